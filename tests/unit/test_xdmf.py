"""XDMF + HDF5 export for ParaView: read back with meshio (and VTK's XDMF reader when the ``vtk``
package is installed), every value equal to the netCDF file's."""
from __future__ import annotations

import types

import netCDF4
import numpy as np
import pytest

from dycore import cli
from dycore.errors import OutputError
from dycore.io.netcdf import FIELDS, SnapshotWriter
from dycore.io.xdmf import export_xdmf, xdmf_field_names, xdmf_paths

import meshio  # noqa: E402  (a project dependency)

COORDS = np.array([[0.0, 0.0, 0.0], [1000.0, 0.0, 0.0], [0.0, 1000.0, 0.0],
                   [0.0, 0.0, 500.0], [1000.0, 1000.0, 500.0]])
TETS = np.array([[0, 1, 2, 3], [1, 2, 4, 3]], dtype=np.int32)
TIMES = (0.0, 300.0, 600.0)
NAMES = {"u": "u [m s-1]", "w": "w [m s-1]", "p": "p [m2 s-2]", "theta_prime": "theta_prime [K]",
         "q_v": "q_v [kg kg-1]", "q_c": "q_c [kg kg-1]", "q_r": "q_r [kg kg-1]"}


def _fields(k: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(k)             # full-precision values: a lossy copy shows
    return {name: rng.standard_normal(5) * 10.0 ** (i - 3) for i, name in enumerate(FIELDS)}


def _output(path):
    mesh = types.SimpleNamespace(coords=COORDS, tets=TETS)
    with SnapshotWriter(path, mesh, config_yaml="a: 1", version="0") as writer:
        for k, t in enumerate(TIMES):
            writer.write_snapshot(t, _fields(k))
    return path


def _netcdf_snapshots(path):
    """(times, [{xdmf name: expected array}]) from the netCDF file."""
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        times = list(ds["time"][:])
        snaps = []
        for k in range(len(times)):
            snap = {NAMES["u"]: np.column_stack([ds[c][k, :] for c in "uvw"])}
            snap.update({NAMES[n]: ds[n][k, :] for n in NAMES if n != "u"})
            snaps.append(snap)
    return times, snaps


def test_export_reads_back_with_meshio_exactly(tmp_path, capsys):
    nc = _output(tmp_path / "run.nc")
    assert cli.main(["export", str(nc), "--xdmf"]) == 0
    assert capsys.readouterr().out.strip() == f"xdmf: {tmp_path / 'run.xdmf'} (+ run.h5)"
    assert (tmp_path / "run.h5").is_file()
    assert "run.h5:/" in (tmp_path / "run.xdmf").read_text()     # no folder in the reference

    times, snaps = _netcdf_snapshots(nc)
    with meshio.xdmf.TimeSeriesReader(tmp_path / "run.xdmf") as reader:
        points, cells = reader.read_points_cells()
        np.testing.assert_array_equal(points, COORDS)
        assert [c.type for c in cells] == ["tetra"]
        np.testing.assert_array_equal(cells[0].data, TETS)
        assert reader.num_steps == len(TIMES)
        for k in range(reader.num_steps):
            t, point_data, _ = reader.read_data(k)
            assert t == times[k] == TIMES[k]
            assert set(point_data) == set(snaps[k])
            for name, expected in snaps[k].items():
                assert point_data[name].dtype == np.float64
                np.testing.assert_array_equal(point_data[name], expected, err_msg=name)
            assert point_data[NAMES["u"]].shape == (5, 3)


def test_export_reads_back_with_vtk_exactly(tmp_path):
    import vtkmodules.vtkIOXdmf2 as vtk_xdmf     # the test extra installs vtk
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline

    nc = _output(tmp_path / "run.nc")
    xdmf = export_xdmf(nc)
    times, snaps = _netcdf_snapshots(nc)
    reader = vtk_xdmf.vtkXdmfReader()
    reader.SetFileName(str(xdmf))
    reader.UpdateInformation()
    steps = reader.GetOutputInformation(0).Get(vtkStreamingDemandDrivenPipeline.TIME_STEPS())
    assert list(steps) == times
    for k, t in enumerate(times):
        reader.UpdateTimeStep(t)
        grid = reader.GetOutputDataObject(0)
        assert grid.GetClassName() == "vtkUnstructuredGrid"    # one dataset, not a multiblock
        assert grid.GetNumberOfPoints() == 5 and grid.GetNumberOfCells() == 2
        assert {grid.GetCellType(i) for i in range(2)} == {10}                 # VTK_TETRA
        np.testing.assert_array_equal(vtk_to_numpy(grid.GetPoints().GetData()), COORDS)
        point_data = grid.GetPointData()
        got = {point_data.GetArrayName(i): vtk_to_numpy(point_data.GetArray(i))
               for i in range(point_data.GetNumberOfArrays())}
        assert set(got) == set(snaps[k])
        for name, expected in snaps[k].items():
            np.testing.assert_array_equal(got[name], expected, err_msg=f"{name} at t = {t}")


def test_export_options_and_errors(tmp_path, capsys):
    nc = _output(tmp_path / "run.nc")
    out = tmp_path / "pv" / "case.xdmf"
    assert cli.main(["export", str(nc), "--xdmf", "--out", str(out)]) == 0
    assert out.is_file() and (tmp_path / "pv" / "case.h5").is_file()
    capsys.readouterr()

    assert cli.main(["export", str(nc), "--xdmf", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"dycore: error: {out} and {out.with_suffix('.h5')}: XDMF output exists" in err
    with pytest.raises(OutputError, match="XDMF output exists; pass --overwrite"):
        export_xdmf(nc, out)
    assert export_xdmf(nc, out, overwrite=True) == out
    with pytest.raises(OutputError, match=r"must end in \.xdmf"):
        export_xdmf(nc, tmp_path / "case.vtu")
    with pytest.raises(OutputError, match="would replace the netCDF file itself"):
        xdmf_paths(tmp_path / "run.h5")
    with pytest.raises(OutputError, match="absent.nc: cannot open"):
        export_xdmf(tmp_path / "absent.nc")
    empty = tmp_path / "empty.nc"
    SnapshotWriter(empty, types.SimpleNamespace(coords=COORDS, tets=TETS), config_yaml="",
                   version="0").close()
    with pytest.raises(OutputError, match="no snapshot"):
        export_xdmf(empty)
    assert not (tmp_path / "empty.xdmf").exists() and not (tmp_path / "empty.h5").exists()
    with pytest.raises(SystemExit):                       # a format flag is required
        cli.main(["export", str(nc)])


def test_field_names_carry_units():
    units = {"u": "m s-1", "v": "m s-1", "w": "m s-1", "p": "m2 s-2", "theta_prime": "K"}
    assert xdmf_field_names(units) == {"u": "u [m s-1]", "w": "w [m s-1]", "p": "p [m2 s-2]",
                                       "theta_prime": "theta_prime [K]"}
    assert xdmf_field_names({"w": "m s-1"}) == {"w": "w [m s-1]"}   # no vector without u, v


def test_run_with_xdmf_format_writes_both(tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text("mesh: {nx: 2, ny: 2, nz: 2}\ntime: {dt: 10.0, t_end: 10.0}\n"
                      f"output: {{path: '{tmp_path / 'out.nc'}', progress: false, "
                      "formats: [netcdf, xdmf]}\n")
    assert cli.main(["run", str(config)]) == 0, capsys.readouterr().err
    assert f"xdmf: {tmp_path / 'out.xdmf'} (+ out.h5)" in capsys.readouterr().out
    times, snaps = _netcdf_snapshots(tmp_path / "out.nc")
    assert times == [0.0, 10.0]
    with meshio.xdmf.TimeSeriesReader(tmp_path / "out.xdmf") as reader:
        reader.read_points_cells()
        t, point_data, _ = reader.read_data(1)
    assert t == 10.0
    for name, expected in snaps[1].items():
        np.testing.assert_array_equal(point_data[name], expected)

    # an existing export is refused before the run (no --overwrite), replaced with it
    (tmp_path / "out.nc").unlink()
    assert cli.main(["run", str(config)]) == 1
    assert "out.xdmf and " in capsys.readouterr().err
    assert not (tmp_path / "out.nc").exists()
    assert cli.main(["run", str(config), "--overwrite"]) == 0


def test_unstable_run_still_exports_its_good_snapshots(tmp_path, capsys):
    config = tmp_path / "blowup.yaml"
    config.write_text("mesh: {nx: 4, ny: 4, nz: 3}\ntime: {dt: 500.0, t_end: 3000.0}\n"
                      f"output: {{path: '{tmp_path / 'out.nc'}', progress: false, "
                      "formats: [netcdf, xdmf]}\n")
    assert cli.main(["run", str(config)]) == 1
    assert "unstable run at step 2" in capsys.readouterr().err
    times, snaps = _netcdf_snapshots(tmp_path / "out.nc")
    with meshio.xdmf.TimeSeriesReader(tmp_path / "out.xdmf") as reader:
        reader.read_points_cells()
        assert reader.num_steps == len(times) == 2
        t, point_data, _ = reader.read_data(1)
    assert t == times[1] == 500.0
    np.testing.assert_array_equal(point_data["w [m s-1]"], snaps[1]["w [m s-1]"])


@pytest.mark.parametrize("formats, message", [
    ("[xdmf]", "output.formats: expected a list that contains netcdf (the netCDF file is the "
               "run's record; xdmf is exported from it) (got ['xdmf'])"),
    ("[netcdf, vtu]", "output.formats.1: expected 'netcdf' or 'xdmf' (got 'vtu')"),
    ("[netcdf, netcdf]", "output.formats: expected each format at most once"),
    ("xdmf", "output.formats: expected a valid list (got 'xdmf')"),
])
def test_output_formats_are_checked(tmp_path, capsys, formats, message):
    config = tmp_path / "run.yaml"
    config.write_text(f"output: {{formats: {formats}}}\n")
    assert cli.main(["run", str(config)]) == 2
    assert f"dycore: error: {config}: {message}" in capsys.readouterr().err


def test_every_dataset_of_the_export_has_a_checksum(tmp_path):
    import h5py

    export_xdmf(_output(tmp_path / "run.nc"))
    with h5py.File(tmp_path / "run.h5", "r") as f:
        names = list(f)
        assert len(names) == 2 + 7 * len(TIMES)       # points, cells; 7 arrays per step
        assert all(f[name].fletcher32 for name in names)
