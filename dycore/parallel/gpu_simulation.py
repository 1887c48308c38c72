"""A Simulation decomposed over GPU ranks: the serial Picard stepper on each rank's local mesh,
every local array on the rank's GPU.

The set-up is the CPU ranks' (:class:`~dycore.parallel.simulation.DistributedSimulation`):
rank 0 builds the serial set-up on the CPU, partitions it with METIS and scatters the pieces.
Each rank then moves its piece to its GPU and runs
:class:`~dycore.timestepping.picard.PicardStepper` unchanged with

- the GPU backend (rank r drives GPU ``local rank % device count``; numba-cuda's simulator in
  the tests), its own assembler on the local mesh (``deterministic`` assembly gives the owned
  rows the serial bits), its vector kernels with rank-combined reductions
  (:class:`~dycore.parallel.device_systems.DeviceRankVectorOps`);
- C, Cᵀ, KMK as :class:`~dycore.parallel.device_halo.DeviceOwnedRowsOperator` (owned rows,
  ghosts of the product refilled);
- :class:`~dycore.parallel.device_systems.DeviceDistributedSystems` for the three solves (the
  pressure by CG, or — ``method: direct``, or ``auto`` where the serial run would factorise —
  by a factorisation of the global matrix on every rank:
  :mod:`dycore.parallel.device_direct`; rank 0 broadcasts the matrix then);
- a transport (:mod:`dycore.parallel.nccl`): NCCL made from MPI (:meth:`NcclTransport.from_mpi`)
  where CuPy has NCCL, else :class:`~dycore.parallel.nccl.MpiStagedTransport` (host-staged
  mpi4py; always under the simulator).

The first steps are issued from Python, each solve replaying its own graphs over NCCL
(:mod:`dycore.parallel.device_replay`); once every solve has learnt its iteration budget and a
step has been verified, each Picard iteration is captured as one CUDA graph per rank and
replayed (``systems.graph_ready``; :class:`~dycore.parallel.device_systems.
DeviceDistributedSystems`), as the serial device path does. Snapshots are gathered as on CPU
ranks, after a device→host copy of each rank's owned rows.

With the exact reduction, ``assembly: deterministic``, ``strict: true`` and the pressure
preconditioner ``jacobi``, a step gives the same bits on any number of GPU ranks (the pressure
``amg`` becomes rank-local V-cycles on GPU ranks, whose iterates depend on the partition). So
does the pressure ``method: direct`` under the simulator (SuperLU of the same global system on
every rank; tests/parallel/test_device_direct_ranks.py).
"""
from __future__ import annotations

import numbers

import dataclasses
import logging
from types import SimpleNamespace

import numpy as np

from dycore.assembly.sparsity import build_sparsity
from dycore.backend.timers import StageTimers
from dycore.errors import ConfigError
from dycore.mesh.mesh import Mesh
from dycore.parallel.partition import owned_row_order
from dycore.parallel.simulation import DistributedSimulation, setup_mode
from dycore.physics.state import State

__all__ = ["GpuRankSimulation", "make_transport", "select_rank_device", "transport_kind"]

log = logging.getLogger("dycore")

#: run_distributed's reduction names -> the GPU ranks' reducers
_REDUCTIONS = {"exact": "exact", "allreduce": "sum", "sum": "sum"}

#: the most pressure rows for which GPU ranks take the V-cycle of one global hierarchy by
#: default (``global_amg=None``): its PyAMG build runs on rank 0 alone (40.5 s at 762,129 rows
#: on an H200 host, docs/performance.md); above, rank-local hierarchies built on every rank
GLOBAL_AMG_MAX_ROWS = 1_000_000

#: the global V-cycle's levels (below the fine one) of at most this many unknowns are held whole
#: by every GPU rank (:func:`~dycore.parallel.amg.rank_pieces`): chosen from the A/B in
#: docs/performance.md
GLOBAL_AMG_REPLICATE_BELOW = 50_000

