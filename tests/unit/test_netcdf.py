"""netCDF writer: UGRID layout, CF metadata, chunking and compression, units, values, diagnostics,
timers, portable metadata, and surviving a killed run."""
from __future__ import annotations

import datetime
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import netCDF4
import numpy as np
import pytest

from dycore.errors import OutputError
from dycore.io.netcdf import (CALENDAR, COMPRESSION_LEVEL, FIELDS, TIME_UNITS, SnapshotWriter,
                               _command_line, portable_text, read_last_snapshot)

COORDS = np.array([[0.0, 0.0, 0.0], [1000.0, 0.0, 0.0], [0.0, 1000.0, 0.0],
                   [0.0, 0.0, 500.0], [1000.0, 1000.0, 500.0]])
TETS = np.array([[0, 1, 2, 3], [1, 2, 3, 4]], dtype=np.int32)
UNITS = {"u": "m s-1", "v": "m s-1", "w": "m s-1", "p": "m2 s-2", "theta_prime": "K",
         "q_v": "kg kg-1", "q_c": "kg kg-1", "q_r": "kg kg-1"}


def _mesh():
    return types.SimpleNamespace(coords=COORDS, tets=TETS)


def _fields(k: int) -> dict[str, np.ndarray]:
    return {name: np.arange(5.0) * (i + 1) + 10.0 * k for i, name in enumerate(FIELDS)}


def _writer(path, config_yaml="time:\n  dt: 10.0\n", **kwargs):
    return SnapshotWriter(path, _mesh(), config_yaml=config_yaml, version="9.8.7",
                          title="test run", **kwargs)


def _all_variables(group):
    yield from group.variables.values()
    for sub in group.groups.values():
        yield from _all_variables(sub)


def test_layout_units_and_values(tmp_path):
    path = tmp_path / "sub" / "dir" / "run.nc"          # parent folders are created
    with _writer(path) as writer:
        assert writer.write_snapshot(0.0, _fields(0)) == 0
        assert writer.write_snapshot(300.0, _fields(1)) == 1
        assert writer.n_snapshots == 2

    with netCDF4.Dataset(path) as ds:
        assert ds.file_format == "NETCDF4"
        dims = {name: len(dim) for name, dim in ds.dimensions.items()}
        assert dims["time"] == 2 and dims["nodes"] == 5 and dims["cells"] == 2
        assert dims["four"] == 4
        assert ds.dimensions["time"].isunlimited() and ds.dimensions["step"].isunlimited()
        # one unlimited dimension per record kind; picard is fixed (time.nonlinear_iterations)
        assert not ds.dimensions["picard"].isunlimited() and dims["picard"] == 2
        assert ds.Conventions == "CF-1.8 UGRID-1.0"
        assert ds.title == "test run" and ds.dycore_version == "9.8.7"
        assert ds.config == "time:\n  dt: 10.0\n" and "created by dycore 9.8.7" in ds.history

        for name, std in zip("xyz", ("projection_x_coordinate", "projection_y_coordinate",
                                     "altitude")):
            var = ds[name]
            assert var.dimensions == ("nodes",) and var.units == "m"
            assert var.standard_name == std and var.long_name
            np.testing.assert_array_equal(var[:], COORDS[:, "xyz".index(name)])

        conn = ds["cell_nodes"]
        assert conn.dimensions == ("cells", "four") and conn.dtype == np.int32
        assert conn.start_index == 0 and conn.cf_role == "volume_node_connectivity"
        np.testing.assert_array_equal(conn[:], TETS)

        mesh = ds["mesh"]
        assert mesh.cf_role == "mesh_topology" and mesh.topology_dimension == 3
        assert mesh.node_coordinates == "x y z"
        assert mesh.volume_node_connectivity == "cell_nodes"
        assert mesh.volume_dimension == "cells"
        shape = ds[mesh.volume_shape_type]
        assert "cf_role" not in shape.ncattrs()         # a CF flag variable, no UGRID cf_role
        assert shape.flag_meanings.split()[0] == "tetrahedron"
        np.testing.assert_array_equal(shape[:], 0)
        # cf_role only where UGRID requires it
        assert sorted(v.name for v in ds.variables.values() if "cf_role" in v.ncattrs()) == \
            ["cell_nodes", "mesh"]

        time = ds["time"]
        assert time.units == TIME_UNITS == "seconds since 2000-01-01 00:00:00"
        assert time.standard_name == "time" and time.calendar == CALENDAR and time.axis == "T"
        np.testing.assert_array_equal(time[:], [0.0, 300.0])     # raw values: model seconds
        assert list(netCDF4.num2date(time[:], time.units, time.calendar,
                                     only_use_cftime_datetimes=False)) == [
            datetime.datetime(2000, 1, 1), datetime.datetime(2000, 1, 1, 0, 5)]
        for name, units in UNITS.items():
            var = ds[name]
            assert var.dimensions == ("time", "nodes") and var.dtype == np.float64
            assert var.units == units and var.long_name
            assert var.mesh == "mesh" and var.location == "node"
            for k in range(2):
                np.testing.assert_array_equal(var[k, :], _fields(k)[name])


