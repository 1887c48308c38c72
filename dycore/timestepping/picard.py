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
δ = 0 keeps the boundary value of every field. The stepper never branches on the backend: array
arithmetic goes through ``backend.xp`` and sparse products through the backend's matrices.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from dycore.diagnostics.norms import SCALAR_NAMES, step_scalars
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

    def __init__(self, backend, assembler, ops, systems, coeffs, time_cfg, timers):
        self.b, self.asm, self.ops, self.sys = backend, assembler, ops, systems
        self.c, self.cfg, self.timers = coeffs, time_cfg, timers
        self.xp = backend.xp

    # -- boundary conditions -------------------------------------------------------------
    def _dirichlet_scalar(self, values, rhs):
        if values is not None:
            values[self.ops.dir_row_pos] = 0.0
            values[self.ops.dir_diag_pos] = 1.0
        rhs[self.ops.dir_nodes] = 0.0

    def _dirichlet_block(self, values, rhs):
        values[self.ops.dir_row_pos] = 0.0
        for a in range(3):
            values[self.ops.dir_diag_pos, a, a] = 1.0
        rhs[self.ops.dir_nodes] = 0.0

    # -- stages ----------------------------------------------------------------------------
    def advance_tracer(self, name, u_nl, c_old, src, c_ref, kdiag, info, matrix=None):
        """Stage 3 for one tracer; returns (c_new, the Dirichlet-applied matrix values)."""
        dt, th = self.cfg.dt, self.cfg.theta
        values, rhs = self.asm.tracer(name, u_nl, c_old, src, self.c.sigma, c_ref, kdiag,
                                      dt * th, want_matrix=matrix is None)
        with self.timers("boundary conditions"):
            self._dirichlet_scalar(values, rhs)
        if matrix is None:
            matrix = values
        with self.timers(f"solve tracer {name}"):
            dc = self.sys.tracer(matrix, rhs)
        return c_old + dt * dc, matrix

    def momentum_predictor(self, u_nl, u_old, theta_w, p, info):
        """Stage 4: returns u*."""
        dt, th = self.cfg.dt, self.cfg.theta
        buoy = self.c.g_over_theta0 * theta_w
        values, rhs = self.asm.momentum(u_nl, u_old, buoy, p, self.c.sigma, self.c.u_ref,
                                        self.c.nu, self.c.f_cor, dt * th)
        with self.timers("boundary conditions"):
            self._dirichlet_block(values, rhs)
        with self.timers("solve momentum"):
            du = self.sys.momentum(values, rhs)
        return u_old + dt * du

    def pressure_projection(self, u_star, p, info):
        """Stages 5–6: returns (u, p_new)."""
        dt, ops = self.cfg.dt, self.ops
        with self.timers("pressure rhs"):
            r = -(ops.C @ u_star.ravel()) - dt * (ops.kmk @ p)
            r[ops.pin] = 0.0
        with self.timers("solve pressure"):
            dp = self.sys.pressure(r)
        with self.timers("velocity correction"):
            u = u_star + ops.ml_inv_u * (ops.CT @ dp).reshape(-1, 3)
            p_new = p + dp / dt
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
        xp, cfg, c = self.xp, self.cfg, self.c
        th, relax = cfg.theta, cfg.relaxation
        info = StepInfo()
        u_old, th_old = state.u, state.theta_prime
        q_old = state.q
        u_it, p = u_old, state.p
        th_new, q_new = th_old, q_old
        for k in range(cfg.nonlinear_iterations):
            with self.timers("advecting velocity"):
                u_nl = relax * u_it + (1.0 - relax) * u_old
                src = -(th * u_it[:, 2] + (1.0 - th) * u_old[:, 2]) * c.dtheta_bar_dz
            th_new, _ = self.advance_tracer("theta_prime", u_nl, th_old, src, c.zeros,
                                            c.kappa, info)
            q_new, qmat = {}, None
            for name in TRACERS:
                q_new[name], qmat = self.advance_tracer(name, u_nl, q_old[name], c.zeros,
                                                        c.q_ref[name], c.kappa_q, info, qmat)
            theta_w = th * th_new + (1.0 - th) * th_old
            u_star = self.momentum_predictor(u_nl, u_old, theta_w, p, info)
            u, p = self.pressure_projection(u_star, p, info)
            change = xp.max(xp.abs(u - u_it))
            u_it = u
            if k == cfg.nonlinear_iterations - 1:
                break
            change = float(self.b.to_host(change))
            info.picard_change.append(change)
            if not change == change or change < cfg.picard_tolerance:   # NaN or converged
                change = None
                break
        nonfinite = xp.count_nonzero(~xp.isfinite(u_it)) + xp.count_nonzero(~xp.isfinite(th_new))
        scalars = [nonfinite] + step_scalars(u_it, self.ops, xp)
        if change is not None:
            scalars.append(change)
        host = self.b.to_host(xp.stack([xp.asarray(v, dtype=xp.float64) for v in scalars]))
        info.nonfinite = int(host[0])
        info.diagnostics = dict(zip(SCALAR_NAMES, (float(v) for v in host[1:4])))
        if change is not None:
            info.picard_change.append(float(host[4]))
        return info, (u_it, p, th_new, q_new)
