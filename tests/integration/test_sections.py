"""``output.sections`` (issue 23): 2-D UGRID section files that uxarray, xugrid and VTK's
netCDF UGRID reader (ParaView's) open, whose values are the P1 interpolation of the 3-D output
(checked against an independent point-in-tetrahedron barycentric interpolation), that the UGRID
checker passes, and that a restart continues bit for bit."""
from __future__ import annotations

import gc
import json
import warnings

import netCDF4
import numpy as np
import pytest
import xarray as xr

from dycore import cli
from dycore.io.netcdf import FIELDS

SECTIONS = ("z=1000", "y=0")
TINY = ("mesh: {nx: 4, ny: 4, nz: 3, dx_min: 2000.0, dz_min: 1000.0}\n"
        "time: {dt: 10.0, t_end: 40.0}\n"
        "output: {path: '%s', output_interval: 10.0, progress: false, "
        "sections: ['z=1000', 'y=0']}\n")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sections")
    out = folder / "run.nc"
    (folder / "run.yaml").write_text(TINY % out)
    assert cli.main(["run", str(folder / "run.yaml")]) == 0
    return out


def _files(out):
    return {"z=1000": out.with_name("run.section_z1000m.nc"),
            "y=0": out.with_name("run.section_y0m.nc")}


def _barycentric_reference(coords, tets, points):
    """Each point's containing tetrahedron and its barycentric weights (independent of the
    section code: a linear solve per tetrahedron)."""
    x = coords[tets]                                       # (nele, 4, 3)
    T = np.transpose(x[:, 1:] - x[:, :1], (0, 2, 1))       # (nele, 3, 3)
    inv = np.linalg.inv(T)
    found_tet, found_w = [], []
    for p in points:
        lam = np.einsum("eij,ej->ei", inv, p - x[:, 0])
        w = np.column_stack([1.0 - lam.sum(axis=1), lam])
        inside = np.flatnonzero(w.min(axis=1) >= -1e-9)
        assert inside.size, p
        found_tet.append(inside[0])
        found_w.append(w[inside[0]])
    return np.array(found_tet), np.array(found_w)


def test_sections_hold_the_p1_interpolation_of_every_snapshot(run):
    with netCDF4.Dataset(run) as ds:
        ds.set_auto_mask(False)
        coords = np.column_stack([ds["x"][:], ds["y"][:], ds["z"][:]])
        tets = np.asarray(ds["cell_nodes"][:])
        times = np.asarray(ds["time"][:])
        fields = {name: np.asarray(ds[name][:]) for name in FIELDS}
    for item, path in _files(run).items():
        axis, level = "xyz".index(item[0]), float(item[2:])
        with netCDF4.Dataset(path) as sec:
            sec.set_auto_mask(False)
            names = sec["mesh2d"].node_coordinates.split()
            plane = np.column_stack([sec[n][:] for n in names])
            assert np.array_equal(sec["time"][:], times) and len(times) == 5
            points = np.insert(plane, axis, level, axis=1)
            tet, w = _barycentric_reference(coords, tets, points)
            for name in FIELDS:
                want = np.einsum("pk,tpk->tp", w, fields[name][:, tets[tet]])
                got = np.asarray(sec[name][:])
                scale = max(np.abs(fields[name]).max(), 1e-300)
                assert np.abs(got - want).max() <= 1e-12 * scale, (item, name)
            assert np.abs(sec["w"][-1]).max() > 1e-3               # the lee wave is there


def test_section_areas(run):
    """z = 1000 m lies above the 400 m mountain: the whole lx x ly domain; y = 0 is the box
    minus the area under the ground polyline at y = 0 (trapezoids of the ground nodes)."""
    with netCDF4.Dataset(run) as ds:
        x, y, z = (np.asarray(ds[c][:]) for c in "xyz")
    lx, ly, lz = np.ptp(x), np.ptp(y), z.max()
    ground = (y == 0.0) & (z == np.array([z[(x == xi) & (y == 0.0)].min() for xi in x]))
    gx, gz = x[ground], z[ground]
    order = np.argsort(gx)
    under = np.sum(np.diff(gx[order]) * 0.5 * (gz[order][1:] + gz[order][:-1]))
    for item, want in (("z=1000", lx * ly), ("y=0", lx * lz - under)):
        with netCDF4.Dataset(_files(run)[item]) as sec:
            names = sec["mesh2d"].node_coordinates.split()
            p = np.column_stack([sec[n][:] for n in names])[sec["face_nodes"][:]]
            signed = 0.5 * ((p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1])
                            - (p[:, 1, 1] - p[:, 0, 1]) * (p[:, 2, 0] - p[:, 0, 0]))
            assert signed.min() > 0.0                          # anticlockwise, no sliver
            assert signed.sum() == pytest.approx(want, rel=1e-12), item


