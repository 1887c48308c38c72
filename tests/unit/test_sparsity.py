"""dycore.assembly.sparsity.build_sparsity against its NumPy definition, array for array.

The definition (:func:`numpy_sparsity`, the implementation before the ``@njit`` passes): the
pattern is ``np.unique`` of the keys row·n + column over every (element, i, j), the lookup its
inverse, the contribution maps stable argsorts — so within a nonzero the element entries come
in element order (the deterministic assembly's summation order)."""
import numpy as np
import pytest

from dycore.assembly.sparsity import build_sparsity, first_order_pattern
from dycore.mesh.graph import counting_order
from dycore.dtypes import INDEX

FIELDS = ("indptr", "indices", "lookup", "contrib_ptr", "contrib", "row_of",
          "node_contrib_ptr", "node_contrib")


def numpy_sparsity(tets, nnodes) -> dict:
    """The first-order pattern and tables by sorting (the definition; arrays as Sparsity's)."""
    tets = np.asarray(tets, dtype=np.int64)
    nele, nloc = tets.shape
    rows = np.repeat(tets, nloc, axis=1).ravel()
    cols = np.tile(tets, (1, nloc)).ravel()
    uniq, inverse = np.unique(rows * nnodes + cols, return_inverse=True)
    urow, ucol = (uniq // nnodes).astype(INDEX), (uniq % nnodes).astype(INDEX)
    indptr = np.zeros(nnodes + 1, dtype=np.int64)
    np.add.at(indptr, urow.astype(np.int64) + 1, 1)

    def cmap(target, ntarget):
        order = np.argsort(target, kind="stable").astype(np.int64)
        ptr = np.zeros(ntarget + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.bincount(target, minlength=ntarget))
        return ptr, order
    contrib_ptr, contrib = cmap(inverse.ravel(), uniq.shape[0])
    node_contrib_ptr, node_contrib = cmap(tets.ravel(), nnodes)
    return {"indptr": np.cumsum(indptr).astype(INDEX), "indices": ucol,
            "lookup": inverse.reshape(nele, nloc, nloc).astype(INDEX),
            "contrib_ptr": contrib_ptr, "contrib": contrib, "row_of": urow,
            "node_contrib_ptr": node_contrib_ptr, "node_contrib": node_contrib}


def _meshes():
    import dycore
    from cases import build_config_mesh, load_case
    cfg = dycore.load_config("configs/mountainwave3d_small.yaml",
                             mesh={"nx": 5, "ny": 4, "nz": 3})
    case = load_case(cfg.case.name)
    mesh = build_config_mesh(cfg, case, cfg.case.build_parameters())
    yield "mountain mesh", mesh.tets, mesh.nnodes
    rng = np.random.default_rng(4)
    # random elements over 60 nodes (nodes of no element: empty rows; shared faces and
    # repeated elements: entries with several contributions in element order)
    tets = np.array([rng.choice(50, 4, replace=False) for _ in range(200)])
    yield "random elements", np.concatenate([tets, tets[:7]]), 60
    yield "one element", np.array([[3, 0, 2, 1]]), 5


@pytest.mark.parametrize("name,tets,n", list(_meshes()), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_build_sparsity_is_its_numpy_definition(name, tets, n):
    got, want = build_sparsity(tets, n), numpy_sparsity(tets, n)
    assert got.n == n
    for f in FIELDS:
        a, b = getattr(got, f), want[f]
        assert a.dtype == b.dtype and a.shape == b.shape, (name, f, a.dtype, b.dtype)
        assert np.array_equal(a, b), (name, f)
    assert np.all(got.indices[got.diagonal_positions()] == np.flatnonzero(np.diff(got.indptr)))
    indptr, indices = first_order_pattern(tets, n)
    assert indptr.dtype == indices.dtype == INDEX
    assert np.array_equal(indptr, want["indptr"]) and np.array_equal(indices, want["indices"])


def test_counting_order_is_a_stable_argsort():
    """On any number of target ranges (one per thread; targets beyond the last present)."""
    from dycore.mesh.graph import _counting_order
    rng = np.random.default_rng(9)
    t = rng.integers(0, 17, 500)
    ptr, order = counting_order(t, 20)
    assert np.array_equal(order, np.argsort(t, kind="stable"))
    assert np.array_equal(np.diff(ptr), np.bincount(t, minlength=20))
    for nchunk in (1, 2, 3, 7, 20):
        got = _counting_order(t, 20, nchunk)
        assert np.array_equal(got[0], ptr) and np.array_equal(got[1], order), nchunk


def test_node_ids_outside_the_node_count_are_a_value_error():
    with pytest.raises(ValueError, match=r"outside 0\.\.4"):
        build_sparsity(np.array([[0, 1, 2, 5]]), 5)
    with pytest.raises(ValueError, match="outside"):
        build_sparsity(np.array([[0, 1, -1, 3]]), 5)


@pytest.mark.parametrize("name,tets,n", list(_meshes()), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_node_pattern_is_the_same_in_any_number_of_chunks(name, tets, n):
    """The rows of the first-order pattern are cut into one chunk per thread: any cut (one
    chunk, a few, one row each) gives the one-chunk pattern, array for array."""
    from dycore.mesh.graph import _node_pattern
    t = np.ascontiguousarray(tets, dtype=np.int64)
    ptr, contrib = counting_order(t.ravel(), n)
    want = _node_pattern(t, n, ptr, contrib, 1, True)
    assert np.array_equal(want[1], numpy_sparsity(tets, n)["indices"])
    rows = np.repeat(np.arange(n), np.diff(want[0]))
    off = want[1] != rows                        # the adjacency: the pattern less its diagonal
    adj = (np.concatenate([[0], np.cumsum(np.bincount(rows[off], minlength=n))]), want[1][off])
    for nchunk in (1, 2, 3, 7, n):
        got = _node_pattern(t, n, ptr, contrib, nchunk, True)
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), (name, nchunk)
        got = _node_pattern(t, n, ptr, contrib, nchunk, False)
        assert all(np.array_equal(a, b) for a, b in zip(got, adj)), (name, nchunk)
