"""Steady 3-D linear mountain-wave theory for the mountainwave3D case (Smith 1980).

An independent reference solution for the vertical velocity w of uniform, stratified flow
(speed U along x, buoyancy frequency N) over the bell mountain
``h(x, y) = h0 / (1 + (x^2 + y^2)/a^2)^(3/2)``, used by ``dycore verify``.

Theory (Smith, R. B., 1980: Linear theory of stratified hydrostatic flow past an isolated
mountain. *Tellus* 32, 348-364; here in its non-hydrostatic Boussinesq form)
-------------------------------------------------------------------------------------------
Linearised about (U, 0, 0) with constant N, steady, inviscid, Boussinesq, the vertical velocity
obeys ``U^2 d_xx (lap w) + N^2 lap_h w = 0``. With the transform convention
``f(x, y) = (2 pi)^-2 ∫∫ f^(k, l) exp(i (k x + l y)) dk dl`` each horizontal mode satisfies

    ŵ_zz + m^2 ŵ = 0,      m^2 = K^2 (N^2 / (U k)^2 - 1),   K = sqrt(k^2 + l^2)

(non-hydrostatic vertical wavenumber). The solution takes

* ``m = sign(U k) sqrt(m^2)`` where ``m^2 > 0`` (radiation condition: upward group velocity,
  i.e. energy propagates away from the ground), and
* ``m = i sqrt(-m^2)`` where ``m^2 < 0`` (evanescent, decaying with height),

and the lower boundary condition linearised to the flat ground, ``w(x, y, 0) = U dh/dx``:

    ŵ(k, l, z) = i U k ĥ(k, l) exp(i m z),     ĥ(k, l) = 2 pi a^2 h0 exp(-a K)

(the bell mountain's transform). ŵ = 0 at k = 0 (no forcing there).

Numerics and accuracy
---------------------
w is synthesised by an inverse FFT on a periodic square of side ``length`` with spacing
``dx``: ``w(x_j, y_i, z) = dx^-2 IFFT2[ŵ](j, i)``, using only k >= 0 (w is real: ``irfft``)
and zeroing the Nyquist column. The y = 0 section sums ŵ over l first and needs a 1-D inverse
transform per level. Errors:

* truncation at ``|k| <= pi/dx``: ĥ there is ``exp(-pi a/dx)`` of its peak (4e-6 for the
  default dx = 250 m and a = 1 km; short waves are also evanescent, so aloft it is smaller);
* periodic images of the mountain and its waves: the field is the sum over copies one period
  apart. Along x this dominates: waves near k = N/U have m ~ 0, travel almost horizontally and
  decay slowly downstream, so upstream copies' lee waves reach the window unless the x period
  is thousands of km. The default (``length`` = 4096 km along x, ``length_y`` = 256 km,
  dx = 250 m: a 1024 x 16384 grid, ~15 s for the verify section and planes) differs from an
  8192 x 512 km synthesis by 7.5e-4 (y = 0 section) and <= 5.3e-4 (planes) relative;
  512 km along x would give ~1e-2 (docs/verify.md has the convergence table).

The ground condition is applied at z = 0 (flat-ground linearisation); the model's ground is at
h(x, y) <= 400 m, so compare aloft (the verify section starts at z = 1 km).

Public API
----------
``BellMountainWaves`` (the solution), ``bell_height``, ``bell_dhdx`` (closed forms).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["BellMountainWaves", "bell_height", "bell_dhdx"]


def bell_height(x, y, h0: float, a: float) -> np.ndarray:
    """The bell mountain ``h0 / (1 + (x^2 + y^2)/a^2)^(3/2)`` [m]."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return h0 / (1.0 + (x * x + y * y) / (a * a)) ** 1.5


