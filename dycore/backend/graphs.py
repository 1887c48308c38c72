"""Captured work and its replay: :class:`Graph` (one CUDA graph, or its stand-in) and
:class:`IterationGraphs` (one graph per Picard iteration, what the stepper replays).

The time step calls ``graphs.run(k, issue)`` for iteration ``k`` and does not know whether the
kernels ran from Python or from a graph; when to capture, when to start afresh and how to keep
timer events and solver checks out of a capture are decided here.
"""
from __future__ import annotations

import logging

log = logging.getLogger("dycore")

__all__ = ["Graph", "IterationGraphs"]


class Graph:
    """Kernels captured once and replayed (a CUDA graph; re-issued under the simulator).

    Parameters
    ----------
    backend : GPUBackend, or any backend with ``capture=False``
    issue : callable with no arguments that launches kernels through ``backend.launch``
    capture : False: nothing is captured and each replay calls ``issue()`` again
    """

    def __init__(self, backend, issue, capture=True):
        self.b = backend
        self.issue = issue
        #: what a replay runs in order: CUDA graphs and host calls between them
        #: (:meth:`split`); one graph unless the work asked for an uncaptured call
        self.segments = []
        self.graph = None
        self.direct = not capture                # replays are plain launches
        c = backend.counters
        before = c.launches
        sent = {f: getattr(c, f) for f in c.REPLAYED}
        #: what the capture counted of ``Counters.REPLAYED`` (added at each GPU replay)
        self.replayed_counts = {}
        if capture and not backend.simulator:
            import cupy
            self._mode = cupy.cuda.runtime.streamCaptureModeRelaxed
            stream = backend.stream
            try:
                backend.capturing = self
                stream.begin_capture(mode=self._mode)
                try:
                    issue()
                finally:
                    backend.capturing = None
                    self.segments.append(stream.end_capture())
                self.graph = self.segments[0]
            except Exception as exc:  # noqa: BLE001 - any capture failure: launch directly
                self.segments = []
                log.warning("CUDA graph capture failed (%s: %s); launching these kernels "
                            "directly", type(exc).__name__, exc)
        self.kernels = c.launches - before
        c.launches = before                      # captured, not run
        counted = {f: getattr(c, f) - v for f, v in sent.items()}
        for f, v in sent.items():                # (halo messages too: sent at each replay)
            setattr(c, f, v)
        if self.graph is not None:
            self.replayed_counts = counted

    def split(self, call) -> None:
        """During the capture: end the graph here, record ``call`` (host code issuing work the
        capture cannot hold, e.g. a library solve that synchronises internally) to run at this
        point of every replay, and capture what follows into a further graph."""
        stream = self.b.stream
        self.segments.append(stream.end_capture())
        self.segments.append(call)
        stream.begin_capture(mode=self._mode)

    def replay(self) -> None:
        """Run the captured kernels once more (on the backend's stream).

        Under the simulator the kernels are re-issued and counted as a replay, as on a GPU;
        after a failed capture they are launched directly and counted as launches."""
        c = self.b.counters
        if self.direct or (self.graph is None and not self.b.simulator):
            self.issue()
            return
        c.graph_replays += 1
        if self.graph is not None:
            c.graph_kernels += self.kernels
            for f, v in self.replayed_counts.items():
                setattr(c, f, getattr(c, f) + v)
            for seg in self.segments:
                if callable(seg):
                    seg()
                else:
                    seg.launch(stream=self.b.stream)
            return
        saved = c.launches
        self.issue()
        self.kernels = c.launches - saved
        c.graph_kernels += self.kernels
        c.launches = saved


class IterationGraphs:
    """The Picard iterations of a step as captured graphs, one per iteration index.

    An iteration is captured (assembly, boundary conditions, solves and updates) once the
    linear systems allow it (``systems.graph_ready``: every solve has run, checked, and learnt
    its iteration budget) and replayed in later steps; until then, and with ``enabled`` False,
    its work is launched directly.

    Parameters
    ----------
    backend : Backend (:mod:`dycore.backend.protocol`; its ``capture``)
    systems : the linear systems (``graph_ready``; ``inline``: solves launch their kernels
        in the caller's capture instead of replaying graphs of their own)
    timers : StageTimers (paused during a capture: no timer events inside a graph)
    """

    #: the stage name of a replayed iteration in the timer table
    STAGE = "Picard iteration (graph replay)"

    def __init__(self, backend, systems, timers):
        self.b, self.sys, self.timers = backend, systems, timers
        self._graphs = {}
        #: capture iterations (False: assembly launched from Python and each solve replayed as
        #: its own graph, so that the stage timers split a step by stage; a profiling switch)
        self.enabled = True

    @property
    def captured(self) -> int:
        """How many Picard iterations are held as captured graphs now."""
        return len(self._graphs)

    def clear(self) -> None:
        """Forget every captured iteration (the solves' budgets changed: capture afresh)."""
        self._graphs.clear()

    def run(self, k: int, issue) -> None:
        """Iteration ``k``: replay its graph (capturing ``issue()`` the first time) once the
        systems allow it, else call ``issue()`` directly."""
        if not (self.sys.graph_ready and self.enabled):
            self._graphs.clear()
            issue()
            return
        g = self._graphs.get(k)
        if g is None:
            g = self._graphs[k] = self.b.capture(lambda: self._issue_inline(issue))
        with self.timers(self.STAGE):
            g.replay()

    def _issue_inline(self, issue) -> None:
        self.sys.inline = True
        try:
            with self.timers.paused():
                issue()
        finally:
            self.sys.inline = False
