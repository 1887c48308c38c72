"""dycore.cases.mountainwave3d.linear_theory (Smith 1980 linear solution) and p1_sample (exact P1 sampling)."""
import numpy as np
import pytest

from dycore.cases.mountainwave3d.linear_theory import BellMountainWaves, bell_dhdx, bell_height
from dycore.diagnostics.p1_sample import P1Locator

U, N, H0, A = 10.0, 0.01, 400.0, 1000.0


def box_mesh(xs, ys, zs):
    """Structured box of hexahedra, each split into 6 tetrahedra (Kuhn: one per axis order)."""
    X, Y, Z = np.meshgrid(xs, ys, zs, indexing="ij")
    coords = np.column_stack([X.ravel(), Y.ravel(), Z.ravel()])
    nx, ny, nz = len(xs), len(ys), len(zs)
    node = np.arange(coords.shape[0]).reshape(nx, ny, nz)
    i, j, k = (a.ravel() for a in np.meshgrid(np.arange(nx - 1), np.arange(ny - 1),
                                               np.arange(nz - 1), indexing="ij"))
    tets = []
    for order in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
        corner = [i.copy(), j.copy(), k.copy()]
        verts = [node[corner[0], corner[1], corner[2]]]
        for axis in order:
            corner[axis] = corner[axis] + 1
            verts.append(node[corner[0], corner[1], corner[2]])
        tets.append(np.column_stack(verts))
    return coords, np.concatenate(tets)


