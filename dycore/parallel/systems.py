"""The three linear systems of a Picard iteration, solved across ranks.

Same interface as :class:`dycore.solvers.systems.HostSystems` (``tracer``, ``momentum``,
``pressure``, ``begin_step``, ``end_step``), so the serial
:class:`~dycore.timestepping.picard.PicardStepper` drives it unchanged. Inputs are a rank's
LOCAL arrays: matrix values as its local assembly wrote them (local pattern, owned rows valid),
right-hand sides over local nodes (owned entries valid). The owned rows are put into the global
column order, solved with :func:`~dycore.parallel.krylov.cg` / ``bicgstab`` over
:class:`~dycore.parallel.spmv.DistributedMatrix`, and the solution is returned as a local
vector with EVERY ghost filled (depth-2 halo), so each rank's local arrays stay exact copies of
the owners' values.

Methods: pressure CG with ``amg`` (the device solvers' Chebyshev V-cycle over one global
hierarchy, distributed: the same bits on any rank count), ``jacobi`` or ``none``; momentum and tracers BiCGStab (``gmres`` in the configuration is solved with
BiCGStab: the distributed runs have no GMRES) with ``block_jacobi`` / ``jacobi`` / ``none``.
ILU is refused (ConfigError).
"""
from __future__ import annotations

import numpy as np

from dycore.errors import ConfigError
from dycore.parallel.halo import HaloExchange
from dycore.parallel.krylov import BlockJacobi3, Jacobi, LocalAMG, bicgstab, cg
from dycore.parallel.spmv import DistributedMatrix

__all__ = ["DistributedSystems"]


def _diag_positions(indptr, indices):
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    pos = np.flatnonzero(indices == rows)
    if pos.size != indptr.size - 1:
        raise ValueError("a owned row has no diagonal entry")
    return pos


