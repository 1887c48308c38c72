"""The mountainwave3D case definition (dycore.cases.mountainwave3d) and case loading (cases)."""
import math

import numpy as np
import pydantic
import pytest

from dycore import cases
from dycore.cases import available_cases, load_case
from dycore.errors import ConfigError, MeshError
from dycore.mesh import FaceTag, Mesh, bandwidth

mw = load_case("mountainwave3d")


@pytest.fixture(scope="module")
def params():
    return mw.Parameters()


# ---------------------------------------------------------------------------- loading
def test_load_case():
    assert "mountainwave3d" in available_cases()
    assert load_case("mountainwave3d") is cases.mountainwave3d
    assert mw.NAME == "mountainwave3d"
    with pytest.raises(ConfigError, match=r"unknown case 'nope'.*mountainwave3d"):
        load_case("nope")
    with pytest.raises(ConfigError, match="mountainwave3d"):
        load_case("mountainwave3d.os")
    with pytest.raises(ConfigError):
        load_case(None)


# ------------------------------------------------------------------------- parameters
def test_parameter_defaults(params):
    assert (params.lx, params.ly, params.lz) == (60000.0, 60000.0, 16000.0)
    assert (params.h0, params.a, params.brunt_vaisala) == (400.0, 1000.0, 0.01)
    assert (params.theta0, params.g, params.u0) == (293.15, 9.81, 10.0)
    assert (params.sponge_top_base, params.sponge_lateral_width) == (10000.0, 10000.0)
    assert params.sponge_max == pytest.approx(1.0 / 150.0)
    assert (params.q_v_surface, params.q_v_scale_height) == (0.01, 2500.0)
    assert params.nondimensional_width == pytest.approx(1.0)
    assert params.nondimensional_height == pytest.approx(0.4)
    assert params.vertical_wavelength == pytest.approx(2 * math.pi * 1000.0)


def test_parameter_descriptions_have_units():
    for name, field in mw.Parameters.model_fields.items():
        assert field.description and "[" in field.description and "]" in field.description, name


def test_parameter_validation():
    with pytest.raises(pydantic.ValidationError, match="extra"):
        mw.Parameters(N=0.02)
    with pytest.raises(pydantic.ValidationError):
        mw.Parameters(lx=-1.0)
    with pytest.raises(pydantic.ValidationError, match="h0"):
        mw.Parameters(h0=20000.0)
    with pytest.raises(pydantic.ValidationError, match="sponge_top_base"):
        mw.Parameters(sponge_top_base=17000.0)
    with pytest.raises(pydantic.ValidationError, match="sponge_lateral_width"):
        mw.Parameters(sponge_lateral_width=31000.0)
    p = mw.Parameters(u0=5.0, brunt_vaisala=0.02)
    assert p.nondimensional_height == pytest.approx(1.6)


# ------------------------------------------------------------------------------ terrain
def test_terrain(params):
    assert mw.terrain(params, 0.0, 0.0) == pytest.approx(400.0)
    assert mw.terrain(params, 1000.0, 0.0) == pytest.approx(400.0 / 2 ** 1.5)
    assert mw.terrain(params, 0.0, -1000.0) == pytest.approx(141.42135623730950)
    x = np.array([[0.0, 3000.0], [30000.0, -30000.0]])
    h = mw.terrain(params, x, x.T)
    assert h.shape == (2, 2) and h[1, 1] == pytest.approx(400.0 / (1 + 1800.0) ** 1.5)


