"""Terrain-following, graded, structured tetrahedral mesh of a box over a mountain.

A tensor grid of ``nx * ny * nz`` hexahedral cells is built from three graded 1-D node
distributions, lifted onto the terrain with the Gal-Chen & Somerville (1975) coordinate
``z = h(x, y) + zeta * (lz - h(x, y)) / lz`` and every cell is split into 6 tetrahedra: the
Kuhn (Freudenthal) triangulation, mirrored in y for the cells in y < 0 (``split="mirror_y"``, the
default) so that the mesh is mirror-symmetric about the plane y = 0. Everything is vectorised
NumPy; a 48 x 48 x 40 grid (552,960 tetrahedra) takes well under a second to a few seconds.

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

Mirror-symmetric split about y = 0
----------------------------------
The Kuhn split is not mirror-symmetric: reflecting a cell in y maps the diagonal 000-111 to
010-101, so most tetrahedra have no mirror image (68 % on the paper-size mesh) and a flow that
is symmetric in y picks up an antisymmetric discretisation error. With ``split="mirror_y"``
the cells with ``j < ny/2`` (those in y < 0) use the Kuhn split reflected in the local y index,
offsets ``(a, b, c) -> (a, 1 - b, c)``; reflection reverses orientation, so local nodes 1 and 2
of every mirrored tet are swapped back to positive volume. Tet ``t`` of cell ``(i, j, k)`` is
then the exact mirror image of tet ``t`` of cell ``(i, ny - 1 - j, k)`` (the y node positions
and the terrain are symmetric).

Why it stays conforming (needs an even ``ny``): inside each half the split is one Kuhn split
(reflected or not), conforming by the argument above. The only faces between a mirrored and an
unmirrored cell lie on the grid plane ``j = ny/2``, which is y = 0 exactly when ``ny`` is even
(:func:`graded_symmetric_nodes` puts a node at 0). Such a face is cut along the diagonal through
its lowest and highest (x, z) corners from both sides, because the reflection changes only the
y offset, never the (x, z) offsets of the face's corners -- so both cells cut it the same way.
With odd ``ny`` the middle row of cells straddles y = 0 and no split of those cells into 6 tets
is mirror-symmetric; the generator then keeps the plain Kuhn split everywhere and logs a
warning (``split="kuhn"`` asks for it outright).

Core grading
------------
By default x and y are graded geometrically from ``dx_min`` at the centre and zeta from
``dz_min`` at the ground. With ``core_dx`` (and ``core_x``, ``core_y_half``) the horizontal
spacing is uniform over the core ``core_x[0] <= x <= core_x[1]``, ``|y| <= core_y_half`` (at most
``core_dx``, exactly dividing the core) and grows geometrically only outside it, starting from
the core spacing; with ``dz_core`` (and ``core_z_top``) the same holds for zeta below
``core_z_top``. See :func:`core_graded_nodes`.
"""
from __future__ import annotations

import logging
import math
import numbers
from dataclasses import dataclass
from itertools import permutations
from typing import Callable

import numpy as np
from numba import njit, prange

from dycore.dtypes import INDEX, REAL
from dycore.errors import MeshError
from dycore.mesh.mesh import OUTWARD_LOCAL_FACES, FaceTag, Mesh

__all__ = [
    "GridSpec",
    "generate_terrain_following",
    "graded_symmetric_nodes",
    "graded_one_sided_nodes",
    "core_graded_nodes",
    "KUHN_PERMUTATIONS",
    "SPLITS",
]

log = logging.getLogger("dycore")

#: Hexahedron -> tetrahedra splits: the plain Kuhn split, or Kuhn mirrored in y for y < 0.
SPLITS = ("kuhn", "mirror_y", "symmetric_y")

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
    from scipy.optimize import brentq     # here: a run whose mesh comes from the set-up cache
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


