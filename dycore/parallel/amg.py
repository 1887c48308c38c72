"""The pressure V-cycle of the device solvers, distributed over ranks: one global hierarchy.

The hierarchy (:class:`dycore.solvers.amg.HostHierarchy`: PyAMG smoothed aggregation, Chebyshev
or damped-Jacobi smoothing, dense pseudo-inverse on the coarsest level) is built once on rank 0
from the global pressure matrix, cut into every rank's rows there (:func:`rank_pieces`) and
scattered. Down to the first level held whole (:func:`whole_from`: the first level of at most
``replicate_below`` unknowns, else the coarsest) a rank holds only its rows of each level:
A, R and P are distributed by rows (:func:`~dycore.parallel.rowmatrix.distribute_rows`),
level-0 rows as the mesh partition, a coarse node (an aggregate) on the rank owning the first
fine row of its column of P. That level's right-hand side is all-gathered, and every rank runs
the rest of the cycle — the whole levels below and the whole coarsest pseudo-inverse — itself,
so the small levels send no halo messages (coarse-level agglomeration).

Smoothing is a polynomial in D⁻¹A, applied entry by entry, and every product is the serial
row sum, so the cycle gives the bits of :func:`dycore.solvers.amg.vcycle_reference` with one
thread per row (``max_group=1``) on any number of ranks — unlike a rank-local hierarchy
(:class:`~dycore.parallel.krylov.LocalAMG`), whose iteration count grows with the rank count
(docs/architecture.md, "Scaling out").
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dycore.parallel.partition import row_subset
from dycore.parallel.rowmatrix import ColumnPlan, matrix_from_block, row_blocks

__all__ = ["DistributedVCycle", "coarse_owners", "rank_pieces", "whole_from"]


def coarse_owners(p, fine_owner: np.ndarray) -> np.ndarray:
    """Owner of every coarse node: the owner of the first fine row of its column of P.

    Parameters
    ----------
    p : SciPy sparse (n_fine, n_coarse) prolongation; fine_owner : (n_fine,) int

    Returns
    -------
    (n_coarse,) int64

    Raises
    ------
    ValueError if a column of P is empty.
    """
    pc = sp.csc_matrix(p)
    pc.sort_indices()
    if np.any(np.diff(pc.indptr) == 0):
        raise ValueError("prolongation with an empty column")
    return np.asarray(fine_owner, np.int64)[pc.indices[pc.indptr[:-1]]]


def whole_from(sizes, replicate_below: int) -> int:
    """The first level every rank holds whole: the first of the hierarchy's levels below the
    fine one with at most ``replicate_below`` unknowns, else the coarsest.

    Parameters
    ----------
    sizes : list of int — unknowns per level, fine first (the last: the coarsest, solved by
        its pseudo-inverse); replicate_below : int ≥ 0 (0: only the coarsest)

    Returns
    -------
    int in [1, len(sizes) − 1], or 0 for a hierarchy of one level

    Raises
    ------
    ValueError if ``replicate_below`` is negative.
    """
    if replicate_below < 0:
        raise ValueError(f"replicate_below must be >= 0, got {replicate_below}")
    last = len(sizes) - 1
    return next((lev for lev in range(1, last) if sizes[lev] <= replicate_below), last)


def _whole_block(a, rows_mask=None) -> tuple:
    """The :func:`~dycore.parallel.rowmatrix.row_blocks` piece of ``a`` for a rank holding
    every column (global column ids, no halo): all rows, or the rows where ``rows_mask`` is
    True."""
    a = a.tocsr()
    rows = np.arange(a.shape[0]) if rows_mask is None else np.flatnonzero(rows_mask)
    ptr, idx, val = row_subset(a.indptr, a.indices, a.data, rows)
    plan = ColumnPlan(depth=1, n_local=a.shape[1], neighbours=(), send={}, recv={},
                      ghosts=np.zeros(0, np.int64))
    return plan, ptr, idx, val, a.shape[1]


def rank_pieces(a, owner, nranks: int, smoother: str = "chebyshev", sweeps: int = 2,
                max_coarse: int = 500, hierarchy=None, coarsening: str = "aggregation",
                replicate_below: int = 0) -> list:
    """Build the hierarchy of the global matrix ``a`` and cut it into what every rank keeps
    (run on one rank; :class:`DistributedVCycle` scatters the pieces).

    Levels above the first level held whole (:func:`whole_from`) are distributed by rows;
    from it down every rank holds the whole level and the coarsest pseudo-inverse, and the
    cycle all-gathers that level's right-hand side once instead of exchanging halos on every
    level below (coarse-level agglomeration, as in hypre's and PETSc's GAMG's redundant
    coarse solves; the bits are the same: every row is still summed in the global CSR's entry
    order).

    Parameters
    ----------
    a : SciPy CSR (n, n) — the global pressure matrix; owner : (n,) int — rank of every fine
        row; nranks : int; smoother, sweeps, max_coarse : as
        :class:`dycore.solvers.amg.HostHierarchy`
    hierarchy : HostHierarchy of ``a`` already built (e.g. loaded from the set-up cache:
        :func:`~dycore.solvers.amg.cached_hierarchy`), or None to build it here
    coarsening : "aggregation" or "classical" (the hierarchy built here: as
        :func:`dycore.solvers.linear.amg_hierarchy`)
    replicate_below : int — levels (below the fine one) of at most this many unknowns are held
        whole by every rank (0: only the coarsest)

    Returns
    -------
    list over ranks of dicts:

    - ``sizes`` (unknowns per level), ``owned`` (owned ids per level: the rows' owners),
      ``n_coarse``;
    - ``levels``: per distributed level (above the first held whole) the
      :func:`~dycore.parallel.rowmatrix.row_blocks` pieces of A, R, P, the owned entries of
      D⁻¹ and the smoother's coefficients; the last level's P reads the whole vector of the
      level below (global column ids, no halo);
    - ``whole``: ``level`` (the first level held whole), ``levels`` (the whole A, R, P,
      D⁻¹ and coefficients of every level from it to the coarsest, as row blocks on global ids),
      ``owner`` ((n_level,) rank owning each unknown of ``level``: the all-gather's layout),
      ``coarse_inv`` (the coarsest pseudo-inverse, SciPy CSR).

    Raises
    ------
    ValueError if ``replicate_below`` is negative.
    """
    from dycore.solvers.amg import HostHierarchy
    h = (HostHierarchy(a, smoother=smoother, sweeps=sweeps, max_coarse=max_coarse,
                       coarsening=coarsening) if hierarchy is None else hierarchy)
    top = whole_from(h.sizes, replicate_below)
    owners = [np.asarray(owner, np.int64)]
    for _, p, _, _, _ in h.levels:
        owners.append(coarse_owners(p, owners[-1]))
    ranks = range(nranks)
    whole = {"level": top, "owner": owners[top], "coarse_inv": sp.csr_matrix(h.coarse_inv),
             "levels": [(_whole_block(A), _whole_block(R), _whole_block(P), dinv, coef)
                        for A, P, R, dinv, coef in h.levels[top:]]}
    out = [{"sizes": h.sizes, "levels": [], "n_coarse": owners[-1].size, "whole": whole,
            "owned": [np.flatnonzero(o == r) for o in owners]} for r in ranks]
    for lev, (A, P, R, dinv, coef) in enumerate(h.levels[:top]):
        own, own_c = owners[lev], owners[lev + 1]
        ba, br = row_blocks(A, own, own, ranks), row_blocks(R, own_c, own, ranks)
        bp = (row_blocks(P, own, own_c, ranks) if lev + 1 < top
              else {r: _whole_block(P, own == r) for r in ranks})
        for r in ranks:
            out[r]["levels"].append((ba[r], br[r], bp[r], dinv[own == r], coef))
    return out


class _Whole:
    """A level held whole (a :func:`rank_pieces` row block on global ids) as SciPy CSR in its
    stored entry order, with ``matvec`` like :class:`~dycore.parallel.spmv.DistributedMatrix`."""

    def __init__(self, block):
        _, ptr, idx, val, ncol = block
        self.a = sp.csr_matrix((val, idx, ptr), shape=(ptr.size - 1, ncol))
        self.a.has_sorted_indices = False      # never reorder: the order is the point

    def matvec(self, x):
        return self.a @ x


class DistributedVCycle:
    """z ≈ A⁻¹ r on owned rows (a symmetric preconditioner for :func:`~dycore.parallel.krylov.cg`).

    Parameters
    ----------
    comm : mpi4py communicator
    a : SciPy CSR of the GLOBAL pressure matrix — read on rank 0 only (None elsewhere)
    owner : (n,) int — rank of every fine row (the mesh partition) — rank 0 only
    smoother, sweeps, max_coarse, coarsening, replicate_below : as :func:`rank_pieces`

    Attributes
    ----------
    sizes : list of int — unknowns per level; owned : list of (n_owned,) per level
    top : int — the first level every rank holds whole (its right-hand side all-gathered)
    """

    def __init__(self, comm, a, owner, smoother: str = "chebyshev", sweeps: int = 2,
                 coarsening: str = "aggregation", replicate_below: int = 0,
                 max_coarse: int = 500):
        pieces = None
        if comm.rank == 0:
            pieces = rank_pieces(a, owner, comm.size, smoother=smoother, sweeps=sweeps,
                                 max_coarse=max_coarse, coarsening=coarsening,
                                 replicate_below=replicate_below)
        piece = comm.scatter(pieces, root=0)
        del pieces
        self.comm, self.sizes = comm, piece["sizes"]
        whole = piece["whole"]
        self.top = whole["level"]
        self.levels = [(matrix_from_block(comm, ba), matrix_from_block(comm, br),
                        _Whole(bp) if lev + 1 == self.top else matrix_from_block(comm, bp),
                        dinv, coef)
                       for lev, (ba, br, bp, dinv, coef) in enumerate(piece["levels"])]
        self.levels += [(_Whole(ba), _Whole(br), _Whole(bp), dinv, coef)
                        for ba, br, bp, dinv, coef in whole["levels"]]
        self.coarse_inv = whole["coarse_inv"]
        self.coarse_inv.has_sorted_indices = False
        self.gather_rows = np.flatnonzero(whole["owner"] == comm.rank)
        self.owned = piece["owned"]

    def _gathered(self, b):
        """The whole right-hand side of level ``top`` from every rank's owned entries."""
        full = np.zeros(self.sizes[self.top])
        for rows, vals in self.comm.allgather((self.gather_rows, b)):
            full[rows] = vals
        return full

    @staticmethod
    def _smooth(a, dinv, coef, b, x):
        d = None
        for c1, c2 in coef:
            r = b if x is None else b - a.matvec(x)
            d = c1 * (dinv * r) + (0.0 if d is None else c2 * d)
            x = d.copy() if x is None else x + d
        return x

    def _cycle(self, level, b):
        """The correction of level ``level``: its owned entries above ``top``, the whole
        vector from ``top`` down."""
        if level == self.top:
            b = self._gathered(b)
        if level == len(self.levels):
            return self.coarse_inv @ b
        a, r, p, dinv, coef = self.levels[level]
        x = self._smooth(a, dinv, coef, b, None)
        x = x + p.matvec(self._cycle(level + 1, r.matvec(b - a.matvec(x))))
        return self._smooth(a, dinv, coef, b, x)

    def __call__(self, r):
        """One V-cycle: r (n_owned,) float64 owned residual -> (n_owned,) correction."""
        z = self._cycle(0, np.asarray(r, np.float64).reshape(-1))
        return z[self.owned[0]] if self.top == 0 else z
