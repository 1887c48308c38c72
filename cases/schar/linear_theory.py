"""Steady linear (non-hydrostatic, Boussinesq) w over the Schär mountain: the case's reference.

Theory (Schär et al. 2002, Mon. Wea. Rev. 130, 2459-2480, §5b, after Queney 1948 / Smith 1979)
----------------------------------------------------------------------------------------------
Uniform flow U along x with constant N over ``h(x) = h0 exp(-(x/a)^2) cos^2(pi x/lambda)``,
linearised, steady, inviscid, 2-D: ``U^2 d_xx (d_xx + d_zz) w + N^2 d_xx w = 0``. With
``f(x) = (1/2 pi) ∫ f^(k) e^{ikx} dk`` each mode obeys ``ŵ_zz + m^2 ŵ = 0`` with

    m^2 = N^2/U^2 - k^2,
    m = sign(U k) sqrt(m^2)   where m^2 > 0  (radiation condition: energy propagates upward),
    m = i sqrt(-m^2)          where m^2 < 0  (evanescent: decays with height),

and the linearised ground condition ``w(x, 0) = U dh/dx`` gives ``ŵ(k, z) = i U k ĥ(k) e^{imz}``.
Writing ``cos^2 = (1 + cos(2 pi x/lambda))/2`` and K = 2 pi/lambda, the terrain's transform is
closed-form:

    ĥ(k) = (sqrt(pi) a h0 / 4) [2 e^{-a^2 k^2/4} + e^{-a^2 (k-K)^2/4} + e^{-a^2 (k+K)^2/4}].

So for the paper's values (N/U = 1e-3 1/m, K = 1.57e-3 1/m) the 4 km ripples are evanescent
(e-folding height 1/sqrt(K^2 - N^2/U^2) = 826 m) and the 5 km envelope radiates nearly
hydrostatic waves of vertical wavelength 2 pi U/N = 6.3 km.

Numerics
--------
w being real, ``w(x, z) = (1/pi) Re ∫_0^∞ ŵ(k, z) e^{ikx} dk``, evaluated by the trapezoid rule
on ``k_j = j dk`` up to ``k_max = K + 16/a`` (ĥ there is below 1e-27 of its peak). The rule is
exact for the periodic continuation of period ``2 pi / dk`` (Poisson summation), so ``dk``
sets how far the periodic copies of the mountain are: the default dk = 1e-6 1/m puts them
6,283 km apart and differs from dk = 5e-8 by 7e-5 relative on the verify section (1e-7: 1.5e-6;
the error falls like dk^1.5, from the square-root branch point at k = N/U where m = 0);
tests/unit/test_schar_linear_theory.py checks it. The verify section (161 x 91 points) then
costs about 0.5 s.

Public API
----------
``SchaerWaves`` (the solution), ``schar_height``, ``schar_dhdx`` (closed forms).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SchaerWaves", "schar_height", "schar_dhdx"]


def schar_height(x, h0: float, a: float, wavelength: float) -> np.ndarray:
    """``h0 exp(-(x/a)^2) cos^2(pi x / wavelength)`` [m], shape of x [m]."""
    x = np.asarray(x, dtype=float)
    c = np.cos(np.pi * x / wavelength)
    return h0 * np.exp(-(x / a) ** 2) * c * c


def schar_dhdx(x, h0: float, a: float, wavelength: float) -> np.ndarray:
    """Analytic dh/dx of :func:`schar_height` [-], shape of x."""
    x = np.asarray(x, dtype=float)
    c = np.cos(np.pi * x / wavelength)
    return h0 * np.exp(-(x / a) ** 2) * (-2.0 * x / a ** 2 * c * c
                                          - np.pi / wavelength * np.sin(2 * np.pi * x / wavelength))


@dataclass
class SchaerWaves:
    """Linear steady w over the Schär mountain (module docstring).

    Parameters
    ----------
    u0 : float
        Wind speed U [m/s] (along +x; its sign enters the radiation condition).
    n : float
        Buoyancy frequency N [1/s].
    h0, a, wavelength : float
        Mountain height, envelope half-width and ripple wavelength [m].
    dk : float
        Wavenumber step of the quadrature [1/m] (default 1e-6: copies 6,283 km apart, 7e-5
        relative from the converged integral).
    hydrostatic : bool
        Use the hydrostatic ``m^2 = N^2/U^2`` instead (for checks only).

    Raises
    ------
    ValueError for a non-positive ``dk``, ``a`` or ``wavelength``, or U = 0.
    """

    u0: float = 10.0
    n: float = 0.01
    h0: float = 250.0
    a: float = 5000.0
    wavelength: float = 4000.0
    dk: float = 1e-6
    hydrostatic: bool = False

    #: the sample grid of ``dycore verify``: names used by the report
    dimensions = 2
    title = "steady linear theory (Schär et al. 2002, non-hydrostatic Boussinesq, 2-D)"

    def __post_init__(self):
        for name in ("dk", "a", "wavelength"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.u0 == 0:
            raise ValueError("u0 must be nonzero (the steady linear solution needs a mean wind)")

    # ------------------------------------------------------------------ spectral pieces
    @property
    def ripple_k(self) -> float:
        """K = 2 pi / wavelength [1/m]."""
        return 2.0 * math.pi / self.wavelength

    def wavenumbers(self) -> np.ndarray:
        """The quadrature nodes k_j = j dk, j = 0..ceil(k_max/dk) [1/m]."""
        k_max = self.ripple_k + 16.0 / self.a
        return np.arange(int(math.ceil(k_max / self.dk)) + 1) * self.dk

    def h_hat(self, k) -> np.ndarray:
        """Closed-form transform ĥ(k) of the terrain [m^2] (module docstring)."""
        k = np.asarray(k, dtype=float)
        a, kk = self.a, self.ripple_k
        return (math.sqrt(math.pi) * a * self.h0 / 4.0) * (
            2.0 * np.exp(-a * a * k * k / 4.0) + np.exp(-a * a * (k - kk) ** 2 / 4.0)
            + np.exp(-a * a * (k + kk) ** 2 / 4.0))

    def m(self, k) -> np.ndarray:
        """Vertical wavenumber with the radiation / decay condition (complex) [1/m]."""
        k = np.asarray(k, dtype=float)
        l2 = (self.n / self.u0) ** 2
        m2 = np.full(k.shape, l2) if self.hydrostatic else l2 - k * k
        root = np.sqrt(np.abs(m2))
        return np.where(m2 > 0.0, np.sign(self.u0 * k) * root, 1j * root).astype(complex)

    def w_hat(self, k, z) -> np.ndarray:
        """ŵ(k, z) = i U k ĥ(k) e^{i m z} [m^2/s], shape ``(len(z), len(k))``."""
        k = np.atleast_1d(np.asarray(k, dtype=float))
        z = np.atleast_1d(np.asarray(z, dtype=float))
        w0 = 1j * self.u0 * k * self.h_hat(k)
        return w0[None, :] * np.exp(1j * self.m(k)[None, :] * z[:, None])

    # ------------------------------------------------------------------ physical space
    def section(self, x, z) -> np.ndarray:
        """w(x, z) [m/s] on the tensor grid, shape ``(len(z), len(x))`` (x, z in m).

        The ground condition is linearised to z = 0; the values below the terrain are the
        analytic continuation (``dycore verify`` masks them).
        """
        x = np.atleast_1d(np.asarray(x, dtype=float))
        z = np.atleast_1d(np.asarray(z, dtype=float))
        k = self.wavenumbers()
        weight = np.full(k.shape, self.dk)
        weight[0] *= 0.5                       # trapezoid end (ŵ(0) = 0 anyway)
        phase = np.exp(1j * k[:, None] * x[None, :])                 # (nk, nx)
        out = np.empty((len(z), len(x)))
        for lo in range(0, len(z), 16):                               # bounded memory
            w = self.w_hat(k, z[lo:lo + 16]) * weight[None, :]
            out[lo:lo + 16] = (w @ phase).real / math.pi
        return out

    def section_y0(self, x, z) -> np.ndarray:
        """Alias of :meth:`section` (the flow has no y-dependence)."""
        return self.section(x, z)

    def terrain(self, x) -> np.ndarray:
        """The terrain h(x) [m] (for masking the section below the ground)."""
        return schar_height(x, self.h0, self.a, self.wavelength)
