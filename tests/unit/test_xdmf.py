"""The XDMF series for ParaView (issue 23: written during the run): read back with VTK's XDMF
reader (ParaView's), every value equal to the netCDF file's, plain array names with their units
as metadata, the boundary with its tags (the terrain), and a run killed with SIGKILL leaves a
series of its finished snapshots that VTK opens."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import netCDF4
import numpy as np
import pytest

from dycore import cli
from dycore.errors import OutputError
from dycore.io.netcdf import FIELDS, SnapshotWriter
from dycore.io.xdmf import FACE_TAG_NAMES, boundary_tags, export_xdmf, xdmf_paths

REPO = Path(__file__).resolve().parents[2]
COORDS = np.array([[0.0, 0.0, 0.0], [1000.0, 0.0, 0.0], [0.0, 1000.0, 0.0],
                   [0.0, 0.0, 500.0], [1000.0, 1000.0, 500.0]])
TETS = np.array([[0, 1, 2, 3], [1, 4, 2, 3]], dtype=np.int32)     # positively oriented
TIMES = (0.0, 300.0, 600.0)
NAMES = ("velocity", "u", "v", "w", "p", "theta_prime", "q_v", "q_c", "q_r")
TINY = ("mesh: {nx: 2, ny: 2, nz: 2}\ntime: {dt: 10.0, t_end: %s}\n"
        "output: {path: '%s', progress: false, output_interval: 10.0, formats: [netcdf, xdmf]}\n")


def _fields(k: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(k)             # full-precision values: a lossy copy shows
    return {name: rng.standard_normal(5) * 10.0 ** (i - 3) for i, name in enumerate(FIELDS)}


def _output(path):
    mesh = types.SimpleNamespace(coords=COORDS, tets=TETS)
    with SnapshotWriter(path, mesh, config_yaml="a: 1", version="0") as writer:
        for k, t in enumerate(TIMES):
            writer.write_snapshot(t, _fields(k))
    return path


def _netcdf(path):
    """(times, [{array name: expected values}], coords, tets) from the netCDF file."""
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        times = [float(t) for t in ds["time"][:]]
        snaps = []
        for k in range(len(times)):
            snap = {"velocity": np.column_stack([ds[c][k, :] for c in "uvw"])}
            snap.update({n: np.asarray(ds[n][k, :]) for n in NAMES[1:]})
            snaps.append(snap)
        coords = np.column_stack([ds[c][:] for c in "xyz"])
        tets = np.asarray(ds["cell_nodes"][:])
    return times, snaps, coords, tets


def _vtk(xdmf):
    """VTK's XDMF reader (ParaView's "XDMF Reader"): (times, {t: fields block arrays},
    boundary (points, triangles, face_tag))."""
    import vtkmodules.vtkIOXdmf2 as vtk_xdmf
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline

    reader = vtk_xdmf.vtkXdmfReader()
    reader.SetFileName(str(xdmf))
    reader.UpdateInformation()
    times = list(reader.GetOutputInformation(0).Get(
        vtkStreamingDemandDrivenPipeline.TIME_STEPS()))
    data, boundary = {}, None
    for t in times:
        reader.UpdateTimeStep(t)
        out = reader.GetOutputDataObject(0)
        blocks = {out.GetMetaData(i).Get(out.NAME()): out.GetBlock(i)
                  for i in range(out.GetNumberOfBlocks())}
        assert set(blocks) == {"fields", "boundary"}
        grid = blocks["fields"]
        assert {grid.GetCellType(i) for i in range(grid.GetNumberOfCells())} == {10}  # tetra
        pd = grid.GetPointData()
        data[t] = {pd.GetArrayName(i): vtk_to_numpy(pd.GetArray(i))
                   for i in range(pd.GetNumberOfArrays())}
        data[t]["points"] = vtk_to_numpy(grid.GetPoints().GetData())
        b = blocks["boundary"]
        cells = vtk_to_numpy(b.GetCells().GetConnectivityArray()).reshape(-1, 3)
        boundary = (vtk_to_numpy(b.GetPoints().GetData()), cells,
                    vtk_to_numpy(b.GetCellData().GetArray("face_tag")))
    return times, data, boundary


def _assert_same(xdmf, nc, n_times=None):
    times, snaps, coords, _ = _netcdf(nc)
    got_times, got, _ = _vtk(xdmf)
    n = len(times) if n_times is None else n_times
    assert got_times == times[:n] and len(got_times) == n
    for k, t in enumerate(got_times):
        np.testing.assert_array_equal(got[t]["points"], coords)
        assert set(got[t]) - {"points"} == set(NAMES)
        for name, expected in snaps[k].items():
            np.testing.assert_array_equal(got[t][name], expected, err_msg=f"{name}, t = {t}")


def test_export_reads_back_with_vtk_exactly(tmp_path, capsys):
    nc = _output(tmp_path / "run.nc")
    assert cli.main(["export", str(nc), "--xdmf"]) == 0
    assert capsys.readouterr().out.strip() == f"xdmf: {tmp_path / 'run.xdmf'} (+ run_xdmf/)"
    assert sorted(p.name for p in (tmp_path / "run_xdmf").iterdir()) == [
        "mesh.h5", "t00000.h5", "t00001.h5", "t00002.h5"]
    assert "run_xdmf/t00002.h5:/w" in (tmp_path / "run.xdmf").read_text()   # relative names
    _assert_same(tmp_path / "run.xdmf", nc)


def test_plain_names_and_units_as_metadata(tmp_path):
    nc = _output(tmp_path / "run.nc")
    root = ET.parse(export_xdmf(nc)).getroot()
    steps = root.findall("./Domain/Grid[@Name='fields']/Grid")
    assert len(steps) == 3
    for step in steps:
        units = {a.get("Name"): a.find("Information[@Name='units']").get("Value")
                 for a in step.findall("Attribute")}
        want = {name: FIELDS[name][1] for name in NAMES[1:]} | {"velocity": "m s-1"}
        assert units == want


def test_boundary_tags_from_normals_are_the_generators(tmp_path, capsys):
    """The export (no tags in the netCDF file) tags the faces by their normals: the same tags
    the mesh generator gave (ground = the terrain, a 400 m mountain)."""
    from dycore import cases
    from dycore.config import load_config

    (tmp_path / "run.yaml").write_text(TINY % (10.0, tmp_path / "out.nc"))
    mesh = cases.build_config_mesh(load_config(tmp_path / "run.yaml"))
    faces, tags = boundary_tags(mesh.coords, mesh.tets)
    key = {tuple(sorted(f)): int(t) for f, t in zip(mesh.faces.tolist(), mesh.face_tags)}
    assert {tuple(sorted(f)): int(t) for f, t in zip(faces.tolist(), tags)} == key
    assert sorted(set(tags.tolist())) == sorted(FACE_TAG_NAMES)
    # the live series of a run carries the mesh's own tags; the ground is the terrain
    assert cli.main(["run", str(tmp_path / "run.yaml")]) == 0
    _, _, (points, triangles, tag) = _vtk(tmp_path / "out.xdmf")
    got = {tuple(sorted(f)): int(t) for f, t in zip(triangles.tolist(), tag)}
    assert got == key
    ground = points[triangles[tag == 1]]
    assert ground[..., 2].max() > 100.0                       # the mountain is in it


@pytest.mark.slow
def test_run_writes_the_series_live_and_a_killed_run_keeps_it(tmp_path):
    """SIGKILL in the worst place: the fourth snapshot's data file is written, the XML that
    would name it is not. The XDMF names the three finished snapshots (t = 0, 10, 20 s); VTK
    reads them equal to the netCDF file's."""
    out = tmp_path / "out.nc"
    (tmp_path / "run.yaml").write_text(TINY % (100.0, out))
    script = textwrap.dedent(f"""
        import os, signal
        from dycore import cli
        from dycore.io import xdmf
        write_xml = xdmf.XdmfWriter._write_xml
        def killing(self):
            if len(self.times) == 4:
                os.kill(os.getpid(), signal.SIGKILL)
            return write_xml(self)
        xdmf.XdmfWriter._write_xml = killing
        cli.main(["run", {str(tmp_path / "run.yaml")!r}])
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert (tmp_path / "out_xdmf" / "t00003.h5").is_file()      # written, not yet named
    assert "t00003" not in (tmp_path / "out.xdmf").read_text()
    _assert_same(tmp_path / "out.xdmf", out, n_times=3)          # t = 0, 10, 20 s


def test_export_options_and_errors(tmp_path, capsys):
    nc = _output(tmp_path / "run.nc")
    out = tmp_path / "pv" / "case.xdmf"
    assert cli.main(["export", str(nc), "--xdmf", "--out", str(out)]) == 0
    assert out.is_file() and (tmp_path / "pv" / "case_xdmf" / "mesh.h5").is_file()
    capsys.readouterr()

    assert cli.main(["export", str(nc), "--xdmf", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"dycore: error: {out} and {tmp_path / 'pv' / 'case_xdmf'}: XDMF output exists" in err
    with pytest.raises(OutputError, match="XDMF output exists; pass --overwrite"):
        export_xdmf(nc, out)
    assert export_xdmf(nc, out, overwrite=True) == out
    with pytest.raises(OutputError, match=r"must end in \.xdmf"):
        export_xdmf(nc, tmp_path / "case.vtu")
    with pytest.raises(OutputError, match="would replace the netCDF file itself"):
        xdmf_paths(tmp_path / "run.xdmf")
    with pytest.raises(OutputError, match="absent.nc: cannot open"):
        export_xdmf(tmp_path / "absent.nc")
    empty = tmp_path / "empty.nc"
    SnapshotWriter(empty, types.SimpleNamespace(coords=COORDS, tets=TETS), config_yaml="",
                   version="0").close()
    with pytest.raises(OutputError, match="no snapshot"):
        export_xdmf(empty)
    assert not (tmp_path / "empty.xdmf").exists() and not (tmp_path / "empty_xdmf").exists()
    with pytest.raises(SystemExit):                       # a format flag is required
        cli.main(["export", str(nc)])


@pytest.mark.slow
def test_existing_series_is_refused_before_the_run_and_replaced_with_overwrite(tmp_path,
                                                                                capsys):
    out = tmp_path / "out.nc"
    (tmp_path / "run.yaml").write_text(TINY % (20.0, out))
    assert cli.main(["run", str(tmp_path / "run.yaml")]) == 0
    assert f"xdmf: {tmp_path / 'out.xdmf'} (+ out_xdmf/)" in capsys.readouterr().out
    _assert_same(tmp_path / "out.xdmf", out)
    out.unlink()
    assert cli.main(["run", str(tmp_path / "run.yaml")]) == 1
    assert "out.xdmf and " in capsys.readouterr().err
    assert not out.exists()
    (tmp_path / "run.yaml").write_text(TINY % (10.0, out))
    assert cli.main(["run", str(tmp_path / "run.yaml"), "--overwrite"]) == 0
    _assert_same(tmp_path / "out.xdmf", out, n_times=2)
    assert sorted(p.name for p in (tmp_path / "out_xdmf").iterdir()) == [
        "mesh.h5", "t00000.h5", "t00001.h5"]                # the older third snapshot is gone


def test_unstable_run_keeps_its_good_snapshots(tmp_path, capsys):
    config = tmp_path / "blowup.yaml"
    config.write_text("mesh: {nx: 4, ny: 4, nz: 3}\ntime: {dt: 500.0, t_end: 3000.0}\n"
                      f"output: {{path: '{tmp_path / 'out.nc'}', progress: false, "
                      "output_interval: 500.0, formats: [netcdf, xdmf]}\n")
    assert cli.main(["run", str(config)]) == 1
    assert "unstable run at step 2" in capsys.readouterr().err
    _assert_same(tmp_path / "out.xdmf", tmp_path / "out.nc", n_times=2)


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
    files = sorted((tmp_path / "run_xdmf").glob("*.h5"))
    assert len(files) == 1 + len(TIMES)                # the mesh, then one file per snapshot
    checked = 0
    for path in files:
        with h5py.File(path, "r") as f:
            for name in f:
                assert f[name].fletcher32, (path.name, name)
                checked += 1
    assert checked >= 4 + len(TIMES)
