"""Work that may run beside the main stream: a fork/join branch of a step.

The Picard iteration has one chain of dependent stages (θ′ → momentum → pressure → velocity
correction) and work that hangs off it: the moisture tracers need the advecting velocity and
θ′'s matrix, and nothing in the iteration reads them until the next one. On a GPU such work is
issued on a second stream (:class:`SideStream`) forked from the main stream after its inputs
(``branch.issue(work)``) and joined before a later stage (``branch.join()``), so its
latency-bound solves run while the main stream's kernels do; inside a CUDA-graph capture the
fork and the join are event records and waits, which the capture turns into graph edges (two
parallel branches in one graph).

Nothing changes in what is computed: every kernel sees the same inputs in the same order as
on one stream, so the bits are those of the serial issue (the CPU and the simulator run the
branch inline, :class:`InlineBranch`; the tests also run it as late as the contract allows,
:class:`DeferredBranch`). What the branch writes must not be read or written by the main
stream between the fork and the join, nor what it reads be overwritten (the caller's
contract: in the step, the moisture tracers' right-hand sides, solutions and new fields; their
solver has its own workspace, :class:`dycore.solvers.device.DeviceSystems`).
"""
from __future__ import annotations

__all__ = ["DeferredBranch", "InlineBranch", "SideStream"]


class InlineBranch:
    """A branch that issues its work at once, in order (CPU, simulator, or concurrency
    switched off); :meth:`join` has nothing to wait for."""

    def issue(self, work) -> None:
        """Call ``work()`` (no arguments; it launches through the backend) now."""
        work()

    def join(self) -> None:
        """Nothing to wait for: the work already ran in order."""


class DeferredBranch(InlineBranch):
    """A branch that issues its work at :meth:`join`, the latest point the contract allows
    (a check, for the simulator tests): the fields come out bit for bit as with
    :class:`InlineBranch` only if the main stream neither reads what the branch writes nor
    overwrites what it reads between the fork and the join — the two hazards a
    :class:`SideStream` would turn into races."""

    def __init__(self):
        self._work = []

    def issue(self, work) -> None:
        self._work.append(work)

    def join(self) -> None:
        work, self._work = self._work, []
        for w in work:
            w()


class SideStream:
    """A second CUDA stream of a :class:`~dycore.backend.gpu.GPUBackend`, forked and joined by
    events.

    :meth:`issue` records an event on the main stream, makes the side stream wait for it and
    points the backend (its CuPy stream and numba's view of it) at the side stream while
    ``work()`` launches, so the work runs after what the main stream issued before it and
    beside what the main stream issues next. :meth:`join` makes the main stream wait for
    everything issued on the side stream; it must come before the main stream reads the
    branch's results and, during a capture, before the capture ends or is split
    (:meth:`dycore.backend.graphs.Graph.split`).

    Parameters
    ----------
    backend : GPUBackend (its ``stream`` / ``nb_stream`` are swapped while ``work()`` runs)
    priority : CUDA stream priority of the side stream (lower is higher; None: the default)

    Raises
    ------
    RuntimeError when :meth:`issue` is called from inside an issued work (no nesting).
    """

    def __init__(self, backend, priority: int | None = None):
        import cupy
        from numba import cuda
        self.b = backend
        self.main, self.main_nb = backend.stream, backend.nb_stream
        self.side = (cupy.cuda.Stream(non_blocking=True) if priority is None else
                     cupy.cuda.Stream(non_blocking=True, priority=int(priority)))
        self.side_nb = cuda.external_stream(self.side.ptr)
        self._fork = cupy.cuda.Event(disable_timing=True)
        self._join = cupy.cuda.Event(disable_timing=True)
        self._open = False
        self._pending = False

    def issue(self, work) -> None:
        """Launch ``work()`` on the side stream after the main stream's work so far."""
        if self._open:
            raise RuntimeError("side stream: issue() inside an issued work (no nesting)")
        self._fork.record(self.main)
        self.side.wait_event(self._fork)
        self.b.stream, self.b.nb_stream = self.side, self.side_nb
        self.side.use()
        self._open = self._pending = True
        try:
            work()
        finally:
            self.b.stream, self.b.nb_stream = self.main, self.main_nb
            self.main.use()
            self._open = False

    def join(self) -> None:
        """Make the main stream wait for the branch's work (no host synchronisation)."""
        if self._pending:
            self._join.record(self.side)
            self.main.wait_event(self._join)
            self._pending = False
