"""Sparsity patterns, element->nonzero lookup tables and deterministic contribution maps.

Everything here depends only on the mesh and is built once (docs/equations.md §6), vectorised with NumPy /
SciPy. Patterns are CSR with sorted column indices and the diagonal always present.

- first-order pattern: node i couples to node j when they share an element (P1 matrices, C, BCSR);
- second-order pattern: the pattern of A·A (CMC = C M_L⁻¹ Cᵀ and KMK = K_p M_p⁻¹ K_p).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dycore.dtypes import INDEX, NLOC

__all__ = ["Sparsity", "build_sparsity", "second_order_pattern"]


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
    """Build the first-order pattern, the lookup table and the contribution map.

    Parameters
    ----------
    tets : ndarray, (nele, 4), int
        Element connectivity, 0-based.
    nnodes : int
        Number of nodes (rows).

    Returns
    -------
    Sparsity
    """
    tets = np.asarray(tets, dtype=np.int64)
    nele = tets.shape[0]
    rows = np.repeat(tets, NLOC, axis=1).ravel()          # (e, i, j) -> tets[e, i]
    cols = np.tile(tets, (1, NLOC)).ravel()                # (e, i, j) -> tets[e, j]
    key = rows * nnodes + cols
    uniq, inverse = np.unique(key, return_inverse=True)
    urow = (uniq // nnodes).astype(INDEX)
    ucol = (uniq % nnodes).astype(INDEX)
    indptr = np.zeros(nnodes + 1, dtype=np.int64)
    np.add.at(indptr, urow.astype(np.int64) + 1, 1)
    indptr = np.cumsum(indptr).astype(INDEX)
    lookup = inverse.reshape(nele, NLOC, NLOC).astype(INDEX)
    # contributions per nonzero, sorted by (nonzero, element): stable sort of the flat
    # (e, i, j) enumeration by nonzero keeps element order within a nonzero.
    contrib_ptr, order = _contribution_map(inverse.ravel(), uniq.shape[0])
    node_contrib_ptr, node_contrib = _contribution_map(tets.ravel(), nnodes)
    return Sparsity(n=nnodes, indptr=indptr, indices=ucol, lookup=lookup,
                    contrib_ptr=contrib_ptr, contrib=order, row_of=urow,
                    node_contrib_ptr=node_contrib_ptr, node_contrib=node_contrib)


def _contribution_map(target: np.ndarray, ntarget: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR map target -> flat source positions, in ascending source order (stable sort)."""
    order = np.argsort(target, kind="stable").astype(np.int64)
    ptr = np.zeros(ntarget + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(target, minlength=ntarget))
    return ptr, order


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
