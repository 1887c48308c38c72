"""A Simulation decomposed over MPI ranks: the serial Picard stepper on each rank's local mesh.

Set-up is replicated: every rank builds the serial :class:`~dycore.timestepping.simulation.
Simulation` (mesh, sparsity, mesh-only operators, coefficients, initial state), rank 0
partitions the node graph with METIS and broadcasts the partition, and each rank keeps:

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

import dataclasses
from types import SimpleNamespace

import numpy as np

from dycore.assembly.sparsity import build_sparsity
from dycore.diagnostics.norms import step_diagnostics
from dycore.backend.timers import StageTimers
from dycore.errors import ConfigError
from dycore.mesh.mesh import Mesh
from dycore.parallel.halo import gather_to_root
from dycore.parallel.partition import (
    extract_rows,
    metis_partition,
    owned_row_order,
    partition_mesh,
)
from dycore.parallel.rank_ops import OwnedRowsOperator, RankBackend
from dycore.parallel.reduce import Reducer
from dycore.parallel.systems import DistributedSystems
from dycore.physics.state import TRACERS, State
from dycore.timestepping.simulation import Simulation

__all__ = ["DistributedSimulation"]


class DistributedSimulation:
    """One rank's share of a run.

    Parameters
    ----------
    config : Config; comm : mpi4py communicator (its size is the rank count)
    reduction : "exact" | "ordered" | "allreduce" — dot products of the solvers
        (:class:`~dycore.parallel.reduce.Reducer`)

    Attributes
    ----------
    rp : RankPartition; mesh : the GLOBAL mesh on rank 0 (output), None elsewhere
    state : State over local nodes; stepper : PicardStepper; timers : StageTimers
    halo_values_per_exchange : int — ghost values this rank receives per depth-2 exchange

    Raises
    ------
    ConfigError (on every rank) for a solver the ranks lack (DistributedSystems) or a mesh
    METIS cannot split into ``comm.size`` non-empty parts.
    """

    def __init__(self, config, comm, reduction: str = "exact"):
        from dycore.backend.cpu import CPUBackend
        from dycore.timestepping.picard import PicardStepper
        serial = Simulation(config, backend=CPUBackend(threads=config.backend.threads))  # CPU ranks
        self.config, self.comm = config, comm
        mesh, spg, ops = serial.mesh, serial.sparsity, serial.ops
        n = self.nnodes = mesh.nnodes
        part, problem = None, None
        if comm.rank == 0:
            try:
                part = metis_partition(spg.indptr, spg.indices, comm.size)
            except ValueError as exc:           # e.g. more ranks than nodes: tell every rank
                problem = str(exc)
        part, problem = comm.bcast((part, problem), root=0)
        if problem:
            raise ConfigError(f"cannot partition the mesh over {comm.size} MPI ranks: {problem}")
        rp = self.rp = partition_mesh(mesh.tets, n, spg.indptr, spg.indices, part,
                                      ranks=[comm.rank])[0]
        self.part = part
        l2g = rp.l2g
        n_loc, n1 = l2g.size, rp.n_local(1)
        self.timers = StageTimers()
        lmesh = Mesh(coords=mesh.coords[l2g], tets=rp.local_tets, faces=np.zeros((0, 3)),
                     face_tags=np.zeros(0), face_ele=np.zeros(0))
        lsp = build_sparsity(lmesh.tets, n_loc)
        assembler = serial.backend.assembler(lmesh, lsp, self.timers)
        self.local_ops = self._local_ops(comm, serial, rp, lsp, n)
        p = ops.pressure_host
        pp, pi, pos = extract_rows(p.indptr, p.indices, rp, n, 2)
        systems = DistributedSystems(comm, rp, extract_rows(spg.indptr, spg.indices, rp, n, 1)[:2],
                                     owned_row_order(lsp.indptr, lsp.indices, rp),
                                     (pp, pi, p.data[pos]), config.solvers,
                                     Reducer(comm, reduction), pressure_global=p, part=part)
        self.systems = systems
        c = serial.coeffs
        self.coeffs = dataclasses.replace(
            c, sigma=c.sigma[l2g], dtheta_bar_dz=c.dtheta_bar_dz[l2g],
            q_ref={k: v[l2g] for k, v in c.q_ref.items()},
            g_over_theta_bar=c.g_over_theta_bar[l2g], zeros=np.zeros(n_loc))
        s = serial.state
        self.state = State(u=s.u[l2g].copy(), p=s.p[l2g].copy(),
                           theta_prime=s.theta_prime[l2g].copy(),
                           q={k: v[l2g].copy() for k, v in s.q.items()}, t=s.t)
        self.backend = RankBackend(comm, rp.n_owned)
        self.stepper = PicardStepper(self.backend, assembler, self.local_ops, systems,
                                     self.coeffs, config.time, self.timers)
        self.mesh = mesh if comm.rank == 0 else None
        self.global_mesh = mesh            # every rank: restart checks (set-up is replicated)
        self.halo_values_per_exchange = rp.plan(2).count()[1]
        self.n1 = n1
        self.last_diagnostics = {}        # of the last step taken

    @staticmethod
    def _local_ops(comm, serial, rp, lsp, n):
        """The MeshOperators the stepper reads, over local nodes."""
        from dycore.assembly.no_normal_flow import localise
        from dycore.assembly.operators import csr_positions
        ops = serial.ops
        l2g = rp.l2g
        g2l = np.full(n, -1, np.int64)
        g2l[l2g] = np.arange(l2g.size)
        dir_local = g2l[np.asarray(ops.dir_nodes)]
        dir_local = np.sort(dir_local[dir_local >= 0])
        with_rows = dir_local[dir_local < rp.n_local(1)]
        in_dir = np.zeros(l2g.size, bool)
        in_dir[with_rows] = True
        return SimpleNamespace(
            ml=np.asarray(ops.ml)[l2g], ml_inv_u=np.asarray(ops.ml_inv_u)[l2g],
            C=OwnedRowsOperator(comm, rp, n, ops.C, 1, 3),
            CT=OwnedRowsOperator(comm, rp, n, ops.CT, 3, 1),
            kmk=OwnedRowsOperator(comm, rp, n, ops.kmk, 1, 1),
            pin=int(g2l[ops.pin]), dir_nodes=dir_local,
            dir_row_pos=np.flatnonzero(in_dir[lsp.row_of]),
            dir_diag_pos=csr_positions(lsp, with_rows, with_rows),
            detj_min=ops.detj_min,
            nnf=None if ops.nnf is None else localise(ops.nnf, g2l, lsp))

    def load_fields(self, fields: dict, t: float) -> None:
        """Set the local state from GLOBAL host fields (names of ``OUTPUT_FIELDS``, (nnodes,)
        each, the same on every rank) at model time ``t`` (a restart).

        Raises
        ------
        ValueError naming the fields whose shape is not (nnodes,).
        """
        bad = [k for k in ("u", "v", "w", "p", "theta_prime", *TRACERS)
               if np.shape(fields[k]) != (self.nnodes,)]
        if bad:
            raise ValueError(f"load_fields: field(s) {', '.join(bad)} do not have shape "
                             f"({self.nnodes},)")
        g = self.rp.l2g
        self.state.u[...] = np.column_stack([fields["u"], fields["v"], fields["w"]])[g]
        self.state.p[...] = np.asarray(fields["p"], float)[g]
        self.state.theta_prime[...] = np.asarray(fields["theta_prime"], float)[g]
        for k in TRACERS:
            self.state.q[k][...] = np.asarray(fields[k], float)[g]
        self.state.t = float(t)

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

    def gather_fields(self) -> dict | None:
        """{name: (nnodes,) array} of every output field on rank 0 (None on the others)."""
        o = self.rp.n_owned
        u = self.state.u[:o]
        local = {"u": u[:, 0], "v": u[:, 1], "w": u[:, 2], "p": self.state.p[:o],
                 "theta_prime": self.state.theta_prime[:o]}
        local.update({k: self.state.q[k][:o] for k in TRACERS})
        out = {k: gather_to_root(self.comm, self.rp.owned, v, self.nnodes)
               for k, v in local.items()}
        return out if self.comm.rank == 0 else None