#: launch shapes under numba-cuda's simulator, where every simulated thread is a Python
#: thread (the GPU defaults — 264 × 256 threads per exact dot product — would take minutes per
#: solve); the bits do not depend on them
SIMULATOR_SHAPES = dict(reducer_options=dict(exact_blocks=1, exact_threads=1, sum_blocks=2,
                                             sum_threads=1), block=8, element_block=16)


def select_rank_device(comm) -> tuple[int, bool]:
    """Make GPU ``local rank % device count`` current for CuPy and numba (collective: the
    node-local rank comes from ``MPI_Comm_split_type``); returns (its index, whether some node
    has more ranks than GPUs — collective too). Under the simulator: (0, False)."""
    from numba import config as numba_config
    if numba_config.ENABLE_CUDASIM:
        return 0, False
    from mpi4py import MPI
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    rank, size = local.rank, local.size
    local.Free()
    import cupy
    from numba import cuda
    count = max(1, cupy.cuda.runtime.getDeviceCount())
    dev = rank % count
    cupy.cuda.Device(dev).use()
    cuda.select_device(dev)
    return dev, bool(comm.allreduce(int(size > count), op=MPI.MAX))


def transport_kind(kind: str, simulator: bool, nccl: bool, shared: bool,
                   peer: bool = False, ranks: int = 0) -> str:
    """The transport GPU ranks use: ``kind`` ("auto", "nccl", "peer" or "mpi") resolved.

    ``peer`` (:mod:`dycore.parallel.peer`: our kernels store each message into the
    neighbour GPU's memory through CUDA IPC) needs one host, a GPU per rank and peer access
    between them (``peer``: the ranks said they have it), never the simulator. NCCL cannot
    put two ranks of one communicator on one GPU either, so ranks sharing GPUs (``shared``)
    under ``auto`` fall back to the staged MPI transport with a warning (correct, much
    slower), and ``nccl`` or ``peer`` is refused.

    ``auto`` takes, in this order: the peer transport for two ranks (``ranks`` = 2) that
    allow it — on two H200s joined by NVLink its 4.42 M-tet step is 4 % shorter than NCCL's
    (84.9 against 88.3 ms in one call, the same bits; docs/performance.md); NCCL where CuPy has
    it (more than two ranks: the peer transport has not been measured there); the peer
    transport where CuPy has no NCCL (every message stays on the GPUs and in the CUDA
    graphs: ten times faster than staging); else the staged MPI transport (always under
    the simulator).

    Raises
    ------
    ConfigError for ``nccl`` with shared GPUs or without NCCL in CuPy, and for ``peer`` under
    the simulator or with shared GPUs; ValueError for another ``kind``.
    """
    if kind not in ("auto", "nccl", "peer", "mpi"):
        raise ValueError(f"GPU-rank transport must be 'auto', 'nccl', 'peer' or 'mpi', got "
                         f"{kind!r}")
    if kind == "peer" and (simulator or shared):
        raise ConfigError("GPU-rank transport peer: " + (
            "needs GPUs (CUDA IPC), not the simulator" if simulator else
            "more MPI ranks than GPUs on a node; start one rank per GPU"))
    if kind == "auto":
        if simulator:
            return "mpi"
        if shared:
            log.warning("warning: more MPI ranks than GPUs on a node: NCCL and the peer "
                        "transport need a GPU per rank, so the halo exchanges and reductions "
                        "go through the host (staged MPI; correct, much slower) — start one "
                        "rank per GPU")
            return "mpi"
        if peer and (ranks == 2 or not nccl):
            return "peer"
        return "nccl" if nccl else "mpi"
    if kind == "nccl" and (shared or not nccl):
        raise ConfigError("GPU-rank transport nccl: " + (
            "more MPI ranks than GPUs on a node (NCCL needs a GPU per rank); start one rank "
            "per GPU" if shared else "this CuPy has no NCCL"))
    return kind


