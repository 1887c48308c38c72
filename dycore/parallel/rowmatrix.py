"""Any CSR matrix distributed by rows, for row and column ownerships of its own (the levels of
an AMG hierarchy: A_l, R_l, P_l, whose nodes are aggregates, not mesh nodes).

The layout is PETSc's MPIAIJ idea without its split into diagonal and off-diagonal blocks:
rank r keeps its owned rows (ascending global id) with the entries in the serial order; its
column vector is its owned columns (ascending) followed by the ghost columns its rows reference,
ordered by (owner, global id). The plans are derived from the global structure, on every rank
(:func:`distribute_rows`, a replicated matrix) or for all ranks on one (:func:`row_blocks`,
whose pieces a scattered set-up sends), so the halo needs no set-up messages.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dycore.parallel.partition import row_subset
from dycore.parallel.spmv import DistributedMatrix

__all__ = ["ColumnPlan", "distribute_rows", "matrix_from_block", "row_blocks"]


@dataclass(frozen=True)
class ColumnPlan:
    """Halo plan of one rank for one matrix (the fields :class:`HaloExchange` reads).

    Attributes
    ----------
    depth : int (always 1; kept for the HaloExchange interface)
    n_local : int — owned columns + ghost columns
    neighbours : tuple of int; send, recv : dict rank -> (m,) int64 local indices
    ghosts : (n_ghost,) int64 global ids of the ghost columns
    """

    depth: int
    n_local: int
    neighbours: tuple
    send: dict
    recv: dict
    ghosts: np.ndarray

    def count(self) -> tuple[int, int]:
        return (sum(int(v.size) for v in self.send.values()),
                sum(int(v.size) for v in self.recv.values()))


def row_blocks(a, row_owner: np.ndarray, col_owner: np.ndarray, ranks) -> dict:
    """The pieces of the global SciPy CSR ``a`` that each rank of ``ranks`` keeps, computed
    in one process (rank 0 of a scattered set-up, or every rank from a replicated matrix).

    Parameters
    ----------
    a : SciPy sparse (m, n), converted to CSR (entry order kept)
    row_owner : (m,) int — rank owning each row; col_owner : (n,) int — rank owning each
        column's vector entry; ranks : iterable of int

    Returns
    -------
    dict rank -> (ColumnPlan, indptr (n_rows+1,) int64, indices (nnz_r,) int64 local column
    ids, values (nnz_r,), n_owned_cols int) — the arguments of that rank's
    :class:`DistributedMatrix` (:func:`matrix_from_block`).
    """
    a = a.tocsr()
    row_owner = np.asarray(row_owner, np.int64)
    col_owner = np.asarray(col_owner, np.int64)
    rows_all = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    q_of = row_owner[rows_all]
    cols = a.indices.astype(np.int64)
    foreign = col_owner[cols] != q_of
    pairs = np.unique(np.stack([q_of[foreign], col_owner[cols[foreign]], cols[foreign]], 1),
                      axis=0)                           # (needing rank, owner, column) sorted
    out = {}
    for r in ranks:
        owned_cols = np.flatnonzero(col_owner == r)
        mine = pairs[pairs[:, 0] == r]
        ghosts = mine[:, 2]
        n_own = owned_cols.size
        local_of = np.full(a.shape[1], -1, np.int64)
        local_of[owned_cols] = np.arange(n_own)
        local_of[ghosts] = n_own + np.arange(ghosts.size)
        recv = {int(q): n_own + np.flatnonzero(mine[:, 1] == q) for q in np.unique(mine[:, 1])}
        to_send = pairs[pairs[:, 1] == r]
        send = {int(q): local_of[to_send[to_send[:, 0] == q, 2]]
                for q in np.unique(to_send[:, 0])}
        plan = ColumnPlan(depth=1, n_local=n_own + ghosts.size,
                          neighbours=tuple(sorted(set(send) | set(recv))), send=send,
                          recv=recv, ghosts=ghosts)
        rows = np.flatnonzero(row_owner == r)
        ptr, idx, val = row_subset(a.indptr, a.indices, a.data, rows)
        out[int(r)] = (plan, ptr, local_of[idx], val, n_own)
    return out


def matrix_from_block(comm, block) -> DistributedMatrix:
    """This rank's :class:`DistributedMatrix` from its piece of :func:`row_blocks`."""
    plan, ptr, idx, val, n_own = block
    return DistributedMatrix(comm, plan, ptr, idx, val, n_owned_cols=n_own)


def distribute_rows(comm, a, row_owner: np.ndarray, col_owner: np.ndarray):
    """This rank's :class:`DistributedMatrix` of the global SciPy CSR ``a`` (every rank holds
    ``a``; a scattered set-up uses :func:`row_blocks` on one rank instead).

    Parameters
    ----------
    comm : mpi4py communicator; a : SciPy sparse (m, n), converted to CSR (entry order kept)
    row_owner : (m,) int — rank owning each row; col_owner : (n,) int — rank owning each
        column's vector entry

    Returns
    -------
    DistributedMatrix: ``matvec(x_owned_cols) -> y_owned_rows``, bitwise the serial rows.
    """
    return matrix_from_block(comm, row_blocks(a, row_owner, col_owner, [comm.rank])[comm.rank])
