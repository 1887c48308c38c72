"""The steady linear reference of the Schär case (cases/schar/linear_theory.py), tested
as the 3-D reference is: the ground condition, the mode-wise residual, the regime's physics."""
import math

import numpy as np
import pytest

from dycore.cases.schar.linear_theory import SchaerWaves, schar_dhdx, schar_height

U, N, H0, A, LAM = 10.0, 0.01, 250.0, 5000.0, 4000.0
X = np.arange(-20_000.0, 20_000.0 + 1, 250.0)


def test_terrain_closed_forms():
    assert schar_height(0.0, H0, A, LAM) == H0
    assert abs(schar_height(LAM / 2, H0, A, LAM)) < 1e-12              # cos^2 zero
    x = np.linspace(-12_000.0, 12_000.0, 97)
    d = 1e-3
    fd = (schar_height(x + d, H0, A, LAM) - schar_height(x - d, H0, A, LAM)) / (2 * d)
    assert np.abs(schar_dhdx(x, H0, A, LAM) - fd).max() < 1e-7


def test_transform_is_the_terrains():
    """ĥ(k) against a direct quadrature of ∫ h(x) e^{-ikx} dx."""
    s = SchaerWaves()
    x = np.arange(-60_000.0, 60_000.0, 10.0)
    h = schar_height(x, H0, A, LAM)
    for k in (0.0, 3e-4, 1e-3, 2 * math.pi / LAM, 2.5e-3):
        direct = np.sum(h * np.exp(-1j * k * x)) * 10.0
        assert abs(direct - s.h_hat(k)) < 1e-9 * abs(s.h_hat(0.0))


def test_ground_condition_w_equals_u_dhdx():
    s = SchaerWaves(U, N, H0, A, LAM)
    w0 = s.section(X, [0.0])[0]
    ref = U * schar_dhdx(X, H0, A, LAM)
    assert np.abs(w0 - ref).max() < 1e-10 * np.abs(ref).max()


def test_modewise_residual_of_the_linear_equation():
    """ŵ_zz + m² ŵ = 0 for each mode (ŵ_zz by 4th-order differences; m from N, U, k)."""
    s = SchaerWaves(U, N, H0, A, LAM)
    k = np.array([2e-4, 6e-4, 9.9e-4, 1.2e-3, 2 * math.pi / LAM, 3e-3])
    dz, z0 = 5.0, 2000.0
    zs = z0 + dz * np.arange(-2, 3)
    w = s.w_hat(k, zs)                                           # (5, nk)
    wzz = (-w[0] + 16 * w[1] - 30 * w[2] + 16 * w[3] - w[4]) / (12 * dz * dz)
    m2 = (N / U) ** 2 - k * k
    res = np.abs(wzz + m2 * w[2]) / (np.abs(m2 * w[2]))
    assert res.max() < 1e-6


def test_radiation_and_decay_conditions():
    """|ŵ| is constant in z where m² > 0 (upward radiation, sign(m) = sign(Uk)) and decays as
    e^{-|m| z} where m² < 0."""
    s = SchaerWaves(U, N, H0, A, LAM)
    k = np.array([5e-4, 1.5e-3])
    m = s.m(k)
    assert m[0].real > 0 and m[0].imag == 0                      # propagating, U k > 0
    assert m[1].real == 0 and m[1].imag > 0                      # evanescent
    w = s.w_hat(k, [0.0, 3000.0])
    assert abs(abs(w[1, 0]) / abs(w[0, 0]) - 1.0) < 1e-12
    assert abs(abs(w[1, 1]) / abs(w[0, 1]) - math.exp(-m[1].imag * 3000.0)) < 1e-12
    assert np.array_equal(SchaerWaves(-U, N, H0, A, LAM).m(k[:1]), -m[:1])   # U < 0


def test_evanescent_ripples_decay_and_the_envelope_radiates():
    """The 4 km ripples (k = 2π/λ > N/U) fall off with the e-folding height
    1/sqrt(K² - N²/U²) = 826 m; the 5 km envelope keeps its amplitude (radiating waves)."""
    z = np.array([0.0, 1000.0, 3000.0, 6000.0])
    full = SchaerWaves(U, N, H0, A, LAM).section(X, z)
    envelope = 0.5 * SchaerWaves(U, N, H0, A, 1e12).section(X, z)     # h0/2 exp(-(x/a)^2)
    ripples = full - envelope
    rms = lambda a: np.sqrt(np.mean(a * a, axis=1))                  # noqa: E731
    r, e = rms(ripples), rms(envelope)
    efold = 1.0 / math.sqrt((2 * math.pi / LAM) ** 2 - (N / U) ** 2)
    assert abs(efold - 825.5) < 0.1
    assert abs(r[1] / r[0] - math.exp(-1000.0 / efold)) < 0.1 * math.exp(-1000.0 / efold)
    assert r[2] / r[0] < 0.06 and r[3] / r[0] < 0.03
    assert np.abs(e / e[0] - 1.0).max() < 5e-3


def test_hydrostatic_limit_for_a_wide_mountain():
    """N a/U = 50 (a = 50 km, no ripples): non-hydrostatic and hydrostatic agree to ~1e-3."""
    x = np.arange(-100_000.0, 100_000.0 + 1, 1000.0)
    kw = dict(h0=H0, a=50_000.0, wavelength=1e12)
    nh = SchaerWaves(U, N, **kw).section(x, [2000.0, 5000.0])
    hy = SchaerWaves(U, N, hydrostatic=True, **kw).section(x, [2000.0, 5000.0])
    rel = np.linalg.norm(nh - hy) / np.linalg.norm(hy)
    assert 1e-5 < rel < 5e-3


@pytest.mark.slow
def test_quadrature_step_converged():
    """The default dk = 1e-6 against dk = 1e-7 (converged to ~1.5e-6): about 7e-5 apart."""
    x = np.arange(-15_000.0, 15_000.0 + 1, 250.0)
    z = np.arange(1000.0, 9001.0, 500.0)
    a = SchaerWaves().section(x, z)
    b = SchaerWaves(dk=1e-7).section(x, z)
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 2e-4


@pytest.mark.parametrize("bad", [dict(dk=0.0), dict(a=-1.0), dict(wavelength=0.0), dict(u0=0.0)])
def test_bad_parameters(bad):
    with pytest.raises(ValueError, match=next(iter(bad)) if "u0" not in bad else "u0"):
        SchaerWaves(**bad)
