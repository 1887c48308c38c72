"""The Schär case (cases/schar): parameters, terrain, sponge, the symmetric_y channel mesh,
the strong free-slip walls (two constraints on the wall-ground and wall-lid edges), w independent
of y on a tiny channel, and `dycore verify` picking the case's 2-D reference."""
import math
from pathlib import Path

import numpy as np
import pytest

import dycore
from dycore.assembly.no_normal_flow import build_no_normal_flow
from dycore.assembly.sparsity import build_sparsity
from dycore.cases import available_cases, load_case
from dycore.cases import schar
from dycore.checks.convergence import ConvergenceStudy, fitted_order, level_overrides
from dycore.checks.verify import verify, y_dependence
from dycore.mesh import FaceTag

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "schar_tiny.yaml"


def test_the_case_is_a_module_with_the_case_interface():
    assert {"mountainwave3d", "schar"} <= set(available_cases())
    case = load_case("schar")
    for name in ("Parameters", "build_mesh", "sponge", "theta_bar", "dtheta_bar_dz",
                 "reference_state", "initial_state", "DIRICHLET_TAGS", "NO_NORMAL_FLOW_TAGS",
                 "ground_normals", "linear_reference"):
        assert hasattr(case, name), name
    assert set(case.NO_NORMAL_FLOW_TAGS) == {FaceTag.GROUND, FaceTag.TOP, FaceTag.SOUTH,
                                             FaceTag.NORTH}
    assert set(case.DIRICHLET_TAGS) == {FaceTag.WEST, FaceTag.EAST}


def test_parameters_are_the_papers():
    p = schar.Parameters()
    assert (p.h0, p.a, p.wavelength, p.u0, p.brunt_vaisala) == (250.0, 5000.0, 4000.0, 10.0, 0.01)
    assert p.nondimensional_height == pytest.approx(0.25)
    assert p.vertical_wavelength == pytest.approx(2 * math.pi * 1000.0)
    with pytest.raises(ValueError, match="h0"):
        schar.Parameters(h0=30000.0)
    with pytest.raises(ValueError, match="sponge_lateral_width"):
        schar.Parameters(sponge_lateral_width=30000.0)
    with pytest.raises(ValueError, match="extra"):
        schar.Parameters(mountain=1.0)


def test_terrain_and_its_normals():
    p = schar.Parameters()
    x = np.linspace(-20_000.0, 20_000.0, 161)
    h = schar.terrain(p, x, np.full_like(x, 123.0))
    assert h[80] == 250.0 and np.all(h >= 0.0) and np.all(h <= 250.0)
    assert np.array_equal(h, schar.terrain(p, x))                       # no y-dependence
    coords = np.column_stack([x, np.zeros_like(x), schar.terrain(p, x)])
    n, on = schar.ground_normals(p, coords)
    assert on.all() and np.allclose(np.linalg.norm(n, axis=1), 1.0, atol=1e-15)
    tangent = np.column_stack([np.ones_like(x), np.zeros_like(x), schar.terrain_dhdx(p, x)])
    assert np.abs(np.sum(n * tangent, axis=1)).max() < 1e-15 and np.all(n[:, 2] < 0)


def test_sponge_top_and_ends_only():
    p = schar.Parameters()
    pts = np.array([[0.0, 0.0, 5000.0], [0.0, 500.0, 5000.0], [0.0, 0.0, 21000.0],
                    [-25000.0, 0.0, 5000.0], [25000.0, -500.0, 3000.0], [-15000.0, 0.0, 10000.0],
                    [20000.0, 0.0, 5000.0], [0.0, 0.0, 15500.0]])
    s = schar.sponge(p, pts)
    smax = p.sponge_max
    assert s[0] == 0.0 and s[1] == 0.0 and s[5] == 0.0                   # walls: no sponge
    assert s[2] == pytest.approx(smax) and s[3] == pytest.approx(smax)
    assert s[4] == pytest.approx(smax)
    assert s[6] == pytest.approx(smax * math.sin(math.pi / 4) ** 2)      # half-way in
    assert s[7] == pytest.approx(smax * 0.5)


def _tiny_mesh(split="symmetric_y", ny=2):
    p = schar.Parameters(ly=12500.0)
    return p, schar.build_mesh(p, nx=8, ny=ny, nz=4, dx_min=6250.0, dz_min=5250.0, split=split,
                               renumber="none")


