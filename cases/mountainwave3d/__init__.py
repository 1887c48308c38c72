"""mountainwave3D: stratified flow over an isolated 3-D bell-shaped mountain.

Source: docs/equations.md §2 (equations, background state, boundary conditions) and §5 (the case), from
Li et al., "GPU-accelerated finite-element method for the three-dimensional unstructured mesh
atmospheric dynamic framework", §5.2, and Li et al. (2021). Physical reference: linear theory of
flow over an isolated mountain, Smith (1980), Tellus 32, 348-364. See README.md beside this file.

Public API
----------
``Parameters`` (pydantic model), ``terrain``, ``build_mesh``, ``check_mesh``, ``sponge``,
``theta_bar``, ``dtheta_bar_dz``, ``q_v_ref``, ``reference_state``, ``initial_state``,
``DIRICHLET_TAGS``, ``NO_NORMAL_FLOW_TAGS``, ``NAME``, ``linear_reference``.
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
    "NAME",
    "Parameters",
    "terrain",
    "ground_normals",
    "build_mesh",
    "check_mesh",
    "sponge",
    "theta_bar",
    "dtheta_bar_dz",
    "q_v_ref",
    "reference_state",
    "initial_state",
    "DIRICHLET_TAGS",
    "NO_NORMAL_FLOW_TAGS",
    "linear_reference",
    "LINEAR_REFERENCE_GRID",
]

NAME = "mountainwave3d"

#: Lateral faces: strong Dirichlet u = u_ref, theta' = 0, q = q_ref (docs/equations.md §2).
DIRICHLET_TAGS = (FaceTag.WEST, FaceTag.EAST, FaceTag.SOUTH, FaceTag.NORTH)
#: Ground and lid: no normal flow, imposed weakly through the continuity equation (docs/equations.md §2-3).
NO_NORMAL_FLOW_TAGS = (FaceTag.GROUND, FaceTag.TOP)


class Parameters(BaseModel):
    """Physical parameters of the mountainwave3D case (docs/equations.md §5).

    Defaults are the paper's values. Lengths in metres; the domain is
    ``[-lx/2, lx/2] x [-ly/2, ly/2] x [h(x, y), lz]`` with the mountain at the origin.

    Raises
    ------
    pydantic.ValidationError
        On unknown keys (``extra="forbid"``), out-of-range values, ``h0 >= lz``,
        ``sponge_top_base > lz`` or ``sponge_lateral_width > min(lx, ly)/2``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    lx: float = Field(60000.0, gt=0, description="Domain length in x [m]; x in [-lx/2, lx/2].")
    ly: float = Field(60000.0, gt=0, description="Domain length in y [m]; y in [-ly/2, ly/2].")
    lz: float = Field(16000.0, gt=0, description="Height of the rigid lid [m].")
    h0: float = Field(400.0, ge=0, description="Mountain peak height h0 [m].")
    a: float = Field(1000.0, gt=0, description="Mountain half-width a [m].")
    brunt_vaisala: float = Field(
        0.01, ge=0, description="Brunt-Vaisala frequency N of the background [1/s]."
    )
    theta0: float = Field(293.15, gt=0, description="Surface potential temperature theta0 [K].")
    g: float = Field(9.81, gt=0, description="Gravitational acceleration g [m/s^2].")
    u0: float = Field(
        10.0, description="Inflow / reference wind speed U [m/s]; u_ref = (U, 0, 0)."
    )
    sponge_top_base: float = Field(
        10000.0, gt=0,
        description="Height where the top absorbing layer starts [m]; it reaches the lid lz.",
    )
    sponge_lateral_width: float = Field(
        10000.0, ge=0,
        description="Width of the lateral absorbing layers, measured inward from every side "
                    "[m]; 0 disables them.",
    )
    sponge_max: float = Field(
        1.0 / 150.0, ge=0,
        description="Maximum sponge (Rayleigh damping) rate sigma_max [1/s], reached at the lid "
                    "and on the lateral boundaries. Default 1/150 s^-1: an e-folding time of "
                    "150 s (1.5/N) is short against the ~1000 s a wave spends crossing a 6-10 km "
                    "layer at group/advection speeds of order U = 10 m/s, so the waves are "
                    "absorbed, while the smooth sin^2 ramp over more than one vertical wavelength "
                    "(2 pi U/N = 6.3 km) keeps the damping gradient weak enough not to reflect "
                    "much; sigma_max * dt = 0.067 for dt = 10 s. A tuning choice, not a value "
                    "from the reference paper.",
    )
    q_v_surface: float = Field(
        0.01, ge=0, description="Reference water-vapour mixing ratio at z = 0 [kg/kg]."
    )
    q_v_scale_height: float = Field(
        2500.0, gt=0,
        description="e-folding height of the reference vapour profile q_v = q_s exp(-z/H) [m].",
    )

    @model_validator(mode="after")
    def _check_geometry(self) -> "Parameters":
        if self.h0 >= self.lz:
            raise ValueError(f"h0 = {self.h0} m must be below the lid lz = {self.lz} m")
        if self.sponge_top_base > self.lz:
            raise ValueError(
                f"sponge_top_base = {self.sponge_top_base} m must be <= lz = {self.lz} m"
            )
        if self.sponge_lateral_width > 0.5 * min(self.lx, self.ly):
            raise ValueError(
                f"sponge_lateral_width = {self.sponge_lateral_width} m exceeds half the "
                f"horizontal domain ({0.5 * min(self.lx, self.ly)} m)"
            )
        return self

    # ---- derived numbers (Smith 1980 regime parameters)
    @property
    def vertical_wavelength(self) -> float:
        """Hydrostatic vertical wavelength 2 pi U / N [m] (inf when N = 0)."""
        n = self.brunt_vaisala
        return math.inf if n == 0 else 2.0 * math.pi * abs(self.u0) / n

    @property
    def nondimensional_width(self) -> float:
        """N a / U [-] (about 1: non-hydrostatic regime; inf when U = 0)."""
        return math.inf if self.u0 == 0 else self.brunt_vaisala * self.a / abs(self.u0)

    @property
    def nondimensional_height(self) -> float:
        """N h0 / U [-] (0.4: weakly nonlinear; inf when U = 0)."""
        return math.inf if self.u0 == 0 else self.brunt_vaisala * self.h0 / abs(self.u0)