# --------------------------------------------------------------------------------- mesh
def test_build_mesh_small(params):
    m = mw.build_mesh(params, nx=8, ny=6, nz=5, dx_min=1000.0, dz_min=500.0)
    assert isinstance(m, Mesh)
    assert (m.nnodes, m.nele) == (9 * 7 * 6, 6 * 8 * 6 * 5)
    m.check()
    g = m.tagged_nodes([FaceTag.GROUND])
    c = m.coords[g]
    np.testing.assert_array_equal(c[:, 2], mw.terrain(params, c[:, 0], c[:, 1]))
    assert c[:, 2].max() == pytest.approx(400.0)          # the peak is a node (even nx, ny)
    assert np.all(m.coords[m.tagged_nodes([FaceTag.TOP]), 2] == 16000.0)
    n = mw.build_mesh(params, nx=8, ny=6, nz=5, dx_min=1000.0, dz_min=500.0, renumber="none")
    s = mw.build_mesh(params, nx=8, ny=6, nz=5, dx_min=1000.0, dz_min=500.0, shuffle=True,
                      seed=3)
    for other in (n, s):
        np.testing.assert_array_equal(np.sort(other.signed_volumes()),
                                      np.sort(m.signed_volumes()))
    assert bandwidth(s) > bandwidth(m)
    with pytest.raises(ConfigError, match="renumber"):
        mw.build_mesh(params, nx=8, ny=6, nz=5, dx_min=1000.0, dz_min=500.0, renumber="metis")
    with pytest.raises(MeshError, match="dx_min"):
        mw.build_mesh(params, nx=8, ny=6, nz=5, dx_min=9000.0, dz_min=500.0)


def test_boundary_tag_groups():
    assert set(mw.DIRICHLET_TAGS) | set(mw.NO_NORMAL_FLOW_TAGS) == set(FaceTag)
    assert not set(mw.DIRICHLET_TAGS) & set(mw.NO_NORMAL_FLOW_TAGS)
    assert mw.NO_NORMAL_FLOW_TAGS == (FaceTag.GROUND, FaceTag.TOP)


# ------------------------------------------------------------------------------- sponge
def test_sponge_values(params):
    smax = params.sponge_max
    pts = np.array([
        [0.0, 0.0, 0.0],            # interior, ground
        [19999.0, -19999.0, 9999.0],  # interior corner of the undamped box
        [0.0, 0.0, 16000.0],        # lid
        [0.0, 0.0, 13000.0],        # half-way up the top layer: sin^2(pi/4) = 1/2
        [-30000.0, 0.0, 5000.0],    # west boundary
        [30000.0, 0.0, 5000.0],     # east
        [0.0, -30000.0, 5000.0],    # south
        [0.0, 30000.0, 5000.0],     # north
        [25000.0, 0.0, 5000.0],     # half-way into the east layer
        [25000.0, 0.0, 13000.0],    # overlap: max of the two (both 1/2)
        [25000.0, 0.0, 14500.0],    # overlap: top (xi=0.75) wins over lateral (xi=0.5)
    ])
    s = mw.sponge(params, pts)
    expect = [0, 0, smax, smax / 2, smax, smax, smax, smax, smax / 2, smax / 2,
              smax * math.sin(0.375 * math.pi) ** 2]
    np.testing.assert_allclose(s, expect, rtol=1e-14, atol=1e-18)


def test_sponge_monotone(params):
    z = np.linspace(0.0, 16000.0, 161)
    col = np.column_stack([np.zeros_like(z), np.zeros_like(z), z])
    s = mw.sponge(params, col)
    assert np.all(s[z <= 10000.0] == 0.0)
    assert np.all(np.diff(s) >= 0) and np.all(np.diff(s[z > 10000.0]) > 0)
    assert s[-1] == params.sponge_max
    x = np.linspace(0.0, 30000.0, 301)
    row = np.column_stack([x, np.zeros_like(x), np.full_like(x, 2000.0)])
    sx = mw.sponge(params, row)
    assert np.all(sx[x <= 20000.0] == 0.0) and np.all(np.diff(sx[x > 20000.0]) > 0)
    assert sx[-1] == pytest.approx(params.sponge_max, rel=1e-15)
    p0 = mw.Parameters(sponge_lateral_width=0.0, sponge_top_base=16000.0)
    assert np.all(mw.sponge(p0, np.vstack([col, row])) == 0.0)


def test_sponge_on_mesh(params):
    m = mw.build_mesh(params, nx=12, ny=12, nz=8, dx_min=1500.0, dz_min=500.0)
    s = mw.sponge(params, m.coords)
    assert s.shape == (m.nnodes,) and s.dtype == np.float64
    assert s.min() == 0.0 and s.max() == pytest.approx(params.sponge_max)
    np.testing.assert_allclose(s[m.tagged_nodes(mw.DIRICHLET_TAGS + (FaceTag.TOP,))],
                               params.sponge_max, rtol=1e-14)
    with pytest.raises(MeshError, match="shape"):
        mw.sponge(params, m.coords[:, :2])


