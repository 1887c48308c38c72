"""Plane sections of P1 fields (exact for linear fields, masked outside the mesh), the ground
surface (terrain contours on the horizontal panel) and plot_w."""
from __future__ import annotations

import itertools
import types

import numpy as np
import pytest

from dycore.errors import OutputError
from dycore.io.netcdf import SnapshotWriter
from dycore.io.plot import plane_section, plot_w, sample_section

LX, LY, LZ = (-3.0, 3.0), (-3.0, 3.0), 2.0


def _bump(x, y):
    return 0.6 / (1.0 + x * x + y * y) ** 1.5


def box_mesh(nx, ny, nz, terrain=None):
    """Terrain-following structured mesh: each hexahedron split into 6 tetrahedra (Kuhn)."""
    x, y, s = np.linspace(*LX, nx + 1), np.linspace(*LY, ny + 1), np.linspace(0, 1, nz + 1)
    X, Y, S = np.meshgrid(x, y, s, indexing="ij")
    H = terrain(X, Y) if terrain is not None else np.zeros_like(X)
    coords = np.column_stack([X.ravel(), Y.ravel(), (H + S * (LZ - H)).ravel()])
    idx = np.arange(len(coords)).reshape(nx + 1, ny + 1, nz + 1)
    corner = [idx[(b & 1):nx + (b & 1), (b >> 1 & 1):ny + (b >> 1 & 1),
                  (b >> 2 & 1):nz + (b >> 2 & 1)].ravel() for b in range(8)]
    tets = np.concatenate([np.column_stack([corner[0], corner[p[0]], corner[p[0] + p[1]],
                                            corner[7]])
                           for p in itertools.permutations((1, 2, 4))])
    X0 = coords[tets]
    flip = np.linalg.det(X0[:, 1:] - X0[:, :1]) < 0
    tets[flip] = tets[flip][:, [0, 2, 1, 3]]
    return coords, tets.astype(np.int32)


def _linear(p):
    return 0.3 + 1.1 * p[..., 0] - 0.7 * p[..., 1] + 2.3 * p[..., 2]


def _area(section):
    p = section.points[section.triangles]
    e1, e2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
    return 0.5 * np.abs(e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]).sum()


@pytest.mark.parametrize("axis, level", [(1, 0.0), (1, 0.37), (2, 1.23), (0, -1.5)])
def test_section_of_linear_field_is_exact(axis, level):
    coords, tets = box_mesh(6, 6, 4, terrain=_bump)
    section = plane_section(coords, tets, _linear(coords), axis=axis, level=level)
    assert len(section.triangles) > 0
    xyz = np.empty((len(section.points), 3))
    xyz[:, axis] = level
    xyz[:, list(section.in_plane_axes)] = section.points
    np.testing.assert_allclose(section.values, _linear(xyz), rtol=0, atol=1e-10)

    # sample a regular grid of points in the plane: linear interpolation inside the section
    lo, hi = section.points.min(axis=0), section.points.max(axis=0)
    a, b = np.meshgrid(np.linspace(lo[0], hi[0], 41), np.linspace(lo[1], hi[1], 37))
    sampled = sample_section(section, a, b)
    grid = np.empty(a.shape + (3,))
    grid[..., axis] = level
    grid[..., section.in_plane_axes[0]], grid[..., section.in_plane_axes[1]] = a, b
    inside = ~np.ma.getmaskarray(sampled)
    assert inside.mean() > 0.8
    np.testing.assert_allclose(sampled[inside], _linear(grid)[inside], rtol=0, atol=1e-10)


@pytest.mark.parametrize("axis, level", [(1, 0.0), (1, 0.37), (2, 0.5), (2, 2.0 / 3.0)])
def test_section_covers_the_cut_exactly_once(axis, level):
    # flat box: the cut is a rectangle; node planes (y = 0, z = 2/3) must not double or drop faces
    coords, tets = box_mesh(6, 6, 3)
    section = plane_section(coords, tets, coords[:, 0], axis=axis, level=level)
    width = (LX[1] - LX[0]) * (LZ if axis == 1 else LY[1] - LY[0])
    assert _area(section) == pytest.approx(width, rel=1e-12)
    # the outline is the rectangle's perimeter only: no interior cracks
    seg = section.points[section.boundary_edges]
    perimeter = np.linalg.norm(seg[:, 1] - seg[:, 0], axis=1).sum()
    span = np.ptp(section.points, axis=0)
    assert perimeter == pytest.approx(2 * span.sum(), rel=1e-12)