# ------------------------------------------------------------------------------- geometry
def terrain(params: Parameters, x, y) -> np.ndarray:
    """Bell ("Witch of Agnesi" 3-D) mountain ``h0 / (1 + (x^2 + y^2)/a^2)^(3/2)``.

    Parameters
    ----------
    params : Parameters
    x, y : array_like, float, same (broadcastable) shapes
        Horizontal position [m], mountain centred at the origin.

    Returns
    -------
    ndarray, float64, broadcast shape of x and y
        Ground height [m].

    Source: docs/equations.md §5; Smith (1980).
    """
    x = np.asarray(x, dtype=REAL)
    y = np.asarray(y, dtype=REAL)
    r2 = (x * x + y * y) / (params.a * params.a)
    return params.h0 / (1.0 + r2) ** 1.5


def ground_normals(params: Parameters, coords) -> tuple[np.ndarray, np.ndarray]:
    """Outward unit normals of the terrain surface z = h(x, y) at ground nodes.

    n = (∂h/∂x, ∂h/∂y, −1)/√(1 + |∇h|²) (pointing down, out of the domain), with
    ∂h/∂x = −3 h0 x / (a² (1 + r²/a²)^(5/2)) from :func:`terrain`. The strong no-normal-flow
    condition uses them (instead of the mesh's area-weighted normals, which the triangulation
    of the ground tilts: about 2.6° at the summit of the small mesh) so that the kinematic
    condition w = u·∇h holds at the nodes — w = 0 at the summit.

    Parameters
    ----------
    params : Parameters; coords : (m, 3) float64 node coordinates [m]

    Returns
    -------
    normals : (m, 3) float64; on_terrain : (m,) bool — the node lies on :func:`terrain` (to
    1e-9·h0 + 1e-9 m; a mesh read from a file may differ, and there only the mesh's own normals
    apply)
    """
    c = _coords(coords)
    x, y = c[:, 0], c[:, 1]
    q = 1.0 + (x * x + y * y) / (params.a * params.a)
    g = -3.0 * params.h0 / (params.a * params.a * q ** 2.5)
    n = np.column_stack([g * x, g * y, -np.ones_like(x)])
    n /= np.sqrt(1.0 + (g * x) ** 2 + (g * y) ** 2)[:, None]
    on = np.abs(c[:, 2] - terrain(params, x, y)) <= 1e-9 * params.h0 + 1e-9
    return n, on


