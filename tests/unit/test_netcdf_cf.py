"""The output file as CF tools see it: the IOOS compliance-checker (CF-1.8) and xarray.

Both are optional here (skipped when not installed); the ``test`` extra installs them. The
compliance check needs no network (the CF standard-name table ships with the package).
"""
from __future__ import annotations

import json
import re
import types

import numpy as np
import pytest

from dycore.io.netcdf import FIELDS, SnapshotWriter

COORDS = np.array([[0.0, 0.0, 0.0], [1000.0, 0.0, 0.0], [0.0, 1000.0, 0.0],
                   [0.0, 0.0, 500.0], [1000.0, 1000.0, 500.0]])
TETS = np.array([[0, 1, 2, 3], [1, 2, 3, 4]], dtype=np.int32)

#: the only findings allowed: UGRID requires these cf_role values (mesh topology and its volume
#: connectivity); CF-1.8 defines cf_role for discrete sampling geometries only
CF_ALLOWED = (
    re.compile(r"^mesh_topology is not a valid cf_role value\."),
    re.compile(r"^volume_node_connectivity is not a valid cf_role value\."),
)


def _write(path):
    mesh = types.SimpleNamespace(coords=COORDS, tets=TETS)
    with SnapshotWriter(path, mesh, config_yaml="time:\n  nonlinear_iterations: 2\n",
                        version="1.0") as writer:
        for k in range(3):
            writer.write_snapshot(100.0 * k, {name: np.arange(5.0) + k for name in FIELDS})
            writer.write_diagnostics(k + 1, 100.0 * k, {
                "max_abs_w": 0.5, "kinetic_energy": 1.0, "max_abs_div_u": 1e-9,
                "picard_change": [1e-3, 1e-6][:k + 1], "picard_iterations": min(k + 1, 2),
                "solver_iterations": {"pressure": 4, "momentum": 3, "tracer": 2}})
        writer.write_timers({"step": {"calls": 3, "total_s": 1.5}}, "table")
    return path


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # its ioos_sos checker, loaded too
def test_compliance_checker_cf18(tmp_path):
    from compliance_checker.runner import CheckSuite, ComplianceChecker

    path = _write(tmp_path / "run.nc")
    report = tmp_path / "report.json"
    CheckSuite().load_all_available_checkers()
    ComplianceChecker.run_checker(str(path), ["cf:1.8"], verbose=0, criteria="strict",
                                  output_filename=str(report), output_format="json")
    result = json.loads(report.read_text())["cf:1.8"]
    messages = [msg for priority in ("high_priorities", "medium_priorities", "low_priorities")
                for check in result[priority] for msg in check["msgs"]]
    unexpected = [m for m in messages if not any(p.search(m) for p in CF_ALLOWED)]
    assert not unexpected, "\n".join(unexpected)
    assert all(any(p.search(m) for m in messages) for p in CF_ALLOWED)  # the list is not stale


def test_xarray_decodes_time_and_keeps_integers(tmp_path):
    import xarray as xr                                   # the test extra installs it
    path = _write(tmp_path / "run.nc")
    with xr.open_dataset(path) as ds:
        assert ds["time"].dtype.kind == "M"                 # CF time decoded to datetimes
        seconds = (ds["time"] - ds["time"][0]) / np.timedelta64(1, "s")
        np.testing.assert_array_equal(seconds, [0.0, 100.0, 200.0])
        for name in ("step", "picard_iterations", "solver_iterations_pressure"):
            assert ds[name].dtype == np.int32, name          # no fill value: not float + NaN
        np.testing.assert_array_equal(ds["picard_iterations"], [1, 2, 2])
        assert ds.sizes["picard"] == 2
        np.testing.assert_array_equal(ds["w"].isel(time=-1), np.arange(5.0) + 2)
    with xr.open_dataset(path, decode_times=False) as ds:
        np.testing.assert_array_equal(ds["time"], [0.0, 100.0, 200.0])
