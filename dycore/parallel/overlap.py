"""Interior rows first: the local numbering that lets a GPU rank's product overlap its halo.

A rank's owned row is *interior* when it reads no ghost column and a *boundary* row when it
reads at least one. Numbered interior rows first, a product y = A x on a GPU rank runs as

    post the halo exchange of x  →  rows [0, m) (interior)  →  wait  →  rows [m, n) (boundary)

with the messages travelling on a second stream while the interior rows are summed
(:class:`~dycore.parallel.device_halo.DeviceHaloExchange` with ``overlap``), instead of every row
waiting for the exchange. Two contiguous row ranges need no new kernel: the interior launch takes
``indptr[:m + 1]``, the boundary launch ``indptr[m:]`` (and the smoothing kernel a first row),
over the same column and value arrays (:func:`split_rows`).

Renumbering the owned rows changes no row's sum: each row keeps its entries in their order and
only the column ids are relabelled, so every owned value keeps its bits, and a dot product is
either order-free (the exact reduction) or already depends on the partition (the float sum).
The permutation is applied where a solve starts and undone where it ends
(:class:`~dycore.parallel.device_krylov.DeviceRankPCG`); the levels of the global V-cycle
below the fine one are numbered this way from the start
(:class:`~dycore.parallel.device_amg.DeviceGlobalVCycle`). The CPU ranks do the same split with
index lists (:class:`~dycore.parallel.spmv.DistributedMatrix`).
"""
from __future__ import annotations

import copy

import numpy as np

from dycore.parallel.partition import HaloPlan, row_subset

__all__ = ["interior_first", "leading_interior", "local_relabel", "permute_rows", "reads_ghost",
           "relabel_plan", "renumber", "send_last", "split_rows"]


def interior_first(indptr, indices, n_owned: int) -> tuple[np.ndarray, int]:
    """The owned rows numbered interior first.

    Parameters
    ----------
    indptr : (n_owned+1,) int array; indices : (nnz,) int array — the owned rows in local
        columns (owned columns < n_owned, ghosts ≥ n_owned)
    n_owned : int

    Returns
    -------
    order : (n_owned,) int64 — order[new] = old row: the interior rows ascending, then the
        boundary rows ascending (the identity when no row reads a ghost)
    n_interior : int — rows without a ghost column

    Raises
    ------
    ValueError when indptr does not have n_owned + 1 entries.
    """
    has_ghost = _owned_rows_reading_ghosts(indptr, indices, n_owned)
    order = np.concatenate([np.flatnonzero(~has_ghost), np.flatnonzero(has_ghost)])
    return order.astype(np.int64), int(n_owned - np.count_nonzero(has_ghost))


def send_last(plan: HaloPlan, n_owned: int) -> np.ndarray | None:
    """The owned rows numbered so that the one neighbour's message is one run: the rows the
    plan does not send ascending, then the sent rows in the message's order. Renumbered so
    (:func:`renumber`), the plan's sent ids are n_owned − m … n_owned − 1 and NCCL reads them
    from the vector itself: :class:`~dycore.parallel.device_halo.DeviceHaloExchange` needs no
    pack kernel (``send_in_place``). Like every renumbering here, it changes no row's sum.

    Parameters
    ----------
    plan : HaloPlan of the rank (sent ids are owned local ids, < n_owned); n_owned : int

    Returns
    -------
    order : (n_owned,) int64 (order[new] = old), or None when the plan sends to no neighbour
    or to more than one (no single numbering makes every message a run), or sends a row twice.
    """
    sends = [np.asarray(v, np.int64) for v in plan.send.values() if np.asarray(v).size]
    if len(sends) != 1:
        return None
    sent = sends[0]
    if np.unique(sent).size != sent.size or sent.min() < 0 or sent.max() >= n_owned:
        return None
    kept = np.ones(n_owned, bool)
    kept[sent] = False
    return np.concatenate([np.flatnonzero(kept), sent]).astype(np.int64)


def reads_ghost(indptr, indices, first_ghost: int) -> np.ndarray:
    """(n_rows,) bool: which rows of a CSR block (indptr (n_rows+1,), indices (nnz,)) read a
    column ≥ ``first_ghost`` (a ghost: the owned columns come first). The CPU ranks'
    :class:`~dycore.parallel.spmv.DistributedMatrix` splits its rows by it too."""
    indptr = np.asarray(indptr, np.int64)
    ghost = np.asarray(indices, np.int64)[:indptr[-1]] >= first_ghost
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return np.bincount(rows[ghost], minlength=indptr.size - 1) > 0


