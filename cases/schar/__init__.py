"""schar: stratified flow over the Schär mountain (quasi-2-D, in a channel with free-slip walls).

The second standard mountain-wave case of the package, from Schär, Leuenberger, Fuhrer, Lüthi and
Girard (2002), "A new terrain-following vertical coordinate formulation for atmospheric
prediction models", Mon. Wea. Rev. 130, 2459-2480, §5b: terrain uniform in y,
``h(x) = h0 exp(-(x/a)^2) cos^2(pi x / lambda)``, h0 = 250 m, a = 5 km, lambda = 4 km,
U = 10 m/s, N = 0.01 1/s. The 4 km ripples are evanescent (k = 2 pi/lambda > N/U), the 5 km
envelope launches nearly hydrostatic waves of vertical wavelength 2 pi U/N = 6.3 km. Here the
vertical slice of the literature is a channel a few cells wide in y whose side walls y = ±ly/2
are free-slip (strong no normal flow, like the ground and the lid); on a mesh mirror-symmetric
about y = 0 the flow has no y-dependence (docs/verify.md measures it). See README.md beside this
file; the steady linear reference is :mod:`dycore.cases.schar.linear_theory`.

Public API (the case interface, ``cases/__init__.py``)
-------------------------------------------------------------
``NAME``, ``Parameters``, ``terrain``, ``terrain_dhdx``, ``ground_normals``, ``build_mesh``,
``check_mesh``, ``sponge``, ``theta_bar``, ``dtheta_bar_dz``, ``q_v_ref``, ``reference_state``,
``initial_state``, ``DIRICHLET_TAGS``, ``NO_NORMAL_FLOW_TAGS``, ``linear_reference``.
"""
from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from dycore.cases import _background
from dycore.dtypes import REAL
from dycore.errors import ConfigError, MeshError
from dycore.mesh import FaceTag, GridSpec, Mesh, generate_terrain_following
from dycore.mesh import renumber as _renumber

__all__ = [
    "NAME", "Parameters", "terrain", "terrain_dhdx", "ground_normals", "build_mesh", "check_mesh",
    "sponge", "theta_bar", "dtheta_bar_dz", "q_v_ref", "reference_state", "initial_state",
    "DIRICHLET_TAGS", "NO_NORMAL_FLOW_TAGS", "linear_reference",
]

NAME = "schar"

#: Inflow and outflow ends x = ∓lx/2: strong Dirichlet u = u_ref, θ' = 0, q = q_ref.
DIRICHLET_TAGS = (FaceTag.WEST, FaceTag.EAST)
#: Ground, lid and the two side walls y = ∓ly/2: strong free-slip no normal flow.
NO_NORMAL_FLOW_TAGS = (FaceTag.GROUND, FaceTag.TOP, FaceTag.SOUTH, FaceTag.NORTH)
#: Axes a convergence study refines (dycore.checks.convergence): the channel keeps its width.
REFINE_AXES = ("x", "z")


