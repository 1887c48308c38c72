"""Device-resident linear systems: our own kernels, no cuSPARSE, no host sync per solve.

- pressure: CG (:class:`DevicePCG`) with the smoothed-aggregation V-cycle of
  :mod:`dycore.solvers.amg` (PyAMG sets the hierarchy up once on the host; the cycle runs as our
  kernels), or Jacobi, or none; or (``method: direct``) a factorisation made once per run
  (:mod:`dycore.solvers.direct`: cuDSS on a GPU, SuperLU under the simulator);
- momentum: BiCGStab over the assembled BCSR 3×3 ``values`` in place, block-Jacobi (the 3×3
  inverses are computed on the device at the start of each solve), Jacobi or none; its
  products read the blocks lean (:class:`~dycore.solvers.krylov.LeanBlocks`: the diagonal and
  Coriolis entries, the rotated blocks in full — the same bits, 28 instead of 76 bytes per
  block without Coriolis);
- tracers: BiCGStab over the assembled CSR ``values``, Jacobi or none.

Device mode implements ``cg`` (pressure) and ``bicgstab`` (momentum, tracers); a configured
``gmres`` is run as BiCGStab with the same tolerances (logged once), since GMRES's growing Krylov
basis has no place in a fixed kernel graph. Every work array is allocated here, once per mesh.
The first solve of each kind runs with a host check of its verdict every few iterations and
learns its iteration count; later solves replay a CUDA graph of that many iterations (+10 %, at
least 2: :func:`~dycore.solvers.krylov.replay_budget`) unchecked, and :meth:`DeviceSystems.end_step` verifies all of a step's solves with one read.
"""
from __future__ import annotations

import logging

import numpy as np

from dycore.errors import ConfigError
from dycore.backend import solver_kernels as K
from dycore.solvers.amg import DeviceJacobi, DeviceVCycle, HostHierarchy, hierarchy_entry, \
    level_dtype
from dycore.solvers.direct import (ORDERING_ENTRY, direct_solver, on_gpu, ordering_arrays,
                                   pressure_method, solve_in_step)
from dycore.solvers.krylov import (DeviceBiCGStab, DeviceLinalg, DeviceMatrix, DevicePCG,
                                   LeanBlocks)

__all__ = ["DeviceSystems"]

log = logging.getLogger("dycore")

#: rows of the control array (one per solver) and slots of the step statistics
_PRESSURE, _MOMENTUM, _TRACER = range(3)
SYSTEMS = ("pressure", "momentum", "tracer")


