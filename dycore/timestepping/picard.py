"""One time step: the Picard iteration around the θ-scheme (DESIGN.md §4), as named timed stages.

For each of ``nonlinear_iterations`` (stopping early when the iterate change < tolerance):

1. advecting velocity      u_nl = θ_nl·u + (1 − θ_nl)·uⁿ
2. reset                    every field but p restarts from its old value
3. tracers                  (M + ΔtθL) δc = −L cⁿ + sources;  c = cⁿ + Δt δc
                            (θ' with source −w dθ̄/dz, w θ-weighted; q_v, q_c, q_r)
4. momentum predictor       big_m δu = −L uⁿ + ∫N b ẑ + ∫N σ u_ref + Cᵀp;  u* = uⁿ + Δt δu
                            (b = g θ'/θ₀ θ-weighted between θ'ⁿ and the new θ')
5. pressure                 (CMC + KMK) δp = −C u* − Δt·KMK·p;  p ← p + δp/Δt
6. velocity correction      u = u* + M_L⁻¹ Cᵀ δp   (Dirichlet nodes excluded)
7. convergence              ‖u − u_previous iterate‖_∞

Strong Dirichlet rows (lateral faces) are replaced by identity rows with zero right-hand side:
δ = 0 keeps the boundary value of every field. The stepper never branches on the backend: the
arithmetic between assemblies and solves goes through ``backend.ops`` (NumPy on the CPU, fused
kernels on the GPU, the same operations in the same order) into arrays allocated once, and sparse
products through the backend's matrices; a step on the GPU allocates nothing.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from dycore.diagnostics.norms import SCALAR_NAMES
from dycore.errors import SolverDivergedError
from dycore.physics.state import TRACERS

log = logging.getLogger("dycore")

__all__ = ["PicardStepper", "StepInfo"]


@dataclass
class StepInfo:
    """What one step reports to the diagnostics."""

    picard_change: list = field(default_factory=list)   # ‖Δu‖_∞ per iteration [m/s]
    iterations: dict = field(default_factory=lambda: {"pressure": 0, "momentum": 0, "tracer": 0})
    nonfinite: int = 0                                   # non-finite entries of u and θ'
    diagnostics: dict = field(default_factory=dict)     # max_abs_w, kinetic_energy, ...


class PicardStepper:
    """Advances a :class:`State` by one Δt.

    Parameters
    ----------
    backend, assembler, ops (MeshOperators), systems (linear systems), coeffs (Coefficients),
    time_cfg (TimeConfig), timers (StageTimers)
    """

    #: slots of the scalars read at the end of a step
    _STEP, _CHANGE = 0, 4

    def __init__(self, backend, assembler, ops, systems, coeffs, time_cfg, timers):
        self.b, self.asm, self.ops, self.sys = backend, assembler, ops, systems
        self.c, self.cfg, self.timers = coeffs, time_cfg, timers
        self.xp, self.vops = backend.xp, backend.ops
        self._pool = {}
        self.pin = backend.to_device(np.array([ops.pin], dtype=np.int64))
        self.scalars = self._work("scalars", (8,))

    # -- work arrays, allocated once -------------------------------------------------------
    def _work(self, name, shape):
        key = (name, shape)
        if key not in self._pool:
            self._pool[key] = self.xp.zeros(shape)
        return self._pool[key]

    def _fresh(self, name, like, avoid):
        """One of three arrays kept for ``name`` that is none of ``avoid`` (the old value and
        the current iterate stay intact, so a step can be repeated from the old state)."""
        for k in range(3):
            a = self._work(f"{name}.{k}", like.shape)
            if not any(a is v for v in avoid):
                return a
        raise RuntimeError(f"no free work array for {name}")   # pragma: no cover

    # -- stages ----------------------------------------------------------------------------
    def advance_tracer(self, name, u_nl, c_old, src, c_ref, kdiag, avoid, matrix=None):
        """Stage 3 for one tracer; returns (c_new, the Dirichlet-applied matrix values)."""
        dt, th = self.cfg.dt, self.cfg.theta
        values, rhs = self.asm.tracer(name, u_nl, c_old, src, self.c.sigma, c_ref, kdiag,
                                      dt * th, want_matrix=matrix is None)
        with self.timers("boundary conditions"):
            self.vops.dirichlet(values, rhs, 1, self.ops)
        if matrix is None:
            matrix = values
        with self.timers(f"solve tracer {name}"):
            dc = self.sys.tracer(matrix, rhs)
        c_new = self._fresh(name, c_old, (c_old,) + avoid)
        self.vops.axpby(c_new, 1.0, c_old, dt, dc)              # cⁿ + Δt δc
        return c_new, matrix

    def momentum_predictor(self, u_nl, u_old, theta_w, p):
        """Stage 4: returns u*."""
        dt, th = self.cfg.dt, self.cfg.theta
        buoy = self._work("buoyancy", theta_w.shape)
        self.vops.axpby(buoy, self.c.g_over_theta0, theta_w, 0.0, theta_w)
        values, rhs = self.asm.momentum(u_nl, u_old, buoy, p, self.c.sigma, self.c.u_ref,
                                        self.c.nu, self.c.f_cor, dt * th)
        with self.timers("boundary conditions"):
            self.vops.dirichlet(values, rhs, 3, self.ops)
        with self.timers("solve momentum"):
            du = self.sys.momentum(values, rhs)
        u_star = self._work("u_star", u_old.shape)
        self.vops.axpby(u_star, 1.0, u_old, dt, du)             # uⁿ + Δt δu
        return u_star

    def pressure_projection(self, u_star, p, avoid):
        """Stages 5–6: returns (u, p_new)."""
        dt, ops, v = self.cfg.dt, self.ops, self.vops
        r = self._work("pressure_rhs", p.shape)
        with self.timers("pressure rhs"):
            kmk_p = self._work("kmk_p", p.shape)
            ops.C.matvec(u_star, r)
            ops.kmk.matvec(p, kmk_p)
            v.axpby(r, -1.0, r, -dt, kmk_p)                     # −C u* − Δt·KMK p
            v.scatter_fill(r, self.pin, 0.0)
        with self.timers("solve pressure"):
            dp = self.sys.pressure(r)
        with self.timers("velocity correction"):
            ct_dp = self._work("ct_dp", u_star.shape)
            ops.CT.matvec(dp, ct_dp)
            u = self._fresh("u", u_star, avoid)
            v.x_plus_yz(u, u_star, ops.ml_inv_u, ct_dp)         # u* + M_L⁻¹ Cᵀ δp
            p_new = self._fresh("p", p, avoid)
            v.axpby(p_new, 1.0, p, dt, dp, div=True)            # p + δp/Δt
        return u, p_new

    # -- the step ----------------------------------------------------------------------------
    def step(self, state) -> StepInfo:
        """Advance ``state`` in place from t to t + Δt.

        Host traffic: one scalar read per Picard iteration but the last (the early-exit test),
        one read of the end-of-step scalars (last change, non-finite count, diagnostics) and one
        of the solver statistics. Device solves replayed without a check are verified there;
        if one fell short of convergence the step is repeated from the unchanged ``state``
        with every solve checked.

        Raises
        ------
        SolverDivergedError when a solve fails or a field becomes non-finite.
        """
        for attempt in range(2):
            self.sys.begin_step()
            info, fields = self._picard(state)
            info.iterations, converged = self.sys.end_step()
            if converged:
                break
            log.info("t = %g s: a solve replayed without a check stopped short of its tolerance;"
                     " repeating the step with every solve checked", state.t)
        if info.nonfinite:
            raise SolverDivergedError(
                f"fields became non-finite in the step from t = {state.t:g} s "
                f"(dt = {self.cfg.dt:g} s); reduce time.dt or check the solver tolerances")
        state.u, state.p, state.theta_prime, state.q = fields
        state.t += self.cfg.dt
        return info

    def _picard(self, state):
        """The Picard loop from ``state`` (left unchanged); returns (StepInfo, new fields)."""
        cfg, c, v = self.cfg, self.c, self.vops
        th, relax = cfg.theta, cfg.relaxation
        info = StepInfo()
        u_old, th_old, p_old = state.u, state.theta_prime, state.p
        q_old = state.q
        old = (u_old, th_old, p_old) + tuple(q_old.values())
        u_it, p = u_old, p_old
        th_new, q_new = th_old, q_old
        u_nl = self._work("u_nl", u_old.shape)
        src = self._work("theta_source", th_old.shape)
        theta_w = self._work("theta_w", th_old.shape)
        share = tuple(c.kappa) == tuple(c.kappa_q)       # θ' and q see the same matrix
        change_slot = self._CHANGE
        for k in range(cfg.nonlinear_iterations):
            with self.timers("advecting velocity"):
                v.axpby(u_nl, relax, u_it, 1.0 - relax, u_old)
                v.advection_source(src, u_it, u_old, th, c.dtheta_bar_dz)
            th_new, mat = self.advance_tracer("theta_prime", u_nl, th_old, src, c.zeros,
                                              c.kappa, old)
            q_new, qmat = {}, (mat if share else None)
            for name in TRACERS:
                q_new[name], qmat = self.advance_tracer(name, u_nl, q_old[name], c.zeros,
                                                        c.q_ref[name], c.kappa_q, old, qmat)
            v.axpby(theta_w, th, th_new, 1.0 - th, th_old)
            u_star = self.momentum_predictor(u_nl, u_old, theta_w, p)
            u, p = self.pressure_projection(u_star, p, old + (u_it,))
            v.max_abs_diff(u, u_it, self.scalars, change_slot)
            u_it = u
            if k == cfg.nonlinear_iterations - 1:
                break
            change = float(self.b.to_host(self.scalars[change_slot:change_slot + 1])[0])
            info.picard_change.append(change)
            if not change == change or change < cfg.picard_tolerance:   # NaN or converged
                change_slot = None
                break
        div = self._work("divergence", th_old.shape)
        self.ops.C.matvec(u_it, div)
        v.step_scalars(u_it, th_new, self.ops.ml, div, self.scalars, self._STEP)
        host = self.b.to_host(self.scalars)
        info.nonfinite = int(host[3])
        info.diagnostics = dict(zip(SCALAR_NAMES, (float(host[0]), 0.5 * float(host[1]),
                                                   float(host[2]))))
        if change_slot is not None:
            info.picard_change.append(float(host[change_slot]))
        return info, (u_it, p, th_new, q_new)