def test_every_variable_is_chunked_and_compressed(tmp_path):
    path = tmp_path / "run.nc"
    with _writer(path) as writer:
        writer.write_snapshot(0.0, _fields(0))
        writer.write_diagnostics(1, 10.0, {"max_abs_w": 0.5, "picard_change": [1e-3, 1e-6]})
        writer.write_timers({"step": {"calls": 1, "total_s": 2.0}}, "table")
    with netCDF4.Dataset(path) as ds:
        checked = 0
        for var in _all_variables(ds):
            if var.name == "mesh":                      # the UGRID container is a scalar
                assert var.shape == () and var.chunking() == "contiguous"
                continue
            chunks = var.chunking()
            assert isinstance(chunks, list) and len(chunks) == var.ndim, var.name
            if var.dtype != str:                        # HDF5 filters skip variable-length data
                filters = var.filters()
                assert filters["zlib"] and filters["complevel"] == COMPRESSION_LEVEL, var.name
                assert filters["shuffle"], var.name
            checked += 1
        assert checked > 20
        assert ds["u"].chunking() == [1, 5] and ds["picard_change"].chunking() == [1024, 2]
        assert ds["cell_nodes"].chunking() == [2, 4] and ds["time"].chunking() == [1024]


def test_compression_can_be_switched_off_and_values_stay_exact(tmp_path):
    for level in (0, 9):
        path = tmp_path / f"level{level}.nc"
        with _writer(path, compression_level=level) as writer:
            writer.write_snapshot(0.0, _fields(3))
        with netCDF4.Dataset(path) as ds:
            assert bool(ds["w"].filters()["zlib"]) == (level > 0)
            np.testing.assert_array_equal(ds["w"][0, :], _fields(3)["w"])
    with pytest.raises(OutputError, match="compression_level must be an integer from 0 to 9"):
        _writer(tmp_path / "bad.nc", compression_level=10)


def test_no_absolute_paths_in_config_and_history(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["/opt/venv/lib/dycore/__main__.py", "run",
                                      str(tmp_path / "configs" / "a.yaml"),
                                      "--output=/scratch/me/out.nc"])
    config = (f"# dycore resolved configuration (source: {tmp_path}/configs/a.yaml)\n"
              "output:\n  path: /scratch/me/out.nc\n  unit: m/s\n")
    with _writer(tmp_path / "run.nc", config_yaml=config) as writer:
        writer.write_snapshot(0.0, _fields(0))
    with netCDF4.Dataset(tmp_path / "run.nc") as ds:
        assert ds.config == ("# dycore resolved configuration (source: configs/a.yaml)\n"
                             "output:\n  path: out.nc\n  unit: m/s\n")
        assert ds.history.endswith(
            ": created by dycore 9.8.7: dycore run configs/a.yaml --output=out.nc")
        assert "__main__" not in ds.history and str(tmp_path) not in ds.history


def test_portable_text_and_command_line():
    cwd = Path("/home/me/run")
    assert portable_text("source: /home/me/run/configs/a.yaml", cwd) == "source: configs/a.yaml"
    assert portable_text("'/tmp/x/out.nc', (/a/b.yaml)", cwd) == "'out.nc', (b.yaml)"
    assert portable_text("path: output/{case}.nc; 1/s; m2 s-2", cwd) == \
        "path: output/{case}.nc; 1/s; m2 s-2"
    assert portable_text("see /etc/x.", cwd) == "see x."
    assert _command_line(["/usr/bin/dycore", "plot", "/data/a.nc"]) == "dycore plot a.nc"
    assert _command_line(["/src/dycore/__main__.py", "run", "c.yaml"]) == "dycore run c.yaml"
    assert _command_line(["/usr/lib/pytest/__main__.py", "-q"]) == \
        "the dycore Python API (program: pytest)"
    assert _command_line(["-c"]) == "the dycore Python API (program: python)"


