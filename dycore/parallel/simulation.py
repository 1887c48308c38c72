"""A Simulation decomposed over MPI ranks: the serial Picard stepper on each rank's local mesh.

Set-up (``setup="local"``, the default): rank 0 builds the mesh, its node graph and the METIS
partition (of the mesh's vertical columns where it has them:
:func:`~dycore.parallel.columns.mesh_partition`) and sends each rank its part of the mesh;
every rank assembles its own mesh-only operators, coefficients and initial state from it
(:mod:`dycore.parallel.local_setup`) and rank 0 gathers the owned pressure rows into the
global matrix. With ``setup="scattered"`` rank
0 alone builds the serial :class:`~dycore.timestepping.simulation.Simulation` and cuts out
every rank's piece — the same pieces (:func:`~dycore.parallel.piece.rank_piece`). The pressure
AMG hierarchy is built on rank 0 and scattered by rows
(:class:`~dycore.parallel.amg.DistributedVCycle`). No rank but 0 holds a global array. Each
rank keeps:

- its local mesh: the halo elements (every element touching an owned node) over the local
  nodes (owned, then ghost layers 1 and 2), assembled by the backend's own assembler: owned
  rows come out bit for bit as in the serial assembly (docs/architecture.md, "Scaling out");
- the owned rows of C, Cᵀ, KMK and the pinned pressure matrix, serial entry order kept;
- the slices of the coefficients, lumped masses and state at its local nodes.

:class:`~dycore.timestepping.picard.PicardStepper` runs unchanged on these local arrays with
:class:`~dycore.parallel.rank_ops.RankBackend` and
:class:`~dycore.parallel.systems.DistributedSystems`; every result of a solve or a sparse
product has its ghosts refilled from their owners, so each local array is an exact copy of
the owners' values. With the exact reduction and the preconditioners of the configuration
(pressure ``amg`` — one global V-cycle — or ``jacobi``, momentum ``block_jacobi``, tracers
``jacobi``) a step gives the same bits on any number of ranks.
"""
from __future__ import annotations

import gc
import logging
from contextlib import contextmanager, nullcontext
from types import SimpleNamespace

import numpy as np

from dycore.assembly.sparsity import build_sparsity
from dycore.diagnostics.norms import step_diagnostics
from dycore.backend.timers import StageTimers, add_seconds
from dycore.errors import ConfigError, DycoreError
from dycore.mesh.mesh import Mesh
from dycore.parallel.halo import RootGather
from dycore.parallel.mpi import idle_wait, large
from dycore.parallel.columns import mesh_partition
from dycore.parallel.partition import owned_row_order, partition_mesh
from dycore.parallel.piece import rank_piece
from dycore.parallel.rank_ops import OwnedRowsOperator, RankBackend
from dycore.parallel.reduce import Reducer
from dycore.parallel.systems import DistributedSystems
from dycore.physics.state import TRACERS
from dycore.timestepping.simulation import Simulation

__all__ = ["DistributedSimulation"]

log = logging.getLogger("dycore")


#: message tag of the set-up pieces rank 0 sends
_SETUP_TAG = 2207


def setup_mode(setup: str) -> str:
    """``setup`` checked: "local" or "scattered" (:class:`DistributedSimulation`); a ValueError
    names the choices otherwise."""
    if setup not in ("local", "scattered"):
        raise ValueError(f"setup '{setup}' is not 'local' or 'scattered'")
    return setup