def test_symmetric_y_mesh_every_cell_is_its_own_mirror_image():
    p, mesh = _tiny_mesh()
    nx, ny, nz = 8, 2, 4
    assert mesh.nele == 20 * nx * ny * nz
    assert mesh.nnodes == ((nx + 1) * (ny + 1) * (nz + 1) + nx * ny * nz
                           + (nx + 1) * ny * nz + nx * ny * (nz + 1))
    q = mesh.coords[mesh.tets]
    vol = np.einsum("ij,ij->i", q[:, 1] - q[:, 0],
                    np.cross(q[:, 2] - q[:, 0], q[:, 3] - q[:, 0])) / 6.0
    assert vol.min() > 0.0
    xs = np.linspace(-p.lx / 2, p.lx / 2, nx + 1)                       # 6.25 km cells
    h, hm = schar.terrain(p, xs), schar.terrain(p, 0.5 * (xs[1:] + xs[:-1]))
    under = p.ly * np.sum((h[:-1] + hm + h[1:]) / 3.0) * (p.lx / nx)   # 4 ground triangles/face
    assert vol.sum() == pytest.approx(p.lx * p.ly * p.lz - under, rel=1e-12)   # no gap, no overlap
    c = mesh.coords
    key = lambda pts: tuple(sorted(map(tuple, np.round(pts, 6).tolist())))   # noqa: E731
    tets = {key(c[t]) for t in mesh.tets}
    dy = p.ly / ny
    for t in mesh.tets:
        y_mid = -p.ly / 2 + dy * (math.floor((c[t, 1].mean() + p.ly / 2) / dy) + 0.5)
        mirrored = c[t].copy()
        mirrored[:, 1] = 2 * y_mid - mirrored[:, 1]
        assert key(mirrored) in tets
    walls = mesh.face_tags == int(FaceTag.SOUTH)
    assert np.allclose(c[mesh.faces[walls], 1], -p.ly / 2)
    ground = mesh.tagged_nodes([FaceTag.GROUND])
    assert np.allclose(c[ground, 2], schar.terrain(p, c[ground, 0]), atol=1e-9)


def test_walls_get_two_constraints_on_their_edges():
    p, mesh = _tiny_mesh()
    sp_ = build_sparsity(mesh.tets, mesh.nnodes)
    west_east = mesh.tagged_nodes([FaceTag.WEST, FaceTag.EAST])
    nnf = build_no_normal_flow(mesh, sp_, schar.NO_NORMAL_FLOW_TAGS, west_east,
                               {FaceTag.GROUND: lambda x: schar.ground_normals(p, x)})
    c = mesh.coords[nnf.nodes]
    frames = nnf.frames.reshape(-1, 3, 3)
    on_wall = np.abs(np.abs(c[:, 1]) - p.ly / 2) < 1e-9
    on_ground = np.isin(nnf.nodes, mesh.tagged_nodes([FaceTag.GROUND]))
    on_top = np.abs(c[:, 2] - p.lz) < 1e-9
    edge = on_wall & (on_ground | on_top)
    assert edge.sum() > 0 and np.array_equal(nnf.fixed == 2, edge)
    exact, _ = schar.ground_normals(p, c)
    g = edge & on_ground
    assert np.abs(frames[g, 0] - exact[g]).max() < 1e-15              # n1: the exact terrain's
    assert np.abs(np.abs(frames[edge, 1, 1]) - 1.0).max() < 1e-15     # n2: ±e_y
    walls_only = on_wall & ~edge
    assert np.abs(np.abs(frames[walls_only, 0, 1]) - 1.0).max() < 1e-15


@pytest.fixture(scope="module")
def tiny_run():
    cfg = dycore.load_config(TINY)
    sim = dycore.Simulation(cfg)
    sim.run(steps=5)
    return sim


@pytest.mark.slow
def test_w_does_not_depend_on_y_in_the_channel(tiny_run):
    sim = tiny_run
    u = np.asarray(sim.state.u)
    w, v = u[:, 2], u[:, 1]
    assert np.abs(w).max() > 0.1                                          # the hill forces w
    d = y_dependence(sim.mesh.coords, w)
    assert d["columns"] > 500 and d["relative"] < 1e-10
    assert y_dependence(sim.mesh.coords, np.asarray(sim.state.theta_prime))["relative"] < 1e-10
    assert np.abs(v).max() < 1e-12 * np.abs(w).max()
    ground = np.setdiff1d(sim.mesh.tagged_nodes([FaceTag.GROUND]),
                          sim.mesh.tagged_nodes(list(schar.DIRICHLET_TAGS)))
    n, _ = schar.ground_normals(sim.params, sim.mesh.coords[ground])
    assert np.abs(np.sum(n * u[ground], axis=1)).max() < 1e-12 * np.abs(u).max()   # kinematic