def test_fields_left_out_are_nan_and_reader_returns_last(tmp_path):
    path = tmp_path / "run.nc"
    with _writer(path) as writer:
        writer.write_snapshot(0.0, _fields(0))
        writer.write_snapshot(10.0, {"w": np.full(5, 0.25)})
    t, values, coords, cell_nodes = read_last_snapshot(path)
    assert t == 10.0
    assert set(values) == set(FIELDS)
    np.testing.assert_array_equal(values["w"], 0.25)
    assert np.all(np.isnan(values["u"]))
    np.testing.assert_array_equal(coords, COORDS)
    np.testing.assert_array_equal(cell_nodes, TETS)
    assert cell_nodes.dtype == np.int32
    t, values, _, _ = read_last_snapshot(path, fields=("w",))
    assert list(values) == ["w"]


def test_diagnostics(tmp_path):
    path = tmp_path / "run.nc"
    with _writer(path, config_yaml="time:\n  nonlinear_iterations: 3\n",
                 picard_iterations=3) as writer:
        writer.write_diagnostics(1, 10.0, {
            "max_abs_w": 0.5, "kinetic_energy": 2.0e9, "max_abs_div_u": 1e-12,
            "picard_change": [1e-2, 1e-5], "picard_iterations": 2,
            "solver_iterations": {"pressure": [12, 10], "momentum": 7, "tracer": [3, 3, 3, 3]}})
        writer.write_diagnostics(2, 20.0, {"max_abs_w": 0.75, "picard_change": [1e-3, 1e-6, 1e-9],
                                           "solver_iterations_pressure": 9, "cfl": 0.4})
        writer.write_diagnostics(3, 30.0, {"max_abs_w": 0.5, "picard_change": [2e-3]})
        with pytest.raises(OutputError, match="must be a scalar"):
            writer.write_diagnostics(3, 30.0, {"max_abs_w": [1.0, 2.0]})
        with pytest.raises(OutputError, match="step 4 has 4 picard_change values; the file's "
                                              "picard dimension holds 3"):
            writer.write_diagnostics(4, 40.0, {"picard_change": [1.0, 2.0, 3.0, 4.0]})
    with netCDF4.Dataset(path) as ds:
        # integer diagnostics have no fill value: read back as int32 and never masked
        for name in ("step", "picard_iterations", "solver_iterations_pressure"):
            values = ds[name][:]
            assert values.dtype == np.int32 and not np.ma.getmaskarray(values).any(), name
            assert "_FillValue" not in ds[name].ncattrs()
        assert ds["diag_time"].units == TIME_UNITS and ds["diag_time"].calendar == CALENDAR
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        # picard holds time.nonlinear_iterations values per step; shorter rows are NaN-padded
        assert len(ds.dimensions["step"]) == 3 and len(ds.dimensions["picard"]) == 3
        assert not ds.dimensions["picard"].isunlimited()
        np.testing.assert_array_equal(ds["step"][:], [1, 2, 3])
        np.testing.assert_array_equal(ds["diag_time"][:], [10.0, 20.0, 30.0])
        np.testing.assert_array_equal(ds["max_abs_w"][:], [0.5, 0.75, 0.5])
        assert ds["max_abs_w"].units == "m s-1"
        change = ds["picard_change"][:]
        np.testing.assert_array_equal(change[0, :2], [1e-2, 1e-5])
        assert np.isnan(change[0, 2])
        np.testing.assert_array_equal(change[1], [1e-3, 1e-6, 1e-9])
        assert change[2, 0] == 2e-3 and np.isnan(change[2, 1:]).all()
        np.testing.assert_array_equal(ds["solver_iterations_pressure"][:], [22, 9, -1])
        np.testing.assert_array_equal(ds["solver_iterations_momentum"][:], [7, -1, -1])
        np.testing.assert_array_equal(ds["solver_iterations_tracer"][:], [12, -1, -1])
        np.testing.assert_array_equal(ds["picard_iterations"][:], [2, -1, -1])
        assert ds["kinetic_energy"][0] == 2.0e9 and np.isnan(ds["kinetic_energy"][1])
        cfl = ds["cfl"][:]                                     # a new diagnostic: new variable
        assert np.isnan(cfl[0]) and cfl[1] == 0.4 and np.isnan(cfl[2])