# ----------------------------------------------------------------- background / states
def test_theta_bar_and_derivative(params):
    assert mw.theta_bar(params, 0.0) == pytest.approx(293.15)
    z = np.array([0.0, 1000.0, 5000.0, 16000.0])
    np.testing.assert_allclose(mw.theta_bar(params, z),
                               293.15 * np.exp(1e-4 * z / 9.81), rtol=1e-15)
    dz = 1e-2
    fd = (mw.theta_bar(params, z + dz) - mw.theta_bar(params, z - dz)) / (2 * dz)
    np.testing.assert_allclose(mw.dtheta_bar_dz(params, z), fd, rtol=1e-8)
    assert mw.dtheta_bar_dz(params, 0.0) == pytest.approx(293.15 * 1e-4 / 9.81, rel=1e-15)
    # N^2 = g/theta_bar * dtheta_bar/dz
    n2 = params.g / mw.theta_bar(params, z) * mw.dtheta_bar_dz(params, z)
    np.testing.assert_allclose(n2, 1e-4, rtol=1e-14)


def test_reference_and_initial_state(params):
    coords = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 2500.0], [5.0, 5.0, 16000.0]])
    ref = mw.reference_state(params, coords)
    assert set(ref) == {"u", "theta_prime", "q_v", "q_c", "q_r"}
    np.testing.assert_array_equal(ref["u"], [[10.0, 0, 0]] * 3)
    np.testing.assert_allclose(ref["q_v"], 0.01 * np.exp(-coords[:, 2] / 2500.0), rtol=1e-15)
    assert ref["q_v"][1] == pytest.approx(0.01 / math.e)
    for k in ("theta_prime", "q_c", "q_r"):
        assert ref[k].shape == (3,) and np.all(ref[k] == 0.0)
    ini = mw.initial_state(params, coords)
    assert list(ini) == ["u", "p", "theta_prime", "q_v", "q_c", "q_r"]
    assert ini["p"].shape == (3,) and np.all(ini["p"] == 0.0)
    for k in ref:
        np.testing.assert_array_equal(ini[k], ref[k])
        assert ini[k].dtype == np.float64
    ini["u"][0, 0] = -1.0     # fresh arrays: no aliasing between calls / dict entries
    assert mw.initial_state(params, coords)["u"][0, 0] == 10.0
    assert not np.shares_memory(ini["q_c"], ini["q_r"])


def test_buoyancy_frequency_is_n_at_every_node(params):
    """b = g θ'/θ̄(z) (docs/equations.md §2): (g/θ̄)·dθ̄/dz = N² at every node of the mesh."""
    from dycore.backend.cpu import CPUBackend
    from dycore.config import PhysicsConfig
    from dycore.physics.coefficients import build_coefficients

    m = mw.build_mesh(params, nx=8, ny=6, nz=5, dx_min=1000.0, dz_min=500.0)
    c = build_coefficients(mw, params, m, PhysicsConfig(), CPUBackend())
    g_over_tb = np.asarray(c.g_over_theta_bar)
    assert g_over_tb.shape == (m.nnodes,) and g_over_tb.dtype == np.float64
    n2 = g_over_tb * np.asarray(c.dtheta_bar_dz)
    np.testing.assert_allclose(n2, params.brunt_vaisala ** 2, rtol=1e-12, atol=0.0)
    z = m.coords[:, 2]
    assert z.max() - z.min() > 15000.0                     # ground to lid: θ̄ varies by ~18 %
    np.testing.assert_allclose(g_over_tb, params.g / mw.theta_bar(params, z), rtol=1e-15)
    # the surface value g/θ₀ would not do: its frequency grows with height
    assert np.max(c.g_over_theta0 * np.asarray(c.dtheta_bar_dz)) > 1.1 * params.brunt_vaisala ** 2