def test_points_below_terrain_are_masked():
    coords, tets = box_mesh(12, 12, 6, terrain=_bump)
    section = plane_section(coords, tets, _linear(coords), axis=1, level=0.0)
    # the ground at x = y = 0 is the bump top h = 0.6 (a mesh node); z = 0.3 is below it
    below = sample_section(section, np.array([0.0]), np.array([0.3]))
    above = sample_section(section, np.array([0.0]), np.array([0.9]))
    assert np.ma.getmaskarray(below)[0]
    assert above[0] == pytest.approx(_linear(np.array([0.0, 0.0, 0.9])), abs=1e-10)
    # the section's lowest point at x = 0 is the terrain
    at_x0 = np.isclose(section.points[:, 0], 0.0)
    assert section.points[at_x0, 1].min() == pytest.approx(_bump(0.0, 0.0), abs=1e-12)


def test_plane_missing_the_mesh_gives_empty_section():
    coords, tets = box_mesh(2, 2, 2)
    section = plane_section(coords, tets, coords[:, 0], axis=2, level=5.0)
    assert section.triangles.shape == (0, 3)
    assert np.ma.getmaskarray(sample_section(section, np.zeros(3), np.zeros(3))).all()


def _write_run(path, coords, tets, w):
    with SnapshotWriter(path, types.SimpleNamespace(coords=coords, tets=tets),
                        config_yaml="", version="0") as writer:
        writer.write_snapshot(0.0, {"w": np.zeros(len(coords))})
        writer.write_snapshot(1500.0, {"w": w})


@pytest.mark.slow
def test_plot_w_writes_png(tmp_path):
    coords, tets = box_mesh(16, 16, 8, terrain=_bump)
    w = np.sin(coords[:, 0]) * np.cos(coords[:, 2])
    path = tmp_path / "run.nc"
    _write_run(path, coords, tets, w)
    png = plot_w(path, z_level=1.0)
    assert png == tmp_path / "run_w.png"
    data = png.read_bytes()
    assert len(data) > 10_000 and data[:8] == b"\x89PNG\r\n\x1a\n"
    other = plot_w(path, tmp_path / "figs" / "w.png", z_level=0.5)
    assert other.stat().st_size > 0


def test_plot_w_errors(tmp_path):
    coords, tets = box_mesh(4, 4, 2)
    path = tmp_path / "run.nc"
    _write_run(path, coords, tets, coords[:, 0])
    with pytest.raises(OutputError, match=r"plane z = 3000 m does not cut the mesh"):
        plot_w(path)                                  # the default 3 km is above this toy box
    with pytest.raises(OutputError, match="cannot open"):
        plot_w(tmp_path / "absent.nc")


def test_nice_interval_and_window():
    from dycore.io.plot import _window, nice_interval

    assert [nice_interval(v) for v in (2.2, 0.45, 1.0, 7.0)] == [0.5, 0.1, 0.2, 2.0]
    assert _window((-1.0, 1.0), -3.0, 3.0) == (-1.0, 1.0)
    assert _window((2.0, -5.0), -3.0, 3.0) == (-3.0, 2.0)          # order and clipping
    assert _window((10.0, 20.0), -3.0, 3.0) == (-3.0, 3.0)         # misses: the whole range
    assert _window(None, -3.0, 3.0) == (-3.0, 3.0)


