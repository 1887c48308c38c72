"""Host linear solvers: SciPy Krylov methods with Jacobi / block-Jacobi / ILU, PyAMG for pressure.

docs/equations.md §4: pressure (CMC + KMK) is SPD → CG with smoothed-aggregation AMG, set up once
(the matrix depends only on the mesh); momentum (BCSR 3×3) and tracers (CSR) are non-symmetric →
GMRES or BiCGStab. Iteration counts are returned for the diagnostics.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse.linalg as spla

from dycore.errors import ConfigError, SolverDivergedError

__all__ = ["HostSolver", "block_jacobi_inverse", "amg_hierarchy", "one_blas_thread"]


def one_blas_thread():
    """A context in which BLAS runs on one thread (threadpoolctl): the AMG set-up's BLAS work
    is many small calls (PyAMG's Arnoldi estimates of ρ(D⁻¹A), the Lanczos of the Chebyshev
    interval, the coarsest pseudo-inverse), which a threaded BLAS slows where other processes
    share the cores — the ranks of a node build their hierarchies at once. A 190,532-row
    rank-local block's ``HostHierarchy`` on the 2-core development machine, under load from a
    test run: 4.1 s on one BLAS thread against 8.5 s on two (the default); unloaded, the same
    (3.9–4.4 s against 4.0–4.4 s)."""
    from threadpoolctl import threadpool_limits
    return threadpool_limits(limits=1, user_api="blas")


def amg_hierarchy(a, max_coarse: int = 500, coarsening: str = "aggregation",
                  evolution_steps: int = 2, energy_iterations: int = 4):
    """PyAMG smoothed-aggregation hierarchy for the SPD pressure matrix (host and device use it).

    Evolution strength of connection (Olson, Schroder & Tuminaro 2010) and energy-minimising
    prolongation, its CG preconditioned by the diagonal of A (PyAMG's ``weighting="local"``
    default takes |A| row sums, which SciPy forms for a BSR matrix in a Python loop: on the
    paper mesh's matrix the build takes 3.80 against 5.45 s, 0.88 against 1.17 s on a quarter,
    with the same CG iterations, 21 and 193 — scripts/rank_amg_setup_ab.py). CMC + KMK
    couples second neighbours (61 nonzeros per row on the paper mesh) on anisotropic
    terrain-following cells, where the classical symmetric measure picks poor
    aggregates: on the paper-size mesh (98,441 nodes, first pressure solve of a step, rtol
    1e-10) CG + PyAMG's V-cycle took 82 iterations / 14.3 s with symmetric θ = 0.25 and 16
    iterations / 2.6 s with evolution strength; with the device V-cycle (damped Jacobi,
    2 sweeps) 125 against 22 iterations.

    The evolution measure estimates ρ(D⁻¹A) by Arnoldi from ``numpy.random``'s global stream;
    it is seeded here (and the caller's stream restored), and BLAS runs on one thread
    (:func:`one_blas_thread`: a threaded BLAS splits its sums by the machine's core count),
    so the hierarchy — and every run — is reproducible bit for bit.

    ``coarsening="classical"``: PyAMG's Ruge-Stuben hierarchy instead (classical strength,
    θ = 0.25; Ruge & Stüben 1987): 6.9-7.8× faster to build on the paper mesh's matrix, 32
    against 21 CG iterations on the whole matrix, 190 against 193 with rank-local blocks of
    four METIS parts, operator complexity 2.06 against 1.34 — on an H200 the paper-mesh step
    takes 38.9 against 21.5 ms (docs/performance.md).

    Parameters
    ----------
    a : scipy sparse (n, n), symmetric positive definite
    max_coarse : largest coarsest level (solved directly)
    coarsening : "aggregation" (the default above) or "classical"
    evolution_steps : steps of the evolution measure (PyAMG's ``k``, its default 2; the
        aggregation hierarchy only). 1 halves the build and suits the rank-local blocks of K
        ranks, whose iteration count the coupling between blocks sets: on the paper mesh's
        matrix cut into 4 (8) METIS parts, 192 (225) against 193 (225) CG iterations for
        0.74 (0.42) against 1.51 (0.91) s on the slowest part; on the whole matrix 22
        against 21 iterations (:data:`dycore.solvers.amg.RANK_LOCAL_AMG`).
    energy_iterations : CG iterations of the energy-minimising prolongation (PyAMG's
        ``maxiter``, its default 4; the aggregation hierarchy only). The rank-local blocks
        take 2: on the paper mesh's matrix cut into 2 and 4 vertical-column parts, 113 and 137
        CG iterations either way, for 15-23 % less build (scripts/rank_amg_setup_ab.py).

    Returns
    -------
    pyamg.multilevel.MultilevelSolver
    """
    import pyamg
    if coarsening not in ("aggregation", "classical"):
        raise ValueError(f"AMG coarsening '{coarsening}' is not 'aggregation' or 'classical'")
    with one_blas_thread():
        if coarsening == "classical":
            return pyamg.ruge_stuben_solver(a.tocsr(), strength=("classical", {"theta": 0.25}),
                                            max_coarse=max_coarse)
        saved = np.random.get_state()
        np.random.seed(0)
        try:
            return pyamg.smoothed_aggregation_solver(
                a.tocsr(), symmetry="symmetric", strength=("evolution", {"k": evolution_steps}),
                smooth=("energy", {"weighting": "diagonal", "maxiter": energy_iterations}),
                max_coarse=max_coarse)
        finally:
            np.random.set_state(saved)


def block_jacobi_inverse(diag_blocks: np.ndarray) -> np.ndarray:
    """Inverses of the 3×3 diagonal blocks, (n,3,3) -> (n,3,3) (NumPy batched inverse)."""
    return np.linalg.inv(diag_blocks)


class HostSolver:
    """One linear system kind (pressure, momentum or tracer) solved with SciPy on the host.

    Parameters
    ----------
    name : str — used in error messages ("pressure", "momentum", "tracer").
    cfg : LinearSolverConfig-like object with method, preconditioner, rtol, atol,
        max_iterations, restart.
    """

    def __init__(self, name: str, cfg):
        self.name = name
        self.cfg = cfg
        self._amg = None
        self._amg_matrix_id = None
        self._lu = None           # (matrix id, HostDirect) for method "direct"

    def _preconditioner(self, a, block_diag=None):
        kind = self.cfg.preconditioner
        n = a.shape[0]
        if kind == "none":
            return None
        if kind == "jacobi" or (kind == "block_jacobi" and block_diag is None):
            inv = 1.0 / a.diagonal()
            return spla.LinearOperator((n, n), matvec=lambda x: inv * x.ravel(), dtype=float)
        if kind == "block_jacobi":
            binv = block_jacobi_inverse(block_diag)
            return spla.LinearOperator(
                (n, n), matvec=lambda x: np.einsum("kab,kb->ka", binv, x.reshape(-1, 3)).ravel(),
                dtype=float)
        if kind == "ilu":
            ilu = spla.spilu(a.tocsc(), drop_tol=1e-5, fill_factor=5)
            return spla.LinearOperator((n, n), matvec=ilu.solve, dtype=float)
        if kind == "amg":
            if self._amg is None or self._amg_matrix_id != id(a):
                self._amg = amg_hierarchy(a, coarsening=getattr(self.cfg, "amg_coarsening",
                                                                "aggregation"))
                self._amg_matrix_id = id(a)
            return self._amg.aspreconditioner(cycle="V")
        raise ConfigError(f"solvers.{self.name}.preconditioner: unknown '{kind}'")

    def solve(self, a, b: np.ndarray, x0: np.ndarray | None = None, block_diag=None):
        """Solve ``a x = b``.

        Parameters
        ----------
        a : scipy sparse matrix (CSR or BSR), (n, n)
        b : (n,) float64
        x0 : (n,) float64 initial guess or None (zero)
        block_diag : (n/3,3,3) diagonal blocks for block-Jacobi, or None

        Returns
        -------
        x : (n,) float64 ; iterations : int

        Raises
        ------
        SolverDivergedError if the method does not converge or returns non-finite values.
        """
        cfg = self.cfg
        if cfg.method == "direct":
            return self._direct(a, b), 0
        m = self._preconditioner(a, block_diag)
        its = [0]

        def count(_):
            its[0] += 1

        kw = dict(rtol=cfg.rtol, atol=cfg.atol, maxiter=cfg.max_iterations, M=m, x0=x0)
        if np.linalg.norm(b) == 0.0:
            return np.zeros_like(b), 0
        if cfg.method in ("cg", "auto"):          # auto: CG on the host (direct: GPU only)
            x, info = spla.cg(a, b, callback=count, **kw)
        elif cfg.method == "bicgstab":
            x, info = spla.bicgstab(a, b, callback=count, **kw)
        elif cfg.method == "gmres":
            # SciPy's maxiter counts restart cycles: whole cycles covering max_iterations
            kw["maxiter"] = -(-cfg.max_iterations // cfg.restart)
            x, info = spla.gmres(a, b, restart=cfg.restart, callback=count,
                                 callback_type="pr_norm", **kw)
        else:
            raise ConfigError(f"solvers.{self.name}.method: unknown '{cfg.method}'")
        if info != 0 or not np.all(np.isfinite(x)):
            res = np.linalg.norm(b - a @ x) / np.linalg.norm(b)
            raise SolverDivergedError(
                f"{self.name} solve ({cfg.method}+{cfg.preconditioner}) did not converge: "
                f"info={info}, {its[0]} iterations, relative residual {res:.3e} "
                f"(rtol {cfg.rtol:g}, max_iterations {cfg.max_iterations})")
        return x, its[0]

    def _direct(self, a, b):
        """x = A⁻¹ b with a SuperLU factorisation of ``a`` made at its first solve and kept
        while the same matrix object comes back (the pressure matrix is constant)."""
        from dycore.solvers.direct import HostDirect
        if self._lu is None or self._lu[0] is not a:
            n = a.shape[0]
            self._lu = (a, HostDirect(a, np.zeros(n), np.zeros(n), self.cfg.rtol))
        return self._lu[1].lu.solve(b)
