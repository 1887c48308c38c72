"""The three linear systems of a Picard iteration, solved on the host (SciPy / PyAMG).

``HostSystems`` takes backend arrays (NumPy, or CuPy on the GPU backend's ``host`` mode), copies
them to the host when needed, builds SciPy CSR / BSR matrices over the assembled ``values`` and
solves. This is the reference paper's GPU+PETSc pipeline on the GPU backend and the only mode on
the CPU backend.
"""
from __future__ import annotations

import scipy.sparse as sp

from dycore.solvers.linear import HostSolver

__all__ = ["HostSystems"]


class HostSystems:
    """Solves tracer (CSR), momentum (BCSR 3×3) and pressure (constant CSR) systems on the host.

    Parameters
    ----------
    backend : backend value (its to_host / to_device move the arrays)
    sparsity : Sparsity (host pattern); ops : MeshOperators; cfg : SolversConfig
    timers : StageTimers (transfers are timed as ``transfer <what>``)
    """

    def __init__(self, backend, sparsity, ops, cfg, timers):
        self.b, self.sp, self.ops, self.timers = backend, sparsity, ops, timers
        self.indptr = sparsity.indptr
        self.indices = sparsity.indices
        self.diag_pos = sparsity.diagonal_positions()
        self.tracer_solver = HostSolver("tracer", cfg.tracer)
        self.momentum_solver = HostSolver("momentum", cfg.momentum)
        self.pressure_solver = HostSolver("pressure", cfg.pressure)
        self.pressure_matrix = ops.pressure_host
        self._its = dict.fromkeys(("pressure", "momentum", "tracer"), 0)

    #: host solves are never captured in a graph
    graph_ready = False

    def begin_step(self) -> None:
        """Zero the iteration counts of the step."""
        self._its = dict.fromkeys(self._its, 0)

    def end_step(self):
        """(dict system -> iterations over the step, True): host solves raise when they fail."""
        return dict(self._its), True

    def _host(self, a, what):
        if self.b.name == "cpu":
            return a
        with self.timers(f"transfer {what} to host"):
            return self.b.to_host(a)

    def _dev(self, a, what):
        if self.b.name == "cpu":
            return a
        with self.timers(f"transfer {what} to device"):
            return self.b.to_device(a)

    def tracer(self, values, rhs, x0=None):
        """Solve the tracer system; values (nnz,), rhs (n,) -> x (n,)."""
        n = self.sp.n
        values, rhs = self._host(values, "tracer matrix"), self._host(rhs, "tracer rhs")
        a = sp.csr_matrix((values, self.indices, self.indptr), shape=(n, n))
        x, its = self.tracer_solver.solve(a, rhs, None if x0 is None else self._host(x0, "x0"))
        self._its["tracer"] += its
        return self._dev(x, "tracer solution")

    def momentum(self, values, rhs, x0=None):
        """Solve big_m δu = rhs; values (nnz,3,3), rhs (n,3) -> δu (n,3)."""
        n = self.sp.n
        values = self._host(values, "momentum matrix")
        rhs = self._host(rhs, "momentum rhs")
        a = sp.bsr_matrix((values, self.indices, self.indptr), shape=(3 * n, 3 * n))
        x0h = None if x0 is None else self._host(x0, "x0").ravel()
        x, its = self.momentum_solver.solve(a, rhs.ravel(), x0h,
                                            block_diag=values[self.diag_pos])
        self._its["momentum"] += its
        return self._dev(x.reshape(n, 3), "momentum solution")

    def pressure(self, rhs, x0=None):
        """Solve (CMC + KMK) δp = rhs (pinned); rhs (n,) -> δp (n,)."""
        rhs = self._host(rhs, "pressure rhs")
        x, its = self.pressure_solver.solve(self.pressure_matrix, rhs,
                                            None if x0 is None else self._host(x0, "x0"))
        self._its["pressure"] += its
        return self._dev(x, "pressure solution")
