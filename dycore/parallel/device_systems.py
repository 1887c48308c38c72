"""What the serial Picard stepper needs on a GPU rank: vector operations with rank-combined
reductions and the three linear systems solved across GPU ranks.

- :class:`DeviceRankVectorOps`: the GPU backend's vector operations
  (:class:`~dycore.backend.gpu_ops.GPUVectorOps`, the same kernels) over a rank's LOCAL device
  arrays (owned nodes, then ghosts). Element-wise operations run on every local entry (with
  consistent inputs the ghost entries come out as the owners' bits); the reductions read the
  owned entries and combine the ranks through the transport (maxima by an all-reduce max, the
  kinetic energy as the correctly rounded Σ (M_L·u)·u by the exact reducer, the non-finite
  count by a sum), so every rank takes the same branch of the step.
- :class:`DeviceDistributedSystems`: the twin of
  :class:`~dycore.parallel.systems.DistributedSystems` — pressure CG
  (:class:`~dycore.parallel.device_krylov.DeviceRankPCG`: ``jacobi``, or ``amg`` as rank-local
  V-cycles) or the direct solve of the global system replicated on every rank
  (:class:`~dycore.parallel.device_direct.ReplicatedDirectPressure`, ``method: direct``),
  momentum and tracers BiCGStab
  (:class:`~dycore.parallel.device_bicgstab.DeviceRankBiCGStab`); every solution is returned as
  a local device vector with every ghost filled (depth-2 halo).
"""
from __future__ import annotations

import logging

import numpy as np

from dycore.backend.gpu_ops import GPUVectorOps
from dycore.backend.timers import add_seconds
from dycore.errors import ConfigError
from dycore.parallel.device_bicgstab import DeviceRankBiCGStab, rank_reducer
from dycore.parallel.device_halo import DeviceHaloExchange

__all__ = ["DeviceDistributedSystems", "DeviceRankVectorOps", "rank_amg_entry"]

log = logging.getLogger("dycore")

#: the systems in the order of their statistics slots (iterations, shortfalls)
SLOTS = ("pressure", "momentum", "tracer")


def rank_amg_entry(rp) -> str:
    """The set-up cache entry of rank ``rp.rank``'s local AMG hierarchy on ``rp.nparts`` ranks
    (:func:`~dycore.parallel.device_krylov.rank_local_hierarchy` appends its options)."""
    return f"amg-rank{rp.rank}of{rp.nparts}"


def _key(a):
    return (a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data.ptr,
            a.shape)


class DeviceRankVectorOps(GPUVectorOps):
    """GPUVectorOps over local device arrays with rank-combined reductions.

    Parameters
    ----------
    backend : GPUBackend (or its simulator); transport : NcclTransport / MpiStagedTransport /
    loopback transport; n_owned : int — owned entries lead every local array
    reducer_options : launch shape of the exact reducer (:func:`rank_reducer`)
    """

    def __init__(self, backend, transport, n_owned: int, reducer_options: dict | None = None):
        super().__init__(backend)
        self.t, self.n_owned = transport, int(n_owned)
        self.red = rank_reducer(backend, transport, "exact", 1, **(reducer_options or {}))
        self._cache: dict = {}

    def _cached(self, tag, a, make):
        key = (tag, _key(a))
        if key not in self._cache:
            self._cache[key] = (a, make())                 # the array kept alive with it
        return self._cache[key][1]

    def scatter_fill(self, a, idx, value) -> None:
        """a[idx] = value for the local indices ≥ 0 (−1: a node this rank lacks); ``idx`` a
        backend int array that stays the same (its filtered copy is made once)."""
        def keep():
            host = np.asarray(self.b.to_host(idx))
            return self.b.to_device(host[host >= 0].astype(np.int64))
        kept = self._cached("scatter", idx, keep)
        super().scatter_fill(a, kept, value)

    def max_abs_diff(self, x, y, out, slot) -> None:
        """out[slot] = max over the owned entries of every rank of |x − y|."""
        o = self.n_owned
        super().max_abs_diff(x[:o], y[:o], out, slot)
        self.t.allreduce(out[slot:slot + 1], "max")

    def step_scalars(self, u, th, ml, div, out, slot) -> None:
        """max|w|, Σ M_L|u|² (the correctly rounded Σ (M_L·u_a)·u_a over all ranks), max|div/M_L|,
        non-finite count of u and θ' over every rank's owned entries."""
        o = self.n_owned
        super().step_scalars(u[:o], th[:o], ml[:o], div[:o], out, slot)
        ml3 = self._cached("ml3", ml, lambda: self.b.to_device(
            np.repeat(np.asarray(self.b.to_host(ml))[:o, None], 3, axis=1)))
        mu = self._cached("mu", ml, lambda: self.b.zeros((o, 3)))
        self.multiply(mu, ml3, u[:o])
        self.red.post_dots((mu.reshape(-1), u[:o].reshape(-1)))
        out[slot + 1:slot + 2] = self.red.finish_on_device()[:1]
        self.t.allreduce(out[slot:slot + 1], "max")
        self.t.allreduce(out[slot + 2:slot + 3], "max")
        self.t.allreduce(out[slot + 3:slot + 4], "sum")