def test_ground_value_is_u_dhdx():
    """At z = 0, w = U dh/dx of the bell exactly (up to the truncation exp(-pi a/dx) and the
    periodic images (a/L)^3): measured 7e-8 relative."""
    theory = BellMountainWaves(U, N, H0, A, length=100_000.0, length_y=100_000.0, dx=100.0)
    x = np.arange(-20_000.0, 20_001.0, 500.0)
    X, Y = np.meshgrid(x, x)
    exact = U * bell_dhdx(X, Y, H0, A)
    scale = np.abs(exact).max()
    assert np.abs(theory.plane(0.0, x, x) - exact).max() < 1e-6 * scale
    assert np.abs(theory.section_y0(x, [0.0])[0] - exact[len(x) // 2]).max() < 1e-6 * scale


def test_bell_closed_forms():
    x, y = np.array([0.0, 700.0, -1500.0]), np.array([0.0, 300.0, 2000.0])
    eps = 1e-3
    fd = (bell_height(x + eps, y, H0, A) - bell_height(x - eps, y, H0, A)) / (2 * eps)
    assert np.allclose(bell_dhdx(x, y, H0, A), fd, rtol=1e-7, atol=1e-12)
    assert bell_height(0.0, 0.0, H0, A) == H0


def test_spectral_residual_of_the_wave_equation():
    """U^2 d_xx lap w + N^2 lap_h w = 0 mode by mode: -U^2 k^2 (w_zz - K^2 w) - N^2 K^2 w, with
    w_zz by a 4th-order finite difference in z of w_hat(z): relative residual < 1e-6."""
    theory = BellMountainWaves(U, N, H0, A, length=64_000.0, length_y=64_000.0, dx=250.0)
    k, _, kk = theory.wavenumbers()
    z, dz = 3000.0, 0.5
    w = {s: theory.w_hat(z + s * dz) for s in (-2, -1, 0, 1, 2)}
    w_zz = (-w[2] + 16 * w[1] - 30 * w[0] + 16 * w[-1] - w[-2]) / (12 * dz * dz)
    residual = -U ** 2 * k ** 2 * (w_zz - kk ** 2 * w[0]) - N ** 2 * kk ** 2 * w[0]
    scale = N ** 2 * kk ** 2 * np.abs(w[0])
    ok = scale > 1e-8 * scale.max()
    assert np.max(np.abs(residual[ok]) / scale[ok]) < 1e-6
    # and the ODE w_zz + m^2 w = 0 itself
    m = theory.m()
    assert np.max(np.abs(w_zz + m ** 2 * w[0])[ok] / (np.abs(m ** 2 * w[0])[ok] + 1e-300)) < 1e-6


def test_radiation_and_decay_conditions():
    theory = BellMountainWaves(U, N, H0, A, length=64_000.0, length_y=64_000.0, dx=250.0)
    k, _, _ = theory.wavenumbers()
    m, m2 = theory.m(), theory.m_squared()
    prop = np.isfinite(m2) & (m2 > 0)
    evan = np.isfinite(m2) & (m2 < 0)
    assert np.all(np.sign(m[prop].real) == np.sign(U))        # k > 0 on the half spectrum
    assert np.all(m[prop].imag == 0)
    assert np.all(m[evan].real == 0) and np.all(m[evan].imag > 0)   # exp(imz) decays
    assert np.all(np.abs(k[0, np.any(evan, axis=0)]) * U > N * (1 - 1e-12))


def test_hydrostatic_limit_for_a_wide_mountain():
    """For N a / U >> 1 the non-hydrostatic and hydrostatic solutions agree: measured 4.1e-2
    relative at N a / U = 20 (the non-hydrostatic correction plus the periodic images of a
    20 km mountain in a 1024 km period)."""
    a = 20_000.0                       # N a / U = 20
    kw = dict(length=1_024_000.0, length_y=512_000.0, dx=1000.0)
    x = np.arange(-100_000.0, 100_001.0, 1000.0)
    nh = BellMountainWaves(U, N, H0, a, **kw).section_y0(x, [2000.0, 5000.0])
    hy = BellMountainWaves(U, N, H0, a, hydrostatic=True, **kw).section_y0(x, [2000.0, 5000.0])
    assert np.linalg.norm(nh - hy) / np.linalg.norm(hy) < 0.06


def test_fft_synthesis_matches_direct_summation_and_is_symmetric():
    theory = BellMountainWaves(U, N, H0, A, length=64_000.0, length_y=32_000.0, dx=500.0)
    x = np.array([-3000.0, 0.0, 2500.0, 6000.0])
    y = np.array([0.0, 1500.0, -1500.0, 4000.0])
    plane = theory.plane(4000.0, x, y)
    direct = theory.w_at(x, y[1:2].repeat(4), np.full(4, 4000.0))
    assert np.allclose(plane[1], direct, atol=1e-10)
    assert np.allclose(plane[1], plane[2], atol=1e-12)          # even in y
    assert np.allclose(theory.section_y0(x, [4000.0])[0], plane[0], atol=1e-12)
    with pytest.raises(ValueError):
        theory.plane(4000.0, [100.0], [0.0])                     # not on the grid


@pytest.mark.slow
def test_converges_with_the_synthesis_period():
    """Doubling the x period changes the y = 0 section by a few 1e-3 at 2048 km (the default is
    4096 km: 7.5e-4 against 8192 x 512 km; docs/verify.md)."""
    x = np.arange(-20_000.0, 20_001.0, 250.0)
    z = np.arange(1000.0, 9001.0, 1000.0)
    kw = dict(u0=U, n=N, h0=H0, a=A, length_y=128_000.0)
    a = BellMountainWaves(length=1_024_000.0, **kw).section_y0(x, z)
    b = BellMountainWaves(length=2_048_000.0, **kw).section_y0(x, z)
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 2e-2


def test_p1_sampling_reproduces_a_linear_function_and_masks_outside():
    xs, ys, zs = np.linspace(-3, 3, 7), np.linspace(-2, 2, 5), np.array([0.0, 0.5, 1.5, 3.0])
    coords, tets = box_mesh(xs, ys, zs)
    rng = np.random.default_rng(1)
    coords = coords + np.where(np.isin(coords, [-3, 3, -2, 2, 0, 3.0]), 0,
                               0.1 * rng.uniform(-1, 1, coords.shape))   # distorted interior
    f = lambda p: 1.5 + 2.0 * p[:, 0] - 0.7 * p[:, 1] + 3.1 * p[:, 2]
    pts = np.column_stack([rng.uniform(-3, 3, 500), rng.uniform(-2, 2, 500),
                           rng.uniform(0, 3, 500)])
    outside = np.array([[3.5, 0, 1], [0, 0, -0.1], [0, 2.01, 1], [0, 0, 3.2]])
    loc = P1Locator(coords, tets, np.concatenate([pts, outside]), candidates=4)
    got = loc(f(coords))
    assert np.allclose(got[:500], f(pts), rtol=0, atol=1e-12)
    assert np.all(np.isnan(got[500:])) and not loc.inside[500:].any()
    assert np.allclose(loc.weights[:500].sum(axis=1), 1.0)


def test_p1_sampling_on_a_strongly_graded_mesh_is_exact_in_bounded_batches(monkeypatch):
    """Cells of 0.1 beside cells up to 5 wide (a core, outer cells growing by 2.2): the nearest
    centroids of a point in a large cell are the small cells', so some points miss both
    nearest-centroid passes and reach the exact fallback (7 of 300 here), which runs a few
    points at a time (3 here) and finds the same tetrahedra as a brute-force search."""
    core = np.linspace(-1.0, 1.0, 21)
    outer = 1.0 + np.cumsum(0.1 * 2.2 ** np.arange(1, 6))                 # 0.22 ... 5.15 wide
    xs = np.concatenate([-outer[::-1], core, outer])
    coords, tets = box_mesh(xs, np.array([0.0, 1.0]), np.array([0.0, 0.5, 1.0]))
    rng = np.random.default_rng(3)
    pts = np.column_stack([rng.uniform(xs[0], xs[-1], 300), rng.uniform(0, 1, 300),
                           rng.uniform(0, 1, 300)])
    monkeypatch.setattr(P1Locator, "FALLBACK_BATCH", 3)
    loc = P1Locator(coords, tets, pts, candidates=1)
    every = P1Locator(coords, tets, pts, candidates=len(tets))           # brute force
    assert loc.inside.all()
    v = coords[tets[loc.cell]]                                          # (n, 4, 3)
    assert np.allclose(np.einsum("pi,pij->pj", loc.weights, v), pts, rtol=0, atol=1e-12)
    assert np.allclose(loc.weights, every.weights, rtol=0, atol=1e-12)
    f = lambda p: 0.5 - p[:, 0] + 2.0 * p[:, 2]
    assert np.allclose(loc(f(coords)), f(pts), rtol=0, atol=1e-12)