def test_timers(tmp_path):
    path = tmp_path / "run.nc"
    table = {"assemble.momentum": {"calls": 600, "total_s": 12.5, "mean_s": 0.0208},
             "solve.pressure": {"calls": 600, "total_s": 30.0}}
    with _writer(path) as writer:
        writer.write_timers({"old": {"calls": 1}, "older": {"calls": 2}, "oldest": {"calls": 3}})
        writer.write_timers(table, "stage  calls\n...")  # a later call replaces the table
    with netCDF4.Dataset(path) as ds:
        assert json.loads(ds.timers) == table
        assert ds.timers_table == "stage  calls\n..."
        group = ds.groups["timers"]
        names = list(group["stage_name"][:])
        assert names[:2] == ["assemble.momentum", "solve.pressure"] and names[2] == ""
        np.testing.assert_array_equal(group["calls"][:2], [600, 600])
        total = np.ma.filled(group["total_s"][:], np.nan)
        np.testing.assert_array_equal(total[:2], [12.5, 30.0])
        assert group["total_s"].units == "s"
        mean = np.ma.filled(group["mean_s"][:], np.nan)
        assert mean[0] == 0.0208 and np.isnan(mean[1])


def test_timer_units_from_suffix(tmp_path):
    path = tmp_path / "run.nc"
    with _writer(path) as writer:
        writer.write_timers({"step": {"calls": np.int64(3), "total_ms": 9.0, "mean_ms": 3.0}})
    with netCDF4.Dataset(path) as ds:
        group = ds.groups["timers"]
        assert group["total_ms"].units == "ms" and group["mean_ms"][0] == 3.0
        assert json.loads(ds.timers) == {"step": {"calls": 3.0, "total_ms": 9.0,
                                                  "mean_ms": 3.0}}


_KILLED_RUN = textwrap.dedent("""
    import os, sys, types
    import numpy as np
    from dycore.io.netcdf import SnapshotWriter
    mesh = types.SimpleNamespace(coords=np.array({coords}), tets=np.array({tets}))
    writer = SnapshotWriter(sys.argv[1], mesh, config_yaml="a: 1", version="0")
    for k in range(2):
        writer.write_snapshot(100.0 * k, {{"w": np.arange(5.0) + k}})
        writer.write_diagnostics(k + 1, 100.0 * k, {{"max_abs_w": 4.0 + k}})
    os._exit(1)   # killed: the file is never closed
""")


def test_killed_run_keeps_finished_snapshots(tmp_path):
    path = tmp_path / "killed.nc"
    script = _KILLED_RUN.format(coords=COORDS.tolist(), tets=TETS.tolist())
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    with netCDF4.Dataset(path) as ds:
        assert len(ds.dimensions["time"]) == 2
        np.testing.assert_array_equal(ds["time"][:], [0.0, 100.0])
        np.testing.assert_array_equal(ds["w"][0, :], np.arange(5.0))
        np.testing.assert_array_equal(ds["max_abs_w"][:], [4.0, 5.0])
    t, values, coords, _ = read_last_snapshot(path)
    assert t == 100.0
    np.testing.assert_array_equal(values["w"], np.arange(5.0) + 1)
    np.testing.assert_array_equal(coords, COORDS)


def test_bad_input_and_paths(tmp_path):
    with _writer(tmp_path / "run.nc") as writer:
        with pytest.raises(OutputError, match="unknown snapshot field"):
            writer.write_snapshot(0.0, {"temperature": np.zeros(5)})
        with pytest.raises(OutputError, match=r"field w has shape \(4,\), expected \(5,\)"):
            writer.write_snapshot(0.0, {"w": np.zeros(4)})
        assert writer.n_snapshots == 0
    with pytest.raises(OutputError, match="already closed"):
        writer.write_snapshot(0.0, {"w": np.zeros(5)})

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(OutputError, match=str(blocker / "run.nc")):
        _writer(blocker / "run.nc")
    with pytest.raises(OutputError, match="mesh must have coords"):
        SnapshotWriter(tmp_path / "x.nc", types.SimpleNamespace(coords=COORDS, tets=TETS[:, :3]),
                       config_yaml="", version="0")


def test_reader_errors(tmp_path):
    with pytest.raises(OutputError, match="absent.nc: cannot open"):
        read_last_snapshot(tmp_path / "absent.nc")
    empty = tmp_path / "empty.nc"
    _writer(empty).close()
    with pytest.raises(OutputError, match="no snapshot"):
        read_last_snapshot(empty)
    other = tmp_path / "other.nc"
    with netCDF4.Dataset(other, "w") as ds:
        ds.createDimension("n", 1)
    with pytest.raises(OutputError, match="not a dycore output file"):
        read_last_snapshot(other)
