"""The restart check (``dycore validate --checks restart``, dycore.checks.bitwise; the ``restart``
part of scripts/gpu_check.py) under the CUDA simulator (issue 12): on the GPU backend with
deterministic assembly and strict FP, 2 steps in one run equal 1 step + a restart from the
output file + 1 step, and a restart from the checkpoint, bit for bit, with device and host
solvers; the verdict is JSON (validate_checks.json).

The simulator runs a device-solver step of 2 x 2 x 2 cells in about 14 s on 2 cores (one Picard
iteration), so the check is kept to 2 steps; the real GPU runs 20 (restart at 10).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dycore.checks import bitwise
from dycore.config import load_config

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                    reason="the simulator check; on a GPU run scripts/gpu_check.py --parts restart")
def test_restart_part_is_bitwise_under_the_simulator(tmp_path):
    cfg = load_config(REPO / "configs" / "mountainwave3d_small.yaml",
                      {"mesh": {"nx": 2, "ny": 2, "nz": 2}, "time": {"nonlinear_iterations": 1}})
    passed, message, results = bitwise.run_checks(cfg, ["restart"], tmp_path, 2, echo=print)
    assert passed and message == "restart: passed"
    for mode in ("device", "host"):
        row = results["restart"][mode]
        assert row["steps"] == 2 and row["restart_at_step"] == 1
        assert row["bitwise"], row
        assert row["differing_from_output_file"] == [] == row["differing_from_checkpoint"]
        assert set(row["max_abs_diff_from_checkpoint"].values()) == {0.0}
    assert json.loads((tmp_path / "validate_checks.json").read_text()) == results
    assert sorted(p.name for p in (tmp_path / "restart").glob("restart_device_*.nc")) == [
        "restart_device_checkpoint.checkpoint.nc", "restart_device_checkpoint.nc",
        "restart_device_one.checkpoint.nc", "restart_device_one.nc",
        "restart_device_saved.checkpoint.nc", "restart_device_split.checkpoint.nc",
        "restart_device_split.nc"]


def test_restart_part_finds_a_difference(tmp_path):
    """The comparison is not vacuous: a file whose last w differs by one ulp is reported."""
    import netCDF4
    import numpy as np

    from dycore.io.netcdf import SnapshotWriter

    class Mesh:
        coords = np.zeros((2, 3))
        tets = np.zeros((1, 4), dtype=np.int32)

    paths = []
    for name, w in (("a", 1.0), ("b", np.nextafter(1.0, 2.0))):
        path = tmp_path / f"{name}.nc"
        with SnapshotWriter(path, Mesh(), config_yaml="", version="test") as writer:
            writer.write_snapshot(0.0, {"w": np.array([0.5, 0.5])}, step=0)
            writer.write_snapshot(10.0, {"w": np.array([w, 0.5])}, step=1)
            writer.write_diagnostics(1, 10.0, {"max_abs_w": w})
        paths.append(path)
    a, b = (bitwise._last_record(p, 0) for p in paths)
    assert np.array_equal(a["w"], [1.0, 0.5]) and not np.array_equal(a["w"], b["w"])
    assert not np.array_equal(a["step:max_abs_w"], b["step:max_abs_w"])
    with netCDF4.Dataset(paths[0]) as ds:
        assert ds["time"][:].tolist() == [0.0, 10.0]