def _nccl_available() -> bool:
    try:
        from cupy.cuda import nccl
        nccl.get_version()
        return True
    except Exception:  # noqa: BLE001 - no NCCL in this CuPy, for whatever reason
        return False


def make_transport(comm, backend, kind: str = "auto", shared: bool = False):
    """The GPU ranks' transport: ``"nccl"`` (:class:`~dycore.parallel.nccl.NcclTransport` on
    the backend's stream), ``"peer"`` (:class:`~dycore.parallel.peer.PeerTransport`),
    ``"mpi"`` (:class:`~dycore.parallel.nccl.MpiStagedTransport`) or ``"auto"``
    (:func:`transport_kind`; ``shared``: some node has more ranks than GPUs; with two ranks,
    or without NCCL, the ranks are asked, collectively, whether the peer transport can
    connect them).

    Raises
    ------
    ConfigError, ValueError (:func:`transport_kind`); RuntimeError (CuPy) when NCCL cannot
    build the communicator.
    """
    from dycore.parallel.nccl import MpiStagedTransport, NcclTransport
    nccl = not backend.simulator and _nccl_available()
    peer = False
    if kind == "auto" and not (backend.simulator or shared) and (comm.size == 2 or not nccl):
        from dycore.parallel.peer import peer_access_problem
        problem = peer_access_problem(comm)               # (collective)
        peer = problem is None
        if not (peer or nccl):
            log.warning("warning: no NCCL in this CuPy and no peer transport (%s): the halo "
                        "exchanges and reductions go through the host (staged MPI; correct, "
                        "much slower)", problem)
    kind = transport_kind(kind, backend.simulator, nccl, shared, peer, comm.size)
    if kind == "nccl":
        return NcclTransport.from_mpi(comm, backend.stream)
    if kind == "peer":
        from dycore.parallel.peer import PeerTransport
        return PeerTransport.from_mpi(comm, backend)
    return MpiStagedTransport(comm, reissue=backend.simulator)