class Parameters(BaseModel):
    """Physical parameters of the Schär case (Schär et al. 2002, §5b).

    Defaults are the paper's values and a domain like the literature's slice: x in
    [-lx/2, lx/2] = [-25, 25] km with 10 km absorbing layers at both ends, a lid at 21 km with
    an absorbing layer above 10 km; the channel is ly = 1 km wide. Lengths in metres.

    Raises
    ------
    pydantic.ValidationError
        On unknown keys (``extra="forbid"``), out-of-range values, ``h0 >= lz``,
        ``sponge_top_base > lz`` or ``sponge_lateral_width > lx/2``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    lx: float = Field(50000.0, gt=0, description="Channel length in x [m]; x in [-lx/2, lx/2].")
    ly: float = Field(1000.0, gt=0, description="Channel width in y [m]; y in [-ly/2, ly/2], "
                                                 "free-slip walls on both sides.")
    lz: float = Field(21000.0, gt=0, description="Height of the rigid lid [m].")
    h0: float = Field(250.0, ge=0, description="Mountain height h0 [m].")
    a: float = Field(5000.0, gt=0, description="Half-width a of the Gaussian envelope [m].")
    wavelength: float = Field(4000.0, gt=0,
                              description="Ripple wavelength lambda of cos^2(pi x/lambda) [m].")
    brunt_vaisala: float = Field(0.01, ge=0, description="Brunt-Vaisala frequency N [1/s].")
    theta0: float = Field(293.15, gt=0, description="Surface potential temperature theta0 [K].")
    g: float = Field(9.81, gt=0, description="Gravitational acceleration g [m/s^2].")
    u0: float = Field(10.0, description="Inflow / reference wind speed U [m/s]; u_ref = (U, 0, 0).")
    sponge_top_base: float = Field(
        10000.0, gt=0,
        description="Height where the top absorbing layer starts [m]; it reaches the lid lz "
                    "(Schär et al. 2002: damping above about 10 km).")
    sponge_lateral_width: float = Field(
        10000.0, ge=0,
        description="Width of the absorbing layers at the inflow and outflow ends x = -+lx/2, "
                    "measured inward [m]; 0 disables them. None at the side walls.")
    sponge_max: float = Field(
        1.0 / 150.0, ge=0,
        description="Maximum Rayleigh damping rate sigma_max [1/s] (at the lid and the ends); "
                    "the mountainwave3d value, an e-folding time of 150 s = 1.5/N.")
    q_v_surface: float = Field(0.0, ge=0,
                               description="Reference water-vapour mixing ratio at z = 0 "
                                           "[kg/kg] (dry case: 0).")
    q_v_scale_height: float = Field(
        2500.0, gt=0,
        description="e-folding height of the reference vapour profile q_v = q_s exp(-z/H) [m].")

    @model_validator(mode="after")
    def _check_geometry(self) -> "Parameters":
        if self.h0 >= self.lz:
            raise ValueError(f"h0 = {self.h0} m must be below the lid lz = {self.lz} m")
        if self.sponge_top_base > self.lz:
            raise ValueError(
                f"sponge_top_base = {self.sponge_top_base} m must be <= lz = {self.lz} m")
        if self.sponge_lateral_width > 0.5 * self.lx:
            raise ValueError(f"sponge_lateral_width = {self.sponge_lateral_width} m exceeds "
                             f"half the channel length ({0.5 * self.lx} m)")
        return self

    @property
    def vertical_wavelength(self) -> float:
        """Hydrostatic vertical wavelength 2 pi U / N [m] (inf when N = 0)."""
        n = self.brunt_vaisala
        return math.inf if n == 0 else 2.0 * math.pi * abs(self.u0) / n

    @property
    def nondimensional_height(self) -> float:
        """N h0 / U [-] (0.25 for the paper's values; the linearisation error scales with it)."""
        return math.inf if self.u0 == 0 else self.brunt_vaisala * self.h0 / abs(self.u0)


# ------------------------------------------------------------------------------- geometry
def terrain(params: Parameters, x, y=None) -> np.ndarray:
    """Schär terrain ``h0 exp(-(x/a)^2) cos^2(pi x / lambda)`` [m], independent of y.

    Parameters
    ----------
    params : Parameters
    x : array_like, float [m]; y : array_like or None, broadcast with x (ignored: no y-dependence)

    Returns
    -------
    ndarray, float64, broadcast shape of x (and y) [m]

    Source: Schär et al. (2002), Mon. Wea. Rev. 130, eq. (46).
    """
    x = np.asarray(x, dtype=REAL)
    if y is not None:
        x = x + 0.0 * np.asarray(y, dtype=REAL)
    c = np.cos(np.pi * x / params.wavelength)
    return params.h0 * np.exp(-(x / params.a) ** 2) * c * c


def terrain_dhdx(params: Parameters, x) -> np.ndarray:
    """Analytic slope ``dh/dx`` of :func:`terrain` [-], shape of x.

    ``h0 e^{-(x/a)^2} [-(2x/a^2) cos^2(pi x/lambda) - (pi/lambda) sin(2 pi x/lambda)]``.
    """
    x = np.asarray(x, dtype=REAL)
    lam = params.wavelength
    c = np.cos(np.pi * x / lam)
    return params.h0 * np.exp(-(x / params.a) ** 2) * (
        -2.0 * x / params.a ** 2 * c * c - np.pi / lam * np.sin(2.0 * np.pi * x / lam))


def ground_normals(params: Parameters, coords) -> tuple[np.ndarray, np.ndarray]:
    """Outward unit normals (dh/dx, 0, -1)/sqrt(1 + (dh/dx)^2) of the terrain at ground nodes.

    Parameters
    ----------
    params : Parameters; coords : (m, 3) float64 node coordinates [m]

    Returns
    -------
    normals : (m, 3) float64; on_terrain : (m,) bool — the node lies on :func:`terrain` (to
    1e-9 h0 + 1e-9 m); elsewhere the mesh's own normals apply.
    """
    c = _background.coords_array(coords)
    s = terrain_dhdx(params, c[:, 0])
    n = np.column_stack([s, np.zeros_like(s), -np.ones_like(s)]) / np.sqrt(1.0 + s * s)[:, None]
    on = np.abs(c[:, 2] - terrain(params, c[:, 0])) <= 1e-9 * params.h0 + 1e-9
    return n, on


def build_mesh(params: Parameters, *, nx: int = 100, ny: int = 2, nz: int = 70,
               dx_min: float = 500.0, dz_min: float = 300.0, renumber: str = "rcm",
               shuffle: bool = False, seed: int = 0, split: str = "symmetric_y",
               core_x=None, core_y_half=None, core_dx=None, core_z_top=None,
               dz_core=None) -> Mesh:
    """Terrain-following tetrahedral mesh of the channel (the generator of mountainwave3d).

    Parameters
    ----------
    params : Parameters
        Supplies lx, ly, lz and the terrain.
    nx, ny, nz : int
        Hexahedral cells per direction. Defaults 100 x 2 x 70: with ``dx_min = lx/nx`` and
        ``dz_min = lz/nz`` uniform 500 m x 300 m cells, the resolution of Schär et al. (2002)
        (280,000 tetrahedra with the default split).
    dx_min, dz_min : float
        Spacing at the centre / first layer [m]; ``n * d_min = length`` gives a uniform grid.
    split : {"symmetric_y", "mirror_y", "kuhn"}
        Default ``symmetric_y`` (:mod:`dycore.mesh.layer_split`, 20 tetrahedra per cell): every
        cell is its own mirror image about its mid-plane in y, so with the free-slip walls the
        solution does not depend on y. ``mirror_y`` (6 tets, even ``ny``) is only
        mirror-symmetric about y = 0: w then depends on y by the discretisation error.
    renumber, shuffle, seed, core_x, core_y_half, core_dx, core_z_top, dz_core :
        As :func:`dycore.cases.mountainwave3d.build_mesh` (:class:`dycore.mesh.GridSpec`).

    Returns
    -------
    Mesh (checked)

    Raises
    ------
    MeshError for bad grid values or an odd ``ny`` with ``split="mirror_y"`` (not even
    mirror-symmetric about y = 0); ConfigError for an unknown ``renumber``.
    """
    if renumber not in ("rcm", "none"):
        raise ConfigError(f"renumber must be 'rcm' or 'none', got {renumber!r}")
    if split == "mirror_y" and ny % 2:
        raise MeshError(f"mesh.ny = {ny}: split mirror_y needs an even number of cells across "
                        "the schar channel (or use split: symmetric_y, any ny)")
    spec = GridSpec(nx=nx, ny=ny, nz=nz, lx=params.lx, ly=params.ly, lz=params.lz,
                    dx_min=dx_min, dz_min=dz_min, split=split,
                    core_x=None if core_x is None else tuple(core_x), core_y_half=core_y_half,
                    core_dx=core_dx, core_z_top=core_z_top, dz_core=dz_core)
    mesh = generate_terrain_following(spec, lambda x, y: terrain(params, x, y))
    if renumber == "rcm":
        mesh = _renumber.reverse_cuthill_mckee(mesh)
    if shuffle:
        mesh = _renumber.shuffle(mesh, seed)
    return mesh


def check_mesh(params: Parameters, mesh: Mesh, source: str = "mesh") -> None:
    """Check that a mesh read from a file meshes this channel (every face on its plane).

    Raises
    ------
    MeshError naming ``source`` and the first face tag off its plane.
    """
    _background.check_box_mesh(params, mesh, source, lambda x, y: terrain(params, x, y))


def sponge(params: Parameters, coords) -> np.ndarray:
    """Rayleigh damping rate σ [1/s] at the nodes: a top layer and layers at both ends.

    ``σ = σ_max sin²(π/2 ξ)``, ξ the fractional depth into a layer: from ``sponge_top_base``
    to the lid and ``sponge_lateral_width`` inward from x = ∓lx/2 (the inflow and outflow
    ends; none at the side walls); layers combine by max. The sin² profile over a layer deeper
    than a vertical wavelength, as in mountainwave3d; Schär et al. (2002) damp above about
    10 km (their slice's lid is at about 20 km) and at the lateral boundaries.

    Parameters
    ----------
    params : Parameters; coords : (n, 3) float64 [m]

    Returns
    -------
    (n,) float64 [1/s]
    """
    c = _background.coords_array(coords)
    x, z = c[:, 0], c[:, 2]
    xi = np.zeros(c.shape[0], dtype=REAL)
    depth = params.lz - params.sponge_top_base
    if depth > 0:
        xi = np.maximum(xi, np.clip((z - params.sponge_top_base) / depth, 0.0, 1.0))
    width = params.sponge_lateral_width
    if width > 0:
        d = np.minimum(x + 0.5 * params.lx, 0.5 * params.lx - x)
        xi = np.maximum(xi, np.clip(1.0 - d / width, 0.0, 1.0))
    s = np.sin(0.5 * np.pi * xi)
    return params.sponge_max * s * s


def theta_bar(params: Parameters, z) -> np.ndarray:
    """Background potential temperature ``theta0 exp(N^2 z / g)`` [K], shape of z."""
    return _background.theta_bar(params, z)


def dtheta_bar_dz(params: Parameters, z) -> np.ndarray:
    """Background lapse ``theta_bar N^2 / g`` [K/m], shape of z."""
    return _background.dtheta_bar_dz(params, z)


def q_v_ref(params: Parameters, z) -> np.ndarray:
    """Reference vapour ``q_v_surface exp(-z / q_v_scale_height)`` [kg/kg] (0: dry)."""
    return _background.q_v_ref(params, z)


def reference_state(params: Parameters, coords) -> dict[str, np.ndarray]:
    """Reference (relaxation / Dirichlet) values: u = (U, 0, 0), θ' = 0, q = q_ref (see
    :func:`dycore.cases._background.reference_state`)."""
    return _background.reference_state(params, coords)


def initial_state(params: Parameters, coords) -> dict[str, np.ndarray]:
    """Impulsive start: the reference state and p = 0 (``u``, ``p``, ``theta_prime``,
    ``q_v``, ``q_c``, ``q_r``; fresh float64 arrays)."""
    return _background.initial_state(params, coords)


def linear_reference(params: Parameters, **quadrature):
    """The steady linear solution for ``dycore verify``:
    :class:`dycore.cases.schar.linear_theory.SchaerWaves` of these parameters (``quadrature``
    may set its ``dk`` [1/m])."""
    from dycore.cases.schar.linear_theory import SchaerWaves

    return SchaerWaves(u0=params.u0, n=params.brunt_vaisala, h0=params.h0, a=params.a,
                       wavelength=params.wavelength, **quadrature)
