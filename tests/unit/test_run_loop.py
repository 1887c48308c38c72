"""The one run loop (dycore.timestepping.loop) and its schedules and callbacks: the exact steps
a schedule fires at, the order of initialize / call / finalize, a user's own callback, and the
Python API writing a file whose snapshots equal `dycore run`'s bit for bit."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import dycore
from dycore.backend.timers import StageTimers
from dycore.errors import InstabilityError
from dycore.timestepping.callbacks import Callback, Snapshots, StabilityCheck
from dycore.timestepping.loop import run_loop
from dycore.timestepping.schedules import (AtEnd, IterationInterval, TimeInterval,
                                           snapshot_every)


class FakeSim:
    """The loop's simulation interface: t advances by dt per step (accumulated like the
    stepper's), fields are (t, t) and the diagnostics carry max_abs_w = t / 1000."""

    def __init__(self, dt: float, t0: float = 0.0):
        self.config = SimpleNamespace(time=SimpleNamespace(dt=dt))
        self.state = SimpleNamespace(t=t0)
        self.timers = StageTimers()
        self.fetched = 0

    def step(self):
        self.state.t += self.config.time.dt
        return {"max_abs_w": self.state.t / 1000.0}

    def output_fields(self):
        self.fetched += 1
        return {"u": np.full(2, self.state.t), "v": np.zeros(2), "w": np.zeros(2)}

    @staticmethod
    def agree(value):
        return value


def fired(schedule, dt: float, steps: int, t0: float = 0.0) -> list[int]:
    seen = []

    def record(sim, diag):
        seen.append(diag["step"])

    from dycore.timestepping.callbacks import FunctionCallback
    run_loop(FakeSim(dt, t0), steps, [FunctionCallback(record, schedule)])
    return seen


def test_time_interval_fires_at_the_first_step_at_or_after_each_multiple():
    assert fired(TimeInterval(20.0), 7.0, 12) == [3, 6, 9, 12]    # t = 21, 42, 63, 84
    assert fired(TimeInterval(30.0), 10.0, 9) == [3, 6, 9]        # dt divides the interval
    assert fired(TimeInterval(0.1), 0.1, 5) == [1, 2, 3, 4, 5]    # accumulated 0.1 round-off
    assert fired(TimeInterval(25.0), 10.0, 10) == [3, 5, 8, 10]   # t = 30, 50, 80, 100
    assert fired(TimeInterval(5.0), 10.0, 3) == [1, 2, 3]         # shorter than a step
    assert fired(TimeInterval(20.0), 7.0, 4, t0=35.0) == [6, 9]   # a restart at step 5


def test_iteration_interval_counts_from_t0_and_at_end():
    assert fired(IterationInterval(3), 10.0, 8) == [3, 6]
    assert fired(IterationInterval(3) | AtEnd(), 10.0, 8) == [3, 6, 8]
    assert fired(IterationInterval(3) | AtEnd(), 10.0, 4, t0=40.0) == [6, 8]   # steps 5..8
    assert snapshot_every(300.0, 10.0) == 30 and snapshot_every(25.0, 10.0) == 2
    assert snapshot_every(1.0, 10.0) == 1
    with pytest.raises(ValueError, match="positive integer"):
        IterationInterval(0)
    with pytest.raises(ValueError, match="positive number"):
        TimeInterval(-1.0)


class Recorder(Callback):
    """A user's callback: logs its calls; asks for the fields (fetched once per step)."""

    def __init__(self, name, log, schedule=None, stop_at=None):
        self.name, self.log, self.stop_at = name, log, stop_at
        if schedule is not None:
            self.schedule = schedule

    def initialize(self, sim, step):
        self.log.append((self.name, "init", step.k))

    def __call__(self, sim, step):
        fields = step.fields()
        self.log.append((self.name, step.k, float(fields["u"][0])))
        return step.k == self.stop_at

    def finalize(self, sim, step, error):
        self.log.append((self.name, "end", step.k, type(error).__name__ if error else None))