class GpuRankSimulation(DistributedSimulation):
    """One GPU rank's share of a run (module docstring).

    Parameters
    ----------
    config : Config (``backend.name: gpu``, ``solver_mode: device``); comm : mpi4py communicator
    reduction : "exact" | "allreduce" (= "sum": per-rank partials + an all-reduce sum)
    transport : "auto" | "nccl" | "peer" | "mpi" (:func:`make_transport`), or None for
        ``backend.transport`` of the configuration
    reducer_options : launch shapes of the exact / sum reducers (``exact_blocks``,
        ``exact_threads``, ``sum_blocks``, ``sum_threads``); under the simulator, options left
        None take :data:`SIMULATOR_SHAPES`
    block : threads per block of the solver and vector kernels (None: the backend's
        ``solver_block``); element_block : of the assembly kernels (None: the backend's)
    setup : "local" | "scattered" — how the CPU set-up is built (:class:`DistributedSimulation`)
    global_amg : True: pressure CG with ``preconditioner: amg`` takes the V-cycle of ONE
        hierarchy of the whole matrix distributed by rows (:mod:`dycore.parallel.device_amg`:
        rank 0 gathers the matrix and builds it; the serial iteration count on any K); False:
        rank-local hierarchies (block-Jacobi over the ranks: no global matrix, but iterations
        that grow with K); None (default): the global one for at most
        :data:`GLOBAL_AMG_MAX_ROWS` pressure rows, else rank-local — on one rank too, so that
        1, 2 and 4 ranks precondition with the same hierarchy (the same bits with exact
        reductions). Measured on two H200s at
        4.42 M tets (762,129 rows): 131.6 against 519.3 ms a step (38 against 240 CG
        iterations), set-up 49.5 against 54.6 s (docs/performance.md). ConfigError when True
        and the pressure preconditioner is not ``amg``; ignored where the pressure solve is
        direct.
    replicate_below : int ≥ 0 or None — with the global V-cycle, the levels below the fine one
        of at most this many unknowns are held whole by every rank, whose right-hand side is
        all-gathered once a cycle instead of halo exchanges on each of them
        (:func:`~dycore.parallel.amg.rank_pieces`; 0: only the coarsest; None:
        :data:`GLOBAL_AMG_REPLICATE_BELOW`). The same bits for any value.
    overlap : True: the pressure CG's products (A p, and the global V-cycle's smoothing
        steps and residuals on the levels it distributes) sum their interior rows while the
        halo exchange travels on a second stream (:mod:`dycore.parallel.overlap`); False
        (default): every row waits for the exchange. The same bits either way. Off by
        default because it did not pay on two H200s joined by NVLink: an exchange costs
        11–13 µs inside a graph, the second launch and the fork and join about as much,
        and the 4.42 M-tet step took 143.0 against 139.6 ms (docs/performance.md).

    Attributes
    ----------
    as :class:`DistributedSimulation`, plus backend (GPUBackend), transport, device (int)

    Raises
    ------
    ConfigError (on every rank) for a solver the GPU ranks lack or an unknown reduction, and
    CudssDirect's for the pressure ``method: direct`` on GPUs without cuDSS; the errors of
    :class:`DistributedSimulation`'s set-up.
    """

    #: the global pressure matrix is gathered on rank 0 only for a replicated factorisation
    #: (:meth:`_direct_pressure`): at 30.7 M tets a rank's pickled rows (≈ 3 GB) exceeded one
    #: MPI message
    gather_pressure = False

    def __init__(self, config, comm, reduction: str = "exact", transport: str | None = None,
                 reducer_options: dict | None = None, block: int | None = None,
                 element_block: int | None = None, setup: str = "local",
                 global_amg: bool | None = None, replicate_below: int | None = None,
                 overlap: bool = False):
        from dycore.backend.cpu import CPUBackend
        from dycore.backend.gpu import gpu_backend
        from dycore.parallel.device_direct import keep_ordering
        from dycore.parallel.local_setup import shared_setup_cache
        from dycore.parallel.device_krylov import hierarchy_beside
        from dycore.parallel.device_systems import (DeviceDistributedSystems, DeviceRankVectorOps,
                                                    rank_amg_entry)
        from dycore.parallel.rank_ops import owned_block
        from dycore.timestepping.picard import PicardStepper
        if reduction not in _REDUCTIONS:
            raise ConfigError(f"reduction '{reduction}' is not available on GPU ranks (use "
                              f"{' or '.join(_REDUCTIONS)})")
        if global_amg and config.solvers.pressure.preconditioner != "amg":
            raise ConfigError(f"the global V-cycle (global_amg) preconditions the pressure CG: "
                              f"solvers.pressure.preconditioner is "
                              f"'{config.solvers.pressure.preconditioner}', not 'amg'")
        self.replicate_below = (GLOBAL_AMG_REPLICATE_BELOW if replicate_below is None
                                else replicate_below)
        if not isinstance(self.replicate_below, numbers.Integral) or self.replicate_below < 0:
            raise ConfigError(f"replicate_below must be an integer >= 0 (unknowns of a level "
                              f"held whole), got {replicate_below!r}")
        from numba import config as numba_config
        self.config, self.comm = config, comm
        self.setup_mode = setup_mode(setup)
        if numba_config.ENABLE_CUDASIM:
            import sys
            sim = SIMULATOR_SHAPES
            reducer_options = sim["reducer_options"] if reducer_options is None else reducer_options
            block = sim["block"] if block is None else block
            element_block = sim["element_block"] if element_block is None else element_block
            # a simulated block's threads meet at every syncthreads: with the default 5 ms
            # GIL switch interval each barrier costs ~10 ms (a step: 80 s, with 0.1 ms 20 s)
            sys.setswitchinterval(1e-4)
        with self._phase("GPU selected"):
            self.device, shared = select_rank_device(comm)
        piece, pressure_global = self._receive(config, comm,
                                               CPUBackend(threads=config.backend.threads))
        if global_amg is None:         # the same verdict on every rank (nnodes: the global count)
            global_amg = (config.solvers.pressure.preconditioner == "amg"
                          and self.nnodes <= GLOBAL_AMG_MAX_ROWS)
        bc = config.backend
        b = self.backend = gpu_backend(solver_mode="device", assembly=bc.assembly,
                                       strict=bc.strict, graphs=bc.graphs,
                                       **({} if element_block is None
                                          else {"block": int(element_block)}))
        if block is not None:
            b.solver_block = int(block)          # before any vector / solver workspace
        rp = self.rp
        amg_cache = shared_setup_cache(comm, self.setup_cache)   # (its writes: background)
        if amg_cache is not None:
            self._writing = [*getattr(self, "_writing", []), amg_cache]
        beside = None
        if self._rank_local_amg_certain(config.solvers.pressure, global_amg):
            with self._phase("rank-local AMG hierarchy started beside (the owned block)"):
                pp, pi, pv = piece["pressure_rows"]
                beside = hierarchy_beside(owned_block(pp, pi, pv, rp.n_owned), cache=amg_cache,
                                          entry=rank_amg_entry(rp),
                                          coarsening=config.solvers.pressure.amg_coarsening)
        self.transport = make_transport(comm, b, transport or bc.transport, shared)
        ro = dict(reducer_options or {})
        self.timers = StageTimers(b.marker)
        lmesh = Mesh(coords=piece["coords"], tets=rp.local_tets, faces=np.zeros((0, 3)),
                     face_tags=np.zeros(0), face_ele=np.zeros(0))
        lsp = build_sparsity(lmesh.tets, rp.l2g.size)
        with self._phase("local assembler and operators on the GPU"):
            assembler = b.assembler(lmesh, lsp, self.timers)
            b._ops = DeviceRankVectorOps(b, self.transport, rp.n_owned,
                                         {k: v for k, v in ro.items()
                                          if k.startswith("exact_")})
            self.local_ops = self._device_ops(piece, lsp)
        with self._phase("pressure method (a distributed factorisation where direct)"):
            direct = self._direct_pressure(config.solvers.pressure, pressure_global, piece)
        del pressure_global
        nnf = self.local_ops.nnf
        vcycle_piece = None
        if global_amg and not direct:
            with self._phase("global AMG hierarchy (rank 0) and its pieces sent"):
                vcycle_piece = self._global_vcycle_piece(piece)
        with self._phase("solvers (a replicated factorisation, or CG's rank-local AMG)"):
            self.systems = DeviceDistributedSystems(
                b, self.transport, rp, piece["row1"],
                owned_row_order(lsp.indptr, lsp.indices, rp), piece["pressure_rows"],
                config.solvers, _REDUCTIONS[reduction], ro, block,
                rotated=None if nnf is None else np.asarray(b.to_host(nnf.blk_pos)),
                coriolis=piece["coeffs"].f_cor != 0.0,
                setup_cache=amg_cache,
                vcycle_piece=vcycle_piece, amg_hierarchy=beside, overlap=overlap, **direct)
        for part, seconds in self.systems.setup_seconds.items():     # the phase's parts
            self.setup_seconds[f"  {part}"] = seconds
        if "ordering" in direct:
            keep_ordering(comm, self.setup_cache, self.systems.direct.direct, direct["ordering"])
        del direct
        dev = b.to_device
        c = piece["coeffs"]
        self.coeffs = dataclasses.replace(
            c, sigma=dev(c.sigma), dtheta_bar_dz=dev(c.dtheta_bar_dz),
            q_ref={k: dev(v) for k, v in c.q_ref.items()},
            g_over_theta_bar=dev(c.g_over_theta_bar), zeros=dev(c.zeros))
        s = piece["state"]
        self.state = State(u=dev(s.u), p=dev(s.p), theta_prime=dev(s.theta_prime),
                           q={k: dev(v) for k, v in s.q.items()}, t=s.t)
        del piece
        self.stepper = PicardStepper(b, assembler, self.local_ops, self.systems, self.coeffs,
                                     config.time, self.timers)
        self.stepper.speculate = False   # each Picard iteration in turn: the ranks' messages
        self.halo_values_per_exchange = rp.plan(2).count()[1]
        self.n1 = rp.n_local(1)
        self.last_diagnostics = {}
        self._finish_writes()

    def _rank_local_amg_certain(self, cfg, global_amg: bool) -> bool:
        """Whether the pressure is certainly solved by CG with rank-local V-cycles (``amg``,
        not the global V-cycle; ``cg``, or ``auto`` where no direct solve could be chosen:
        :func:`~dycore.solvers.direct.pressure_method` with the most rows any factorisation
        takes, K times one GPU's). Then each rank's hierarchy is built beside its GPU set-up
        (:func:`~dycore.parallel.device_krylov.hierarchy_beside`): at 30.7 M tets on four
        ranks PyAMG took 37 s of a 120-s set-up (docs/performance.md)."""
        from dycore.solvers.direct import AUTO_DIRECT_MAX_ROWS, pressure_method
        if global_amg or cfg.preconditioner != "amg" or cfg.method == "direct":
            return False
        return pressure_method(cfg, self.backend, self.nnodes,
                               max_rows=AUTO_DIRECT_MAX_ROWS * self.comm.size)[0] == "cg"

    def _global_vcycle_piece(self, piece) -> dict:
        """This rank's piece of the global pressure hierarchy (collective): rank 0 gathers the
        owned pressure rows (:func:`~dycore.parallel.local_setup.gather_rows`), builds PyAMG's
        hierarchy — or loads it from its set-up cache (``amg-global-...``, checked against
        the matrix: :func:`~dycore.solvers.amg.cached_hierarchy`) — and cuts it by rows
        (:func:`~dycore.parallel.amg.rank_pieces`, the mesh partition on level 0), and sends
        each rank its piece (one message per rank)."""
        from dycore.parallel.amg import rank_pieces
        from dycore.parallel.local_setup import gather_rows
        from dycore.parallel.mpi import large
        from dycore.parallel.simulation import _SETUP_TAG
        from dycore.solvers.amg import cached_hierarchy
        comm = self.comm
        a = gather_rows(comm, self.rp, piece["pressure_rows"], self.nnodes)
        if comm.rank != 0:
            return large(comm).recv(source=0, tag=_SETUP_TAG + 3)
        smoother, sweeps, max_coarse = "chebyshev", 2, 500        # rank_pieces' defaults
        h = cached_hierarchy(a, smoother, sweeps, max_coarse, cache=self.setup_cache,
                             name=f"amg-global-{smoother}-{sweeps}-{max_coarse}",
                             coarsening=self.config.solvers.pressure.amg_coarsening)
        pieces = rank_pieces(a, self.part, comm.size, smoother, sweeps, max_coarse,
                             hierarchy=h, replicate_below=self.replicate_below)
        del h
        del a
        for r in range(1, comm.size):
            large(comm).send(pieces[r], dest=r, tag=_SETUP_TAG + 3)
        return pieces[0]

    def _direct_pressure(self, cfg, pressure_global, piece) -> dict:
        """The pressure method of the GPU ranks (collective): ``cfg.method``, or for ``auto``
        :func:`~dycore.solvers.direct.pressure_method`'s choice for the global row count when
        every rank agrees (a GPU, device solvers, atomic assembly and not strict, cuDSS
        importable, at most AUTO_DIRECT_MAX_ROWS rows — K times that where the K ranks share
        one factorisation), else CG. A direct solve on K > 1 ranks is one factorisation
        distributed over the GPUs or one replicated on each (:meth:`_factorisation`, decided
        first; an explicit ``distributed`` that some rank cannot join is an error only where
        the solve is direct). Measured on four H200s (docs/performance.md; exact reduction):
        8.85 M tets (1.48 M rows) the step 124.7 ms with the distributed factorisation against
        1,071 ms with CG and rank-local V-cycles. Returns the keyword arguments of DeviceDistributedSystems:
        {} for CG; {"direct": DistributedDirectPressure}; or for the replicated solve rank 0's
        global matrix broadcast to every rank, the owned global ids of every rank and rank 0's
        cached cuDSS ordering (or None)."""
        from dycore.parallel.device_direct import broadcast_csr, shared_ordering
        from dycore.solvers.direct import AUTO_DIRECT_MAX_ROWS, on_gpu, pressure_method
        comm = self.comm
        shared, refused = None, None     # the factorisation of a direct solve on K ranks
        if comm.size > 1 and cfg.method in ("auto", "direct"):
            try:
                shared = self._factorisation(cfg)
            except ConfigError as exc:       # an explicit distributed that cannot be had:
                refused = exc                # an error only where the solve is direct
        limit = AUTO_DIRECT_MAX_ROWS * (comm.size if shared == "distributed" else 1)
        method, why = pressure_method(cfg, self.backend, self.nnodes, max_rows=limit)
        if cfg.method == "auto":
            votes = comm.allgather(method)
            if method == "direct" and any(v != "direct" for v in votes):
                method, why = "cg", "cuDSS is not available on every rank"
            if comm.rank == 0:
                log.info("solvers.pressure.method auto on GPU ranks: %s (%s)", method, why)
        if method != "direct":
            return {}
        if refused is not None:
            raise refused
        if shared == "distributed":
            from dycore.parallel.distributed_direct import (DistributedDirectPressure,
                                                            distributed_numbering,
                                                            distributed_rows)
            dist, offsets = distributed_numbering(comm.allgather(self.rp.owned), self.nnodes)
            rows = distributed_rows(piece["pressure_rows"], self.rp.l2g, dist, self.nnodes)
            del dist
            return {"direct": DistributedDirectPressure(
                self.backend, self.transport, rows, int(offsets[comm.rank]), self.rp.plan(2),
                comm=comm, rtol=cfg.rtol)}
        if pressure_global is None and self.setup_mode == "local":
            from dycore.parallel.local_setup import gather_rows
            pressure_global = gather_rows(comm, self.rp, piece["pressure_rows"], self.nnodes)
        return {"pressure_global": broadcast_csr(comm, pressure_global, root=0),
                "owned_global": comm.allgather(self.rp.owned),
                "ordering": shared_ordering(comm, self.setup_cache, on_gpu(self.backend))}

    def _factorisation(self, cfg) -> str:
        """``cfg.factorisation`` resolved on K ranks (collective): "replicated" on one rank;
        for ``auto`` "distributed" where every rank supports cuDSS's MGMN mode
        (:func:`~dycore.parallel.distributed_direct.mgmn_support`), the run does not ask for
        reproducible sums and the matrix has at least :data:`~dycore.parallel.distributed_direct.
        MGMN_MIN_ROWS` rows (where the distributed step measured shorter).

        Raises
        ------
        ConfigError (on every rank) for ``distributed`` where some rank lacks the support,
        naming the rank and why.
        """
        from dycore.parallel.distributed_direct import MGMN_MIN_ROWS, mgmn_support
        from dycore.solvers.direct import reproducible
        comm, want = self.comm, cfg.factorisation
        if comm.size == 1 or want == "replicated":
            return "replicated"
        ok, why = mgmn_support(self.transport)
        votes = comm.allgather((ok, why))
        missing = [(r, w) for r, (o, w) in enumerate(votes) if not o]
        if want == "distributed" and missing:
            r, w = missing[0]
            raise ConfigError(f"solvers.pressure.factorisation: distributed: rank {r} cannot "
                              f"join a factorisation over the GPUs ({w}); use replicated")
        if want == "auto":
            small = self.nnodes < MGMN_MIN_ROWS
            if missing or small or reproducible(self.backend):
                if comm.rank == 0:
                    log.info("solvers.pressure.factorisation auto on %d GPU ranks: replicated "
                             "(%s)", comm.size,
                             f"rank {missing[0][0]}: {missing[0][1]}" if missing else
                             f"{self.nnodes} rows < {MGMN_MIN_ROWS}" if small else
                             "reproducible sums asked for")
                return "replicated"
        if comm.rank == 0:
            log.info("solvers.pressure.factorisation on %d GPU ranks: distributed (cuDSS MGMN, "
                     "communication layer %s)", comm.size, votes[0][1])
        return "distributed"

    def _device_ops(self, piece, lsp):
        """The MeshOperators the stepper reads, over local nodes, on the device (the GPU
        backend's Dirichlet kernel wants the rows' extents: only nodes with rows here, i.e.
        owned and first-layer ghosts; outer ghosts get their values from their owners)."""
        from dycore.assembly.no_normal_flow import localise
        from dycore.assembly.operators import _on_backend, csr_positions
        from dycore.parallel.device_halo import DeviceOwnedRowsOperator
        b, rp, t = self.backend, self.rp, self.transport
        dev = b.to_device
        dir_local = piece["dir_nodes"]
        rows = np.asarray(dir_local[dir_local < rp.n_local(1)], np.int64)
        plan2 = rp.plan(2)
        nnf = piece["nnf"]
        if nnf is not None:
            nnf = _on_backend(localise(nnf, np.arange(rp.l2g.size), lsp), b)
        ip = np.asarray(lsp.indptr)
        return SimpleNamespace(
            ml=dev(piece["ml"]), ml_inv_u=dev(piece["ml_inv_u"]),
            C=DeviceOwnedRowsOperator(b, t, plan2, piece["C"]),
            CT=DeviceOwnedRowsOperator(b, t, plan2, piece["CT"]),
            kmk=DeviceOwnedRowsOperator(b, t, plan2, piece["kmk"]),
            pin=piece["pin"], dir_nodes=dev(rows),
            dir_row_start=dev(ip[rows].astype(np.int32)),
            dir_row_end=dev(ip[rows + 1].astype(np.int32)),
            dir_diag_pos=dev(np.asarray(csr_positions(lsp, rows, rows))),
            detj_min=piece["detj_min"], nnf=nnf)

    def _put(self, dst, host) -> None:
        dst[...] = self.backend.to_device(np.ascontiguousarray(host, np.float64))

    def _owned_host(self, a):
        return np.asarray(self.backend.to_host(a[:self.rp.n_owned]))

    def close(self) -> None:
        """End the rank's GPU work: every rank calls it (a barrier), after its last use of the
        simulation; later calls do nothing. The solvers' and the stepper's CUDA graphs are
        released and the objects that hold graphs (stepper, solvers, operators) dropped, then
        :func:`~dycore.parallel.nccl.close_after_graphs` collects them and closes the
        transport (why the order matters: there)."""
        if self.stepper is None:
            return
        from dycore.parallel.nccl import close_after_graphs
        self.backend.synchronize()
        direct = getattr(self.systems, "direct", None)
        if hasattr(direct, "close"):          # a factorisation over the ranks: its handle,
            direct.close()                    # then its own NCCL communicator
        # the graphs go now, not when the last reference to their owner does: a solver kept
        # by a caller (a loop variable) would otherwise keep the communicator from closing
        self.systems.drop_graphs()
        self.stepper.graphs.clear()
        self.stepper = self.systems = self.local_ops = None
        self.backend._ops = None
        close_after_graphs(self.backend, self.transport, self.comm.Barrier)

    def describe(self) -> str:
        """The backend line of the run's log."""
        return (f"gpu ranks ({self.comm.size}; {type(self.transport).__name__}; "
                f"{self.backend.describe()})")
