"""Output off the critical path (dycore.io.background): order, errors, back-pressure, and the
batched diagnostics write giving the same file as one write per step."""
from __future__ import annotations

import gc
import threading

import netCDF4
import numpy as np
import pytest

from dycore.errors import OutputError
from dycore.io.background import BackgroundWriter, DiagnosticsBuffer
from dycore.io.netcdf import SnapshotWriter
from tiny_mesh import tiny_mesh


def test_calls_run_in_order_on_one_other_thread():
    seen = []
    with BackgroundWriter(max_pending=2) as out:
        for i in range(50):
            out.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
    assert [i for i, _ in seen] == list(range(50))
    assert {name for _, name in seen} == {"dycore-writer"}
    assert out.busy_s >= 0.0


def test_garbage_the_caller_left_is_finalised_in_the_callers_thread():
    """The CI segfault: an unclosed dataset from an earlier test, collected by the writer
    thread's first garbage collection, closed its netCDF file beside the main thread."""
    finalised = []

    class Handle:
        def __del__(self):
            finalised.append(threading.current_thread().name)

    gc.disable()                       # nothing collects the cycle before the writer starts ...
    try:
        handle = Handle()
        handle.cycle = handle
        del handle
        with BackgroundWriter() as out:
            out.submit(gc.collect)     # ... and the writer thread collects at once
    finally:
        gc.enable()
    assert finalised == [threading.current_thread().name]


def test_an_error_on_the_thread_reaches_the_caller_and_stops_later_writes():
    seen = []

    def fail():
        raise OutputError("disk full")
    out = BackgroundWriter()
    out.submit(seen.append, 1)
    out.submit(fail)
    out.submit(seen.append, 2)            # queued behind the failure: never runs
    with pytest.raises(OutputError, match="disk full"):
        out.drain()
    out.close()
    assert seen == [1]
    with pytest.raises(RuntimeError, match="after close"):
        out.submit(seen.append, 3)


def test_submit_blocks_while_the_queue_is_full():
    gate, started = threading.Event(), threading.Event()
    out = BackgroundWriter(max_pending=1)
    out.submit(lambda: (started.set(), gate.wait(5)))
    started.wait(5)
    out.submit(lambda: None)              # fills the one slot
    blocked = threading.Thread(target=out.submit, args=(lambda: None,))
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive()             # waits for the writer
    gate.set()
    blocked.join(5)
    assert not blocked.is_alive()
    out.close()


def test_not_threaded_runs_at_once_and_raises_there():
    seen = []
    out = BackgroundWriter(threaded=False)
    out.submit(seen.append, 1)
    assert seen == [1]
    with pytest.raises(ZeroDivisionError):
        out.submit(lambda: 1 / 0)
    out.close()


def _rows():
    rng = np.random.default_rng(0)
    rows = []
    for k in range(1, 8):
        diag = {"max_abs_w": float(rng.random()), "kinetic_energy": float(rng.random()),
                "picard_change": list(rng.random(1 if k % 3 == 0 else 2)),
                "solver_iterations": {"pressure": int(k), "momentum": 2 * k}}
        if k != 4:
            diag["max_abs_div_u"] = float(rng.random())
        if k == 5:
            diag["my_extra"] = 1.5                # a new variable in the middle of a batch
        rows.append((k, 10.0 * k, diag))
    return rows


def test_batched_diagnostics_give_the_file_of_one_write_per_step(tmp_path):
    mesh = tiny_mesh()
    paths = []
    for batched in (False, True):
        path = tmp_path / f"d{int(batched)}.nc"
        with SnapshotWriter(path, mesh, config_yaml="time: {nonlinear_iterations: 2}\n",
                            version="t") as w:
            if batched:
                buf = DiagnosticsBuffer(w.write_diagnostics_rows)
                for step, t, diag in _rows()[:3]:
                    buf.add(step, t, diag)
                assert len(buf) == 3
                buf.flush()
                assert len(buf) == 0
                for step, t, diag in _rows()[3:]:
                    buf.add(step, t, diag)
                buf.flush()
                buf.flush()                       # nothing left: writes nothing
            else:
                for row in _rows():
                    w.write_diagnostics(*row)
        paths.append(path)
    with netCDF4.Dataset(paths[0]) as a, netCDF4.Dataset(paths[1]) as b:
        a.set_auto_mask(False)
        b.set_auto_mask(False)
        assert a.dimensions["step"].size == b.dimensions["step"].size == 7
        names = [n for n, v in a.variables.items() if "step" in v.dimensions]
        assert sorted(names) == sorted(n for n, v in b.variables.items()
                                       if "step" in v.dimensions)
        assert "my_extra" in names
        for name in names:
            assert np.array_equal(a[name][:], b[name][:], equal_nan=True), name
        assert list(b["solver_iterations_momentum"][:]) == [2 * k for k in range(1, 8)]
        assert np.isnan(b["max_abs_div_u"][3]) and np.isnan(b["my_extra"][0])


def test_a_bad_row_writes_nothing_of_its_batch(tmp_path):
    with SnapshotWriter(tmp_path / "x.nc", tiny_mesh(),
                        config_yaml="time: {nonlinear_iterations: 2}\n", version="t") as w:
        with pytest.raises(OutputError, match="step 2 has 3 picard_change values"):
            w.write_diagnostics_rows([(1, 10.0, {"picard_change": [1.0]}),
                                      (2, 20.0, {"picard_change": [1.0, 2.0, 3.0]})])
        assert w.write_diagnostics_rows([]) == -1
    with netCDF4.Dataset(tmp_path / "x.nc") as ds:
        assert ds.dimensions["step"].size == 0
