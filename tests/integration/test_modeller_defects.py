"""The five defects a modeller hit (issue 23), each on a real run of the tiny case:
``picard_iterations`` filled, a restart with an absolute ``mesh.file`` outside the working
directory, ``dycore plot --field u`` on its own scale, one CF ``time`` coordinate for
cf_xarray, and ``units`` on ``step``."""
from __future__ import annotations


import netCDF4
import numpy as np
import pytest

from dycore import cli

TINY = ("mesh: {%s}\n"
        "time: {dt: 10.0, t_end: 40.0, nonlinear_iterations: 3}\n"
        "backend: {name: cpu}\n"
        "output: {path: '%s', output_interval: 10.0, progress: false}\n")
GENERATED = "nx: 4, ny: 4, nz: 3, dx_min: 2000.0, dz_min: 1000.0"


@pytest.fixture(scope="module")
def run4(tmp_path_factory):
    """A 4-step run of the tiny case (a snapshot and a diagnostics record every step)."""
    folder = tmp_path_factory.mktemp("run4")
    out = folder / "run.nc"
    (folder / "run.yaml").write_text(TINY % (GENERATED, out))
    assert cli.main(["run", str(folder / "run.yaml")]) == 0
    return out


def test_picard_iterations_counts_the_iterations_done(run4):
    with netCDF4.Dataset(run4) as ds:
        ds.set_auto_mask(False)
        iterations = np.asarray(ds["picard_iterations"][:])
        change = np.asarray(ds["picard_change"][:])
        assert ds["step"][:].tolist() == [1, 2, 3, 4]
    done = np.isfinite(change).sum(axis=1)        # one value per Picard iteration done
    assert done.min() >= 1
    np.testing.assert_array_equal(iterations, done)
    assert iterations.dtype == np.int32 and iterations.max() <= 3


def test_cf_xarray_finds_one_time_coordinate(run4):
    import cf_xarray  # noqa: F401  (registers the .cf accessor)
    import xarray as xr

    with xr.open_dataset(run4) as ds:
        time = ds.cf["time"]                       # KeyError when two variables claim it
        assert time.name == "time" and time.sizes == {"time": 5}
        assert ds.cf.axes["T"] == ["time"]
    with netCDF4.Dataset(run4) as ds:
        assert ds["time"].standard_name == "time"
        assert not hasattr(ds["diag_time"], "standard_name")


def test_step_has_units(run4):
    with netCDF4.Dataset(run4) as ds:
        assert ds["step"].units == "1"


def test_restart_with_an_absolute_mesh_file_outside_the_working_directory(
        tmp_path, monkeypatch, run4):
    from dycore import cases
    from dycore.config import load_config
    from dycore.mesh import write_mesh

    meshes, work = tmp_path / "meshes", tmp_path / "work"
    meshes.mkdir(), work.mkdir()
    (work / "gen.yaml").write_text(TINY % (GENERATED + ", renumber: none", "unused.nc"))
    write_mesh(cases.build_config_mesh(load_config(work / "gen.yaml")), meshes / "box.msh")
    out = work / "file.nc"
    config = work / "file.yaml"
    config.write_text(TINY % (f"file: {meshes / 'box.msh'}", out))
    monkeypatch.chdir(work)                         # the mesh lies outside the working directory
    assert cli.main(["run", str(config), "--steps", "2"]) == 0
    with netCDF4.Dataset(out) as ds:
        assert "file: box.msh" in ds.config         # the file keeps the file name only
    assert cli.main(["run", str(config), "--restart", str(out)]) == 0
    with netCDF4.Dataset(out) as ds, netCDF4.Dataset(run4) as straight:
        ds.set_auto_mask(False)
        assert ds["snapshot_step"][:].tolist() == [0, 1, 2, 3, 4]
        # the file's mesh is the generated one (same numbering): the same fields, bit for bit
        for name in ("u", "w", "p", "theta_prime"):
            assert np.array_equal(ds[name][:], straight[name][:]), name


def test_restart_still_refuses_another_mesh_file_name(tmp_path, monkeypatch, capsys):
    """The comparison is of the stored form, not switched off: another file name is refused."""
    from dycore import cases
    from dycore.config import load_config
    from dycore.mesh import write_mesh

    (tmp_path / "gen.yaml").write_text(TINY % (GENERATED + ", renumber: none", "unused.nc"))
    mesh = cases.build_config_mesh(load_config(tmp_path / "gen.yaml"))
    write_mesh(mesh, tmp_path / "a.msh")
    write_mesh(mesh, tmp_path / "b.msh")
    out = tmp_path / "a.nc"
    (tmp_path / "a.yaml").write_text(TINY % (f"file: {tmp_path / 'a.msh'}", out))
    (tmp_path / "b.yaml").write_text(TINY % (f"file: {tmp_path / 'b.msh'}", out))
    monkeypatch.chdir(tmp_path.parent)
    assert cli.main(["run", str(tmp_path / "a.yaml"), "--steps", "1"]) == 0
    capsys.readouterr()
    assert cli.main(["run", str(tmp_path / "b.yaml"), "--restart", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mesh.file" in err and "b.msh" in err


def test_plot_u_gets_its_own_scale_and_contour_units(run4, tmp_path, monkeypatch):
    from dycore.io import plot

    figures = {}

    def keep(fig, path, dpi):
        figures[path.name] = fig
        return path

    monkeypatch.setattr(plot, "save_png", keep)
    with netCDF4.Dataset(run4) as ds:
        u = np.asarray(ds["u"][-1])
        w = np.asarray(ds["w"][-1])
    assert u.min() > 5.0                            # the inflow: u is far from 0 everywhere
    for field in ("u", "w", "q_v"):
        plot.plot_w(run4, tmp_path / f"{field}.png", field=field, xlim=None, ylim=None,
                    zlim=None, z_level=2000.0)
    left = figures["u.png"].axes[0]
    vmin, vmax = left.collections[0].get_clim()
    assert u.min() - 1e-9 <= vmin < vmax <= u.max() + 1e-9   # the field's range, not ±max|u|
    assert "contours every" in left.get_title() and "m s-1" in left.get_title()
    wmin, wmax = figures["w.png"].axes[0].collections[0].get_clim()
    assert wmin == -wmax and 0 < wmax <= np.abs(w).max()     # w: symmetric around 0
    qmin, qmax = figures["q_v.png"].axes[0].collections[0].get_clim()
    assert qmin >= 0.0 and "kg kg-1" in figures["q_v.png"].axes[0].get_title()


def test_colour_scale_values():
    from dycore.io.plot import colour_scale

    values = 10.0 + np.linspace(-0.5, 0.5, 1001)           # u = U + u'
    scale = colour_scale(values, diverging=False)
    assert scale.vmin == pytest.approx(9.51) and scale.vmax == pytest.approx(10.49)
    assert scale.step == 0.2 and scale.levels[0] <= 9.51 and scale.levels[-1] >= 10.49
    scale = colour_scale(values - 10.0, diverging=True)
    assert (scale.vmin, scale.vmax) == (pytest.approx(-0.495), pytest.approx(0.495))
    assert 0.0 not in scale.levels and scale.step == 0.1
    flat = colour_scale(np.full(10, 0.0), diverging=False)
    assert flat.vmin < 0.0 < flat.vmax