class DeviceSystems:
    """Same interface as :class:`dycore.solvers.systems.HostSystems`, on the device.

    Parameters
    ----------
    backend : GPUBackend (GPU or simulator); sparsity : Sparsity; ops : MeshOperators
    cfg : SolversConfig; timers : StageTimers
    smoother : "chebyshev" or "jacobi" (pressure V-cycle), sweeps : smoothing steps
    rb : threads per block of the solver kernels (None: ``backend.solver_block``, 256 on a GPU,
        32 under the simulator, which runs every thread of a block as a Python thread)
    max_coarse : largest coarsest AMG level
    setup_cache : SetupCache or None — where the AMG hierarchy is loaded from / stored
        (:mod:`dycore.io.setup_cache`; its key must cover the pressure matrix)
    coriolis : whether the momentum blocks' Coriolis entries may be nonzero (False when the
        Coriolis parameter is 0: the lean momentum products read 3 entries per block, not 5)
    """

    #: read the momentum matrix lean in its products (:class:`LeanBlocks`; False: every block
    #: in full — the same bits; an A/B switch, see :meth:`set_products`)
    lean_momentum = True
    #: threads per block row of the tracer (CSR) and momentum (BCSR 3×3) products: the fastest
    #: of g = 1, 2, 4, 8 for y = A x with w·y in a CUDA graph (H100, paper mesh, 14.5 nonzeros
    #: per row: tracer 8.3 / 10.4 / 14.5 / 18.5 µs; lean momentum 47.6 / 36.5 / 33.3 / 39.1 µs;
    #: ``scripts/device/spmv_groups.py``, docs/performance.md) — not the rule of
    #: :func:`~dycore.solvers.krylov.row_group` that the pressure matrix and the AMG levels use
    tracer_group, momentum_group = 1, 4

    def __init__(self, backend, sparsity, ops, cfg, timers, smoother="chebyshev", sweeps=2,
                 rb=None, max_coarse=500, setup_cache=None, coriolis=True):
        self.b, self.cfg, self.timers, self.n = backend, cfg, timers, sparsity.n
        self._nnf, self._coriolis = ops.nnf, bool(coriolis)
        if rb is None:
            rb = backend.solver_block
        la = self.la = DeviceLinalg(backend, rb)
        self.ctl = backend.xp.zeros((3, K.NCTL))
        for name in ("tracer", "momentum"):
            c = getattr(cfg, name)
            if c.method not in ("gmres", "bicgstab") or c.preconditioner not in (
                    "jacobi", "block_jacobi", "none"):
                raise ConfigError(
                    f"solvers.{name}: device mode supports method bicgstab (or gmres, run as "
                    f"bicgstab) with preconditioner jacobi, block_jacobi or none (got "
                    f"{c.method} + {c.preconditioner})")
            if c.method == "gmres":
                log.info("solvers.%s.method gmres: device mode runs BiCGStab with the same "
                         "rtol/atol", name)
        self.pcg = self.direct = None
        self.pressure_method, why = pressure_method(cfg.pressure, backend, self.n)
        if cfg.pressure.method == "auto":
            log.info("solvers.pressure.method auto: %s (%s)", self.pressure_method, why)
        if self.pressure_method == "direct":
            self.b_arr, self.bv = la.zeros(self.n)
            self.x_arr = la.zeros(self.n)[0]
            self.direct = self._factorise(ops, cfg, setup_cache)
        else:
            a, m = self._pressure_cg_parts(ops, cfg, smoother, sweeps, max_coarse, setup_cache)
            self.pcg = DevicePCG(la, a, m, cfg.pressure, self.ctl[_PRESSURE])
        diag = sparsity.diagonal_positions()
        self.momentum_solver = DeviceBiCGStab(la, self.n, 3, diag, cfg.momentum.preconditioner,
                                              cfg.momentum, self.ctl[_MOMENTUM], "momentum")
        #: the tracers' own workspace (its finishes' arrival ticket): the moisture tracers'
        #: solves may run on a second stream beside the momentum solve (:mod:`dycore.backend.
        #: streams`)
        self.la_tracer = DeviceLinalg(backend, rb)
        self.tracer_solver = DeviceBiCGStab(self.la_tracer, self.n, 1, diag,
                                            cfg.tracer.preconditioner, cfg.tracer,
                                            self.ctl[_TRACER], "tracer")
        self.stats_arr, self.stats = la.zeros(2 * len(SYSTEMS))
        #: verify every solve at once (one host sync each); after a verified step, solves are
        #: replayed unchecked and verified together by :meth:`end_step`
        self.check = True
        #: launch the solves' kernels directly (an enclosing graph is being captured)
        self.inline = False
        self._indptr = backend.to_device(sparsity.indptr.astype(np.int32))
        self._indices = backend.to_device(sparsity.indices.astype(np.int32))
        self._matrices, self._views = {}, {}

    def _factorise(self, ops, cfg, setup_cache):
        """The direct pressure solver; on a GPU its fill-reducing ordering and the partition
        tree of that ordering (the analysis's costly host part) come from the set-up cache, or
        from the first factorisation, which stores them there (:data:`~dycore.solvers.direct.
        ORDERING_ENTRY`, :func:`~dycore.solvers.direct.ordering_arrays`)."""
        def factorise(perm=None, tree=None):
            with self.timers("pressure factorisation (once)"):
                return direct_solver(self.b, ops.pressure_host, self.b_arr, self.x_arr,
                                     cfg.pressure.rtol, perm=perm, tree=tree)
        if setup_cache is None or not on_gpu(self.b):
            return factorise()
        made = []

        def ordering():
            made.append(factorise())
            return ordering_arrays(made[0])
        entry = setup_cache.get(ORDERING_ENTRY, ordering, self.timers, "cuDSS ordering")
        return made[0] if made else factorise(entry["perm"], entry.get("tree"))

    def _pressure_cg_parts(self, ops, cfg, smoother, sweeps, max_coarse, setup_cache):
        """(DeviceMatrix, preconditioner) of the pressure CG: the V-cycle (sets
        ``self.amg_sizes``) or Jacobi."""
        la, timers, backend = self.la, self.timers, self.b
        pc = cfg.pressure.preconditioner
        a = DeviceMatrix.from_scipy(la, ops.pressure_host)
        if pc == "amg":
            coarsening = cfg.pressure.amg_coarsening

            def build():
                with timers("pressure AMG set-up (host, once)"):
                    return HostHierarchy(ops.pressure_host, smoother, sweeps,
                                         max_coarse=max_coarse,
                                         coarsening=coarsening).as_arrays()
            if setup_cache is None:
                h = HostHierarchy.from_arrays(build())
            else:
                name = hierarchy_entry(f"amg-{smoother}-{sweeps}-{max_coarse}", coarsening)
                h = HostHierarchy.from_arrays(setup_cache.get(name, build, timers,
                                                              "pressure AMG hierarchy"))
            self.amg_sizes = h.sizes
            return a, DeviceVCycle(la, h, level_dtype(cfg.pressure.precision, backend.strict))
        elif pc in ("jacobi", "none"):
            dinv = (1.0 / ops.pressure_host.diagonal() if pc == "jacobi"
                    else np.ones(self.n))
            return a, DeviceJacobi(la, a, dinv)
        raise ConfigError(f"solvers.pressure.preconditioner: '{pc}' is not available in "
                          "device mode (use amg, jacobi or none)")

    @staticmethod
    def _key(a):
        """Identity of an array's memory (views made per call share it; ``id`` would not)."""
        ptr = a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data.ptr
        return ptr, a.size

    def _matrix(self, values, bs):
        """The DeviceMatrix over an assembler's values buffer (cached: the buffer is fixed)."""
        key = self._key(values)
        if key not in self._matrices:
            group = self.momentum_group if bs == 3 else self.tracer_group
            # (a workspace of fewer threads a row — a one-thread-a-row A/B — caps them too)
            m = DeviceMatrix(self.la, self._indptr, self._indices, values, bs,
                             min(group, self.la.max_group))
            if bs == 3 and self.lean_momentum:
                m.lean_blocks = self._lean_blocks()
            self._matrices[key] = (values, m)
        return self._matrices[key][1]

    def _lean_blocks(self) -> LeanBlocks:
        full = None if self._nnf is None else self._nnf.blk_pos
        return LeanBlocks(self.la, self._indices, full, self._coriolis)

    def set_products(self, lean: bool | None = None, tracer_group: int | None = None,
                     momentum_group: int | None = None) -> None:
        """Change how the tracer and momentum solves' products run, from the next step on (an
        A/B switch; None keeps a setting): ``lean`` momentum blocks (the same bits) and the
        threads per row ``tracer_group`` / ``momentum_group`` (a power of two ≤ 32, capped by
        the workspace's ``max_group``; another summation order: other round-off). The solves
        re-learn their budgets; the caller clears the stepper's captured iterations
        (``stepper.state_changed()``)."""
        if lean is not None:
            self.lean_momentum = bool(lean)
        if tracer_group is not None:
            self.tracer_group = int(tracer_group)
        if momentum_group is not None:
            self.momentum_group = int(momentum_group)
        self._matrices.clear()
        self.momentum_solver.forget_graphs()
        self.tracer_solver.forget_graphs()
        self.check = True

    def _view(self, a):
        key = self._key(a)
        if key not in self._views:
            self._views[key] = (a, self.la.nb(a.reshape(-1)))
        return self._views[key][1]

    # -- a step's bookkeeping ------------------------------------------------------------------
    def begin_step(self) -> None:
        """Zero the step statistics (a kernel; no host traffic)."""
        self.b.fill(self.stats_arr)

    def end_step(self):
        """Iterations per system over the step and whether every solve converged.

        One device→host copy. Returns (dict system -> iterations, all_converged). After a step
        whose solves all converged, the next steps replay their solves unchecked.
        """
        host = self.b.to_host(self.stats_arr)
        its = {s: int(host[2 * i]) for i, s in enumerate(SYSTEMS)}
        ok = not host[1::2].any()
        self.check = not ok
        return its, ok

    @property
    def graph_ready(self) -> bool:
        """Whether a whole Picard iteration may be captured: graphs are on and every solve has
        run, been verified, and is replayed unchecked."""
        return self.b.graphs and not self.check

    def _solved(self, solver, slot):
        solver.accumulate(self.stats, 2 * slot)

    # -- the three systems ----------------------------------------------------------------------
    def tracer(self, values, rhs, x0=None):
        """Solve the tracer system; values (nnz,), rhs (n,) -> x (n,) (the solver's array)."""
        x, _ = self.tracer_solver.solve(self._matrix(values, 1), self._view(rhs), self.check,
                                        self.inline)
        self._solved(self.tracer_solver, _TRACER)
        return x

    def momentum(self, values, rhs, x0=None):
        """Solve big_m δu = rhs; values (nnz,3,3), rhs (n,3) -> δu (n,3)."""
        x, _ = self.momentum_solver.solve(self._matrix(values, 3), self._view(rhs), self.check,
                                          self.inline)
        self._solved(self.momentum_solver, _MOMENTUM)
        return x.reshape(self.n, 3)

    def pressure(self, rhs, x0=None):
        """Solve the pinned (CMC + KMK) δp = rhs with CG, or with the factorisation made at
        set-up (``method: direct``; 0 iterations counted); rhs (n,) -> δp (n,)."""
        if self.direct is not None:
            self.la.launch(self.la.k.copy, self.n, self._view(rhs), self.bv)
            solve_in_step(self.b, self.direct)
            return self.x_arr
        self.la.launch(self.la.k.copy, self.n, self._view(rhs), self.pcg.bv)
        x, _ = self.pcg.solve(self.check, self.inline)
        self._solved(self.pcg, _PRESSURE)
        return x
