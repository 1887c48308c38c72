"""The column partition (dycore.parallel.columns): the columns of the generated mesh, their
graph against a SciPy construction, every column on one rank, and the node graph's METIS
partition where the mesh has no columns or too few for the ranks."""
import numpy as np
import pytest
import scipy.sparse as sp

from dycore.parallel.columns import (MIN_COLUMNS_PER_PART, column_graph, mesh_columns,
                                     mesh_partition)
from dycore.parallel.partition import metis_partition

NX, NY, NZ = 8, 6, 5


@pytest.fixture(scope="module")
def mesh_and_pattern():
    import dycore
    from cases import build_config_mesh, load_case
    from dycore.assembly.sparsity import first_order_pattern
    cfg = dycore.load_config("configs/mountainwave3d_small.yaml",
                             mesh={"nx": NX, "ny": NY, "nz": NZ})
    mesh = build_config_mesh(cfg, load_case(cfg.case.name), cfg.case.build_parameters())
    return mesh, first_order_pattern(mesh.tets, mesh.nnodes)


def test_the_generated_mesh_has_one_column_per_horizontal_grid_node(mesh_and_pattern):
    mesh, _ = mesh_and_pattern
    column, ncol = mesh_columns(mesh.coords)
    assert ncol == (NX + 1) * (NY + 1) and column.shape == (mesh.nnodes,)
    assert np.all(np.bincount(column, minlength=ncol) == NZ + 1)
    for c in (0, ncol // 2, ncol - 1):                   # one x and one y in a column
        xy = mesh.coords[column == c, :2]
        assert np.all(xy == xy[0])
    xy = mesh.coords[np.unique(column, return_index=True)[1], :2]   # columns by (x, y)
    assert np.all(np.diff(np.unique(xy[:, 0])) > 0) and len(np.unique(xy, axis=0)) == ncol


def test_column_graph_is_the_scipy_contraction_of_the_node_graph(mesh_and_pattern):
    mesh, (indptr, indices) = mesh_and_pattern
    column, ncol = mesh_columns(mesh.coords)
    rows = np.repeat(np.arange(mesh.nnodes), np.diff(indptr))
    want = sp.csr_matrix((np.ones(indices.size), (column[rows], column[indices])),
                         shape=(ncol, ncol))
    want.setdiag(0)
    want.eliminate_zeros()
    want.sort_indices()
    xadj, adjncy = column_graph(column, ncol, indptr, indices)
    assert np.array_equal(xadj, want.indptr) and np.array_equal(adjncy, want.indices)
    # an interior column of the Kuhn-split grid meets its 6 neighbours (the 2-D triangulation)
    assert np.diff(xadj).max() == 6 and np.diff(xadj).min() >= 2


@pytest.mark.parametrize("k", (2, 3))
def test_every_column_is_owned_by_one_rank(mesh_and_pattern, k):
    mesh, (indptr, indices) = mesh_and_pattern
    column, ncol = mesh_columns(mesh.coords)
    part, how = mesh_partition(mesh.coords, indptr, indices, k)
    assert part.dtype == np.int32 and part.shape == (mesh.nnodes,)
    assert how == f"METIS on the {ncol} vertical columns ({mesh.nnodes} nodes)"
    owner = np.full(ncol, -1)
    owner[column] = part
    assert np.array_equal(owner[column], part)           # no column is cut
    counts = np.bincount(part, minlength=k)
    assert counts.min() > 0 and counts.max() <= 1.03 * mesh.nnodes / k + NZ + 1


def test_without_columns_or_with_too_few_the_node_graph_is_cut(mesh_and_pattern):
    mesh, (indptr, indices) = mesh_and_pattern
    rng = np.random.default_rng(1)
    moved = mesh.coords + rng.uniform(-1.0, 1.0, mesh.coords.shape) * [1, 1, 0]
    assert mesh_columns(moved)[1] == mesh.nnodes
    for coords, k in ((moved, 3), (mesh.coords, (NX + 1) * (NY + 1) // MIN_COLUMNS_PER_PART + 1)):
        part, how = mesh_partition(coords, indptr, indices, k)
        assert how == f"METIS on the node graph ({mesh.nnodes} nodes)"
        assert np.array_equal(part, metis_partition(indptr, indices, k))
    part, how = mesh_partition(mesh.coords, indptr, indices, 1)
    assert not part.any() and "node graph" in how
    with pytest.raises(ValueError, match="between 1 and the number of nodes"):
        mesh_partition(mesh.coords, indptr, indices, mesh.nnodes + 1)
