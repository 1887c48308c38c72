"""Sparsity patterns, element->nonzero lookup tables and deterministic contribution maps.

Everything here depends only on the mesh and is built once (docs/equations.md §6): the
first-order pattern and its tables by ``@njit`` passes over the node → element map (linear in
the mesh size: counting sorts and a marker array, no sort of the 16·nele (row, column) pairs),
the second-order pattern by SciPy. Patterns are CSR with sorted column indices and the
diagonal always present.

- first-order pattern: node i couples to node j when they share an element (P1 matrices, C, BCSR);
- second-order pattern: the pattern of A·A (CMC = C M_L⁻¹ Cᵀ and KMK = K_p M_p⁻¹ K_p).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from dycore.dtypes import INDEX
from dycore.mesh.graph import counting_order, element_map_and_pattern

__all__ = ["Sparsity", "build_sparsity", "first_order_pattern", "second_order_pattern"]


@dataclass(frozen=True)
class Sparsity:
    """First-order CSR pattern of a P1 mesh plus the tables assembly uses.

    Attributes
    ----------
    n : int
        Number of rows (= nodes).
    indptr : ndarray, (n+1,), int32
    indices : ndarray, (nnz,), int32 — column indices, sorted within each row.
    lookup : ndarray, (nele, 4, 4), int32
        ``lookup[e, i, j]`` = position in ``values`` of entry (tets[e,i], tets[e,j]).
    contrib_ptr : ndarray, (nnz+1,), int64
        Nonzero k sums element-matrix entries ``contrib[contrib_ptr[k]:contrib_ptr[k+1]]``.
    contrib : ndarray, (nele*16,), int64
        Flat indices ``e*16 + i*4 + j`` into an element-matrix array of shape (nele, 4, 4),
        sorted by element within each nonzero, so summing them in this order from 0.0 gives the
        same bits as a serial scatter loop over elements (deterministic assembly, docs/equations.md §6).
    row_of : ndarray, (nnz,), int32 — row index of every nonzero (COO rows).
    node_contrib_ptr : ndarray, (n+1,), int64
    node_contrib : ndarray, (nele*4,), int64
        The same for element vectors (nele, 4): flat indices ``e*4 + i``, sorted by element.
    """

    n: int
    indptr: np.ndarray
    indices: np.ndarray
    lookup: np.ndarray
    contrib_ptr: np.ndarray
    contrib: np.ndarray
    row_of: np.ndarray
    node_contrib_ptr: np.ndarray
    node_contrib: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    def diagonal_positions(self) -> np.ndarray:
        """Positions of the diagonal entries, (n,) int64."""
        pos = np.flatnonzero(self.row_of == self.indices)
        return pos

    def as_arrays(self) -> dict:
        """Every attribute as an array (``n`` as a 0-d int64), for the set-up cache."""
        out = {f: getattr(self, f) for f in self.__dataclass_fields__}
        out["n"] = np.int64(self.n)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict) -> "Sparsity":
        """The inverse of :meth:`as_arrays`."""
        kw = {f: arrays[f] for f in cls.__dataclass_fields__}
        kw["n"] = int(kw["n"])
        return cls(**kw)


def build_sparsity(tets: np.ndarray, nnodes: int) -> Sparsity:
    """Build the first-order pattern, the lookup table and the contribution maps.

    Parameters
    ----------
    tets : ndarray, (nele, 4), int
        Element connectivity, 0-based.
    nnodes : int
        Number of nodes (rows); a node of no element gets an empty row.

    Returns
    -------
    Sparsity

    Raises
    ------
    ValueError when a node id of ``tets`` is outside 0..nnodes−1.

    Linear passes: the node → element map and each row's distinct neighbours, sorted
    (:func:`~dycore.mesh.graph.element_map_and_pattern`), each element entry's position by
    binary search in its row (:func:`_lookup`), and the nonzero → contributions map (a
    stable counting sort). Equal, array for array, to the NumPy definition (``np.unique`` of
    the keys row·n + column with ``return_inverse``; stable argsorts for the maps), 4.3× faster
    on the paper mesh (docs/performance.md).
    """
    tets = np.ascontiguousarray(tets, dtype=np.int64)
    node_contrib_ptr, node_contrib, indptr, indices = element_map_and_pattern(tets, nnodes)
    lookup = _lookup(tets, indptr, indices)
    contrib_ptr, contrib = counting_order(lookup.ravel(), int(indptr[-1]))
    row_of = np.repeat(np.arange(nnodes, dtype=INDEX), np.diff(indptr))
    return Sparsity(n=nnodes, indptr=indptr.astype(INDEX),
                    indices=indices.astype(INDEX, copy=False), lookup=lookup.astype(INDEX),
                    contrib_ptr=contrib_ptr, contrib=contrib, row_of=row_of,
                    node_contrib_ptr=node_contrib_ptr, node_contrib=node_contrib)


def first_order_pattern(tets: np.ndarray, nnodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The first-order pattern alone (a node graph, e.g. for the partitioner): the
    ``indptr`` (n+1,) and ``indices`` (nnz,) int32 of :func:`build_sparsity`, without its
    tables. Raises ValueError for node ids outside 0..nnodes−1."""
    _, _, indptr, indices = element_map_and_pattern(tets, nnodes)
    return indptr.astype(INDEX), indices.astype(INDEX, copy=False)


@njit(cache=True)
def _lookup(tets, indptr, indices):
    """lookup (nele, 4, 4) int64: the position of entry (tets[e,a], tets[e,b]) in the pattern
    (binary search in row tets[e,a])."""
    nele, nloc = tets.shape
    out = np.empty((nele, nloc, nloc), np.int64)
    for e in range(nele):
        for a in range(nloc):
            i = tets[e, a]
            lo, hi = indptr[i], indptr[i + 1]
            row = indices[lo:hi]
            for b in range(nloc):
                out[e, a, b] = lo + np.searchsorted(row, tets[e, b])
    return out


def second_order_pattern(sparsity: Sparsity) -> tuple[np.ndarray, np.ndarray]:
    """CSR pattern (indptr, indices) of A·A for A with the first-order pattern.

    Returns
    -------
    indptr : ndarray, (n+1,), int32
    indices : ndarray, (nnz2,), int32, sorted within rows.
    """
    n = sparsity.n
    a = sp.csr_matrix((np.ones(sparsity.nnz), sparsity.indices, sparsity.indptr), shape=(n, n))
    a2 = (a @ a).tocsr()
    a2.sort_indices()
    return a2.indptr.astype(INDEX), a2.indices.astype(INDEX)
