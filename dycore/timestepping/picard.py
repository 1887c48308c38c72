"""One time step: the Picard iteration around the θ-scheme (docs/equations.md §4), as named timed stages.

For each of ``nonlinear_iterations`` (stopping early when the iterate change < tolerance):

1. advecting velocity      u_nl = θ_nl·u + (1 − θ_nl)·uⁿ
2. reset                    every field but p restarts from its old value
3. tracers                  (M + ΔtθL) δc = −L cⁿ + sources;  c = cⁿ + Δt δc
                            (θ' with source −w dθ̄/dz, w θ-weighted; q_v, q_c, q_r; a q zero
                            everywhere with a zero reference stays zero and is skipped; the
                            q's feed nothing in this iteration, so on a GPU they run on a
                            second stream beside stage 4, joined before stage 5; on GPU ranks,
                            where one stream carries every message, the q's sharing θ′'s
                            matrix are solved in θ′'s solve instead)
4. momentum predictor       big_m δu = −L uⁿ + ∫N b ẑ + ∫N σ u_ref + Cᵀp;  u* = uⁿ + Δt δu
                            (b = g θ'/θ̄(z) θ-weighted between θ'ⁿ and the new θ'; with the
                            strong no-normal-flow condition the system is rotated to node-normal
                            coordinates at ground/lid nodes and n·u* = 0 is imposed there)
5. pressure                 (CMC + KMK) δp = −C u* − Δt·KMK·p;  p ← p + δp/Δt
6. velocity correction      u = u* + M_L⁻¹ P Cᵀ δp   (Dirichlet nodes excluded; P removes the
                            normal component at rotated nodes)
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
from functools import partial

import numpy as np

from dycore.backend.graphs import IterationGraphs
from dycore.backend.streams import InlineBranch
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
        #: each Picard iteration as one captured graph once the solves allow it (``enabled``
        #: False: launched from Python, so that the stage timers split a step by stage)
        self.graphs = IterationGraphs(backend, systems, timers)
        #: skip the tracers whose field and sponge/boundary reference are zero everywhere when a
        #: run starts (q_c and q_r of the dry cases): their exact update is zero, so skipping
        #: them gives the same bits (False: solve them anyway; an A/B switch, not a config key)
        self.skip_inactive_tracers = True
        self._inactive = None            # frozenset of skipped tracers, decided at the next step
        self._solved_before = None       # the tracers solved by the steps so far (None: none yet)
        self._grouping = None            # (tracers_together, the tracers solved) of the last step
        #: where the moisture tracers are issued: beside the momentum predictor on a second
        #: stream on a GPU (:mod:`dycore.backend.streams`; the same bits), in order elsewhere
        #: and with systems that solve every system in one workspace on the backend's stream
        #: (``systems.one_stream``: the GPU ranks' solvers); an A/B switch: set an
        #: ``InlineBranch`` to issue them on the main stream
        self.branch = (InlineBranch() if getattr(systems, "one_stream", False)
                       else backend.branch())
        #: with systems that solve several right-hand sides of one matrix together
        #: (``systems.tracers``: the GPU ranks), θ′ and the moisture tracers sharing its
        #: matrix are solved in one solve (the same bits; an A/B switch: False solves each
        #: on its own; the step after a switch runs uncaptured and learns the budgets anew)
        self.tracers_together = True
        #: the end-of-step work (scalars, commit copies) as graphs, by the arrays they join
        self._graphs = {}
        self.pin = backend.to_device(np.array([ops.pin], dtype=np.int64))
        self.scalars = self._work("scalars", (8,))
        #: issue Picard iteration k+1 before iteration k's change (the early-exit test) is read
        #: (GPU with device solvers): the GPU does not wait for the host's read and relaunch.
        #: On an early exit — a change below ``time.picard_tolerance`` — iteration k+1 has
        #: overwritten the fields of 0..k, which are issued again from the unchanged state:
        #: the same kernels on the same inputs (an A/B switch; off on GPU ranks)
        self.speculate = (getattr(backend, "name", "cpu") == "gpu"
                          and getattr(backend, "solver_mode", "host") == "device")

    # -- work arrays, allocated once -------------------------------------------------------
    def _work(self, name, shape):
        key = (name, shape)
        if key not in self._pool:
            self._pool[key] = self.xp.zeros(shape)
        return self._pool[key]

    # -- tracer activity ---------------------------------------------------------------------
    def state_changed(self) -> None:
        """Tell the stepper that the state's arrays were written outside :meth:`step` (a
        restart, a user's edit): which tracers are inactive is decided anew at the next step."""
        self._inactive = None
        self.graphs.clear()

    def _new_solves(self) -> bool:
        """Whether this step solves a tracer no step solved before (a tracer that became
        active), or — with systems that solve tracers together — groups the tracer solves
        otherwise than the step before (:attr:`tracers_together` switched, or another set of
        active tracers: another number of right-hand sides). Such a solve must run once
        outside a captured iteration, to learn its budget (the uncaptured step also drops
        the captured iterations, which replay the old grouping's work:
        :meth:`IterationGraphs.run`)."""
        solved = frozenset(TRACERS) - self._inactive
        new = self._solved_before is not None and bool(solved - self._solved_before)
        self._solved_before = solved | (self._solved_before or frozenset())
        grouping = (self.tracers_together, solved) if hasattr(self.sys, "tracers") else None
        regroup = self._grouping is not None and grouping != self._grouping
        self._grouping = grouping
        return new or regroup

    def _decide_inactive(self, state) -> frozenset:
        """The tracers that stay exactly zero: field and reference q_ref zero at every node.

        With c ≡ 0 and q_ref ≡ 0 (and no source) every term of the tracer right-hand side is a
        product with zero, the Dirichlet rows keep 0 and the solve returns δc = 0 after 0
        iterations, so cⁿ⁺¹ = cⁿ + Δt·0 = 0 bit for bit: skipping the assembly and the solve
        changes no number (fields, iteration counts). One reduction per field (global over MPI
        ranks) and one host read, the first step only (and after :meth:`state_changed`)."""
        if self._inactive is not None:
            return self._inactive
        inactive = frozenset()
        if self.skip_inactive_tracers:
            flags = self._work("tracer activity", (2 * len(TRACERS),))
            for i, name in enumerate(TRACERS):
                self.vops.max_abs_diff(state.q[name], self.c.zeros, flags, 2 * i)
                self.vops.max_abs_diff(self.c.q_ref[name], self.c.zeros, flags, 2 * i + 1)
            host = self.b.to_host(flags)
            inactive = frozenset(name for i, name in enumerate(TRACERS)
                                 if host[2 * i] == 0.0 and host[2 * i + 1] == 0.0)
            if inactive:
                log.debug("tracers zero with a zero reference, not solved: %s",
                          ", ".join(sorted(inactive)))
        self.graphs.clear()
        self._inactive = inactive
        return inactive

    # -- stages ----------------------------------------------------------------------------
    def tracer_system(self, name, u_nl, c_old, src, c_ref, kdiag, matrix=None):
        """Stage 3's system for one tracer, Dirichlet rows applied: (matrix values, rhs) —
        ``matrix`` when given (the right-hand side only is assembled), else assembled."""
        values, rhs = self.asm.tracer(name, u_nl, c_old, src, self.c.sigma, c_ref, kdiag,
                                      self.cfg.dt * self.cfg.theta, want_matrix=matrix is None)
        with self.timers("boundary conditions"):
            self.vops.dirichlet(values, rhs, 1, self.ops)
        return (values if matrix is None else matrix), rhs

    def _tracer_update(self, name, c_old, dc):
        """cⁿ + Δt δc into the tracer's work array; returns it."""
        c_new = self._work(f"new {name}", c_old.shape)
        self.vops.axpby(c_new, 1.0, c_old, self.cfg.dt, dc)
        return c_new

    def advance_tracer(self, name, u_nl, c_old, src, c_ref, kdiag, matrix=None):
        """Stage 3 for one tracer; returns (c_new, the Dirichlet-applied matrix values)."""
        matrix, rhs = self.tracer_system(name, u_nl, c_old, src, c_ref, kdiag, matrix)
        with self.timers(f"solve tracer {name}"):
            dc = self.sys.tracer(matrix, rhs)
        return self._tracer_update(name, c_old, dc), matrix

    def advance_tracers_together(self, u_nl, tp_old, src, q_old):
        """Stage 3 for θ′ and every active moisture tracer in ONE solve of their shared
        matrix (systems with ``tracers``: the GPU ranks, whose solve of k right-hand sides
        sends one solve's messages; each tracer gets the bits of its own solve). Returns the
        new θ′."""
        c = self.c
        names = ["theta_prime"] + [n for n in TRACERS if n not in self._inactive]
        olds = {"theta_prime": tp_old, **q_old}
        mat, rhss = self.tracer_system("theta_prime", u_nl, tp_old, src, c.zeros, c.kappa)
        rhss = [rhss] + [self.tracer_system(n, u_nl, q_old[n], c.zeros, c.q_ref[n],
                                            c.kappa_q, mat)[1] for n in names[1:]]
        with self.timers("solve tracers"):
            dcs = self.sys.tracers(mat, rhss, names)
        new = [self._tracer_update(n, olds[n], dc) for n, dc in zip(names, dcs)]
        return new[0]

    def momentum_predictor(self, u_nl, u_old, tp_theta, p):
        """Stage 4: returns u*."""
        dt, theta = self.cfg.dt, self.cfg.theta
        buoy = self._work("buoyancy", tp_theta.shape)
        self.vops.multiply(buoy, self.c.g_over_theta_bar, tp_theta)   # b = g θ'/θ̄(z)
        values, rhs = self.asm.momentum(u_nl, u_old, buoy, p, self.c.sigma, self.c.u_ref,
                                        self.c.nu, self.c.f_cor, dt * theta)
        nnf = self.ops.nnf
        with self.timers("boundary conditions"):
            self.vops.dirichlet(values, rhs, 3, self.ops)
            if nnf is not None:                                 # n·u* = 0 at ground and lid
                self.vops.rotate_system(values, rhs, u_old, dt, nnf)
        with self.timers("solve momentum"):
            du = self.sys.momentum(values, rhs)
        if nnf is not None:
            self.vops.unrotate(du, nnf)                         # δu = Rᵀ δũ
        u_star = self._work("u_star", u_old.shape)
        self.vops.axpby(u_star, 1.0, u_old, dt, du)             # uⁿ + Δt δu
        return u_star

    def pressure_projection(self, u_star, p, u_out, p_out):
        """Stages 5–6: u_out = u* + M_L⁻¹Cᵀδp, p_out = p + δp/Δt (p_out may be p)."""
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
            if ops.nnf is not None:
                v.remove_normal(ct_dp, ops.nnf)                 # P Cᵀδp: n·u stays 0
            v.x_plus_yz(u_out, u_star, ops.ml_inv_u, ct_dp)     # u* + M_L⁻¹ Cᵀ δp
            v.axpby(p_out, 1.0, p, dt, dp, div=True)            # p + δp/Δt

    # -- the step ----------------------------------------------------------------------------
    def step(self, state) -> StepInfo:
        """Advance ``state`` in place from t to t + Δt.

        Every iterate lives in work arrays; ``state`` is overwritten (copied into) only once
        the step has succeeded. Host traffic: one scalar read per Picard iteration but the
        last (the early-exit test), one read of the end-of-step scalars (last change,
        non-finite count, diagnostics) and one of the solver statistics. Device solves
        replayed without a check are verified there; if one fell short of convergence the
        step is repeated from the unchanged ``state`` with every solve checked.

        With device solvers, once every solve has run and been verified, each Picard
        iteration is captured into one CUDA graph (assembly, boundary conditions, solves and
        updates) and replayed in later steps (:class:`IterationGraphs`).

        Raises
        ------
        SolverDivergedError when a solve fails or a field becomes non-finite.
        """
        self._decide_inactive(state)
        captured = self.graphs.enabled
        # a step is captured from its first iteration or not at all: when the solves are not
        # ready as it starts (budgets dropped by an A/B switch), every iteration of it is
        # issued from Python, even after its first iteration's solves have learnt budgets
        self.graphs.enabled = (captured and not self._new_solves()
                               and bool(getattr(self.sys, "graph_ready", False)))
        try:
            for attempt in range(2):
                self.sys.begin_step()
                info, fields = self._picard(state)
                info.iterations, converged = self.sys.end_step()
                if converged:
                    break
                self.graphs.clear()       # budgets change: capture the iterations afresh
                log.info("t = %g s: a solve replayed without a check stopped short of its "
                         "tolerance; repeating the step with every solve checked", state.t)
        finally:
            self.graphs.enabled = captured
        if info.nonfinite:
            raise SolverDivergedError(
                f"fields became non-finite in the step from t = {state.t:g} s "
                f"(dt = {self.cfg.dt:g} s); reduce time.dt or check the solver tolerances")
        self._commit(state, fields)
        state.t += self.cfg.dt
        return info

    def _issue(self, name, arrays, issue) -> None:
        """Run ``issue()`` (kernels between the fixed ``arrays``): replayed from a graph
        captured once per set of arrays when the Picard iterations are (``graphs.enabled``
        and ``systems.graph_ready``: device solvers, every solve verified — on GPU ranks
        also a capturable transport), else launched now."""
        if not (self.graphs.enabled and self.sys.graph_ready):
            issue()
            return
        key = (name, *(id(a) for a in arrays))
        if key not in self._graphs:          # (the arrays are kept: their ids stay theirs)
            self._graphs[key] = (self.b.capture(issue), tuple(arrays))
        self._graphs[key][0].replay()

    def _commit(self, state, fields):
        """Copy the new fields into the state's own arrays (which stay the same objects, so
        every captured graph keeps reading the state where it is): one graph replay once the
        iterations are captured."""
        u, p, tp_new, q_new = fields
        pairs = [(state.u, u), (state.p, p), (state.theta_prime, tp_new)]
        pairs += [(state.q[name], q_new[name]) for name in TRACERS
                  if q_new[name] is not state.q[name]]       # (an inactive tracer: itself)

        def issue():
            for dst, src in pairs:
                self.vops.copy(dst, src)
        with self.timers("commit fields"):
            self._issue("commit", [a for pair in pairs for a in pair], issue)

    def _iterate_fields(self, state, k):
        """(u_it, u_new, p_it, p_new) of Picard iteration k: fixed arrays for each k."""
        ubuf = [self._work(f"u.{j}", state.u.shape) for j in range(2)]
        p_new = self._work("p", state.p.shape)
        u_it = state.u if k == 0 else ubuf[(k - 1) % 2]
        return u_it, ubuf[k % 2], (state.p if k == 0 else p_new), p_new

    def _iteration(self, state, k):
        """Picard iteration k from ``state`` (read only) into the work arrays."""
        cfg, c, v = self.cfg, self.c, self.vops
        theta, relax = cfg.theta, cfg.relaxation   # θ-scheme weight, Picard relaxation
        u_old, tp_old, q_old = state.u, state.theta_prime, state.q
        u_it, u_new, p, p_new = self._iterate_fields(state, k)
        u_nl = self._work("u_nl", u_old.shape)
        src = self._work("theta_source", tp_old.shape)
        tp_theta = self._work("theta_w", tp_old.shape)   # θ-weighted θ'
        share = tuple(c.kappa) == tuple(c.kappa_q)       # θ' and q see the same matrix
        with self.timers("advecting velocity"):
            v.axpby(u_nl, relax, u_it, 1.0 - relax, u_old)
            v.advection_source(src, u_it, u_old, theta, c.dtheta_bar_dz)
        if share and self.tracers_together and hasattr(self.sys, "tracers"):
            tp_new = self.advance_tracers_together(u_nl, tp_old, src, q_old)
        else:
            tp_new, mat = self.advance_tracer("theta_prime", u_nl, tp_old, src, c.zeros,
                                              c.kappa)

            def moisture():             # reads u_nl, qⁿ and θ′'s matrix; nothing reads its
                qmat = mat if share else None   # results before the next iteration
                for name in TRACERS:
                    if name not in self._inactive:
                        _, qmat = self.advance_tracer(name, u_nl, q_old[name], c.zeros,
                                                      c.q_ref[name], c.kappa_q, qmat)
            self.branch.issue(moisture)     # beside the momentum predictor (a second stream)
        v.axpby(tp_theta, theta, tp_new, 1.0 - theta, tp_old)
        u_star = self.momentum_predictor(u_nl, u_old, tp_theta, p)
        self.branch.join()              # before the pressure solve (a graph split point)
        self.pressure_projection(u_star, p, u_new, p_new)
        v.max_abs_diff(u_new, u_it, self.scalars, self._CHANGE)

    def _picard(self, state):
        """The Picard loop from ``state`` (left unchanged); returns (StepInfo, new fields)."""
        cfg = self.cfg
        info = StepInfo()
        k_last = cfg.nonlinear_iterations - 1
        change_slot = self.scalars[self._CHANGE:self._CHANGE + 1]

        def issue(j):
            self.graphs.run(j, partial(self._iteration, state, j))
        k = 0
        issue(0)
        while k < k_last:
            pending = self.b.read_later(change_slot)
            if self.speculate:                 # iteration k+1 goes out before the read
                issue(k + 1)
            change = float(pending.result()[0])
            info.picard_change.append(change)
            if not change == change or change < cfg.picard_tolerance:   # NaN or converged
                if self.speculate:             # k+1 overwrote the fields of 0..k: again
                    self.sys.begin_step()
                    for j in range(k + 1):
                        issue(j)
                k_last = -1
                break
            k += 1
            if not self.speculate:
                issue(k)
        _, u, _, p = self._iterate_fields(state, k)
        tp_new = self._work("new theta_prime", state.theta_prime.shape)
        q_new = {name: state.q[name] if name in self._inactive
                 else self._work(f"new {name}", state.q[name].shape) for name in TRACERS}
        div = self._work("divergence", state.p.shape)

        def finish():                                    # the end-of-step scalars
            self.ops.C.matvec(u, div)
            self.vops.step_scalars(u, tp_new, self.ops.ml, div, self.scalars, self._STEP)
        self._issue("step scalars", (u, tp_new), finish)
        host = self.b.to_host(self.scalars)
        info.nonfinite = int(host[3])
        info.diagnostics = dict(zip(SCALAR_NAMES, (float(host[0]), 0.5 * float(host[1]),
                                                   float(host[2]))))
        if k_last >= 0:
            info.picard_change.append(float(host[self._CHANGE]))
        return info, (u, p, tp_new, q_new)
