"""``Graph.split`` / ``backend.uncaptured``: a captured iteration split around a host call.

A stand-in for CuPy's stream capture records what is issued while capturing; the test checks
what a real capture relies on: nothing runs during the capture, the uncaptured call is not made
then, and a replay runs graph, call, graph in the issue order (as on the H200, where cuDSS's
solve sits between two graphs of a Picard iteration: scripts/device/cudss_smoke.py).
"""
import sys
import types

import pytest

from dycore.backend.counters import Counters
from dycore.backend.gpu import GPUBackend
from dycore.backend.graphs import Graph


class FakeGraph:
    def __init__(self, ops, log):
        self.ops, self.log = list(ops), log

    def launch(self, stream=None):
        self.log.extend(self.ops)


class FakeStream:
    """Begin/end capture like a CUDA stream: work issued while capturing is recorded."""

    def __init__(self, log):
        self.log, self.recording = log, None

    def begin_capture(self, mode=None):
        assert self.recording is None, "capture begun twice"
        self.recording = []

    def end_capture(self):
        graph, self.recording = FakeGraph(self.recording, self.log), None
        return graph

    def issue(self, op):
        (self.log if self.recording is None else self.recording).append(op)


class FakeBackend:
    simulator = False
    uncaptured = GPUBackend.uncaptured

    def __init__(self):
        self.log = []
        self.stream = FakeStream(self.log)
        self.counters = Counters()
        self.capturing = None


@pytest.fixture
def fake_cupy(monkeypatch):
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(
        streamCaptureModeRelaxed=1))
    monkeypatch.setitem(sys.modules, "cupy", cupy)


def test_replay_runs_graph_call_graph_in_issue_order(fake_cupy):
    b = FakeBackend()
    calls = []

    def host_call():
        calls.append(len(b.log))
        b.log.append("library solve")

    def issue():
        b.stream.issue("assemble")
        b.stream.issue("rhs")
        b.uncaptured(host_call)
        b.stream.issue("correct")

    g = Graph(b, issue)
    assert b.log == [] and calls == []                 # nothing ran during the capture
    assert [type(s).__name__ for s in g.segments] == ["FakeGraph", "function", "FakeGraph"]
    assert b.capturing is None
    g.replay()
    g.replay()
    assert b.log == ["assemble", "rhs", "library solve", "correct"] * 2
    assert calls == [2, 6] and b.counters.graph_replays == 2


def test_uncaptured_outside_a_capture_runs_at_once():
    b = FakeBackend()
    b.uncaptured(lambda: b.log.append("now"))
    assert b.log == ["now"]


def test_a_failed_capture_falls_back_to_direct_launches(fake_cupy):
    b = FakeBackend()

    def issue():
        b.stream.issue("a")
        if b.capturing is not None:
            raise RuntimeError("operation not permitted when stream is capturing")

    g = Graph(b, issue)
    assert g.graph is None and g.segments == [] and b.capturing is None
    g.replay()                                          # launched from Python instead
    assert b.log == ["a"]


def test_halo_messages_captured_in_a_graph_are_counted_at_each_replay(fake_cupy):
    """An exchange posted while capturing is counted once per replay (a GPU replay runs no
    Python), not at the capture; after a failed capture the direct launches count it."""
    b = FakeBackend()

    def issue():
        b.stream.issue("exchange")
        b.counters.halo_exchanges += 1          # what DeviceHaloExchange.begin counts
        b.counters.halo_bytes += 8 * 1500

    g = Graph(b, issue)
    assert (b.counters.halo_exchanges, b.counters.halo_bytes) == (0, 0)
    for _ in range(3):
        g.replay()
    assert (b.counters.halo_exchanges, b.counters.halo_bytes) == (3, 3 * 12000)
    assert b.log == ["exchange"] * 3

    def failing():
        issue()
        if b.capturing is not None:
            raise RuntimeError("operation not permitted when stream is capturing")

    f = Graph(b, failing)
    assert f.graph is None and b.counters.halo_exchanges == 3     # the failed capture: none
    f.replay()
    assert (b.counters.halo_exchanges, b.counters.halo_bytes) == (4, 4 * 12000)
