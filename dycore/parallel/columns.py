"""The partition of a mesh of vertical columns: METIS on the graph of the columns.

A terrain-following mesh is a stack of layers over one horizontal grid: the nodes of a column
share their x and y bit for bit (:func:`dycore.mesh.generate.generate_terrain_following` moves
nodes vertically only). Its cells are flat — on the paper mesh 150–830 m thick against 250 m to
3.5 km wide — so the pressure matrix couples a node to those above and below it far more
strongly than to its horizontal neighbours. Cutting the mesh between columns, never across
one, keeps that coupling inside each rank's block, where the rank-local V-cycle sees it: on the
paper mesh's pressure matrix (CG to 1e-10, the ranks' block V-cycle, one process:
``scripts/rank_amg_setup_ab.py --partition auto|metis``) 2 / 4 / 8 column parts take
113 / 137 / 155 iterations against 136 / 192 / 225 for METIS parts of the node graph. And
METIS works on one vertex a column (40,401 at 30.7 M tets, against 5.2 M nodes: 11.9 s of
METIS on the development machine).

:func:`mesh_partition` takes the columns where the mesh has them — at least two nodes a column
on average and :data:`MIN_COLUMNS_PER_PART` columns a rank — and the node graph otherwise (an
unstructured mesh read from a file, or more ranks than the columns can balance).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from dycore.mesh.graph import counting_order
from dycore.parallel.partition import metis_partition

__all__ = ["MIN_COLUMNS_PER_PART", "column_graph", "mesh_columns", "mesh_partition"]

#: the fewest columns a rank may get for the column partition to be used (below it the node
#: graph is cut: METIS balances the ranks' node counts to its 3 % only with enough columns)
MIN_COLUMNS_PER_PART = 16


def mesh_columns(coords) -> tuple[np.ndarray, int]:
    """The vertical columns of a mesh: nodes with the same x and y, bit for bit.

    Parameters
    ----------
    coords : (n, 3) float64 node coordinates [m]

    Returns
    -------
    (column, ncol): ``column`` (n,) int64 — the column of every node, numbered by ascending
    (x, y); ``ncol`` the number of columns (n when no two nodes share x and y)
    """
    coords = np.asarray(coords)
    if coords.shape[0] == 0:
        return np.zeros(0, np.int64), 0
    _, ix = np.unique(coords[:, 0], return_inverse=True)
    uy, iy = np.unique(coords[:, 1], return_inverse=True)
    key = ix.astype(np.int64).ravel() * uy.size + iy.ravel()
    cols, column = np.unique(key, return_inverse=True)
    return column.astype(np.int64).ravel(), int(cols.size)


@njit(cache=True)
def _column_rows(column, ncol, indptr, indices, col_ptr, col_nodes, marker, out, write):
    """Count (``write`` False) or fill the rows of the column graph: column c's row holds the
    other columns of the nodes adjacent to its nodes, in the order first met."""
    p = 0
    ptr = np.zeros(ncol + 1, np.int64)
    for c in range(ncol):
        for q in range(col_ptr[c], col_ptr[c + 1]):
            i = col_nodes[q]
            for k in range(indptr[i], indptr[i + 1]):
                d = column[indices[k]]
                if d != c and marker[d] != c:
                    marker[d] = c
                    if write:
                        out[p] = d
                    p += 1
        ptr[c + 1] = p
    return ptr


def column_graph(column, ncol: int, indptr, indices) -> tuple[np.ndarray, np.ndarray]:
    """The adjacency of the columns: c and d adjacent when a node of c and a node of d are.

    Parameters
    ----------
    column : (n,) int64 from :func:`mesh_columns`; ncol : int
    indptr, indices : CSR of the symmetric node graph (the first-order pattern; the diagonal
        may be present)

    Returns
    -------
    (xadj (ncol+1,) int64, adjncy (nnz,) int64): CSR without the diagonal, each row sorted
    """
    column = np.asarray(column, np.int64)
    indptr, indices = np.asarray(indptr, np.int64), np.asarray(indices)
    col_ptr, col_nodes = counting_order(column, ncol)
    marker = np.full(ncol, -1, np.int64)
    none = np.empty(0, np.int64)
    xadj = _column_rows(column, ncol, indptr, indices, col_ptr, col_nodes, marker, none, False)
    adjncy = np.empty(int(xadj[-1]), np.int64)
    marker[:] = -1
    _column_rows(column, ncol, indptr, indices, col_ptr, col_nodes, marker, adjncy, True)
    for c in range(ncol):                 # (rows of a few dozen columns)
        adjncy[xadj[c]:xadj[c + 1]].sort()
    return xadj, adjncy


def mesh_partition(coords, indptr, indices, nparts: int, seed: int = 0
                   ) -> tuple[np.ndarray, str]:
    """The owner of every node for ``nparts`` ranks: METIS on the columns' graph, weighted by
    their node counts, where the mesh is made of columns; else METIS on the node graph.

    Parameters
    ----------
    coords : (n, 3) float64 [m]; indptr, indices : the first-order node pattern (CSR)
    nparts : int ≥ 1 — number of ranks; seed : METIS random seed

    Returns
    -------
    (part, how): ``part`` (n,) int32 owners (every column on one rank when cut by columns);
    ``how`` says which graph was cut, for the log

    Raises
    ------
    ValueError as :func:`~dycore.parallel.partition.metis_partition` (e.g. more ranks than
    nodes, or a rank left empty).
    """
    coords = np.asarray(coords)
    n = coords.shape[0]
    column, ncol = mesh_columns(coords) if nparts > 1 else (None, n)
    if nparts <= 1 or 2 * ncol > n or ncol < MIN_COLUMNS_PER_PART * nparts:
        return (metis_partition(indptr, indices, nparts, seed),
                f"METIS on the node graph ({n} nodes)")
    import pymetis
    xadj, adjncy = column_graph(column, ncol, indptr, indices)
    weights = np.bincount(column, minlength=ncol)
    _, cpart = pymetis.part_graph(nparts, pymetis.CSRAdjacency(xadj, adjncy),
                                  vweights=weights, options=pymetis.Options(seed=seed))
    part = np.asarray(cpart, np.int32)[column]
    counts = np.bincount(part, minlength=nparts)
    if np.any(counts == 0):
        raise ValueError(f"METIS left rank(s) {np.flatnonzero(counts == 0).tolist()} without "
                         f"columns ({ncol} columns into {nparts} parts): use fewer ranks")
    return part, f"METIS on the {ncol} vertical columns ({n} nodes)"