class DeviceDistributedSystems:
    """Tracer (CSR), momentum (BCSR 3×3) and pressure solves over GPU ranks.

    Same interface as :class:`~dycore.parallel.systems.DistributedSystems` (``tracer``,
    ``momentum``, ``pressure``, ``begin_step``, ``end_step``) and the serial device systems'
    ``graph_ready`` / ``inline``: until every iterative solve has learnt its iteration budget
    and a step has been verified, the step is issued from Python and each solver replays its
    own graphs; then (graphs on, a capturable transport: NCCL) the stepper captures each
    Picard iteration as ONE graph per rank (:class:`~dycore.backend.graphs.IterationGraphs`)
    — assembly, halo exchanges, all-reduces and the solves' budgeted iterations inside, the
    cuDSS solve of a direct pressure as a host call between two graph segments
    (``backend.uncaptured``) — and every inline solve is verified by one read at the end of
    the step (a shortfall repeats the step with every solve checked, as serially).
    Inputs are LOCAL device arrays: matrix values as the local assembly wrote them, right-hand
    sides over local nodes (owned entries valid).

    Parameters
    ----------
    backend : GPUBackend (or simulator); transport; rp : RankPartition
    row1 : (indptr, indices) of the owned rows of the first-order pattern (local columns in
        global order); perm : (nnz_owned,) local assembly values -> that layout
    pressure_rows : (indptr, indices, values) of the owned rows of the pinned pressure matrix
    cfg : SolversConfig; reduction : "exact" | "sum"
    reducer_options : launch shapes of the reducers (small ones keep the simulator fast)
    block : threads per block of the solver kernels (None: ``backend.solver_block``)
    pressure_global : scipy sparse (n, n) — the GLOBAL pinned pressure matrix, given on every
        rank when the pressure is solved directly (``method: direct``, or ``auto`` resolved
        to it: :class:`~dycore.parallel.device_direct.ReplicatedDirectPressure`); None: CG
    owned_global : with ``pressure_global``, every rank's owned global ids (rank order)
    ordering : with ``pressure_global``, a cached cuDSS ordering (:func:`~dycore.parallel.
        device_direct.shared_ordering`) or None
    direct : a pressure solver built by the caller (:class:`~dycore.parallel.
        distributed_direct.DistributedDirectPressure`: one factorisation over the ranks'
        GPUs), used instead of ``pressure_global`` / CG
    rotated : (nr,) int — positions in the LOCAL assembly's block values of the blocks the
        no-normal-flow rotation fills (``NoNormalFlow.blk_pos``), or None (none rotated): the
        momentum products read the other blocks lean (:class:`~dycore.solvers.krylov.
        LeanBlocks`, the serial device path's); coriolis : whether the momentum blocks' (0,1)
        and (1,0) entries may be nonzero (f ≠ 0)
    setup_cache : this rank's view of the set-up cache (:func:`~dycore.parallel.local_setup.
        shared_setup_cache`) or None: the rank-local AMG hierarchy of the pressure ``amg`` is
        kept there as ``amg-rank<r>of<K>`` (:func:`~dycore.solvers.amg.cached_hierarchy`)
    vcycle_piece : this rank's piece of the global pressure hierarchy
        (:func:`~dycore.parallel.amg.rank_pieces`) or None: with pressure ``amg`` and CG, the
        V-cycle of that one hierarchy (:mod:`dycore.parallel.device_amg`) instead of the
        rank-local one
    amg_hierarchy : a Future of the rank-local hierarchy, built by the caller
        (:func:`~dycore.parallel.device_krylov.hierarchy_beside`), or None: built here (read
        by the rank-local V-cycle only)

    Attributes
    ----------
    pressure_method : "direct" or "cg"; pcg : DeviceRankPCG or None; direct :
        ReplicatedDirectPressure, DistributedDirectPressure or None
    setup_seconds : dict part -> host wall seconds of this rank's solver set-up:
        ``"rotated blocks found"``, ``"tracer BiCGStab"``, ``"momentum BiCGStab"``,
        ``"pressure"`` and, for CG with the rank-local AMG, the pressure's parts
        (``"pressure: PyAMG hierarchy"``, ...: :attr:`DeviceRankPCG.setup_seconds`)

    Raises
    ------
    ConfigError naming ``solvers.<system>.preconditioner`` / ``.method`` for a combination the
    GPU ranks lack (pressure: cg with jacobi or amg, or direct; momentum, tracers: bicgstab or
    gmres — run as BiCGStab — with block_jacobi, jacobi or none), and CudssDirect's
    ConfigError for ``direct`` on a GPU without cuDSS; ValueError for ``method: direct``
    without ``pressure_global``.
    """

    #: one tracer solver for θ′ and the moisture tracers, and the transport's messages ordered
    #: on the backend's stream: the stepper issues every solve there (no side stream)
    one_stream = True

    def __init__(self, backend, transport, rp, row1, perm, pressure_rows, cfg,
                 reduction: str = "exact", reducer_options: dict | None = None,
                 block: int | None = None, pressure_global=None, owned_global=None,
                 ordering=None, rotated=None, coriolis: bool = True, direct=None,
                 setup_cache=None, vcycle_piece: dict | None = None, amg_hierarchy=None,
                 overlap: bool = False):
        self.b, self.t, self.rp, self.cfg = backend, transport, rp, cfg
        for name in ("pressure", "momentum", "tracer"):
            self._check(name, getattr(cfg, name))
        self.n_owned, self.n_local = rp.n_owned, rp.n_local(2)
        ro = dict(reducer_options or {})
        plan1, plan2 = rp.plan(1), rp.plan(2)
        perm = np.asarray(perm, np.int64)
        self.perm = backend.to_device(perm)
        self.setup_seconds = {}
        # the owned layout's blocks read in full: those whose local value is a rotated block
        with add_seconds(self.setup_seconds, "rotated blocks found"):
            full = (None if rotated is None else
                    np.flatnonzero(np.isin(perm, np.asarray(rotated, np.int64))))
        self.solvers = {}
        for name, bs in (("tracer", 1), ("momentum", 3)):
            c = getattr(cfg, name)
            lean = {} if bs == 1 else {"lean": True, "full_pos": full, "coriolis": coriolis}
            with add_seconds(self.setup_seconds, f"{name} BiCGStab"):
                self.solvers[name] = DeviceRankBiCGStab(
                    backend, transport, plan1, row1[0], row1[1], bs, c.preconditioner,
                    c.rtol, c.atol, c.max_iterations, reduction, ro, block=block, name=name,
                    **lean)
        with add_seconds(self.setup_seconds, "pressure"):
            self._pressure(cfg, rp, plan2, pressure_rows, reduction, ro, block,
                           pressure_global, owned_global, ordering, direct, setup_cache,
                           vcycle_piece, amg_hierarchy, overlap)
        if self.pcg is not None:
            self.setup_seconds.update({f"pressure: {k}": v
                                       for k, v in self.pcg.setup_seconds.items()})
        self.out = {3: backend.zeros((self.n_local, 3)), "p": backend.zeros(self.n_local)}
        self.fill = {1: DeviceHaloExchange(backend, transport, plan2, 1),
                     3: DeviceHaloExchange(backend, transport, plan2, 3)}
        self._its = dict.fromkeys(SLOTS, 0)
        #: iterations and shortfalls of the solves issued inline (two slots per system)
        self.stats = backend.zeros(2 * len(SLOTS))
        #: launch the solves' kernels into the caller's capture (set by IterationGraphs)
        self.inline = False
        #: verify every solve on the host (until a step's solves all converged)
        self.check = True

    def _pressure(self, cfg, rp, plan2, pressure_rows, reduction, ro, block,
                  pressure_global, owned_global, ordering, direct, setup_cache,
                  vcycle_piece, amg_hierarchy, overlap=False) -> None:
        """Set :attr:`pressure_method`, :attr:`pcg` and :attr:`direct` (the class's
        parameters)."""
        from dycore.parallel.device_krylov import ROW_GROUP, DeviceRankPCG
        from dycore.solvers.amg import level_dtype
        backend, transport = self.b, self.t
        pc, p = cfg.pressure.preconditioner, cfg.pressure
        self.pcg = self.direct = None
        if direct is not None:                      # built by the caller: distributed
            self.pressure_method, self.direct = "direct", direct
        elif pressure_global is not None:
            from dycore.parallel.device_direct import ReplicatedDirectPressure
            self.pressure_method = "direct"
            self.direct = ReplicatedDirectPressure(backend, transport, pressure_global,
                                                   owned_global, rp.l2g, rtol=p.rtol,
                                                   ordering=ordering)
        elif p.method == "direct":
            raise ValueError("solvers.pressure.method direct on GPU ranks needs the global "
                             "pressure matrix (pressure_global) and every rank's owned nodes "
                             "(owned_global)")
        else:
            self.pressure_method = "cg"
            glob = pc == "amg" and vcycle_piece is not None
            if pc == "amg" and rp.rank == 0:
                log.info("solvers.pressure.preconditioner amg on GPU ranks: %s", (
                    "the V-cycle of one global hierarchy distributed by rows" if glob else
                    "rank-local V-cycles (block-Jacobi over ranks; iterations grow with the "
                    "rank count)"))
            pp, pi, pv = pressure_rows
            self.pcg = DeviceRankPCG(
                backend, transport, plan2, (pp, pi, pv, (rp.n_owned, self.n_local), 1),
                reduction=reduction, vcycle_piece=vcycle_piece,
                precond=("global_amg" if glob else "local_amg") if pc == "amg" else "jacobi",
                rtol=p.rtol, atol=p.atol, maxiter=p.max_iterations, block=block,
                group=1 if getattr(backend, "strict", False) else ROW_GROUP,
                amg_dtype=level_dtype(p.precision, getattr(backend, "strict", False)),
                amg_cache=setup_cache, amg_entry=rank_amg_entry(rp),
                amg_coarsening=p.amg_coarsening, amg_hierarchy=amg_hierarchy,
                overlap=overlap,
                **{k: v for k, v in ro.items() if k.startswith(("exact_", "sum_"))})

    def _replayed_solvers(self) -> list:
        """The iterative solvers that replay graphs (each BiCGStab, and the pressure CG)."""
        return list(self.solvers.values()) + ([self.pcg] if self.pcg is not None else [])

    def drop_graphs(self) -> None:
        """Every solver forgets its replay graphs and budgets (the next solves are checked)."""
        for s in self._replayed_solvers():
            s.drop_graphs()

    @property
    def graph_ready(self) -> bool:
        """Whether a whole Picard iteration may be captured on this rank: graphs on, a
        capturable transport, a verified step behind, and every iterative solve's budget
        learnt (the same answer on every rank: the budgets and verdicts are global)."""
        solvers = self._replayed_solvers()
        return (bool(getattr(self.b, "graphs", False)) and not self.check
                and bool(getattr(self.t, "capturable", False))
                and all(s.inline_ready for s in solvers))

    @staticmethod
    def _check(name, c):
        ok_m = ("cg", "auto", "direct") if name == "pressure" else ("bicgstab", "gmres")
        if c.method not in ok_m:
            raise ConfigError(f"solvers.{name}.method: '{c.method}' is not available on GPU "
                              f"ranks (use {', '.join(ok_m[:-1])} or {ok_m[-1]})")
        if c.method == "direct":
            return                       # the factorisation has no preconditioner
        ok_pc = {"pressure": ("amg", "jacobi"),
                 "momentum": ("block_jacobi", "jacobi", "none"),
                 "tracer": ("jacobi", "block_jacobi", "none")}[name]
        if c.preconditioner not in ok_pc:
            raise ConfigError(f"solvers.{name}.preconditioner: '{c.preconditioner}' is not "
                              f"available on GPU ranks (use one of {', '.join(ok_pc)})")

    def begin_step(self) -> None:
        """Zero the iteration counts of the step (and the inline solves' statistics: a
        kernel)."""
        self._its = dict.fromkeys(self._its, 0)
        self.b.fill(self.stats)

    def end_step(self):
        """(dict system -> iterations over the step, whether every solve converged).

        Solves issued from Python raise when they fail; those issued inline (in a captured
        iteration, or replayed from one) are verified here with one device→host copy of the
        statistics, read whenever iterations may have been captured (``graph_ready`` holds
        from the capture to the end of the step). After a step whose solves all converged the
        next steps may capture their iterations; after one that fell short, every solve is
        checked again."""
        its, ok = dict(self._its), True
        if self.graph_ready:
            host = np.asarray(self.b.to_host(self.stats))
            for i, name in enumerate(SLOTS):
                its[name] += int(host[2 * i])
            ok = not host[1::2].any()
        self.check = not ok
        return its, ok

    def _issue(self, name, solver, rhs_owned):
        """The solve of ``name`` for the owned right-hand side ``rhs_owned``: inline (copied
        into ``solver.rhs``, budgeted iterations into the caller's capture, verified by
        :meth:`end_step`) or issued now and checked."""
        if self.inline:
            solver.rhs[...] = rhs_owned
            solver.issue_inline(self.stats, 2 * SLOTS.index(name))
            return solver.x
        x, its = solver.solve(rhs_owned)
        self._its[name] += its
        return x

    def _local(self, x_owned, key, block):
        """x_owned (n_owned·block,) -> the local output vector, every ghost filled."""
        out = self.out[key]
        out.reshape(-1)[:self.n_owned * block] = x_owned.reshape(-1)
        self.fill[block].update(out)
        return out


    def tracer(self, values, rhs, x0=None):
        """Solve the tracer system; values (local nnz,), rhs (n_local,) -> x (n_local,) (the
        systems' own array, overwritten by the next tracer solve): :meth:`tracers` of one."""
        return self.tracers(values, [rhs])[0]

    def tracers(self, values, rhs_list, names=None):
        """Solve the tracer system for k right-hand sides together (θ′ and the moisture
        tracers sharing its matrix: :meth:`DeviceRankBiCGStab.steps` of k systems — one halo
        exchange and one reduction for all at each point, each system its own solve's bits;
        the k solutions' ghosts filled by one exchange).

        values : (local nnz,) the matrix; rhs_list : k (n_local,) arrays; names : the k
        tracers' names (error messages)

        Returns
        -------
        list of k (n_local,) arrays, the systems' own, overwritten by the next such solve.

        Raises
        ------
        SolverDivergedError naming the tracer whose solve failed; RuntimeError for a solve of
        another number of systems issued inline (its budget was learnt for k).
        """
        s, k, n = self.solvers["tracer"], len(rhs_list), self.n_owned
        s.load(values, self.perm)
        owned = [r.reshape(-1)[:n] for r in rhs_list]
        if self.inline:
            if s.nsys != k:
                raise RuntimeError(f"tracer solve of {k} systems issued inline; its budget "
                                   f"was learnt for {s.nsys}")
            for i, o in enumerate(owned):
                s.RHS[i][...] = o
            s.issue_inline(self.stats, 2 * SLOTS.index("tracer"))
        else:
            s.solve(owned, [f"tracer {m}" for m in names] if names else None)
            self._its["tracer"] += sum(s.counts)
        key = ("tracers", k)
        if key not in self.out:
            self.out[key] = self.b.zeros((k, self.n_local))
            self.fill[key] = DeviceHaloExchange(self.b, self.t, self.rp.plan(2).stacked(k), 1)
        out = self.out[key]
        out[:, :n] = s.X
        self.fill[key].update(out.reshape(-1))
        return [out[i] for i in range(k)]

    def momentum(self, values, rhs, x0=None):
        """Solve big_m δu = rhs; values (local nnz,3,3), rhs (n_local,3) -> δu (n_local,3)."""
        s = self.solvers["momentum"]
        s.load(values, self.perm)
        return self._local(self._issue("momentum", s, rhs.reshape(-1)[:3 * self.n_owned]),
                           3, 3)

    def pressure(self, rhs, x0=None):
        """Solve (CMC + KMK) δp = rhs (pinned); rhs (n_local,) -> δp (n_local,). The direct
        solve (0 iterations counted, as serially) returns every ghost filled without a halo
        exchange; CG's owned solution has its ghosts filled by one."""
        if self.direct is not None:
            return self.direct.solve(rhs)[0]
        return self._local(self._issue("pressure", self.pcg, rhs[:self.n_owned]), "p", 1)
