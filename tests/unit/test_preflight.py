"""Checks before a run's expensive part and the stability watch (issue 12), unit by unit."""
from __future__ import annotations

import math
import types
from pathlib import Path

import numpy as np
import pytest

from dycore import preflight
from dycore.errors import ConfigError, OutputError


# ---------------------------------------------------------------------------- output path
def test_output_path_new_file_in_a_missing_folder_is_fine(tmp_path):
    preflight.check_output_path(tmp_path / "a" / "b" / "out.nc", overwrite=False)
    assert not (tmp_path / "a").exists()          # the check creates nothing


def test_output_path_existing_file_needs_overwrite(tmp_path):
    out = tmp_path / "out.nc"
    out.write_text("x")
    with pytest.raises(OutputError, match=r"output file exists; pass --overwrite"):
        preflight.check_output_path(out, overwrite=False)
    preflight.check_output_path(out, overwrite=True)
    assert out.read_text() == "x"


def test_output_path_directory_and_file_as_folder(tmp_path):
    with pytest.raises(OutputError, match=r"is a directory; expected a file name"):
        preflight.check_output_path(tmp_path, overwrite=True)
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match=r"f is a file, not a folder"):
        preflight.check_output_path(tmp_path / "f" / "g" / "out.nc", overwrite=False)


# --------------------------------------------------------------------------------- memory
def _config(nx, ny, nz, source=None, split="mirror_y"):
    mesh = types.SimpleNamespace(nx=nx, ny=ny, nz=nz, split=split, file=None)
    return types.SimpleNamespace(mesh=mesh, source_path=source)


def test_memory_estimate_and_check():
    assert preflight.estimate_run_memory(1000) == (preflight.BASE_BYTES
                                                   + 1000 * preflight.BYTES_PER_TETRAHEDRON)
    preflight.check_memory(_config(20, 20, 12), available=10**9)        # 28,800 tets: ~0.4 GB
    with pytest.raises(ConfigError) as info:
        preflight.check_memory(_config(48, 48, 40, Path("run.yaml")), available=10**9)
    assert str(info.value) == (
        "run.yaml: mesh.nx, mesh.ny, mesh.nz = 48 x 48 x 40: 552,960 tetrahedra need about "
        "2.2 GB of memory (estimate: 300.0 MB + 3,500 bytes per tetrahedron), but 1.0 GB is "
        "available on this machine; use fewer cells")
    with pytest.raises(ConfigError, match="20,000 tetrahedra need about 370.0 MB"):
        preflight.check_memory(_config(10, 10, 10, split="symmetric_y"),   # 20 tets per cell
                               available=10**8)


def test_available_memory_is_found_here():
    available = preflight.available_memory()
    assert available is None or available > 0


# ------------------------------------------------------------------------------ stability
def test_inflow_speed():
    assert preflight.inflow_speed(types.SimpleNamespace(u0=-12.5)) == 12.5
    assert preflight.inflow_speed(types.SimpleNamespace(u0=0.0)) == 1.0    # at least 1 m/s
    assert preflight.inflow_speed(object()) == 1.0                          # case without u0


def test_courant_number_uses_the_smallest_horizontal_spacing():
    x, y, z = np.meshgrid([0.0, 100.0, 300.0], [0.0, 400.0], [0.0, 10.0, 20.0], indexing="ij")
    coords = np.column_stack([x.ravel(), y.ravel(), z.ravel()])
    assert preflight.courant_number(10.0, 20.0, coords) == pytest.approx(2.0)   # 10*20/100


def test_courant_number_from_element_extents():
    """Given the tets: the generated mesh's smallest spacing (every tet spans its cell), and a
    sensible one on a mesh whose node x values are not grid lines (a rotated copy)."""
    import dycore.cases.mountainwave3d as mw

    mesh = mw.build_mesh(mw.Parameters(), nx=6, ny=4, nz=2, dx_min=3000.0, dz_min=2000.0)
    grid = preflight.courant_number(10.0, 20.0, mesh.coords)
    assert preflight.courant_number(10.0, 20.0, mesh.coords, mesh.tets) == grid
    assert grid == pytest.approx(10.0 * 20.0 / 3000.0, rel=1e-12)
    c, s = np.cos(0.3), np.sin(0.3)
    turned = mesh.coords @ np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
    assert preflight.courant_number(10.0, 20.0, turned) > 100 * grid     # grid lines: nonsense
    assert grid < preflight.courant_number(10.0, 20.0, turned, mesh.tets) < 1.5 * grid
    # the spacing given (the set-up cache's) gives the same number; none positive gives 0
    assert mesh.min_horizontal_extent() == pytest.approx(3000.0, rel=1e-12)
    assert preflight.courant_number(10.0, 20.0, spacing=mesh.min_horizontal_extent()) == grid
    assert preflight.courant_number(10.0, 20.0, spacing=0.0) == 0.0


def test_the_courant_spacing_comes_from_the_setup_cache(tmp_path):
    """The second run of a mesh reads dx from the set-up cache: the same value, no gather."""
    from dycore.config import load_config
    from dycore.timestepping.simulation import Simulation

    cfg = load_config("configs/mountainwave3d_small.yaml", {"mesh": {"nx": 2, "ny": 2, "nz": 2}})
    first, second = (Simulation(cfg, setup_cache=tmp_path) for _ in range(2))
    dx = first.horizontal_spacing()
    assert "courant-spacing" in first.setup_cache.misses
    assert second.horizontal_spacing() == dx == first.mesh.min_horizontal_extent() > 0
    assert "courant-spacing" in second.setup_cache.hits
    assert "set-up cache: load Courant spacing" in second.timers.as_dict()


def test_watch_step_problems():
    watch = preflight.StabilityWatch(10.0, 10.0)
    assert watch.step_problem({"max_abs_w": 99.0, "kinetic_energy": 1.0,
                               "picard_change": [1e-3], "solver_iterations_pressure": 4}) is None
    assert watch.step_problem({"max_abs_w": 101.0}) == (
        "max|w| = 101 m/s exceeds stability.max_speed_factor x inflow speed = 10 x 10 m/s = "
        "100 m/s")
    assert watch.step_problem({"max_abs_w": 1.0, "kinetic_energy": math.nan}) == (
        "kinetic_energy = nan (non-finite)")


def test_watch_off_still_stops_on_nan():
    watch = preflight.StabilityWatch(0.0, 10.0)
    assert watch.step_problem({"max_abs_w": 1e9}) is None
    assert watch.step_problem({"max_abs_w": math.inf}) == "max_abs_w = inf (non-finite)"


def test_watch_fields_speed():
    watch = preflight.StabilityWatch(2.0, 10.0)
    fields = {"u": np.array([10.0, 12.0]), "v": np.array([0.0, 16.0]), "w": np.zeros(2)}
    assert watch.fields_problem(fields) is None                              # |u| = 20
    fields["w"][1] = 1.0
    assert watch.fields_problem(fields).startswith("max|u| = 20.02 m/s exceeds ")
    fields["u"][0] = np.nan
    assert watch.fields_problem(fields) == "the velocity has non-finite values"