class DistributedSimulation:
    """One rank's share of a run.

    Parameters
    ----------
    config : Config; comm : mpi4py communicator (its size is the rank count)
    reduction : "exact" | "ordered" | "allreduce" — dot products of the solvers
        (:class:`~dycore.parallel.reduce.Reducer`)
    local_amg : bool — pressure ``amg`` as rank-local hierarchies (block-Jacobi; iterations
        grow with the rank count) instead of the global V-cycle
    setup : "local" (default) — rank 0 builds the mesh and the partition, every rank
        assembles its mesh-only operators from its own part of the mesh
        (:mod:`dycore.parallel.local_setup`) — or "scattered" — rank 0 builds the whole serial
        set-up and sends each rank its piece (the same pieces, array for array)

    Attributes
    ----------
    rp : RankPartition; mesh : the GLOBAL mesh on rank 0 (output), None elsewhere
    part : (nnodes,) node owners on rank 0, None elsewhere; nnodes : int
    state : State over local nodes; stepper : PicardStepper; timers : StageTimers
    halo_values_per_exchange : int — ghost values this rank receives per depth-2 exchange
    setup_seconds : dict phase -> wall seconds of this rank's set-up (the local set-up's
        phases; GPU ranks add theirs: ``scripts/gpu_ranks_check.py`` prints rank 0's)

    Raises
    ------
    ConfigError (on every rank) for a solver the ranks lack (DistributedSystems) or a mesh
    METIS cannot split into ``comm.size`` non-empty parts; any DycoreError of the serial
    build on rank 0 (sent to and raised on every rank).
    """

    #: whether the local set-up gathers the global pinned pressure matrix on rank 0 (the
    #: global AMG hierarchy of CPU ranks needs it)
    gather_pressure = True

    def __init__(self, config, comm, reduction: str = "exact", local_amg: bool = False,
                 setup: str = "local"):
        from dycore.backend.cpu import CPUBackend
        from dycore.timestepping.picard import PicardStepper
        self.config, self.comm = config, comm
        self.setup_mode = setup_mode(setup)
        backend = CPUBackend(threads=config.backend.threads)       # CPU ranks
        piece, pressure_global = self._receive(config, comm, backend)
        rp, part = self.rp, self.part
        l2g = rp.l2g
        n_loc, n1 = l2g.size, rp.n_local(1)
        self.timers = StageTimers()
        lmesh = Mesh(coords=piece["coords"], tets=rp.local_tets, faces=np.zeros((0, 3)),
                     face_tags=np.zeros(0), face_ele=np.zeros(0))
        lsp = build_sparsity(lmesh.tets, n_loc)
        assembler = backend.assembler(lmesh, lsp, self.timers)
        self.local_ops = self._local_ops(comm, piece, rp, lsp)
        systems = DistributedSystems(comm, rp, piece["row1"],
                                     owned_row_order(lsp.indptr, lsp.indices, rp),
                                     piece["pressure_rows"], config.solvers,
                                     Reducer(comm, reduction),
                                     pressure_global=pressure_global, part=part,
                                     local_amg=local_amg)
        self.systems = systems
        self.coeffs = piece["coeffs"]
        self.state = piece["state"]
        del piece
        self.backend = RankBackend(comm, rp.n_owned)
        self.stepper = PicardStepper(self.backend, assembler, self.local_ops, systems,
                                     self.coeffs, config.time, self.timers)
        self.halo_values_per_exchange = rp.plan(2).count()[1]
        self.n1 = n1
        self.last_diagnostics = {}        # of the last step taken
        self._finish_writes()

    def _finish_writes(self) -> None:
        """The end of the set-up: wait for the set-up cache's background writes (this rank's
        piece, :func:`~dycore.parallel.local_setup.store_piece`; a GPU rank's AMG hierarchy),
        before a step changes the state the piece holds."""
        caches = getattr(self, "_writing", [])
        if caches:
            with self._phase("set-up cache writes finished (written in the background)"):
                for cache in caches:
                    cache.flush()
        self._writing = []

    def _receive(self, config, comm, backend):
        """Every rank's piece of the set-up (:attr:`setup_mode`: :meth:`_receive_local`, or
        rank 0 builds the serial set-up with ``backend`` — a CPU backend — and scatters it:
        :meth:`_scatter_setup`). Sets :attr:`mesh`, :attr:`part` and :attr:`setup_cache`
        (rank 0; None elsewhere), :attr:`rp` and :attr:`nnodes`; returns (piece, the global
        pinned pressure matrix on rank 0 — None elsewhere). Raises the DycoreError of a failed
        build on every rank."""
        if getattr(self, "setup_mode", "local") == "local":
            return self._receive_local(config, comm)
        serial, part, piece, pressure_global, self.mesh = None, None, None, None, None
        if comm.rank == 0:
            serial, part, piece = self._scatter_setup(config, comm, backend)
        else:
            piece = large(comm).recv(source=0, tag=_SETUP_TAG)
        if isinstance(piece, DycoreError):           # raised on rank 0: the same on every rank
            raise piece
        #: rank 0's set-up cache (the serial build's: its key covers the mesh); None elsewhere
        self.setup_cache = None
        if serial is not None:       # rank 0 keeps the global mesh (output), the pressure
            self.mesh, pressure_global = serial.mesh, serial.ops.pressure_host   # matrix (AMG)
            self.setup_cache = serial.setup_cache
            del serial                                # and frees the rest before the AMG set-up
            gc.collect()
        self.rp = piece["rp"]
        self.nnodes = piece["nnodes"]
        self.part = part                            # rank 0 only (None elsewhere)
        return piece, pressure_global

    @contextmanager
    def _phase(self, name: str):
        """Add the wall time of the ``with`` body to :attr:`setup_seconds` [name]."""
        if not hasattr(self, "setup_seconds"):
            self.setup_seconds = {}
        with add_seconds(self.setup_seconds, name):
            yield

    def _receive_local(self, config, comm):
        """:meth:`_receive` of the local set-up: rank 0 builds the mesh (:meth:`_root_mesh`);
        where the set-up cache holds every rank's piece from an earlier run on as many ranks,
        each loads its own (:func:`~dycore.parallel.local_setup.load_pieces`); else rank 0
        broadcasts the mesh and its METIS partition and each rank cuts its own part
        (:meth:`_own_part`), builds its piece from it
        (:func:`~dycore.parallel.local_setup.local_piece`) and keeps it in the cache
        (:func:`~dycore.parallel.local_setup.store_piece`). ``detj_min`` is the minimum over
        the ranks; rank 0 gathers the owned pressure rows into the global matrix
        (:func:`~dycore.parallel.local_setup.gather_rows`) — unless :attr:`gather_pressure` is
        False (GPU ranks: only their replicated factorisation needs it, and gathers it then)."""
        from dycore.parallel.local_setup import (
            gather_rows, load_pieces, local_piece, shared_setup_cache, store_piece)
        self.mesh = self.part = self.setup_cache = None
        with self._phase("parts: the mesh, partition and each rank's part (total)"):
            err = None
            if comm.rank == 0:
                self.mesh, self.setup_cache, err = self._root_mesh(config, self._phase)
            idle_wait(comm)                      # the other ranks leave rank 0 the cores
            err = comm.bcast(err, root=0)
            if err is not None:
                raise err
            cache = shared_setup_cache(comm, self.setup_cache)
            with self._phase("  every rank: its piece loaded from the set-up cache"):
                piece, self.part = load_pieces(comm, cache)
            msg = None
            if piece is None:
                self.part, msg = self._own_part(comm, self.mesh, self._phase)
        if isinstance(msg, DycoreError):
            raise msg
        if piece is None:
            err = None
            with self._phase("own piece (local operators)"):
                try:
                    piece = local_piece(config, msg["mesh"], msg["rp"], msg["nnodes"],
                                        msg["pin"])
                except DycoreError as exc:
                    err = exc
            del msg
            errs = [e for e in comm.allgather(err) if e is not None]
            if errs:                                # the first rank's error, on every rank
                raise errs[0]
            with self._phase("own piece kept in the set-up cache"):
                store_piece(comm, cache, piece, self.part)      # written in the background
                self._writing = [] if cache is None else [cache]
        piece["detj_min"] = min(comm.allgather(piece["detj_min"]))
        self.rp, self.nnodes = piece["rp"], piece["nnodes"]
        if not self.gather_pressure:                       # GPU ranks: gathered on demand
            return piece, None
        pressure_global = gather_rows(comm, self.rp, piece["pressure_rows"], self.nnodes)
        return piece, pressure_global

    @staticmethod
    def _root_mesh(config, phase=None):
        """Rank 0 of the local set-up: the mesh (from the set-up cache where it is there) and
        the set-up cache of the mesh and configuration. Returns (mesh, cache, None), or
        (None, None, the DycoreError) when the build fails."""
        from dycore import cases
        from dycore.backend.cpu import CPUBackend
        from dycore.timestepping.simulation import config_mesh, setup_cache_of
        phase = phase or (lambda name: nullcontext())
        try:
            case = cases.load_case(config.case.name)
            params = config.case.build_parameters()
            folder = Simulation._cache_folder(None)
            with phase("  rank 0: mesh"):
                mesh, _ = config_mesh(config, case, params, folder, StageTimers())
            cache = setup_cache_of(config, params, mesh, CPUBackend(threads=0), folder)
        except DycoreError as exc:
            return None, None, exc
        return mesh, cache, None

    @staticmethod
    def _own_part(comm, mesh, phase=None):
        """Every rank's part of the mesh, cut by the rank itself (collective): rank 0
        broadcasts the mesh's arrays (``mesh``: rank 0's Mesh, ignored elsewhere); every rank
        builds the node graph (:func:`~dycore.assembly.sparsity.first_order_pattern`); rank 0
        partitions it with METIS and broadcasts the partition; each rank builds its own
        RankPartition (:func:`~dycore.parallel.partition.partition_mesh` for its rank alone)
        and its part of the mesh (:func:`~dycore.parallel.local_setup.setup_mesh`), and drops
        the broadcast mesh. Rank 0 no longer cuts and sends K parts in turn (at 30.7 M tets on
        four ranks that took 16.2 s, and the halos of every rank 6.7 s, while the other ranks
        waited).

        Returns
        -------
        (part, message): ``part`` (nnodes,) int32 owners on rank 0 (None elsewhere);
        ``message`` the dict ``rp``, ``mesh`` (:func:`setup_mesh`), ``nnodes``, ``pin`` (the
        highest node, the serial set-up's pin) — or (None, the ConfigError) on every rank
        when METIS cannot make ``comm.size`` parts."""
        from dycore.assembly.sparsity import first_order_pattern
        from dycore.parallel.local_setup import setup_mesh
        phase = phase or (lambda name: nullcontext())
        with phase("  every rank: the mesh broadcast"):
            arrays = None
            if comm.rank == 0:
                arrays = {k: np.asarray(getattr(mesh, k))
                          for k in ("coords", "tets", "faces", "face_tags", "face_ele")}
            arrays = large(comm).bcast(arrays, root=0)
            whole = SimpleNamespace(nnodes=arrays["coords"].shape[0], **arrays)
            del arrays
        n = whole.nnodes
        with phase("  node graph (every rank) and METIS partition (rank 0)"):
            indptr, indices = first_order_pattern(whole.tets, n)
            part = None
            if comm.rank == 0:
                try:
                    part, how = mesh_partition(whole.coords, indptr, indices, comm.size)
                    log.info("partition: %s", how)
                except ValueError as exc:   # e.g. more ranks than nodes: tell every rank
                    part = ConfigError(f"cannot partition the mesh over {comm.size} MPI "
                                       f"ranks: {exc}")
            idle_wait(comm)
            part = large(comm).bcast(part, root=0)
        if isinstance(part, ConfigError):
            return None, part
        with phase("  every rank: its halos and part of the mesh"):
            [rp] = partition_mesh(whole.tets, n, indptr, indices, part, ranks=[comm.rank])
            del indptr, indices
            own = {"rp": rp, "mesh": setup_mesh(whole, rp), "nnodes": n,
                   "pin": int(np.argmax(whole.coords[:, 2]))}      # the serial set-up's pin
        return (part if comm.rank == 0 else None), own

    @staticmethod
    def _scatter_setup(config, comm, backend):
        """Rank 0: build the serial set-up, partition it, send every other rank its piece
        (:func:`~dycore.parallel.piece.rank_piece`) one at a time; returns (serial Simulation,
        part, own piece) or, after sending it to every rank, (None, None, the DycoreError)
        when the build fails."""
        try:
            serial = Simulation(config, backend=backend)
            spg = serial.sparsity
            try:
                part, how = mesh_partition(serial.mesh.coords, spg.indptr, spg.indices,
                                           comm.size)
                log.info("partition: %s", how)
                parts = partition_mesh(serial.mesh.tets, serial.mesh.nnodes, spg.indptr,
                                       spg.indices, part)
            except ValueError as exc:       # e.g. more ranks than nodes: tell every rank
                raise ConfigError(f"cannot partition the mesh over {comm.size} MPI ranks: "
                                  f"{exc}") from exc
        except DycoreError as exc:
            for r in range(1, comm.size):
                large(comm).send(exc, dest=r, tag=_SETUP_TAG)
            return None, None, exc
        for r in range(1, comm.size):
            large(comm).send(rank_piece(serial, parts[r]), dest=r, tag=_SETUP_TAG)
            parts[r] = None
        return serial, part, rank_piece(serial, parts[0])

    @staticmethod
    def _local_ops(comm, piece, rp, lsp):
        """The MeshOperators the stepper reads, over local nodes."""
        from dycore.assembly.no_normal_flow import localise
        from dycore.assembly.operators import csr_positions
        dir_local = piece["dir_nodes"]
        with_rows = dir_local[dir_local < rp.n_local(1)]
        in_dir = np.zeros(rp.l2g.size, bool)
        in_dir[with_rows] = True
        nnf = piece["nnf"]
        return SimpleNamespace(
            ml=piece["ml"], ml_inv_u=piece["ml_inv_u"],
            C=OwnedRowsOperator(comm, rp, piece["C"]),
            CT=OwnedRowsOperator(comm, rp, piece["CT"]),
            kmk=OwnedRowsOperator(comm, rp, piece["kmk"]),
            pin=piece["pin"], dir_nodes=dir_local,
            dir_row_pos=np.flatnonzero(in_dir[lsp.row_of]),
            dir_diag_pos=csr_positions(lsp, with_rows, with_rows),
            detj_min=piece["detj_min"],
            nnf=None if nnf is None else localise(nnf, np.arange(rp.l2g.size), lsp))

    def check_restart_mesh(self, point) -> None:
        """:func:`~dycore.timestepping.simulation.check_restart_mesh` on rank 0 (the only rank
        with the global mesh); its ConfigError is raised on every rank."""
        from dycore.timestepping.simulation import check_restart_mesh
        problem = None
        if self.comm.rank == 0:
            try:
                check_restart_mesh(self.mesh, point)
            except DycoreError as exc:
                problem = exc
        problem = self.comm.bcast(problem, root=0)
        if problem is not None:
            raise problem

    def load_fields(self, fields: dict | None, t: float) -> None:
        """Set the local state from GLOBAL host fields at model time ``t`` (a restart; collective).

        Parameters
        ----------
        fields : dict of str to ndarray (nnodes,), on rank 0 only (ignored elsewhere)
            Every name of ``OUTPUT_FIELDS``. Rank 0 sends each rank the values at its local
            nodes, one (n_local, 8) message per rank: no rank but 0 holds a global array.
        t : float
            Model time [s].

        Raises
        ------
        ValueError (on every rank) naming the fields whose shape is not (nnodes,).
        """
        names = ("u", "v", "w", "p", "theta_prime", *TRACERS)
        comm, root = self.comm, self.comm.rank == 0
        l2gs = comm.gather(self.rp.l2g, root=0)
        bad = None
        if root:
            bad = [k for k in names if np.shape(fields[k]) != (self.nnodes,)]
        bad = comm.bcast(bad, root=0)
        if bad:
            raise ValueError(f"load_fields: field(s) {', '.join(bad)} do not have shape "
                             f"({self.nnodes},)")
        if root:
            block = np.column_stack([np.asarray(fields[k], np.float64) for k in names])
            for r in range(1, comm.size):
                large(comm).send(np.ascontiguousarray(block[l2gs[r]]), dest=r,
                                 tag=_SETUP_TAG + 1)
            local = block[self.rp.l2g]
            del block
        else:
            local = large(comm).recv(source=0, tag=_SETUP_TAG + 1)
        put = self._put
        put(self.state.u, np.ascontiguousarray(local[:, 0:3]))
        put(self.state.p, np.ascontiguousarray(local[:, 3]))
        put(self.state.theta_prime, np.ascontiguousarray(local[:, 4]))
        for j, k in enumerate(TRACERS):
            put(self.state.q[k], np.ascontiguousarray(local[:, 5 + j]))
        self.state.t = float(t)
        self.stepper.state_changed()          # which tracers are zero: decided anew

    @staticmethod
    def _put(dst, host) -> None:
        """dst[...] = host (a state array of this rank; host arrays on CPU ranks)."""
        dst[...] = host

    def _owned_host(self, a):
        """The owned rows of a local state array as a host array."""
        return a[:self.rp.n_owned]

    def step(self) -> dict:
        """One time step on every rank (collective); returns its diagnostics (same on all)."""
        with self.timers("step (total)"):
            info = self.stepper.step(self.state)
        self.last_diagnostics = step_diagnostics(info)
        return self.last_diagnostics

    #: the one time loop, as :meth:`Simulation.run
    #: <dycore.timestepping.simulation.Simulation.run>` (every rank runs it; the callbacks'
    #: writes go to rank 0 only: :func:`dycore.parallel.run.root_only`)
    run = Simulation.run

    def output_fields(self) -> dict | None:
        """The GLOBAL host fields on rank 0, None elsewhere (collective: :meth:`gather_fields`)."""
        return self.gather_fields()

    def agree(self, value):
        """Rank 0's ``value`` on every rank (collective broadcast)."""
        return self.comm.bcast(value, root=0)

    #: the snapshot gather (made at the first :meth:`gather_fields`)
    _root_gather: RootGather | None = None

    def gather_fields(self) -> dict | None:
        """{name: (nnodes,) array} of every output field on rank 0 (None on the others): one
        ``Gatherv`` of the (n_owned, 8) block of owned values (one message per rank) through
        the :class:`~dycore.parallel.halo.RootGather` made at the first call (the owned ids
        gathered and checked once, not at every snapshot)."""
        check = getattr(getattr(self, "transport", None), "check", None)
        if check is not None:            # (the peer transport: no wait gave up, on any rank)
            check(self.comm)
        own = self._owned_host
        u = own(self.state.u)
        local = {"u": u[:, 0], "v": u[:, 1], "w": u[:, 2], "p": own(self.state.p),
                 "theta_prime": own(self.state.theta_prime)}
        local.update({k: own(self.state.q[k]) for k in TRACERS})
        if self._root_gather is None:                 # (collective: every rank calls this)
            self._root_gather = RootGather(self.comm, self.rp.owned, self.nnodes)
        block = self._root_gather(np.column_stack(list(local.values())))
        if block is None:
            return None
        return {k: np.ascontiguousarray(block[:, j]) for j, k in enumerate(local)}
