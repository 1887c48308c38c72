"""Distributed Krylov solvers on owned rows: preconditioned CG and BiCGStab, and their
rank-local preconditioners.

Every vector is a rank's owned values; products go through
:class:`~dycore.parallel.spmv.DistributedMatrix` (halo exchange + bitwise serial rows), inner
products through :class:`~dycore.parallel.reduce.Reducer`. With the ``"exact"`` reduction and a
pointwise preconditioner (Jacobi, 3×3 block-Jacobi) every operation is independent of the
partition, so the iterates — and the solution — are the same bits on 1, 2 or 4 ranks.
:class:`LocalAMG` (block-Jacobi over ranks with PyAMG's V-cycle on each rank's owned × owned
block, i.e. additive Schwarz without overlap) depends on the partition: its iteration count
grows with the rank count (docs/architecture.md, "Scaling out", reports the growth).

Algorithms: CG — Hestenes & Stiefel (1952), preconditioned form of Saad, *Iterative Methods
for Sparse Linear Systems* (2003), Alg. 9.1; BiCGStab — van der Vorst (1992), right
preconditioned as Saad Alg. 7.7 with M applied to p and s (SciPy's variant). Stopping test
‖r‖₂ ≤ max(rtol·‖b‖₂, atol) as SciPy's, iterations counted as SciPy's callbacks count them.
Inner products computed at the same point are fused into one reduction (``Reducer.dots``): CG
needs two per iteration (p·Ap; ‖r‖² with r·M⁻¹r, M⁻¹ applied before the convergence test),
BiCGStab four (r̂·v; ‖s‖²; t·s with t·t; ‖r‖² with the next r̂·r).
"""
from __future__ import annotations

import math

import numpy as np

from dycore.errors import SolverDivergedError

__all__ = ["BlockJacobi3", "Jacobi", "LocalAMG", "bicgstab", "cg"]


class Jacobi:
    """z = r / diag(A) (owned diagonal entries, (n_owned,) float64; zero raises ValueError)."""

    def __init__(self, diag):
        diag = np.asarray(diag, np.float64)
        if np.any(diag == 0.0):
            raise ValueError(f"Jacobi: zero diagonal at owned row {int(np.flatnonzero(diag == 0)[0])}")
        self.inv = 1.0 / diag

    def __call__(self, r):
        return self.inv * r


class BlockJacobi3:
    """z_k = B_k⁻¹ r_k with the owned 3×3 diagonal blocks B (n_owned,3,3) (momentum).

    The 3×3 product is written out term by term (fixed order), so the result does not depend
    on how many blocks a rank holds.
    """

    def __init__(self, blocks):
        self.inv = np.linalg.inv(np.asarray(blocks, np.float64))

    def __call__(self, r):
        r = r.reshape(-1, 3)
        b = self.inv
        return (b[:, :, 0] * r[:, 0:1] + b[:, :, 1] * r[:, 1:2] + b[:, :, 2] * r[:, 2:3]
                ).reshape(-1)


class LocalAMG:
    """One V-cycle on the rank's owned × owned block (additive Schwarz without overlap; the
    hierarchy of :func:`dycore.solvers.linear.amg_hierarchy`, ``coarsening`` as there)."""

    def __init__(self, owned_block, coarsening: str = "aggregation"):
        from dycore.solvers.amg import RANK_LOCAL_AMG
        from dycore.solvers.linear import amg_hierarchy
        self.ml = amg_hierarchy(owned_block, coarsening=coarsening, **RANK_LOCAL_AMG)
        self._m = self.ml.aspreconditioner(cycle="V")

    def __call__(self, r):
        return self._m @ r


def _identity(r):
    return r.copy()


def _flat(a):
    return np.ascontiguousarray(a, np.float64).reshape(-1)


def _start(a, b, x0, m):
    """The start of :func:`cg` and :func:`bicgstab`: ``(shape, m, b, x, mv, r)``.

    ``shape`` is b's; ``m`` the preconditioner or the identity; ``b`` and ``x`` flat float64
    (x zero, or a copy of ``x0``); ``mv`` the flat matvec; ``r = b - A x`` (a copy of b for x = 0).
    """
    shape = np.shape(b)
    b = _flat(b)
    x = np.zeros_like(b) if x0 is None else _flat(x0).copy()
    mv = lambda v: _flat(a.matvec(v.reshape(shape)))
    r = b - mv(x) if x0 is not None else b.copy()
    return shape, m or _identity, b, x, mv, r