class DistributedSystems:
    """Tracer (CSR), momentum (BCSR 3×3) and pressure (CSR, second-order) solves over ranks.

    Parameters
    ----------
    comm : mpi4py communicator; rp : RankPartition of this rank
    row1 : (indptr, indices) of the owned rows of the first-order pattern, local columns in
        global order (:func:`~dycore.parallel.partition.extract_rows`, depth 1)
    perm : (nnz_owned,) — local assembly values -> that layout
        (:func:`~dycore.parallel.partition.owned_row_order`)
    pressure_rows : (indptr, indices, values) of the owned rows of the pinned pressure matrix
        (depth 2)
    cfg : SolversConfig (pressure, momentum, tracer); reducer : Reducer
    pressure_global : SciPy CSR of the whole pinned pressure matrix; part : (n,) node owners —
        for ``amg``: the global hierarchy's V-cycle over the ranks
        (:class:`~dycore.parallel.amg.DistributedVCycle`); read on rank 0 only (None elsewhere)
    local_amg : bool — ``amg`` as a rank-local hierarchy on the owned block instead
        (:class:`~dycore.parallel.krylov.LocalAMG`; fewer messages, more iterations)

    Raises
    ------
    ConfigError naming ``solvers.<system>.preconditioner`` / ``.method`` for a combination the
    distributed solvers lack.
    """

    #: host solves are never captured in a graph
    graph_ready = False

    def __init__(self, comm, rp, row1, perm, pressure_rows, cfg, reducer, pressure_global=None,
                 part=None, local_amg=False):
        self.comm, self.rp, self.cfg, self.red = comm, rp, cfg, reducer
        self.plan1, self.plan2 = rp.plan(1), rp.plan(2)
        self.indptr, self.indices = row1
        self.perm = perm
        self.diag = _diag_positions(*row1)
        self.n_owned, self.n_local = rp.n_owned, rp.n_local(2)
        self.fill = {1: HaloExchange(comm, self.plan2, 1), 3: HaloExchange(comm, self.plan2, 3)}
        for name in ("pressure", "momentum", "tracer"):
            self._check(name, getattr(cfg, name))
        pp, pi, pv = pressure_rows
        self.pressure_matrix = DistributedMatrix(comm, self.plan2, pp, pi, pv)
        pc = cfg.pressure.preconditioner
        if pc == "amg" and local_amg:
            self.pressure_pc = LocalAMG(self.pressure_matrix.owned_block(),
                                        cfg.pressure.amg_coarsening)
        elif pc == "amg":
            from dycore.parallel.amg import DistributedVCycle
            if comm.rank == 0 and (pressure_global is None or part is None):
                raise ValueError("the distributed V-cycle needs pressure_global and part "
                                 "on rank 0")
            self.pressure_pc = DistributedVCycle(comm, pressure_global, part,
                                                 coarsening=cfg.pressure.amg_coarsening)
        elif pc == "jacobi":
            self.pressure_pc = Jacobi(np.asarray(pv)[_diag_positions(pp, pi)])
        else:
            self.pressure_pc = None
        self._its = dict.fromkeys(("pressure", "momentum", "tracer"), 0)

    @staticmethod
    def _check(name, c):
        ok_pc = {"pressure": ("amg", "jacobi", "none"),
                 "momentum": ("block_jacobi", "jacobi", "none"),
                 "tracer": ("jacobi", "block_jacobi", "none")}[name]
        if c.preconditioner not in ok_pc:
            raise ConfigError(f"solvers.{name}.preconditioner: '{c.preconditioner}' is not "
                              f"available on MPI ranks (use one of {', '.join(ok_pc)})")
        if name == "pressure" and c.method not in ("cg", "auto"):
            raise ConfigError(f"solvers.pressure.method: '{c.method}' is not available on MPI "
                              "ranks (use cg)")

    def begin_step(self) -> None:
        """Zero the iteration counts of the step."""
        self._its = dict.fromkeys(self._its, 0)

    def end_step(self):
        """(dict system -> iterations over the step, True): the solves raise when they fail."""
        return dict(self._its), True

    def _local(self, x_owned, block):
        shape = (self.n_local,) + (() if block == 1 else (3,))
        x = np.zeros(shape)
        x[:self.n_owned] = x_owned.reshape(x[:self.n_owned].shape)
        self.fill[block].update(x)
        return x

    def _solve(self, name, a, b, m):
        c = getattr(self.cfg, name)
        kw = dict(rtol=c.rtol, atol=c.atol, maxiter=c.max_iterations, name=name)
        if c.method in ("cg", "auto"):
            return cg(a, b, self.red, m=m, **kw)
        return bicgstab(a, b, self.red, m=m, **kw)

    def _pc(self, name, values):
        kind = getattr(self.cfg, name).preconditioner
        if kind == "none":
            return None
        d = values[self.diag]
        if values.ndim == 3:
            if kind == "block_jacobi":
                return BlockJacobi3(d)
            return Jacobi(np.einsum("kaa->ka", d).reshape(-1))
        return Jacobi(d)

    def tracer(self, values, rhs, x0=None):
        """Solve the tracer system; values (local nnz,), rhs (n_local,) -> x (n_local,)."""
        vals = np.asarray(values)[self.perm]
        a = DistributedMatrix(self.comm, self.plan1, self.indptr, self.indices, vals)
        x, its = self._solve("tracer", a, np.asarray(rhs)[:self.n_owned], self._pc("tracer", vals))
        self._its["tracer"] += its
        return self._local(x, 1)

    def momentum(self, values, rhs, x0=None):
        """Solve big_m δu = rhs; values (local nnz,3,3), rhs (n_local,3) -> δu (n_local,3)."""
        vals = np.asarray(values)[self.perm]
        a = DistributedMatrix(self.comm, self.plan1, self.indptr, self.indices, vals)
        x, its = self._solve("momentum", a, np.asarray(rhs)[:self.n_owned],
                             self._pc("momentum", vals))
        self._its["momentum"] += its
        return self._local(x, 3)

    def pressure(self, rhs, x0=None):
        """Solve (CMC + KMK) δp = rhs (pinned); rhs (n_local,) -> δp (n_local,)."""
        x, its = self._solve("pressure", self.pressure_matrix, np.asarray(rhs)[:self.n_owned],
                             self.pressure_pc)
        self._its["pressure"] += its
        return self._local(x, 1)