def _owned_rows_reading_ghosts(indptr, indices, n_owned: int) -> np.ndarray:
    """:func:`reads_ghost` of a rank's owned rows (ValueError unless indptr has n_owned + 1
    entries)."""
    if np.asarray(indptr).size != n_owned + 1:
        raise ValueError(f"interior rows: indptr has {np.asarray(indptr).size} entries for "
                         f"{n_owned} owned rows")
    return reads_ghost(indptr, indices, n_owned)


def leading_interior(indptr, indices, n_owned: int) -> int:
    """How many owned rows, from the first, read no ghost column: the rows a product can sum
    before its halo exchange has landed, in the numbering as it is."""
    has_ghost = _owned_rows_reading_ghosts(indptr, indices, n_owned)
    return int(np.argmax(has_ghost)) if has_ghost.any() else int(n_owned)


def local_relabel(order, n_local: int) -> np.ndarray:
    """old local id → new local id for a rank whose owned ids are renumbered by ``order``
    (order[new] = old; the ghosts, ids ≥ len(order), keep theirs). (n_local,) int64."""
    order = np.asarray(order, np.int64)
    new = np.arange(n_local, dtype=np.int64)
    new[order] = np.arange(order.size, dtype=np.int64)
    return new


def permute_rows(indptr, indices, values, row_order=None, col_new=None):
    """A CSR matrix with its rows taken in ``row_order`` (None: as they are) and its column ids
    mapped through ``col_new`` (old → new; None: kept); each row's entries stay in their
    order. Returns (indptr int64, indices int64, values float64)."""
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices, np.int64)
    values = np.asarray(values, np.float64)
    if row_order is not None:
        indptr, indices, values = row_subset(indptr, indices, values, row_order)
    if col_new is not None:
        indices = np.asarray(col_new, np.int64)[indices]
    return indptr, indices, values


def relabel_plan(plan: HaloPlan, new) -> HaloPlan:
    """``plan`` with the owned ids it sends mapped through ``new`` (old → new local id,
    :func:`local_relabel`); the ghost slots it fills keep theirs."""
    new = np.asarray(new, np.int64)
    return HaloPlan(plan.depth, plan.n_local, plan.neighbours,
                    {q: new[np.asarray(v, np.int64)] for q, v in plan.send.items()},
                    dict(plan.recv))


def renumber(plan: HaloPlan, indptr, indices, values, rows=None, cols=None):
    """A rank's block and its halo plan in another numbering of the owned ids.

    rows : order of the owned rows of the block's row level (order[new] = old), or None
    cols : the same for the level of its columns (the plan's owned ids), or None
    Returns (plan, indptr, indices, values): rows taken in ``rows``, owned columns and the
    plan's sent ids relabelled by ``cols`` (:func:`permute_rows`, :func:`local_relabel`,
    :func:`relabel_plan`); the arrays as given (no copy) when both are None."""
    if rows is None and cols is None:
        return plan, indptr, indices, values
    new = None if cols is None else local_relabel(cols, int(plan.n_local))
    indptr, indices, values = permute_rows(indptr, indices, values, rows, new)
    return (plan if new is None else relabel_plan(plan, new)), indptr, indices, values


def split_rows(matrix, n_interior: int):
    """(interior, boundary): views of a device CSR matrix
    (:class:`~dycore.solvers.krylov.DeviceMatrix`) on rows [0, m) and [m, n), sharing its
    column and value arrays: the interior view's ``indptr[:m + 1]``, the boundary view's
    ``indptr[m:]`` (its rows' y and b are the caller's slices [m:n]). Either may have no row."""
    if getattr(matrix, "sliced", 0):
        raise ValueError("split_rows: a sliced-ELL matrix has no CSR rows to split")
    m = int(n_interior)
    inner, outer = copy.copy(matrix), copy.copy(matrix)
    inner.indptr, outer.indptr = matrix.indptr[:m + 1], matrix.indptr[m:]
    inner.nrow, outer.nrow = m, matrix.nrow - m
    inner.n, outer.n = m * matrix.bs, (matrix.nrow - m) * matrix.bs
    return inner, outer