def bell_dhdx(x, y, h0: float, a: float) -> np.ndarray:
    """Analytic ``dh/dx`` of the bell mountain: ``-3 h0 x / a^2 (1 + r^2/a^2)^(-5/2)``."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return -3.0 * h0 * x / (a * a) * (1.0 + (x * x + y * y) / (a * a)) ** -2.5


@dataclass
class BellMountainWaves:
    """Linear steady w over the bell mountain by Fourier synthesis (see the module docstring).

    Parameters
    ----------
    u0 : float
        Wind speed U [m/s] (along +x; the sign enters the radiation condition).
    n : float
        Buoyancy frequency N [1/s].
    h0, a : float
        Mountain height and half-width [m].
    length : float
        Period along x [m] (default 4096 km).
    dx : float
        Grid spacing [m] (default 250 m); ``length / dx`` must be an even integer.
    length_y : float or None
        Period along y [m] (default 256 km; None: ``length``).
    hydrostatic : bool
        Use the hydrostatic ``m^2 = N^2 K^2 / (U k)^2`` instead (for checks only).

    Sample points must lie on the synthesis grid (multiples of ``dx``, within ``length/2``).
    """

    u0: float = 10.0
    n: float = 0.01
    h0: float = 400.0
    a: float = 1000.0
    length: float = 4_096_000.0
    dx: float = 250.0
    length_y: float | None = 256_000.0
    hydrostatic: bool = False
    _cache: dict = field(default_factory=dict, init=False, repr=False)

    #: for ``dycore verify``: a 3-D reference (section and planes) and its one-line title
    dimensions = 3
    title = "steady linear theory (Smith 1980, non-hydrostatic Boussinesq)"

    def __post_init__(self):
        if self.length_y is None:
            self.length_y = self.length
        sizes = []
        for side in (self.length, self.length_y):
            npts = side / self.dx
            if abs(npts - round(npts)) > 1e-9 * npts or round(npts) % 2:
                raise ValueError(f"length / dx must be an even integer, got {npts}")
            sizes.append(int(round(npts)))
        self.npts, self.npts_y = sizes
        self.k = 2.0 * np.pi * np.fft.rfftfreq(self.npts, d=self.dx)       # (npts//2 + 1,)
        self.l = 2.0 * np.pi * np.fft.fftfreq(self.npts_y, d=self.dx)      # (npts_y,)

    # ------------------------------------------------------------------------ spectrum
    def wavenumbers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(k, l, K)`` broadcast to the half-spectrum layout (l rows, k >= 0 columns)."""
        k = self.k[None, :]
        l = self.l[:, None]
        return k, l, np.sqrt(k * k + l * l)

    def h_hat(self) -> np.ndarray:
        """ĥ(k, l) = 2 pi a^2 h0 exp(-a K) on the half spectrum [m^3]."""
        _, _, kk = self.wavenumbers()
        return 2.0 * np.pi * self.a ** 2 * self.h0 * np.exp(-self.a * kk)

    def m_squared(self) -> np.ndarray:
        """m^2 on the half spectrum (inf at k = 0, where ŵ = 0 anyway)."""
        k, _, kk = self.wavenumbers()
        with np.errstate(divide="ignore", invalid="ignore"):
            uk2 = (self.u0 * k) ** 2
            if self.hydrostatic:
                m2 = kk ** 2 * self.n ** 2 / uk2
            else:
                m2 = kk ** 2 * (self.n ** 2 / uk2 - 1.0)
        return np.where(k == 0.0, np.inf, m2)

    def m(self) -> np.ndarray:
        """Vertical wavenumber with the radiation / decay condition (complex, half spectrum)."""
        if "m" not in self._cache:
            k, _, _ = self.wavenumbers()
            m2 = self.m_squared()
            finite = np.isfinite(m2)
            m2f = np.where(finite, m2, 0.0)
            root = np.sqrt(np.abs(m2f))
            m = np.where(m2f > 0.0, np.sign(self.u0 * k) * root, 1j * root)
            self._cache["m"] = np.where(finite, m, 0.0).astype(complex)
        return self._cache["m"]

    def w_hat_ground(self) -> np.ndarray:
        """ŵ(k, l, 0) = i U k ĥ; zero at k = 0 and on the Nyquist column [m^3/s]."""
        if "w0" not in self._cache:
            k, _, _ = self.wavenumbers()
            w0 = 1j * self.u0 * k * self.h_hat()
            w0[:, -1] = 0.0                        # Nyquist column (npts even)
            w0[self.npts_y // 2, :] = 0.0            # Nyquist row in l
            self._cache["w0"] = w0
        return self._cache["w0"]

    def w_hat(self, z: float) -> np.ndarray:
        """ŵ(k, l, z) = ŵ(k, l, 0) exp(i m z) on the half spectrum."""
        return self.w_hat_ground() * np.exp(1j * self.m() * float(z))

    # ------------------------------------------------------------------ physical space
    def _indices(self, coords, name: str) -> np.ndarray:
        coords = np.asarray(coords, dtype=float)
        side, npts = (self.length, self.npts) if name == "x" else (self.length_y, self.npts_y)
        idx = coords / self.dx
        ridx = np.round(idx)
        if np.any(np.abs(idx - ridx) > 1e-6) or np.any(np.abs(coords) >= side / 2):
            raise ValueError(f"{name} must be multiples of dx = {self.dx:g} m inside "
                             f"|{name}| < {side / 2:g} m (half the synthesis period)")
        return ridx.astype(np.int64) % npts

    def plane(self, z: float, x=None, y=None) -> np.ndarray:
        """w(x, y, z) on the plane z = const [m/s], shape ``(len(y), len(x))``.

        Without ``x`` / ``y`` the whole periodic grid is returned (index 0 = coordinate 0).
        """
        grid = np.fft.irfft2(self.w_hat(z), s=(self.npts_y, self.npts)) / self.dx ** 2
        if x is None and y is None:
            return grid
        ix = self._indices(x, "x") if x is not None else np.arange(self.npts)
        iy = self._indices(y, "y") if y is not None else np.arange(self.npts_y)
        return grid[np.ix_(iy, ix)]

    def section_y0(self, x, z) -> np.ndarray:
        """w(x, 0, z) on the x-z section y = 0 [m/s], shape ``(len(z), len(x))``."""
        ix = self._indices(x, "x")
        z = np.atleast_1d(np.asarray(z, dtype=float))
        w0 = self.w_hat_ground()
        m = self.m()
        out = np.empty((len(z), len(ix)))
        for j, level in enumerate(z):
            s = np.sum(w0 * np.exp(1j * m * level), axis=0)          # sum over l: y = 0
            line = np.fft.irfft(s, n=self.npts) / (self.dx * self.length_y)
            out[j] = line[ix]
        return out

    def terrain(self, x) -> np.ndarray:
        """The terrain on the section y = 0, h(x, 0) [m] (for masking below the ground)."""
        return bell_height(x, 0.0, self.h0, self.a)

    def w_at(self, x, y, z) -> np.ndarray:
        """w at scattered points by direct (slow) summation of the Fourier series; for tests."""
        x, y, z = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (x, y, z))
        k, l, _ = self.wavenumbers()
        w0, m = self.w_hat_ground(), self.m()
        weight = np.full(self.k.shape, 2.0)        # k > 0 columns stand for +k and -k
        weight[0] = 1.0
        out = np.empty(len(x))
        for i in range(len(x)):
            terms = w0 * np.exp(1j * (m * z[i] + k * x[i] + l * y[i]))
            out[i] = np.sum(weight[None, :] * terms.real) / (self.length * self.length_y)
        return out