def test_callbacks_run_in_order_and_fields_are_fetched_once_per_step():
    log = []
    sim = FakeSim(10.0)
    taken = run_loop(sim, 10, [Recorder("a", log, IterationInterval(2)),
                               Recorder("b", log, IterationInterval(2), stop_at=4)])
    assert taken == 4 and sim.state.t == 40.0
    assert log == [("a", "init", 0), ("b", "init", 0),
                   ("a", 2, 20.0), ("b", 2, 20.0), ("a", 4, 40.0), ("b", 4, 40.0),
                   ("a", "end", 4, None), ("b", "end", 4, None)]
    assert sim.fetched == 2                      # steps 2 and 4, once each


def test_stability_check_stops_and_every_callback_is_finalized_with_the_error():
    from dycore.preflight import StabilityWatch

    log = []
    check = StabilityCheck(StabilityWatch(1000.0, 0.035))    # 35 m/s: w at t = 40 s, u later
    with pytest.raises(InstabilityError, match=r"unstable run at t = 40 s: max\|u\| = 40 m/s"):
        run_loop(FakeSim(10.0), 10, [check, Recorder("a", log)])
    assert log[-1] == ("a", "end", 4, "InstabilityError")   # the fields |u| = 40 m/s > 35
    assert [e[1] for e in log[1:-1]] == [1, 2, 3]           # step 4: "a" got no fields
    diag_check = StabilityCheck(StabilityWatch(1.0, 0.035))   # max_abs_w 0.04 > 0.035
    with pytest.raises(InstabilityError, match=r"unstable run at t = 40 s: max\|w\| = 0.04"):
        run_loop(FakeSim(10.0), 10, [diag_check])


def test_api_writes_the_snapshots_of_dycore_run_bit_for_bit(tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    config = tmp_path / "tiny.yaml"
    config.write_text("mesh: {nx: 4, ny: 4, nz: 3}\ntime: {dt: 10.0, t_end: 30.0}\n"
                      "output: {output_interval: 10.0, progress: false}\n")
    cli = tmp_path / "cli.nc"
    proc = subprocess.run([sys.executable, "-m", "dycore", "run", str(config), "--output",
                           str(cli), "--no-progress"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr

    sim = dycore.Simulation(dycore.load_config(config))
    api = tmp_path / "api.nc"
    every_other, seen = [], []

    class Every2(dycore.Callback):                   # a user's callback with its schedule
        schedule = dycore.IterationInterval(2)

        def __call__(self, sim, step):
            every_other.append((step.k, step.t, step.diag["max_abs_w"]))

    writer = dycore.NetCDFWriter(api)                # snapshots and diagnostics: one file
    taken = sim.run(until=30.0, callbacks=[
        dycore.Diagnostics(writer), dycore.Snapshots(writer, dycore.TimeInterval(10.0)),
        Every2(), lambda s, d: seen.append((d["step"], d["max_abs_w"]))])
    assert taken == 3
    assert every_other == [(2, 20.0, seen[1][1])]
    with netCDF4.Dataset(cli) as a, netCDF4.Dataset(api) as b:
        np.testing.assert_array_equal(b["time"][:], [0.0, 10.0, 20.0, 30.0])
        for name in ("time", "x", "y", "z", "cell_nodes", "u", "v", "w", "p", "theta_prime",
                     "q_v", "q_c", "q_r", "step", "diag_time", "max_abs_w", "kinetic_energy",
                     "picard_change", "picard_iterations", "solver_iterations_pressure"):
            x, y = np.asarray(a[name][:]), np.asarray(b[name][:])
            assert x.shape == y.shape and x.tobytes() == y.tobytes(), name
        assert len(b.dimensions["picard"]) == sim.config.time.nonlinear_iterations
        np.testing.assert_array_equal(b["step"][:], [1, 2, 3])
        assert [float(v) for v in b["max_abs_w"][:]] == [w for _, w in seen]
    ds = sim.to_xarray()
    assert ds.attrs["t"] == 30.0 and ds.sizes["nodes"] == 100
    with netCDF4.Dataset(api) as b:
        assert np.asarray(ds["w"].values).tobytes() == np.asarray(b["w"][-1]).tobytes()
    with pytest.raises(dycore_output_error(), match="exists; pass overwrite=True"):
        sim.run(steps=1, callbacks=[Snapshots(dycore.NetCDFWriter(api), AtEnd())])


def dycore_output_error():
    from dycore.errors import OutputError
    return OutputError
