"""The pressure V-cycle of the device solvers, distributed over ranks: one global hierarchy.

The hierarchy (:class:`dycore.solvers.amg.HostHierarchy`: PyAMG smoothed aggregation, Chebyshev
or damped-Jacobi smoothing, dense pseudo-inverse on the coarsest level) is built once on rank 0
from the global pressure matrix, cut into every rank's rows there (:func:`rank_pieces`) and
scattered: a rank holds only its rows of each level. Every level's A, R and P is distributed by rows
(:func:`~dycore.parallel.rowmatrix.distribute_rows`): level-0 rows as the mesh partition,
a coarse node (an aggregate) on the rank owning the first fine row of its column of P. The
coarsest right-hand side (a few hundred values) is all-gathered and each rank applies its rows
of the pseudo-inverse.

Smoothing is a polynomial in D⁻¹A, applied entry by entry, and every product is the serial
row sum, so the cycle gives the bits of :func:`dycore.solvers.amg.vcycle_reference` with one
thread per row (``max_group=1``) on any number of ranks — unlike a rank-local hierarchy
(:class:`~dycore.parallel.krylov.LocalAMG`), whose iteration count grows with the rank count
(docs/architecture.md, "Scaling out").
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dycore.parallel.rowmatrix import matrix_from_block, row_blocks

__all__ = ["DistributedVCycle", "coarse_owners", "rank_pieces"]


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


def rank_pieces(a, owner, nranks: int, smoother: str = "chebyshev", sweeps: int = 2,
                max_coarse: int = 500, hierarchy=None, coarsening: str = "aggregation") -> list:
    """Build the hierarchy of the global matrix ``a`` and cut it into what every rank keeps
    (run on one rank; :class:`DistributedVCycle` scatters the pieces).

    Parameters
    ----------
    a : SciPy CSR (n, n) — the global pressure matrix; owner : (n,) int — rank of every fine
        row; nranks : int; smoother, sweeps, max_coarse : as
        :class:`dycore.solvers.amg.HostHierarchy`
    hierarchy : HostHierarchy of ``a`` already built (e.g. loaded from the set-up cache:
        :func:`~dycore.solvers.amg.cached_hierarchy`), or None to build it here
    coarsening : "aggregation" or "classical" (the hierarchy built here: as
        :func:`dycore.solvers.linear.amg_hierarchy`)

    Returns
    -------
    list over ranks of dicts: ``sizes`` (unknowns per level), ``levels`` (per level the
    :func:`~dycore.parallel.rowmatrix.row_blocks` pieces of A, R, P, the owned entries of
    D⁻¹ and the smoother's coefficients), ``coarse_rows`` / ``coarse_inv`` (owned rows of
    the coarsest pseudo-inverse, SciPy CSR), ``coarse_owner`` ((n_coarse,) rank of every
    coarsest unknown: the all-gather's layout), ``n_coarse``, ``owned`` (owned ids per level).
    """
    from dycore.solvers.amg import HostHierarchy
    h = (HostHierarchy(a, smoother=smoother, sweeps=sweeps, max_coarse=max_coarse,
                       coarsening=coarsening) if hierarchy is None else hierarchy)
    owners = [np.asarray(owner, np.int64)]
    for _, p, _, _, _ in h.levels:
        owners.append(coarse_owners(p, owners[-1]))
    ranks = range(nranks)
    out = [{"sizes": h.sizes, "levels": [], "n_coarse": owners[-1].size,
            "owned": [np.flatnonzero(o == r) for o in owners]} for r in ranks]
    for lev, (A, P, R, dinv, coef) in enumerate(h.levels):
        own, own_c = owners[lev], owners[lev + 1]
        ba, br = row_blocks(A, own, own, ranks), row_blocks(R, own_c, own, ranks)
        bp = row_blocks(P, own, own_c, ranks)
        for r in ranks:
            out[r]["levels"].append((ba[r], br[r], bp[r], dinv[own == r], coef))
    inv = sp.csr_matrix(h.coarse_inv)
    for r in ranks:
        rows = np.flatnonzero(owners[-1] == r)
        out[r]["coarse_rows"], out[r]["coarse_inv"] = rows, inv[rows]
        out[r]["coarse_owner"] = owners[-1]
    return out


class DistributedVCycle:
    """z ≈ A⁻¹ r on owned rows (a symmetric preconditioner for :func:`~dycore.parallel.krylov.cg`).

    Parameters
    ----------
    comm : mpi4py communicator
    a : SciPy CSR of the GLOBAL pressure matrix — read on rank 0 only (None elsewhere)
    owner : (n,) int — rank of every fine row (the mesh partition) — rank 0 only
    smoother, sweeps, coarsening : as :class:`dycore.solvers.amg.HostHierarchy`

    Attributes
    ----------
    sizes : list of int — unknowns per level; owned : list of (n_owned,) per level
    """

    def __init__(self, comm, a, owner, smoother: str = "chebyshev", sweeps: int = 2,
                 coarsening: str = "aggregation"):
        pieces = None
        if comm.rank == 0:
            pieces = rank_pieces(a, owner, comm.size, smoother=smoother, sweeps=sweeps,
                                 coarsening=coarsening)
        piece = comm.scatter(pieces, root=0)
        del pieces
        self.comm, self.sizes = comm, piece["sizes"]
        self.levels = [(matrix_from_block(comm, ba), matrix_from_block(comm, br),
                        matrix_from_block(comm, bp), dinv, coef)
                       for ba, br, bp, dinv, coef in piece["levels"]]
        self.coarse_rows = piece["coarse_rows"]
        self.coarse_inv = piece["coarse_inv"]
        self.coarse_inv.has_sorted_indices = False
        self.n_coarse = piece["n_coarse"]
        self.owned = piece["owned"]

    def _coarse(self, b):
        pieces = self.comm.allgather((self.coarse_rows, b))
        full = np.zeros(self.n_coarse)
        for rows, vals in pieces:
            full[rows] = vals
        return self.coarse_inv @ full

    @staticmethod
    def _smooth(a, dinv, coef, b, x):
        d = None
        for c1, c2 in coef:
            r = b if x is None else b - a.matvec(x)
            d = c1 * (dinv * r) + (0.0 if d is None else c2 * d)
            x = d.copy() if x is None else x + d
        return x

    def _cycle(self, level, b):
        if level == len(self.levels):
            return self._coarse(b)
        a, r, p, dinv, coef = self.levels[level]
        x = self._smooth(a, dinv, coef, b, None)
        x = x + p.matvec(self._cycle(level + 1, r.matvec(b - a.matvec(x))))
        return self._smooth(a, dinv, coef, b, x)

    def __call__(self, r):
        """One V-cycle: r (n_owned,) float64 owned residual -> (n_owned,) correction."""
        return self._cycle(0, np.asarray(r, np.float64).reshape(-1))
