"""What the serial Picard stepper needs from a backend, for one MPI rank on the CPU.

- :class:`RankVectorOps`: the step's vector operations over LOCAL arrays (owned nodes, then
  ghosts). Element-wise operations are the CPU backend's own (``CPUVectorOps``), applied to
  every local entry: with consistent inputs the ghost entries come out as the owners' bits.
  The reductions (``max_abs_diff``, ``step_scalars``) read owned entries only and combine the
  ranks (maxima with ``MPI.MAX``, the kinetic energy with the exact sum, the non-finite count
  with an integer sum), so every rank takes the same early-exit branch.
- :class:`OwnedRowsOperator`: a mesh-only sparse operator (C, Cᵀ, KMK) restricted to the
  owned rows, global column order kept; its ``matvec`` writes the owned rows and then fills
  the ghosts of the result from their owners (depth-2 halo).
- :class:`RankBackend`: the backend value the stepper sees (NumPy arrays, these operations).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from dycore.backend.cpu import CPUBackend, CPUVectorOps
from dycore.parallel.halo import HaloExchange
from dycore.parallel.reduce import exact_parts, parts_to_float

__all__ = ["OwnedRowsOperator", "RankBackend", "RankVectorOps", "owned_block", "owned_rows"]


class RankVectorOps(CPUVectorOps):
    """CPUVectorOps over local arrays with rank-combined reductions.

    Parameters
    ----------
    comm : mpi4py communicator; n_owned : int — owned entries lead every local array
    """

    def __init__(self, comm, n_owned: int):
        self.comm, self.n_owned = comm, int(n_owned)

    def _max(self, v: float) -> float:
        from mpi4py import MPI
        return float(self.comm.allreduce(float(v), op=MPI.MAX))

    @staticmethod
    def scatter_fill(a, idx, value) -> None:
        """a[idx] = value for the local indices ≥ 0 (−1 marks a node this rank lacks)."""
        idx = np.asarray(idx)
        a[idx[idx >= 0]] = value

    def max_abs_diff(self, x, y, out, slot) -> None:
        """out[slot] = max over all owned entries of all ranks of |x − y|."""
        o = self.n_owned
        d = np.abs(x[:o] - y[:o])
        out[slot] = self._max(np.max(d) if d.size else 0.0)

    def step_scalars(self, u, th, ml, div, out, slot) -> None:
        """max|w|, Σ M_L|u|² (exact sum), max|div/M_L|, non-finite count over all ranks."""
        from mpi4py import MPI
        o = self.n_owned
        uo = u[:o]
        out[slot] = self._max(np.max(np.abs(uo[:, 2])))
        parts = exact_parts(ml[:o] * np.sum(uo * uo, axis=1))
        total = np.empty_like(parts)
        self.comm.Allreduce(parts, total, op=MPI.SUM)
        out[slot + 1] = parts_to_float(total)
        out[slot + 2] = self._max(np.max(np.abs(div[:o] / ml[:o])))
        bad = int(np.count_nonzero(~np.isfinite(uo)) + np.count_nonzero(~np.isfinite(th[:o])))
        out[slot + 3] = self.comm.allreduce(bad, op=MPI.SUM)


def owned_rows(rp, nnodes: int, a, row_block: int = 1, col_block: int = 1, ids=None,
               node_local=None):
    """The owned rows of a mesh-only operator for rank ``rp.rank``, columns in local ids,
    entries in the serial order (computed where ``a`` is: rank 0 of the scattered set-up, or
    the rank itself from its own elements: :mod:`dycore.parallel.local_setup`).

    Parameters
    ----------
    rp : RankPartition; nnodes : int (global)
    a : SciPy CSR of the SERIAL operator, shape (row_block·n, col_block·n), row of node j
        component a at ``row_block·j + a``, columns likewise (C: 1, 3; Cᵀ: 3, 1; KMK: 1, 1) —
        or, with ``ids``, the same operator over the nodes ``ids`` only
    row_block, col_block : int
    ids : (m,) int64 ascending global ids of ``a``'s nodes (node k of ``a`` is global
        ``ids[k]``; every owned node among them), or None (``a`` over all global nodes)
    node_local : (m,) int64 local id of each of ``a``'s nodes (−1: not local), or None (made
        here from ``rp``; pass it to share it between operators)

    Returns
    -------
    (indptr, indices, values, shape, row_block): the argument of :class:`OwnedRowsOperator`.

    Raises
    ------
    ValueError if an owned row reaches beyond the depth-2 ghosts.
    """
    a = a.tocsr()
    rb, cb = int(row_block), int(col_block)
    own = rp.owned if ids is None else np.searchsorted(ids, rp.owned)
    rows = (rb * own[:, None] + np.arange(rb)).ravel()
    if node_local is None:
        node_local = rp.global_to_local(np.arange(nnodes) if ids is None else ids, nnodes)
    ptr, cols, vals, bad = _gather_rows(np.asarray(a.indptr, np.int64), a.indices, a.data,
                                        rows, np.asarray(node_local, np.int64), cb)
    if bad:
        raise ValueError(f"rank {rp.rank}: an owned row of a {a.shape} operator reaches "
                         "beyond two ghost layers")
    return ptr, cols, vals, (rows.size, cb * rp.n_local(2)), rb


@njit(cache=True, parallel=True)
def _gather_rows(indptr, indices, data, rows, node_local, cb):
    """Rows ``rows`` of the CSR (indptr, indices, data), entry order kept, each column c
    renumbered to cb·node_local[c // cb] + c % cb; returns (ptr (m+1,) int64, cols (nnz_m,)
    int64, vals (nnz_m,), count of columns whose node is not local)."""
    m = rows.size
    ptr = np.zeros(m + 1, np.int64)
    for i in range(m):
        ptr[i + 1] = ptr[i] + indptr[rows[i] + 1] - indptr[rows[i]]
    cols = np.empty(ptr[m], np.int64)
    vals = np.empty(ptr[m], data.dtype)
    bad = np.zeros(m, np.int64)
    for i in prange(m):
        src = indptr[rows[i]]
        for k in range(ptr[i], ptr[i + 1]):
            c = indices[src + k - ptr[i]]
            node = node_local[c // cb]
            if node < 0:
                bad[i] += 1
            cols[k] = cb * node + c % cb
            vals[k] = data[src + k - ptr[i]]
    return ptr, cols, vals, bad.sum()


def owned_block(indptr, indices, data, n: int) -> sp.csr_matrix:
    """The owned × owned block of a rank's owned rows: the entries of columns < ``n`` (the
    owned local ids; ghosts follow them), columns sorted in each row — what a rank-local
    preconditioner is built from (block-Jacobi / additive Schwarz over the ranks).

    Parameters
    ----------
    indptr : (m+1,) int; indices : (nnz,) int — local column ids, in any order within a row,
        none repeated in a row; data : (nnz,) float64; n : int — owned count
    Returns SciPy CSR (m, n) float64 with int32 indices (int64 from 2³¹ entries), equal to
    ``csr_matrix((data, indices, indptr))[:, :n]`` with sorted indices (one numba pass per
    row instead of SciPy's column slice and sort: the rank-local AMG's 1.3 M rows at 30.7 M
    tets on four ranks took 2.4 s there).
    """
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices)
    counts = _owned_counts(indptr, indices, int(n))
    ptr = np.zeros(indptr.size, np.int64)
    np.cumsum(counts, out=ptr[1:])
    idx = np.int32 if ptr[-1] < 2 ** 31 else np.int64
    cols = np.empty(ptr[-1], idx)
    vals = np.empty(ptr[-1], np.float64)
    _owned_fill(indptr, indices, np.asarray(data, np.float64), int(n), ptr, cols, vals)
    a = sp.csr_matrix((vals, cols, ptr.astype(idx)), shape=(indptr.size - 1, int(n)))
    a.has_sorted_indices = True
    return a


@njit(cache=True, parallel=True)
def _owned_counts(indptr, indices, n):
    m = indptr.size - 1
    counts = np.zeros(m, np.int64)
    for i in prange(m):
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] < n:
                counts[i] += 1
    return counts


@njit(cache=True, parallel=True)
def _owned_fill(indptr, indices, data, n, ptr, cols, vals):
    """Row i's entries of columns < n into cols/vals[ptr[i]:ptr[i+1]], by insertion (a row
    holds a few dozen entries): ascending columns."""
    for i in prange(indptr.size - 1):
        start, end = ptr[i], ptr[i]
        for k in range(indptr[i], indptr[i + 1]):
            c = indices[k]
            if c < n:
                j = end
                while j > start and cols[j - 1] > c:
                    cols[j] = cols[j - 1]
                    vals[j] = vals[j - 1]
                    j -= 1
                cols[j] = c
                vals[j] = data[k]
                end += 1


class OwnedRowsOperator:
    """y = A x on the owned rows of a mesh-only operator, ghosts of y filled by their owners.

    Parameters
    ----------
    comm : communicator; rp : RankPartition
    rows : the owned rows, :func:`owned_rows` of the serial operator

    The owned rows keep their entries in the serial order (columns renumbered to local ids),
    so each owned entry of ``y`` is the serial product's bits. ``matvec(x, out)``:
    x (n_local[, col_block]) with every ghost filled; out (n_local[, row_block]) overwritten,
    its ghosts filled from their owners (depth-2 halo).
    """

    def __init__(self, comm, rp, rows):
        ptr, cols, vals, shape, rb = rows
        self.a = sp.csr_matrix((vals, cols, ptr), shape=shape)
        self.a.has_sorted_indices = False
        self.n_owned = rp.n_owned
        self.halo = HaloExchange(comm, rp.plan(2), rb)

    def matvec(self, x, out) -> None:
        y = self.a @ np.asarray(x).reshape(-1)
        out[:self.n_owned] = y.reshape(out[:self.n_owned].shape)
        self.halo.update(out)


class RankBackend(CPUBackend):
    """The CPU backend of one MPI rank: NumPy arrays, generated CPU loops, the CPU clocks, with
    :class:`RankVectorOps` (reductions across ``comm``) as its vector operations.

    Parameters
    ----------
    comm : mpi4py communicator; n_owned : int — owned entries lead every local array
    """

    def __init__(self, comm, n_owned: int):
        super().__init__(threads=0)       # the launcher sets NUMBA_NUM_THREADS per rank
        self.ops = RankVectorOps(comm, n_owned)

    def describe(self) -> str:
        c = self.ops.comm
        return f"cpu, MPI rank {c.rank} of {c.size} ({self.threads} numba threads)"