def core_graded_nodes(n: int, lo: float, hi: float, core_lo: float, core_hi: float,
                      d_core: float, name: str = "n") -> np.ndarray:
    """Node positions of ``n`` cells on ``[lo, hi]``: uniform over a core, graded outside it.

    The core ``[core_lo, core_hi]`` gets ``ceil((core_hi - core_lo) / d_core)`` cells of equal
    size ``dc <= d_core`` (so both core ends are nodes). The remaining cells go to the two outer
    intervals, each graded geometrically outward (:func:`graded_one_sided_nodes`) starting from
    ``dc``, so the spacing is continuous at the core edges. The split of the remaining cells
    between the two sides is the one with the smallest largest growth ratio. A symmetric set-up
    (``lo = -hi``, ``core_lo = -core_hi``) is built as the mirror image of its positive half and
    is exactly symmetric with a node at 0; it needs an even ``n``.

    Parameters
    ----------
    n : int
        Number of cells, >= 1.
    lo, hi : float
        Interval end points [m], ``lo < hi``.
    core_lo, core_hi : float
        Core end points [m], ``lo <= core_lo < core_hi <= hi``.
    d_core : float
        Largest cell size in the core [m], > 0.
    name : str
        How the cell count is named in error messages (``"GridSpec.nx"``).

    Returns
    -------
    ndarray, shape (n + 1,), float64
        Strictly increasing node positions, exactly ``lo`` first and ``hi`` last [m].

    Raises
    ------
    MeshError
        If the core is not inside ``[lo, hi]``, if ``n`` is too small for the core plus at least
        one cell per non-empty outer interval, or so large that outer cells would be smaller
        than the core cells (naming the range of ``n`` that works).
    """
    lo, hi, core_lo, core_hi, d_core = (float(v) for v in (lo, hi, core_lo, core_hi, d_core))
    if not (lo <= core_lo < core_hi <= hi):
        raise MeshError(f"the core [{core_lo:g}, {core_hi:g}] m must lie inside the domain "
                        f"[{lo:g}, {hi:g}] m and have positive length")
    if not (math.isfinite(d_core) and d_core > 0.0):
        raise MeshError(f"the core spacing must be finite and > 0 [m], got {d_core}")
    if lo == -hi and core_lo == -core_hi and lo < 0.0:
        if n % 2:
            raise MeshError(f"{name} = {n}: a core symmetric about 0 needs an even number of "
                            f"cells (a node at 0)")
        half = core_graded_nodes(n // 2, 0.0, hi, 0.0, core_hi, d_core, f"{name}/2")
        return np.concatenate((-half[::-1], half[1:]))
    n_core = max(1, math.ceil((core_hi - core_lo) / d_core * (1.0 - 1e-12)))
    dc = (core_hi - core_lo) / n_core
    left, right = core_lo - lo, hi - core_hi

    def bounds(length):        # allowed cell counts of one outer interval
        if length <= 0.0:
            return 0, 0
        return 1, max(1, int(math.floor(length / dc * (1.0 + 1e-12))))

    (l_min, l_max), (r_min, r_max) = bounds(left), bounds(right)
    rest = n - n_core
    if not (l_min + r_min <= rest <= l_max + r_max):
        raise MeshError(
            f"{name} = {n} does not fit the core: {n_core} core cells of {dc:g} m plus "
            f"{l_min + r_min} to {l_max + r_max} graded cells outside it, i.e. {name} in "
            f"[{n_core + l_min + r_min}, {n_core + l_max + r_max}]")

    def ratio(m, length):      # growth ratio of m outer cells; one cell jumps from dc to length
        if m == 0:
            return 1.0
        return length / dc if m == 1 else _solve_ratio(m, 0, length / dc)

    best = None
    for n_left in range(max(l_min, rest - r_max), min(l_max, rest - r_min) + 1):
        worst = max(ratio(n_left, left), ratio(rest - n_left, right))
        if best is None or worst < best[0]:
            best = (worst, n_left)
    n_left = best[1]
    n_right = rest - n_left
    core = core_lo + dc * np.arange(n_core + 1, dtype=np.float64)
    core[-1] = core_hi
    parts = []
    if n_left:
        parts.append(core_lo - graded_one_sided_nodes(n_left, left, dc)[:0:-1])
    parts.append(core)
    if n_right:
        parts.append(core_hi + graded_one_sided_nodes(n_right, right, dc)[1:])
    nodes = np.concatenate(parts)
    nodes[0], nodes[-1] = lo, hi
    return nodes


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
    core_x : (float, float) or None
        Streamwise extent of the uniform horizontal core [m]; with ``core_y_half`` and
        ``core_dx`` (all three or none) it replaces the ``dx_min`` grading
        (:func:`core_graded_nodes`).
    core_y_half : float or None
        The core spans ``|y| <= core_y_half`` [m] (symmetric; needs an even ``ny``).
    core_dx : float or None
        Largest horizontal cell size in the core [m].
    core_z_top : float or None
        Top of the uniform vertical core in zeta [m]; with ``dz_core`` (both or none) it
        replaces the ``dz_min`` grading: uniform from the ground to ``core_z_top``, graded above.
    dz_core : float or None
        Largest vertical cell size in the core [m].
    split : {"mirror_y", "kuhn", "symmetric_y"}
        Hexahedron -> tetrahedra split (module docstring): Kuhn mirrored in y for y < 0
        (mirror-symmetric about y = 0 for even ``ny``; odd ``ny`` falls back to ``kuhn`` with a
        logged warning), the plain Kuhn split everywhere, or 20 tetrahedra per cell around
        centre nodes, every cell mirror-symmetric about its own mid-plane in y
        (:mod:`dycore.mesh.layer_split`: a channel with free-slip walls keeps a flow uniform
        in y uniform).

    Raises
    ------
    MeshError
        At construction, naming the bad field (non-integer or < 1 counts, non-positive or
        non-finite lengths, impossible grading, incomplete or misplaced core, unknown split,
        more than 2**31 - 1 nodes or elements).
    """

    nx: int
    ny: int
    nz: int
    lx: float
    ly: float
    lz: float
    dx_min: float
    dz_min: float
    core_x: tuple | None = None
    core_y_half: float | None = None
    core_dx: float | None = None
    core_z_top: float | None = None
    dz_core: float | None = None
    split: str = "mirror_y"

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
        if self.split not in SPLITS:
            raise MeshError(f"GridSpec.split must be one of {SPLITS}, got {self.split!r}")
        self._check_core()
        if self.core_dx is None:
            _check_grading(self.nx, self.lx, self.dx_min, "GridSpec.nx", "GridSpec.lx",
                           "GridSpec.dx_min")
            _check_grading(self.ny, self.ly, self.dx_min, "GridSpec.ny", "GridSpec.ly",
                           "GridSpec.dx_min")
        if self.dz_core is None:
            _check_grading(self.nz, self.lz, self.dz_min, "GridSpec.nz", "GridSpec.lz",
                           "GridSpec.dz_min")
        nnodes, nele = self.nnodes, self.nele
        if nnodes > _INT32_MAX or 6 * nele > _INT32_MAX:
            raise MeshError(
                f"GridSpec nx={self.nx}, ny={self.ny}, nz={self.nz} gives {nnodes} nodes / "
                f"{nele} elements, too many for int32 indices"
            )

    def _check_core(self) -> None:
        horiz = {k: getattr(self, k) for k in ("core_x", "core_y_half", "core_dx")}
        vert = {k: getattr(self, k) for k in ("core_z_top", "dz_core")}
        for group in (horiz, vert):
            given = [k for k, v in group.items() if v is not None]
            if given and len(given) < len(group):
                missing = [k for k in group if k not in given]
                raise MeshError(f"GridSpec.{given[0]} needs {', '.join(missing)} as well "
                                f"(a core is given by {', '.join(group)} together)")
        if self.core_x is not None:
            try:
                cx = tuple(float(v) for v in self.core_x)
            except (TypeError, ValueError):
                cx = ()
            if len(cx) != 2 or not all(math.isfinite(v) for v in cx):
                raise MeshError(f"GridSpec.core_x must be two finite numbers [m] (x_lo, x_hi), "
                                f"got {self.core_x!r}")
            object.__setattr__(self, "core_x", cx)
        for name in ("core_y_half", "core_dx", "core_z_top", "dz_core"):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (
                    math.isfinite(float(v)) and float(v) > 0.0):
                raise MeshError(f"GridSpec.{name} must be a finite number > 0 [m], got {v!r}")
            object.__setattr__(self, name, float(v))
        if self.core_dx is not None:            # raise now, naming the field, if it cannot fit
            self.x_nodes()
            self.y_nodes()
        if self.dz_core is not None:
            self.zeta_nodes()

    @property
    def nnodes(self) -> int:
        """``(nx+1)(ny+1)(nz+1)`` (plus the centre nodes of ``split="symmetric_y"``)."""
        if self.split == "symmetric_y":
            from dycore.mesh.layer_split import symmetric_y_node_count
            return symmetric_y_node_count(self.nx, self.ny, self.nz)
        return (self.nx + 1) * (self.ny + 1) * (self.nz + 1)

    @property
    def nele(self) -> int:
        """``6 nx ny nz`` (``20 nx ny nz`` for ``split="symmetric_y"``)."""
        return (20 if self.split == "symmetric_y" else 6) * self.nx * self.ny * self.nz

    def x_nodes(self) -> np.ndarray:
        """(nx+1,) float64 node x positions [m] (:func:`graded_symmetric_nodes`, or
        :func:`core_graded_nodes` over ``core_x`` when a core is given)."""
        if self.core_dx is None:
            return graded_symmetric_nodes(self.nx, self.lx, self.dx_min)
        h = 0.5 * self.lx
        return core_graded_nodes(self.nx, -h, h, self.core_x[0], self.core_x[1], self.core_dx,
                                 "GridSpec.nx")

    def y_nodes(self) -> np.ndarray:
        """(ny+1,) float64 node y positions [m], exactly symmetric about 0
        (:func:`graded_symmetric_nodes`, or :func:`core_graded_nodes` over ``|y| <= core_y_half``)."""
        if self.core_dx is None:
            return graded_symmetric_nodes(self.ny, self.ly, self.dx_min)
        h = 0.5 * self.ly
        return core_graded_nodes(self.ny, -h, h, -self.core_y_half, self.core_y_half,
                                 self.core_dx, "GridSpec.ny")

    def zeta_nodes(self) -> np.ndarray:
        """(nz+1,) float64 flat-terrain levels zeta in [0, lz] [m] (graded_one_sided_nodes, or
        :func:`core_graded_nodes` uniform below ``core_z_top``)."""
        if self.dz_core is None:
            return graded_one_sided_nodes(self.nz, self.lz, self.dz_min)
        return core_graded_nodes(self.nz, 0.0, self.lz, 0.0, self.core_z_top, self.dz_core,
                                 "GridSpec.nz")

    @property
    def mirrored(self) -> bool:
        """Whether the cells in y < 0 use the mirrored Kuhn split (``split="mirror_y"``, even
        ``ny``)."""
        return self.split == "mirror_y" and self.ny % 2 == 0


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


def _mirrored_kuhn_local() -> np.ndarray:
    """Corner offsets (6, 4, 3) of the Kuhn tets reflected in the local y index, positive.

    Offsets ``(a, b, c) -> (a, 1 - b, c)``; the reflection reverses every orientation, so local
    nodes 1 and 2 are swapped back. Tet ``t`` here is the mirror image of Kuhn tet ``t``.
    """
    corners, _ = _kuhn_local()
    corners = corners.copy()
    corners[..., 1] = 1 - corners[..., 1]
    corners[:, [1, 2]] = corners[:, [2, 1]]
    return corners


@njit(parallel=True, cache=True)
def _kuhn_tets(nx, ny, nz, plain, mirrored, ny_mirrored):
    """(6·nx·ny·nz, 4) INDEX: the tets of every cell c = i + nx(j + ny k) in cell order, tet
    t of cell c at row 6c + t — its base node i + (nx+1)(j + (ny+1)k) plus the offsets
    ``plain[t]`` ((6, 4) int64 node-id offsets), or ``mirrored[t]`` in the rows j <
    ``ny_mirrored``; one pass over the cells split between numba's threads."""
    ncell = nx * ny * nz
    tets = np.empty((6 * ncell, 4), INDEX)
    for c in prange(ncell):
        i = c % nx
        j = (c // nx) % ny
        k = c // (nx * ny)
        base = i + (nx + 1) * (j + (ny + 1) * k)
        offs = mirrored if j < ny_mirrored else plain
        for t in range(6):
            for a in range(4):
                tets[6 * c + t, a] = base + offs[t, a]
    return tets


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
        ``c = i + nx*(j + ny*k)`` (mirrored in y when ``j < ny/2`` and :attr:`GridSpec.mirrored`;
        it is then the mirror image of element ``6*c' + t``, ``c'`` the cell ``(i, ny-1-j, k)``);
        ``4 (nx ny + nx nz + ny nz)`` boundary faces in tag order GROUND, TOP, WEST, EAST, SOUTH,
        NORTH, each tag's faces in element order, outward oriented, with owning elements.
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

    if spec.split == "symmetric_y":                  # 20 tets per cell, centre nodes
        from dycore.mesh.layer_split import symmetric_y_mesh
        return symmetric_y_mesh(x, y, zeta, lz, terrain)

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

    # ---- tetrahedra (mirrored Kuhn split in the cells j < ny/2 when spec.mirrored)
    if spec.split == "mirror_y" and not spec.mirrored:
        log.warning("mesh: ny = %d is odd, so the middle row of cells straddles y = 0 and no "
                    "6-tet split of it is mirror-symmetric; using the plain Kuhn split "
                    "everywhere (use an even ny for a mesh symmetric about y = 0)", ny)
    sx, sy, sz = 1, nx + 1, nn_layer

    def offsets(corners):                                        # (6, 4, 3) -> (6, 4) node ids
        return corners[..., 0] * sx + corners[..., 1] * sy + corners[..., 2] * sz

    plain = offsets(_kuhn_local()[0])
    tets = _kuhn_tets(nx, ny, nz, plain,
                      offsets(_mirrored_kuhn_local()) if spec.mirrored else plain,
                      ny // 2 if spec.mirrored else 0)

    # ---- boundary faces: (tag, axis, index of the boundary plane, cells along it). A tet of
    # such a cell owns a boundary face when the three nodes opposite one of its local nodes
    # all lie on the plane (at most one face per tet and plane).
    cell = np.arange(nx * ny * nz, dtype=np.int64).reshape(nz, ny, nx)
    sides = (
        (FaceTag.GROUND, 2, 0, cell[0, :, :]),
        (FaceTag.TOP, 2, nz, cell[-1, :, :]),
        (FaceTag.WEST, 0, 0, cell[:, :, 0]),
        (FaceTag.EAST, 0, nx, cell[:, :, -1]),
        (FaceTag.SOUTH, 1, 0, cell[:, 0, :]),
        (FaceTag.NORTH, 1, ny, cell[:, -1, :]),
    )
    faces_l, tags_l, ele_l = [], [], []
    for tag, axis, plane, cells in sides:
        cand = (6 * cells.ravel()[:, None] + np.arange(6)[None, :]).ravel()
        nodes = tets[cand].astype(np.int64)
        index = (nodes % (nx + 1), (nodes // (nx + 1)) % (ny + 1), nodes // nn_layer)[axis]
        on = index == plane                                      # (ncand, 4)
        # the face opposite local node m lies on the plane: the other three nodes do
        hit = (on.sum(axis=1, keepdims=True) - on) == 3          # (ncand, 4)
        rows, missing = np.nonzero(hit)                          # in element order
        ele = cand[rows]
        faces_l.append(tets[ele[:, None], OUTWARD_LOCAL_FACES[missing]])
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