@pytest.mark.slow
def test_plot_field_at_a_time_and_the_diagnostics(tmp_path):
    from dycore.io.netcdf import read_last_snapshot
    from dycore.io.plot import plot_diagnostics

    coords, tets = box_mesh(8, 8, 4, terrain=_bump)
    path = tmp_path / "run.nc"
    with SnapshotWriter(path, types.SimpleNamespace(coords=coords, tets=tets),
                        config_yaml="", version="0") as writer:
        writer.write_snapshot(0.0, {"w": np.zeros(len(coords)), "u": coords[:, 0]})
        for step in range(1, 4):
            writer.write_diagnostics(step, 10.0 * step, {"max_abs_w": 0.1 * step,
                                                         "kinetic_energy": 5.0 + step})
        writer.write_snapshot(30.0, {"w": coords[:, 2], "u": 2.0 * coords[:, 0]})
    assert read_last_snapshot(path, at=12.0)[0] == 0.0
    assert read_last_snapshot(path, at=29.0)[0] == 30.0
    t, f, _, _ = read_last_snapshot(path, fields=("u",), at=1.0)
    np.testing.assert_array_equal(f["u"], coords[:, 0])
    png = plot_w(path, field="u", at=0.0, z_level=1.0, xlim=(-1.0, 1.0))
    assert png.name == "run_u.png" and png.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(OutputError, match=r"--field 'vorticity': expected one of u, v, w"):
        plot_w(path, field="vorticity", z_level=1.0)
    diag = plot_diagnostics(path)
    assert diag.name == "run_diagnostics.png" and diag.stat().st_size > 10_000


def test_plot_diagnostics_of_a_file_without_steps(tmp_path):
    from dycore.io.plot import plot_diagnostics

    coords, tets = box_mesh(2, 2, 2)
    path = tmp_path / "run.nc"
    _write_run(path, coords, tets, coords[:, 0])
    with pytest.raises(OutputError, match="holds no time step yet"):
        plot_diagnostics(path)


def test_ground_surface_is_the_terrain():
    from dycore.io.plot import ground_surface

    coords, tets = box_mesh(8, 8, 4, terrain=_bump)
    ground = ground_surface(coords, tets)
    assert ground.triangles.shape == (2 * 8 * 8, 3) and ground.xy.shape == (9 * 9, 2)
    # the ground nodes are the z = h(x, y) layer, exactly
    np.testing.assert_array_equal(ground.height, _bump(ground.xy[:, 0], ground.xy[:, 1]))
    p = ground.xy[ground.triangles]
    e1, e2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
    area = 0.5 * np.abs(e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]).sum()
    assert area == pytest.approx((LX[1] - LX[0]) * (LY[1] - LY[0]), rel=1e-12)
    flat = ground_surface(*box_mesh(3, 3, 2))
    assert flat.triangles.shape == (18, 3) and not flat.height.any()


def test_terrain_on_the_horizontal_panel():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from dycore.io.plot import _draw_terrain_contours, ground_surface

    coords, tets = box_mesh(16, 16, 4, terrain=_bump)
    ground = ground_surface(coords, tets)
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.set_xlim(-3e-3, 3e-3)          # km: the box is 6 m wide
    ax.set_ylim(-3e-3, 3e-3)
    # h from 0.0072 to 0.6 m: interval 0.2 m -> contours at 0.2 and 0.4 m
    assert _draw_terrain_contours(ax, ground, z_level=0.5) == "terrain (brown) every 0.2 m"
    filled, lines = ax.collections[0], ax.collections[1]
    assert list(filled.levels[:1]) == [0.5]               # grey where the ground is above z
    assert list(lines.levels) == [0.2, 0.4]
    assert [t.get_text() for t in ax.texts] and all(t.get_text() in ("0.2 m", "0.4 m")
                                                    for t in ax.texts)
    flat_ax = Figure().subplots()
    assert _draw_terrain_contours(flat_ax, ground_surface(*box_mesh(3, 3, 2)), 1.0) == \
        "flat ground at z = 0 m"


def test_nodes_a_round_off_off_the_plane_leave_no_cracks():
    """Nodes 1e-13 m off the plane y = 0 (as in a gmsh mesh) used to give section vertices a
    round-off apart, whose sliver triangles were dropped: cracks drawn as terrain."""
    coords, tets = box_mesh(6, 6, 3)
    on = coords[:, 1] == 0.0
    coords[on, 1] += np.random.default_rng(1).choice([-1e-13, 1e-13], on.sum())
    section = plane_section(coords, tets, coords[:, 0], axis=1, level=0.0)
    assert _area(section) == pytest.approx(6.0 * LZ, rel=1e-12)
    seg = section.points[section.boundary_edges]
    assert np.linalg.norm(seg[:, 1] - seg[:, 0], axis=1).sum() == pytest.approx(2 * (6.0 + LZ),
                                                                                 rel=1e-12)
