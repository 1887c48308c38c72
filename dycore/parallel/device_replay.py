"""The replay machinery the GPU-rank Krylov solvers share: a checked first solve that learns
its iteration count, a budget the ranks agree on, and graphs of that many iterations replayed
with one host read per solve (docs/parallel.md, "GPU ranks: the pressure solve").

:class:`ReplayedSolve` is a mixin. A solver using it provides ``b`` (backend), ``t``
(transport), ``ctl`` (its control array, a backend array with the solver kernels' ``DONE`` and
``ITS`` slots), ``check_every``, ``maxiter``, ``graphs``, ``capture`` (the transport can be
captured), ``_first`` / ``_more`` / ``budget`` / ``replayed`` / ``iterations``, and two
generators that yield after every post of a message: ``_start()`` (the start of a solve from
its own right-hand side buffer) and ``_iterations(count)`` (``count`` iterations that do nothing
once the control array says the solve is finished).
"""
from __future__ import annotations

import numpy as np

from dycore.backend.solver_kernels import CONVERGED, DONE, ITS, RUNNING
from dycore.solvers.krylov import replay_budget

__all__ = ["ReplayedSolve", "Replayable"]


class ReplayedSolve:
    """Checked, learnt and replayed solves (module docstring)."""

    def _budgeted(self, budget: int):
        """The start and ``budget`` iterations: what the ``first`` graph holds."""
        yield from self._start()
        yield from self._iterations(budget)

    def _read(self):
        """The control array on the host (one device→host copy)."""
        return np.asarray(self.b.to_host(self.ctl))

    def _checked(self):
        """The start, then ``check_every`` iterations between host reads of the verdict until
        the solve has finished; returns the control array read last."""
        yield from self._start()
        while True:
            yield from self._iterations(self.check_every)
            host = self._read()
            if host[DONE] != RUNNING:
                return host

    def _replayed(self):
        """Replay ``first`` (start + budget iterations), read the verdict once, replay ``more``
        (``check_every`` iterations) while it is still running; returns the control array."""
        yield from self._first.run()
        host = self._read()
        while host[DONE] == RUNNING:
            yield from self._more.run()
            host = self._read()
        return host

    def _learn(self, its: int):
        """Agree on the budget (the max over ranks of ``its``: one all-reduce) and capture
        ``first`` with it (and ``more``, once)."""
        cnt = self.b.to_device(np.array([float(its)]))
        self.t.allreduce(cnt, "max")
        yield
        its = int(np.asarray(self.b.to_host(cnt))[0])
        budget = replay_budget(its, self.maxiter)
        self._first = Replayable(self, lambda: self._budgeted(budget))
        if self._more is None:
            chunk = self.check_every
            self._more = Replayable(self, lambda: self._iterations(chunk))
        self.budget = budget

    def issue_inline(self, stats, slot: int) -> None:
        """Issue the start and the learnt budget of iterations into an enclosing capture (the
        Picard iteration's graph per rank, :class:`~dycore.backend.graphs.IterationGraphs`):
        no host read; one kernel adds the iteration count to ``stats[slot]`` and 1 to
        ``stats[slot + 1]`` unless the solve converged (the serial device solvers'
        ``accumulate``), so the step verifies every such solve with one read at its end.

        stats : float64 backend array (the systems' statistics); slot : int

        Raises
        ------
        RuntimeError when no budget has been learnt (:attr:`inline_ready` False).
        """
        if not self.inline_ready:
            raise RuntimeError(f"{getattr(self, 'name', 'GPU-rank')} solve issued inline "
                               "before it learnt an iteration budget")
        drain(self._budgeted(self.budget))
        self._accumulate(stats, slot)

    def _accumulate(self, stats, slot: int) -> None:
        """One kernel adds the solve's iterations to ``stats[slot]`` and 1 to ``stats[slot +
        1]`` unless it converged (a solver of several systems adds each one's)."""
        self.b.launch(self.la.k.accumulate, (1, 1), self.b.nb(self.ctl), self.b.nb(stats),
                      int(slot))

    def drop_graphs(self) -> None:
        """Forget the replay graphs and the learnt budget: the next solve is checked and
        learns its budget again. :meth:`GpuRankSimulation.close` calls it, so that a solver
        still referenced elsewhere keeps no CUDA graph, and with it no NCCL communicator,
        alive (NCCL destroys a communicator only once every graph that captured its
        operations is gone)."""
        self._first = self._more = None
        self.budget = 0

    @property
    def inline_ready(self) -> bool:
        """Whether the solve can be issued inline: graphs on, a capturable transport and a
        learnt budget."""
        return bool(self.graphs and self.capture and self._first is not None)

    def _solve_steps(self):
        """A whole solve (generator): replayed when a budget is known, else checked; then the
        budget learnt (again, when the count exceeded it). Sets :attr:`replayed` and
        :attr:`iterations`; returns the control array read last (the caller gives the
        verdict)."""
        self.replayed = bool(self.graphs and self._first is not None)
        if self.replayed:
            host = yield from self._replayed()
        else:
            host = yield from self._checked()
        self.iterations = its = int(host[ITS])
        if self.graphs and host[DONE] == CONVERGED and (not self.replayed or its > self.budget):
            yield from self._learn(its)
        return host


class Replayable:
    """Work of a solver given as a generator function ``body`` (yielding after each post of a
    message), replayed by :meth:`run`: a captured graph (``backend.capture``: a CUDA graph on a
    GPU, re-issued under the simulator) when the solver's transport is capturable, else
    ``body`` re-issued with its yields (K loopback or staged-MPI ranks in lock step)."""

    def __init__(self, solver, body):
        self.body = body
        self.graph = None
        if solver.capture:
            self.graph = solver.b.capture(lambda: drain(body()))

    def run(self):
        """Replay the work (a generator: yields only when re-issued without a graph)."""
        if self.graph is None:
            yield from self.body()
        else:
            self.graph.replay()


def drain(gen) -> None:
    """Run a generator through."""
    for _ in gen:
        pass