def cg(a, b, reducer, x0=None, m=None, rtol=1e-8, atol=0.0, maxiter=1000, name="pressure"):
    """Preconditioned conjugate gradients on owned rows (A symmetric positive definite).

    Parameters
    ----------
    a : DistributedMatrix (or any object with ``matvec(x_owned) -> y_owned``)
    b : (n_owned,) or (n_owned,3) float64 right-hand side; x0 : same shape or None (zero)
    reducer : Reducer; m : preconditioner callable (flat owned vector -> same) or None
    rtol, atol : stop when ‖r‖₂ ≤ max(rtol·‖b‖₂, atol); maxiter : iteration limit

    Returns
    -------
    x : float64 array shaped like b; iterations : int

    Raises
    ------
    SolverDivergedError (same message on every rank) if not converged in ``maxiter``
    iterations or the iterates turn non-finite.
    """
    shape, m, b, x, mv, r = _start(a, b, x0, m)
    z = m(r)
    bb, rr, rz = reducer.dots((b, b), (r, r), (r, z))        # one reduction
    tol = max(rtol * math.sqrt(bb), atol)
    rn = math.sqrt(rr)
    if rn <= tol:
        return x.reshape(shape), 0
    p = z.copy()
    it = 0
    for it in range(1, maxiter + 1):
        q = mv(p)
        alpha = rz / reducer.dot(p, q)
        x += alpha * p
        r -= alpha * q
        z = m(r)                # before the test: ‖r‖² and r·z share one reduction
        rr, rz_new = reducer.dots((r, r), (r, z))
        rn = math.sqrt(rr)
        if rn <= tol:
            return x.reshape(shape), it
        if not np.isfinite(rn):
            break
        p = z + (rz_new / rz) * p
        rz = rz_new
    raise SolverDivergedError(f"{name} solve (distributed CG) did not converge: {it} "
                              f"iterations, residual {rn:.3e} > {tol:.3e}")


def bicgstab(a, b, reducer, x0=None, m=None, rtol=1e-8, atol=0.0, maxiter=1000,
             name="momentum"):
    """Right-preconditioned BiCGStab on owned rows (general nonsymmetric A).

    Parameters and returns as :func:`cg`.

    Raises
    ------
    SolverDivergedError on breakdown (ρ = 0 or ω = 0), non-finite iterates or no convergence
    in ``maxiter`` iterations.
    """
    shape, m, b, x, mv, r = _start(a, b, x0, m)
    bb, rr = reducer.dots((b, b), (r, r))
    tol = max(rtol * math.sqrt(bb), atol)
    rn = math.sqrt(rr)
    if rn <= tol:
        return x.reshape(shape), 0
    rhat = r.copy()
    rho = rr                                        # r̂·r with r̂ = r
    rho_old = alpha = omega = 1.0
    p = np.zeros_like(b)
    v = np.zeros_like(b)
    why = "no convergence"
    it = 0
    for it in range(1, maxiter + 1):
        if rho == 0.0:
            why = "breakdown (rho = 0)"
            break
        if it == 1:
            p = r.copy()
        else:
            p = r + ((rho / rho_old) * (alpha / omega)) * (p - omega * v)
        phat = m(p)
        v = mv(phat)
        alpha = rho / reducer.dot(rhat, v)
        s = r - alpha * v
        sn = reducer.norm(s)
        if sn <= tol:
            x += alpha * phat
            return x.reshape(shape), it
        shat = m(s)
        t = mv(shat)
        ts, tt = reducer.dots((t, s), (t, t))
        omega = ts / tt
        x += alpha * phat + omega * shat
        r = s - omega * t
        rr, rho_next = reducer.dots((r, r), (rhat, r))     # ‖r‖² and the next ρ together
        rn = math.sqrt(rr)
        if rn <= tol:
            return x.reshape(shape), it
        if omega == 0.0 or not np.isfinite(rn):
            why = "breakdown (omega = 0)" if omega == 0.0 else "non-finite residual"
            break
        rho_old, rho = rho, rho_next
    raise SolverDivergedError(f"{name} solve (distributed BiCGStab) failed: {why}, {it} "
                              f"iterations, residual {rn:.3e} > {tol:.3e}")
