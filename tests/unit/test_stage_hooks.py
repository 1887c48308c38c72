"""NVTX ranges around the timed stages (issue 23): off by default (a timer has no hooks), on
with DYCORE_NVTX=1, balanced and nested like the stages, named as the timer table's rows; with
no NVTX provider one notice and no ranges."""
from __future__ import annotations

import logging
import sys

import pytest

from dycore.backend import stage_hooks
from dycore.backend.timers import StageTimers


class Recorder:
    """Stands in for cupy.cuda.nvtx: the pushes and pops, in order."""

    def __init__(self):
        self.events, self.depth, self.max_depth = [], 0, 0

    def push(self, name):
        self.events.append(("push", name))
        self.depth += 1
        self.max_depth = max(self.max_depth, self.depth)

    def pop(self):
        self.events.append(("pop", None))
        self.depth -= 1
        assert self.depth >= 0


def test_off_by_default(monkeypatch):
    monkeypatch.delenv(stage_hooks.NVTX_ENV, raising=False)
    logging.getLogger("dycore").setLevel(logging.INFO)
    assert StageTimers().hooks == ()
    for value in ("", "0", "off", "false", "No"):
        monkeypatch.setenv(stage_hooks.NVTX_ENV, value)
        assert not stage_hooks.nvtx_requested() and StageTimers().hooks == ()


def test_no_provider_is_one_notice_and_no_ranges(monkeypatch, caplog):
    monkeypatch.setenv(stage_hooks.NVTX_ENV, "1")
    monkeypatch.setitem(sys.modules, "cupy", None)       # neither imports, GPU machine or not
    monkeypatch.setitem(sys.modules, "nvtx", None)
    monkeypatch.setattr(stage_hooks, "_notified", False)
    with caplog.at_level(logging.INFO, logger="dycore"):
        assert StageTimers().hooks == ()
        assert StageTimers().hooks == ()
    assert caplog.text.count("DYCORE_NVTX is set but neither cupy.cuda.nvtx nor the nvtx "
                             "package imports here: no NVTX ranges") == 1


def test_ranges_follow_the_stages_of_a_step(monkeypatch, tmp_path):
    from dycore.config import load_config
    from dycore.timestepping.simulation import Simulation

    recorder = Recorder()
    monkeypatch.setenv(stage_hooks.NVTX_ENV, "1")
    monkeypatch.setattr(stage_hooks, "nvtx_ranges", lambda: stage_hooks.NvtxRanges(
        recorder.push, recorder.pop, "test"))
    (tmp_path / "run.yaml").write_text("mesh: {nx: 2, ny: 2, nz: 2}\n"
                                       "time: {dt: 10.0, t_end: 20.0}\n")
    sim = Simulation(load_config(tmp_path / "run.yaml"))
    before = len(recorder.events)
    sim.run(steps=2)
    assert recorder.depth == 0                                  # balanced
    pushed = [name for kind, name in recorder.events if kind == "push"]
    assert len(pushed) == sum(kind == "pop" for kind, _ in recorder.events)
    table = sim.timers.as_dict()
    assert set(pushed) == set(table) and len(table) >= 15    # the timer table's names
    for stage, row in table.items():                         # one range per timed call
        assert pushed.count(stage) == row["calls"], stage
    # each step is one outer range that holds the step's stages
    step = recorder.events[before:]
    assert step[0] == ("push", "step (total)") and recorder.max_depth >= 2
    depth, outer = 0, []
    for kind, name in step:
        if kind == "push":
            if depth == 0:
                outer.append(name)
            depth += 1
        else:
            depth -= 1
    assert outer == ["step (total)", "step (total)"]


def test_debug_hook_logs_each_stage_once(caplog):
    with caplog.at_level(logging.DEBUG, logger="dycore"):
        timers = StageTimers()
        for _ in range(3):
            with timers("outer"):
                with timers("inner"):
                    pass
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert lines == ["stage outer: first call begins", "stage inner: first call begins",
                     "stage inner: first call done", "stage outer: first call done"]
    assert timers.as_dict()["inner"]["calls"] == 3


@pytest.mark.parametrize("paused", [True, False])
def test_paused_timers_call_no_hook(paused):
    recorder = Recorder()
    timers = StageTimers(hooks=[stage_hooks.NvtxRanges(recorder.push, recorder.pop, "test")])
    if paused:
        with timers.paused(), timers("captured"):
            pass
        assert recorder.events == []
    else:
        with timers("a"):
            pass
        assert recorder.events == [("push", "a"), ("pop", None)]


def test_run_nvtx_flag_turns_ranges_on_for_that_run_only(monkeypatch, tmp_path, capsys):
    from dycore import cli

    recorder = Recorder()
    monkeypatch.delenv(stage_hooks.NVTX_ENV, raising=False)
    monkeypatch.setattr(stage_hooks, "nvtx_ranges", lambda: stage_hooks.NvtxRanges(
        recorder.push, recorder.pop, "test"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text("mesh: {nx: 2, ny: 2, nz: 2}\n"
                                       "time: {dt: 10.0, t_end: 10.0}\n"
                                       "output: {path: out.nc, progress: false}\n")
    assert cli.main(["run", "run.yaml", "--nvtx", "-q"]) == 0
    pushed = [name for kind, name in recorder.events if kind == "push"]
    assert pushed.count("step (total)") == 1 and "solve pressure" in pushed
    assert recorder.depth == 0
    assert stage_hooks.NVTX_ENV not in __import__("os").environ     # restored after the run
    before = len(recorder.events)
    assert cli.main(["run", "run.yaml", "-q", "--overwrite"]) == 0
    assert len(recorder.events) == before                           # off again