def build_mesh(params: Parameters, *, nx: int = 48, ny: int = 48, nz: int = 40,
               dx_min: float = 250.0, dz_min: float = 150.0, renumber: str = "rcm",
               shuffle: bool = False, seed: int = 0, split: str = "mirror_y",
               core_x=None, core_y_half=None, core_dx=None, core_z_top=None,
               dz_core=None) -> Mesh:
    """Terrain-following graded tetrahedral mesh of the case domain.

    Parameters
    ----------
    params : Parameters
        Supplies lx, ly, lz and the terrain.
    nx, ny, nz : int
        Hexahedral cells per direction (6 tets each). Defaults 48 x 48 x 40 -> 98,441 nodes,
        552,960 tets, the size of the paper's mesh (docs/equations.md §5).
    dx_min : float
        Horizontal spacing at the mountain [m] (default 250 m: 4 cells per half-width a;
        grows geometrically to ~3.5 km at the lateral boundaries with the defaults).
    dz_min : float
        First-layer thickness [m] (default 150 m; grows to ~830 m under the lid, ~450 m at
        7 km, i.e. ~14 layers per vertical wavelength in the wave region).
    renumber : {"rcm", "none"}
        Node/element ordering: reverse Cuthill-McKee (``dycore.mesh.reverse_cuthill_mckee``)
        or the generator's structured order.
    shuffle : bool
        If true, randomly permute nodes and elements AFTER the renumbering (so the result is
        always a random order; used to measure memory-locality effects).
    seed : int
        Seed of the shuffle (``numpy.random.default_rng``).
    split : {"mirror_y", "kuhn"}
        Hexahedron -> tetrahedra split (``dycore.mesh.generate``): Kuhn mirrored in y for
        y < 0 (mirror-symmetric about y = 0 with an even ny, docs/equations.md §5), or plain Kuhn.
    core_x, core_y_half, core_dx, core_z_top, dz_core : optional
        Uniform core region replacing the dx_min / dz_min grading (:class:`GridSpec`): cells of
        at most core_dx over core_x[0] <= x <= core_x[1], |y| <= core_y_half, of at most
        dz_core below core_z_top, graded geometrically only outside the core.

    Returns
    -------
    Mesh
        Checked mesh (:meth:`Mesh.check`).

    Raises
    ------
    MeshError
        Bad grid values (names the field, from :class:`GridSpec`).
    ConfigError
        Unknown ``renumber`` value.
    """
    if renumber not in ("rcm", "none"):
        raise ConfigError(f"renumber must be 'rcm' or 'none', got {renumber!r}")
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


#: relative tolerance (of the largest domain length) of :func:`check_mesh`'s plane tests
MESH_PLANE_RTOL = _background.MESH_PLANE_RTOL


def check_mesh(params: Parameters, mesh: Mesh, source: str = "mesh") -> None:
    """Check that a mesh read from a file (``mesh.file``) is a mesh of this case's domain.

    The sponge, the Dirichlet values and the stability limits are set from ``params``, so the
    file must mesh ``[-lx/2, lx/2] x [-ly/2, ly/2] x [ground, lz]``: every :class:`FaceTag`
    present; the west / east / south / north / top faces on ``x = -lx/2``, ``x = lx/2``,
    ``y = -ly/2``, ``y = ly/2``, ``z = lz``; every node inside the box (tolerance
    :data:`MESH_PLANE_RTOL` x ``max(lx, ly, lz)``). The ground may differ from
    :func:`terrain` (the run uses the file's ground); a difference above 1 % of ``h0`` (at least
    1 m) is announced once, since ``dycore verify``'s linear theory uses ``h0`` and ``a``.

    Parameters
    ----------
    params : Parameters
    mesh : Mesh
    source : str
        Names the mesh in messages (the file).

    Raises
    ------
    MeshError
        A tag without faces, a face off its plane or a node outside the box (names the tag, the
        plane, the node's coordinates and the parameters to change).
    """
    _background.check_box_mesh(params, mesh, source, lambda x, y: terrain(params, x, y))


# ------------------------------------------------------------------------ sponge, states
def _coords(coords) -> np.ndarray:
    c = np.asarray(coords, dtype=REAL)
    if c.ndim != 2 or c.shape[1] != 3:
        raise MeshError(f"coords must have shape (nnodes, 3), got {c.shape}")
    return c