@pytest.mark.slow
def test_the_kuhn_mirror_split_is_not_enough():
    """With split mirror_y (only mirror-symmetric about y = 0) w depends on y at O(1): the
    check above can fail."""
    cfg = dycore.load_config(TINY, **{"mesh.split": "mirror_y"})
    sim = dycore.Simulation(cfg)
    sim.run(steps=5)
    w = np.asarray(sim.state.u)[:, 2]
    d = y_dependence(sim.mesh.coords, w)
    assert d["relative"] > 1e-2 and d["odd"] < 1e-10


@pytest.mark.slow
def test_verify_uses_the_schar_reference(tmp_path):
    from dycore.checks.verify import plot_verify
    from dycore.timestepping.simulation import run_from_config

    out = tmp_path / "tiny.nc"
    cfg = dycore.load_config(TINY, **{"output.path": str(out), "output.progress": False,
                                      "time.t_end": 30.0, "output.output_interval": 10.0})
    run_from_config(cfg)
    result = verify(out, t_start=0.0)
    assert result.case == "schar" and result.dimensions == 2
    assert "Schär" in result.title and result.half_width == 15_000.0
    assert {"section 1-9 km", "line z = 2 km", "line z = 4 km", "line z = 6 km"} <= set(result.rows)
    assert result.parameters["wavelength"] == 4000.0
    assert result.ydep["relative"] < 1e-10 and not result.antisymmetry
    table = result.table()
    assert "y-dependence of w" in table and "line z = 6 km" in table
    png = plot_verify(result, tmp_path / "v.png")
    assert png.stat().st_size > 10_000


def test_convergence_levels_and_order():
    cfg = dycore.load_config(TINY)
    over = level_overrides(cfg, 2, schar.REFINE_AXES)
    assert over == {"mesh.nx": 80, "mesh.nz": 40, "mesh.dx_min": 625.0, "mesh.dz_min": 525.0,
                    "time.dt": 2.5}
    assert level_overrides(cfg, 0) == {}
    assert level_overrides(cfg, 1)["mesh.ny"] == 4                      # 3-D default: x, y, z
    assert fitted_order([0.4, 0.1, 0.025]) == pytest.approx(2.0, abs=1e-12)
    assert fitted_order([0.4, 0.2, 0.1]) == pytest.approx(1.0, abs=1e-12)
    study = ConvergenceStudy("c.yaml", "schar", levels=[{}, {}, {}, {}],
                             errors=[0.8, 0.2, 0.05, 0.0125])
    assert study.orders == pytest.approx([2.0, 2.0, 2.0]) and study.order == pytest.approx(2.0)


@pytest.mark.slow
def test_convergence_study_runs_one_level_and_reuses_finished_files(tmp_path):
    from dycore.checks.convergence import convergence_study

    cfg = tmp_path / "c.yaml"
    cfg.write_text(TINY.read_text().replace("t_end: 300.0", "t_end: 10.0")
                   .replace("output_interval: 100.0", "output_interval: 10.0"))
    study = convergence_study(cfg, levels=3, workdir=tmp_path / "w", t_start=0.0, only_level=0)
    done = tmp_path / "w" / "c_level0.nc"
    assert done.exists() and not (tmp_path / "w" / "c_level1.nc").exists()
    assert 0.0 < study.errors[0] < 10.0 and math.isnan(study.errors[1])
    assert [lev["tets"] for lev in study.levels] == [8000, 32000, 128000]
    stamp = done.stat().st_mtime_ns
    again = convergence_study(cfg, levels=3, workdir=tmp_path / "w", t_start=0.0, run=False)
    assert done.stat().st_mtime_ns == stamp and again.errors[0] == study.errors[0]
    assert "fitted order" in again.table()
    # a level killed before t_end (here: t_end raised) is continued from its last snapshot
    from dycore.io.netcdf import open_output

    cfg.write_text(cfg.read_text().replace("t_end: 10.0", "t_end: 20.0"))
    with open_output(done, ("w",)) as ds:
        first = np.asarray(ds.variables["w"][1, :])
    longer = convergence_study(cfg, levels=3, workdir=tmp_path / "w", t_start=0.0, only_level=0,
                               norm="section 1-3 km")
    with open_output(done, ("time", "w")) as ds:
        assert np.array_equal(np.asarray(ds.variables["time"][:]), [0.0, 10.0, 20.0])
        assert np.array_equal(np.asarray(ds.variables["w"][1, :]), first)
    assert longer.errors[0] == longer.rows[0]["section 1-3 km"]["nrms"]
    assert "t = 0-20 s" in longer.table()
    from dycore.errors import ConfigError
    with pytest.raises(ConfigError, match="convergence norm"):
        convergence_study(cfg, levels=3, workdir=tmp_path / "w", norm="section 0-1 km")