def test_uxarray_and_xugrid_read_the_sections(run):
    import uxarray
    import xugrid

    with netCDF4.Dataset(run) as ds:
        n_time = len(ds.dimensions["time"])
    for item, path in _files(run).items():
        with netCDF4.Dataset(path) as sec:
            sec.set_auto_mask(False)
            w = np.asarray(sec["w"][:])
            n_faces = len(sec.dimensions["nfaces"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # uxarray: projected coordinates; xugrid: the
            uxds = uxarray.open_dataset(path, path)   # vertical section's (x, z) taken as (x, y)
            with xr.open_dataset(path) as plain:
                xuds = xugrid.UgridDataset(plain)
                assert xuds.ugrid.grid.n_face == n_faces
                np.testing.assert_array_equal(xuds["w"].values, w)
                assert xuds["w"].ugrid.grid.n_node == w.shape[1]
        assert uxds.uxgrid.n_face == n_faces and uxds["w"].shape == (n_time, w.shape[1])
        np.testing.assert_array_equal(uxds["w"].values, w)
        uxds.close()           # the data file; uxarray's grid keeps its own handle, which only
        del uxds               # garbage collection closes: here, not in a later test's run
        gc.collect()


def test_paraviews_ugrid_reader_reads_the_sections(run):
    """VTK's vtkNetCDFUGRIDReader (ParaView's "NetCDF UGRID reader"): every time step, every
    field, the node coordinates in the plane (the third one 0)."""
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline
    from vtkmodules.vtkIONetCDF import vtkNetCDFUGRIDReader

    for path in _files(run).values():
        with netCDF4.Dataset(path) as sec:
            sec.set_auto_mask(False)
            times = [float(t) for t in sec["time"][:]]
            names = sec["mesh2d"].node_coordinates.split()
            plane = np.column_stack([sec[n][:] for n in names])
            fields = {name: np.asarray(sec[name][:]) for name in FIELDS}
            n_faces = len(sec.dimensions["nfaces"])
        reader = vtkNetCDFUGRIDReader()
        reader.SetFileName(str(path))
        reader.UpdateInformation()
        assert list(reader.GetOutputInformation(0).Get(
            vtkStreamingDemandDrivenPipeline.TIME_STEPS())) == times
        for k, t in enumerate(times):
            reader.UpdateTimeStep(t)
            grid = reader.GetOutput()
            assert grid.GetNumberOfCells() == n_faces
            points = vtk_to_numpy(grid.GetPoints().GetData())
            np.testing.assert_array_equal(points[:, :2], plane)
            assert not points[:, 2].any()
            for name, values in fields.items():
                got = vtk_to_numpy(grid.GetPointData().GetArray(name))
                np.testing.assert_array_equal(got, values[k], err_msg=f"{path.name} {name} {t}")


def test_ugrid_and_cf_checkers(run, tmp_path):
    from compliance_checker.runner import CheckSuite, ComplianceChecker

    CheckSuite().load_all_available_checkers()
    for item, path in _files(run).items():
        report = tmp_path / f"{item}.json"
        passed, errors = ComplianceChecker.run_checker(
            str(path), ["UGRID:2.0", "cf:1.8"], verbose=0, criteria="strict",
            output_filename=str(report), output_format="json")
        result = json.loads(report.read_text())
        ugrid = [m for p in ("high_priorities", "medium_priorities", "low_priorities")
                 for c in result["UGRID:2.0"][p] for m in c["msgs"]]
        cf = [m for p in ("high_priorities", "medium_priorities", "low_priorities")
              for c in result["cf:1.8"][p] for m in c["msgs"]]
        assert ugrid == [], (item, ugrid)
        assert sorted(cf) == ["face_node_connectivity is not a valid cf_role value. It must be "
                              "one of timeseries_id, profile_id, trajectory_id",
                              "mesh_topology is not a valid cf_role value. It must be one of "
                              "timeseries_id, profile_id, trajectory_id"], (item, cf)


def test_restart_continues_the_sections_bit_for_bit(run, tmp_path, capsys):
    out = tmp_path / "run.nc"
    (tmp_path / "run.yaml").write_text(TINY % out)
    assert cli.main(["run", str(tmp_path / "run.yaml"), "--steps", "2"]) == 0
    assert cli.main(["run", str(tmp_path / "run.yaml")]) == 1       # files exist: refused
    assert "section file(s) of output.sections exist" in capsys.readouterr().err
    assert cli.main(["run", str(tmp_path / "run.yaml"), "--restart", str(out)]) == 0
    for item, path in _files(out).items():
        with netCDF4.Dataset(path) as got, netCDF4.Dataset(_files(run)[item]) as want:
            for name in ("time", "face_nodes", *FIELDS):
                assert np.array_equal(got[name][:], want[name][:]), (item, name)


def test_a_plane_outside_the_mesh(tmp_path, capsys):
    (tmp_path / "run.yaml").write_text((TINY % (tmp_path / "o.nc")).replace(
        "'z=1000', 'y=0'", "'z=99999'"))
    assert cli.main(["run", str(tmp_path / "run.yaml")]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith(
        "dycore: error: output.sections: the plane z = 99999 m does not cut the mesh (z from ")
    assert errors[0].endswith(" to 16000 m)")
