"""Terrain-following, graded, structured tetrahedral mesh of a box over a mountain.

A tensor grid of ``nx * ny * nz`` hexahedral cells is built from three graded 1-D node
distributions, lifted onto the terrain with the Gal-Chen & Somerville (1975) coordinate
``z = h(x, y) + zeta * (lz - h(x, y)) / lz`` and every cell is split into the 6 tetrahedra of the
Kuhn (Freudenthal) triangulation. Everything is vectorised NumPy; a 48 x 48 x 40 grid
(552,960 tetrahedra) takes well under a second to a few seconds.

Source: docs/equations.md §5 (the mountainwave3D mesh: 48x48x40 cells -> 98,441 nodes, 552,960 tets,
refined horizontally towards the mountain and vertically towards the ground).

Kuhn split
----------
In the index space of one cell (corner offsets ``(a, b, c)`` in {0,1}^3) each permutation ``p``
of the axes gives the tetrahedron ``v0 = 000, v1 = v0 + e_p0, v2 = v1 + e_p1, v3 = 111``. Every
cube face is then cut along the diagonal through its lowest and highest corners, the same on
both sides of the face, so the triangulation is conforming across cells. The signed volume of
the mapped tetrahedron is ``sign(p) * dx * dy * dz_col / 6`` (x depends only on i, y only on j,
and z grows with k in every column), so odd permutations are made positive by swapping local
nodes 1 and 2 -- orientation is exact by construction and :meth:`Mesh.check` confirms it.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from itertools import permutations
from typing import Callable

import numpy as np
from scipy.optimize import brentq

from dycore.dtypes import INDEX, REAL
from dycore.errors import MeshError
from dycore.mesh.mesh import OUTWARD_LOCAL_FACES, FaceTag, Mesh

__all__ = [
    "GridSpec",
    "generate_terrain_following",
    "graded_symmetric_nodes",
    "graded_one_sided_nodes",
    "KUHN_PERMUTATIONS",
]

#: The six axis permutations of the Kuhn split, in the order of the 6 tets inside each cell.
KUHN_PERMUTATIONS = tuple(permutations(range(3)))

_INT32_MAX = np.iinfo(np.int32).max


# ----------------------------------------------------------------------------- 1-D grading
def _perm_sign(p) -> int:
    s = 1
    p = list(p)
    for i in range(len(p)):
        for j in range(i + 1, len(p)):
            if p[i] > p[j]:
                s = -s
    return s


def _solve_ratio(m: int, k0: int, s: float) -> float:
    """Growth ratio r >= 1 with ``sum_{k=k0}^{k0+m-1} r**k = s`` (requires ``s >= m``)."""
    if s <= m * (1.0 + 1e-13):
        return 1.0
    kmax = k0 + m - 1
    if kmax == 0:  # a single term r**0 = 1 cannot match s > 1; callers avoid this case
        raise MeshError("internal: cannot grade a single cell of fixed size")
    k = np.arange(k0, k0 + m, dtype=np.float64)

    def f(r: float) -> float:
        return float(np.sum(r ** k)) - s

    r_hi = s ** (1.0 / kmax)  # r**kmax <= sum <= s
    if f(r_hi) < 0.0:        # rounding guard
        r_hi *= 1.0 + 1e-9
    return float(brentq(f, 1.0, r_hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500))


def graded_symmetric_nodes(n: int, length: float, d_min: float) -> np.ndarray:
    """Node positions of ``n`` cells on ``[-length/2, length/2]``, finest at the centre.

    Cell sizes grow geometrically, with one ratio ``r >= 1`` solved (Brent) so that the total
    length is exact, from ``d_min`` at the centre to the two ends. Even ``n``: a node at 0 and
    the two central cells of size ``d_min``; odd ``n``: one central cell of size ``d_min``
    centred on 0, then ``d_min * r, d_min * r**2, ...``. The distribution is exactly symmetric
    (the negative half is the mirror of the positive half) and its end points are exactly
    ``-length/2`` and ``length/2``. With ``n <= 2`` there is no free cell to grade and the
    spacing is uniform, ``length / n``.

    Parameters
    ----------
    n : int
        Number of cells, >= 1.
    length : float
        Domain length [m], > 0.
    d_min : float
        Spacing at the centre [m]; needs ``n * d_min <= length``.

    Returns
    -------
    ndarray, shape (n + 1,), float64
        Strictly increasing node positions [m].

    Raises
    ------
    MeshError
        If ``n * d_min > length`` (the grading could only shrink towards the ends).
    """
    _check_grading(n, length, d_min, "n", "length", "d_min")
    half = 0.5 * length
    if n <= 2:
        nodes = np.linspace(-half, half, n + 1)
        if n == 2:
            nodes[1] = 0.0
        return nodes
    if n % 2 == 0:
        m = n // 2
        r = _solve_ratio(m, 0, half / d_min)
        sizes = d_min * r ** np.arange(m)
        pos = np.concatenate(([0.0], np.cumsum(sizes)))
        pos *= half / pos[-1]
        pos[-1] = half
        return np.concatenate((-pos[::-1], pos[1:]))
    m = (n - 1) // 2
    rest = half - 0.5 * d_min
    r = _solve_ratio(m, 1, rest / d_min)
    sizes = d_min * r ** np.arange(1, m + 1)
    cum = np.cumsum(sizes)
    cum *= rest / cum[-1]
    pos = np.concatenate(([0.5 * d_min], 0.5 * d_min + cum))
    pos[-1] = half
    return np.concatenate((-pos[::-1], pos))


def graded_one_sided_nodes(n: int, length: float, d_min: float) -> np.ndarray:
    """Node positions of ``n`` cells on ``[0, length]``, finest (``d_min``) at 0.

    Cell sizes are ``d_min * r**k`` (k = 0..n-1) with the ratio ``r >= 1`` solved so that the
    total is exactly ``length``. ``n == 1`` gives the single cell ``[0, length]``.

    Parameters
    ----------
    n : int
        Number of cells, >= 1.
    length : float
        Length [m], > 0.
    d_min : float
        First cell size [m]; needs ``n * d_min <= length``.

    Returns
    -------
    ndarray, shape (n + 1,), float64
        Strictly increasing, first 0.0 and last exactly ``length`` [m].

    Raises
    ------
    MeshError
        If ``n * d_min > length``.
    """
    _check_grading(n, length, d_min, "n", "length", "d_min")
    if n == 1:
        return np.array([0.0, float(length)])
    r = _solve_ratio(n, 0, length / d_min)
    pos = np.concatenate(([0.0], np.cumsum(d_min * r ** np.arange(n))))
    pos *= length / pos[-1]
    pos[-1] = length
    return pos


def _check_grading(n, length, d_min, n_name, l_name, d_name) -> None:
    if n * d_min > length * (1.0 + 1e-12):
        raise MeshError(
            f"{d_name} = {d_min:g} m is too large: {n_name} * {d_name} = {n * d_min:g} m exceeds "
            f"{l_name} = {length:g} m, so the cells would have to shrink away from the finest "
            f"point; use {d_name} <= {length / n:g} m"
        )


# ------------------------------------------------------------------------------- GridSpec
@dataclass(frozen=True)
class GridSpec:
    """Size and grading of the terrain-following grid.

    Parameters
    ----------
    nx, ny, nz : int
        Numbers of hexahedral cells in x, y, z (each >= 1); the mesh has
        ``(nx+1)(ny+1)(nz+1)`` nodes and ``6 nx ny nz`` tetrahedra.
    lx, ly : float
        Horizontal domain size [m]: ``x in [-lx/2, lx/2]``, ``y in [-ly/2, ly/2]``.
    lz : float
        Height of the flat lid [m]; columns run from the terrain ``h(x, y)`` to ``lz``.
    dx_min : float
        Horizontal spacing at the domain centre [m] (used for x and y); needs
        ``nx * dx_min <= lx`` and ``ny * dx_min <= ly``.
    dz_min : float
        Vertical spacing of the first layer in the flat-terrain coordinate ``zeta`` [m]; the
        physical first layer over terrain of height h is ``dz_min * (1 - h/lz)``. Needs
        ``nz * dz_min <= lz``.

    Raises
    ------
    MeshError
        At construction, naming the bad field (non-integer or < 1 counts, non-positive or
        non-finite lengths, impossible grading, more than 2**31 - 1 nodes or elements).
    """

    nx: int
    ny: int
    nz: int
    lx: float
    ly: float
    lz: float
    dx_min: float
    dz_min: float

    def __post_init__(self) -> None:
        for name in ("nx", "ny", "nz"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise MeshError(f"GridSpec.{name} must be an integer, got {v!r}")
            if v < 1:
                raise MeshError(f"GridSpec.{name} must be >= 1, got {v}")
            object.__setattr__(self, name, int(v))
        for name in ("lx", "ly", "lz", "dx_min", "dz_min"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise MeshError(f"GridSpec.{name} must be a number [m], got {v!r}")
            v = float(v)
            if not (math.isfinite(v) and v > 0.0):
                raise MeshError(f"GridSpec.{name} must be finite and > 0 [m], got {v}")
            object.__setattr__(self, name, v)
        _check_grading(self.nx, self.lx, self.dx_min, "GridSpec.nx", "GridSpec.lx",
                       "GridSpec.dx_min")
        _check_grading(self.ny, self.ly, self.dx_min, "GridSpec.ny", "GridSpec.ly",
                       "GridSpec.dx_min")
        _check_grading(self.nz, self.lz, self.dz_min, "GridSpec.nz", "GridSpec.lz",
                       "GridSpec.dz_min")
        nnodes = (self.nx + 1) * (self.ny + 1) * (self.nz + 1)
        nele = 6 * self.nx * self.ny * self.nz
        if nnodes > _INT32_MAX or 6 * nele > _INT32_MAX:
            raise MeshError(
                f"GridSpec nx={self.nx}, ny={self.ny}, nz={self.nz} gives {nnodes} nodes / "
                f"{nele} elements, too many for int32 indices"
            )

    @property
    def nnodes(self) -> int:
        """``(nx+1)(ny+1)(nz+1)``."""
        return (self.nx + 1) * (self.ny + 1) * (self.nz + 1)

    @property
    def nele(self) -> int:
        """``6 nx ny nz``."""
        return 6 * self.nx * self.ny * self.nz

    def x_nodes(self) -> np.ndarray:
        """(nx+1,) float64 node x positions [m] (:func:`graded_symmetric_nodes`)."""
        return graded_symmetric_nodes(self.nx, self.lx, self.dx_min)

    def y_nodes(self) -> np.ndarray:
        """(ny+1,) float64 node y positions [m] (:func:`graded_symmetric_nodes`)."""
        return graded_symmetric_nodes(self.ny, self.ly, self.dx_min)

    def zeta_nodes(self) -> np.ndarray:
        """(nz+1,) float64 flat-terrain levels zeta in [0, lz] [m] (graded_one_sided_nodes)."""
        return graded_one_sided_nodes(self.nz, self.lz, self.dz_min)


# ------------------------------------------------------------------------------ generator
def _kuhn_local() -> tuple[np.ndarray, list[int]]:
    """Corner offsets (6, 4, 3) of the 6 positively oriented Kuhn tets (index space)."""
    corners = np.zeros((6, 4, 3), dtype=np.int64)
    for t, p in enumerate(KUHN_PERMUTATIONS):
        v = np.zeros(3, dtype=np.int64)
        corners[t, 0] = v
        for step in range(3):
            v = v.copy()
            v[p[step]] += 1
            corners[t, step + 1] = v
        if _perm_sign(p) < 0:
            corners[t, [1, 2]] = corners[t, [2, 1]]
    return corners, [_perm_sign(p) for p in KUHN_PERMUTATIONS]


def generate_terrain_following(spec: GridSpec,
                               terrain: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Mesh:
    """Build the graded terrain-following tetrahedral mesh.

    Parameters
    ----------
    spec : GridSpec
        Cell counts, domain size and grading.
    terrain : callable
        ``terrain(x, y) -> h`` ground height [m], vectorised: called once with two float64
        arrays of shape (ny+1, nx+1) and must return an array broadcastable to that shape,
        finite and ``< spec.lz`` everywhere.

    Returns
    -------
    Mesh
        ``(nx+1)(ny+1)(nz+1)`` nodes numbered ``i + (nx+1)*(j + (ny+1)*k)`` (x fastest);
        ``6 nx ny nz`` tets, element ``6*c + t`` being Kuhn tet ``t`` of cell
        ``c = i + nx*(j + ny*k)``; ``4 (nx ny + nx nz + ny nz)`` boundary faces in tag order
        GROUND, TOP, WEST, EAST, SOUTH, NORTH, outward oriented, with owning elements.
        Vertical coordinate (Gal-Chen & Somerville 1975):
        ``z = h(x, y) + zeta * (lz - h(x, y)) / lz`` with ``zeta`` from
        :meth:`GridSpec.zeta_nodes`; the ground level is exactly ``h`` and the top exactly
        ``lz``. Positions x, y are exact on the lateral boundaries (``+-lx/2``, ``+-ly/2``).

    Raises
    ------
    MeshError
        If ``spec`` is not a GridSpec, the terrain is non-finite, of the wrong shape or reaches
        the lid, or (should never happen) :meth:`Mesh.check` fails.
    """
    if not isinstance(spec, GridSpec):
        raise MeshError(f"spec must be a GridSpec, got {type(spec).__name__}")
    nx, ny, nz, lz = spec.nx, spec.ny, spec.nz, spec.lz
    x = spec.x_nodes()
    y = spec.y_nodes()
    zeta = spec.zeta_nodes()

    xg, yg = np.meshgrid(x, y, indexing="xy")           # (ny+1, nx+1)
    try:
        h = np.broadcast_to(np.asarray(terrain(xg, yg), dtype=REAL), xg.shape)
    except ValueError as exc:
        raise MeshError(f"terrain(x, y) must return an array of shape {xg.shape}: {exc}") from exc
    bad = ~np.isfinite(h)
    if bad.any():
        j, i = np.argwhere(bad)[0]
        raise MeshError(f"terrain is not finite at x={xg[j, i]:g} m, y={yg[j, i]:g} m")
    if h.max() >= lz:
        j, i = np.unravel_index(int(np.argmax(h)), h.shape)
        raise MeshError(
            f"terrain height {h[j, i]:g} m at x={xg[j, i]:g} m, y={yg[j, i]:g} m reaches the "
            f"lid lz = {lz:g} m"
        )

    # ---- coordinates, node id = i + (nx+1)*(j + (ny+1)*k)
    nn_layer = (nx + 1) * (ny + 1)
    z = h[None, :, :] + zeta[:, None, None] * ((lz - h) / lz)[None, :, :]   # (nz+1, ny+1, nx+1)
    z[0] = h
    z[-1] = lz
    coords = np.empty((nz + 1, ny + 1, nx + 1, 3), dtype=REAL)
    coords[..., 0] = xg[None]
    coords[..., 1] = yg[None]
    coords[..., 2] = z
    coords = coords.reshape(-1, 3)

    # ---- tetrahedra
    corners, _ = _kuhn_local()                                   # (6, 4, 3)
    sx, sy, sz = 1, nx + 1, nn_layer
    offs = corners[..., 0] * sx + corners[..., 1] * sy + corners[..., 2] * sz   # (6, 4)
    kk, jj, ii = np.indices((nz, ny, nx), dtype=np.int64)
    base = (ii + (nx + 1) * (jj + (ny + 1) * kk)).ravel()        # cell c = i + nx*(j + ny*k)
    tets = (base[:, None, None] + offs[None, :, :]).reshape(-1, 4).astype(INDEX)

    # ---- boundary faces: (tag, axis, side, cell selector)
    cell = np.arange(nx * ny * nz, dtype=np.int64).reshape(nz, ny, nx)
    sides = (
        (FaceTag.GROUND, 2, 0, cell[0, :, :]),
        (FaceTag.TOP, 2, 1, cell[-1, :, :]),
        (FaceTag.WEST, 0, 0, cell[:, :, 0]),
        (FaceTag.EAST, 0, 1, cell[:, :, -1]),
        (FaceTag.SOUTH, 1, 0, cell[:, 0, :]),
        (FaceTag.NORTH, 1, 1, cell[:, -1, :]),
    )
    faces_l, tags_l, ele_l = [], [], []
    for tag, axis, side, cells in sides:
        # side 0 (low): the axis is stepped last -> face opposite local node 3;
        # side 1 (high): the axis is stepped first -> face opposite local node 0.
        if side == 0:
            tsel = [t for t, p in enumerate(KUHN_PERMUTATIONS) if p[2] == axis]
            missing = 3
        else:
            tsel = [t for t, p in enumerate(KUHN_PERMUTATIONS) if p[0] == axis]
            missing = 0
        ele = (6 * cells.ravel()[:, None] + np.asarray(tsel)[None, :]).ravel()
        faces_l.append(tets[ele][:, OUTWARD_LOCAL_FACES[missing]])
        tags_l.append(np.full(ele.size, int(tag), dtype=np.int8))
        ele_l.append(ele)

    mesh = Mesh(
        coords=coords,
        tets=tets,
        faces=np.concatenate(faces_l),
        face_tags=np.concatenate(tags_l),
        face_ele=np.concatenate(ele_l).astype(INDEX),
    )
    mesh.check()
    return mesh