def sponge(params: Parameters, coords) -> np.ndarray:
    """Absorbing-layer (Rayleigh damping) rate sigma at the nodes.

    ``sigma = sigma_max * sin^2(pi/2 * xi)``, with ``xi`` in [0, 1] the fractional depth into a
    layer: top layer ``xi = (z - sponge_top_base) / (lz - sponge_top_base)`` above
    ``sponge_top_base``; lateral layers ``xi = 1 - d / sponge_lateral_width`` where d is the
    distance to the west / east / south / north boundary. Layers combine by max (equivalently
    the largest xi, sin^2 being monotone on [0, 1]). Zero in the interior
    ``|x| <= lx/2 - w, |y| <= ly/2 - w, z <= sponge_top_base``; sigma_max on the lid and the
    lateral boundaries.

    Parameters
    ----------
    params : Parameters
    coords : array_like, shape (nnodes, 3), float64
        Node positions [m].

    Returns
    -------
    ndarray, shape (nnodes,), float64
        sigma [1/s].

    Source: docs/equations.md §5 (profile and layer extents), §2 (the -sigma (u - u_ref) terms).
    """
    c = _coords(coords)
    x, y, z = c[:, 0], c[:, 1], c[:, 2]
    xi = np.zeros(c.shape[0], dtype=REAL)
    depth = params.lz - params.sponge_top_base
    if depth > 0:
        xi = np.maximum(xi, np.clip((z - params.sponge_top_base) / depth, 0.0, 1.0))
    w = params.sponge_lateral_width
    if w > 0:
        d = np.minimum.reduce([x + 0.5 * params.lx, 0.5 * params.lx - x,
                               y + 0.5 * params.ly, 0.5 * params.ly - y])
        xi = np.maximum(xi, np.clip(1.0 - d / w, 0.0, 1.0))
    s = np.sin(0.5 * np.pi * xi)
    return params.sponge_max * s * s


def theta_bar(params: Parameters, z) -> np.ndarray:
    """Background potential temperature ``theta0 * exp(N^2 z / g)`` [K].

    Parameters
    ----------
    params : Parameters
    z : array_like, float
        Height [m].

    Returns
    -------
    ndarray, float64, shape of z

    Source: docs/equations.md §2.
    """
    return _background.theta_bar(params, z)


def dtheta_bar_dz(params: Parameters, z) -> np.ndarray:
    """Background lapse ``d theta_bar / dz = theta_bar * N^2 / g`` [K/m], shape of z.

    Source: docs/equations.md §2 (the -w d theta_bar/dz source of the theta' equation).
    """
    return _background.dtheta_bar_dz(params, z)


def q_v_ref(params: Parameters, z) -> np.ndarray:
    """Reference water-vapour profile ``q_v_surface * exp(-z / q_v_scale_height)`` [kg/kg].

    Parameters
    ----------
    params : Parameters
    z : array_like, float
        Height [m] (absolute, not above ground).

    Returns
    -------
    ndarray, float64, shape of z
    """
    return _background.q_v_ref(params, z)


def reference_state(params: Parameters, coords) -> dict[str, np.ndarray]:
    """Reference (relaxation / Dirichlet) values at the nodes.

    Parameters
    ----------
    params : Parameters
    coords : array_like, shape (nnodes, 3), float64 [m]

    Returns
    -------
    dict of str -> ndarray (fresh float64 arrays)
        ``u`` (nnodes, 3) = (u0, 0, 0) [m/s]; ``theta_prime`` (nnodes,) zeros [K];
        ``q_v`` (nnodes,) :func:`q_v_ref` of z [kg/kg]; ``q_c``, ``q_r`` (nnodes,) zeros [kg/kg].

    Source: docs/equations.md §2 (u_ref = (U, 0, 0), q_ref; Dirichlet values on lateral faces).
    """
    return _background.reference_state(params, coords)


def initial_state(params: Parameters, coords) -> dict[str, np.ndarray]:
    """Initial condition: the reference state plus zero pressure (impulsive start).

    Returns
    -------
    dict of str -> ndarray (fresh float64 arrays)
        ``u`` (nnodes, 3) [m/s]; ``p`` (nnodes,) zeros [m^2/s^2]; ``theta_prime`` (nnodes,) [K];
        ``q_v``, ``q_c``, ``q_r`` (nnodes,) [kg/kg] -- as :func:`reference_state`.
    """
    return _background.initial_state(params, coords)


#: default synthesis grid of :func:`linear_reference` (about 1e-3 relative; docs/verify.md)
LINEAR_REFERENCE_GRID = {"length": 4_096_000.0, "length_y": 256_000.0, "dx": 250.0}


def linear_reference(params: Parameters, **grid):
    """The steady 3-D linear solution for ``dycore verify``:
    :class:`dycore.cases.mountainwave3d.linear_theory.BellMountainWaves` of these parameters on
    the synthesis grid :data:`LINEAR_REFERENCE_GRID` (``grid`` overrides its keys ``length``,
    ``length_y``, ``dx`` [m])."""
    from dycore.cases.mountainwave3d.linear_theory import BellMountainWaves

    return BellMountainWaves(u0=params.u0, n=params.brunt_vaisala, h0=params.h0, a=params.a,
                             **{**LINEAR_REFERENCE_GRID, **grid})
