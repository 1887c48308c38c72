"""Plots of an output file: a node field (default w) on plane sections of the P1 field, and
the per-step diagnostics as time series.

A P1 field restricted to a plane is linear on each polygon in which the plane cuts a
tetrahedron (a triangle or a quadrilateral), and its values on the polygon's corners are linear
interpolations along the cut tetrahedron edges. :func:`plane_section` builds that exact
piecewise-linear section as a 2-D triangulation; points outside the mesh (e.g. below the terrain)
are simply not covered. :func:`sample_section` evaluates it at arbitrary points (masked outside).
Drawing uses Matplotlib's object API on an Agg canvas (no pyplot, no global backend switch).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dycore.errors import OutputError
from dycore.io.netcdf import DIAGNOSTICS, FIELDS, NOT_RECORDED, open_output, read_last_snapshot

__all__ = ["PlaneSection", "plane_section", "SectionMesh", "section_mesh", "sample_section",
           "GroundSurface", "ground_surface", "plot_w", "plot_diagnostics", "nice_interval",
           "save_png", "colour_scale", "ColourScale", "PERTURBATION_FIELDS"]

_AXES = "xyz"


@dataclass(frozen=True)
class PlaneSection:
    """The exact restriction of a P1 field to the plane ``coords[:, axis] == level``.

    Attributes
    ----------
    axis : int
        Coordinate normal to the plane (0 = x, 1 = y, 2 = z).
    level : float
        Position of the plane [m].
    points : ndarray (m, 2) float64
        In-plane coordinates [m] of the section vertices: (y, z), (x, z) or (x, y) for
        axis 0, 1, 2.
    triangles : ndarray (k, 3) int64
        Triangles of the section (indices into ``points``), degenerate ones removed.
    values : ndarray (m,) float64
        Field values at ``points``.
    boundary_edges : ndarray (b, 2) int64
        Edges of the section's outline (each used by one triangle).
    """

    axis: int
    level: float
    points: np.ndarray
    triangles: np.ndarray
    values: np.ndarray
    boundary_edges: np.ndarray

    @property
    def in_plane_axes(self) -> tuple[int, int]:
        """The two coordinate indices spanning the plane."""
        return tuple(a for a in range(3) if a != self.axis)


@dataclass(frozen=True)
class SectionMesh:
    """The geometry of an axis-aligned plane cut through a tetrahedral mesh, with the weights
    that give any P1 field on it: ``value = f[node_i] + weight * (f[node_j] - f[node_i])``
    (:meth:`values`), exact for a P1 field.

    Attributes
    ----------
    axis, level : int, float
        The plane ``coords[:, axis] == level`` [m].
    points : ndarray (m, 2) float64
        In-plane coordinates [m] of the section vertices (as :class:`PlaneSection`).
    triangles : ndarray (k, 3) int64
        Non-degenerate triangles of the section (indices into ``points``).
    node_i, node_j : ndarray (m,) int64
        Mesh nodes of the edge each vertex lies on (``node_i == node_j`` for a mesh node lying
        in the plane).
    weight : ndarray (m,) float64
        Position along the edge, 0 at ``node_i``, 1 at ``node_j``.
    boundary_edges : ndarray (b, 2) int64
        Edges of the section's outline.
    """

    axis: int
    level: float
    points: np.ndarray
    triangles: np.ndarray
    node_i: np.ndarray
    node_j: np.ndarray
    weight: np.ndarray
    boundary_edges: np.ndarray

    def values(self, field: np.ndarray) -> np.ndarray:
        """The P1 field ``field`` (nnodes,) at the section vertices, (m,) float64."""
        field = np.asarray(field, dtype=np.float64)
        fi = field[self.node_i]
        return fi + self.weight * (field[self.node_j] - fi)


def section_mesh(coords: np.ndarray, tets: np.ndarray, *, axis: int,
                 level: float) -> SectionMesh:
    """Cut a tetrahedral mesh with the plane ``coords[:, axis] == level``.

    Parameters
    ----------
    coords : ndarray (nnodes, 3) float64
        Node coordinates [m].
    tets : ndarray (nele, 4) int
        0-based connectivity.
    axis : int
        0, 1 or 2: the plane is ``x``, ``y`` or ``z`` = ``level``.
    level : float
        Plane position [m].

    Returns
    -------
    SectionMesh
        Possibly empty (no triangles) when the plane misses the mesh.

    Notes
    -----
    Vertices with ``s = coord - level == 0`` count as the non-negative side, so a mesh face lying
    in the plane is produced once (by the tetrahedron below it) and a vertex in the plane gives
    one shared section vertex. Crossing points lie on edges (i, j) with ``s_i < 0 <= s_j``:
    ``x = x_i + t (x_j - x_i)``, ``t = s_i / (s_i - s_j)``, same weights for the values.
    """
    coords = np.asarray(coords, dtype=np.float64)
    tets = np.asarray(tets, dtype=np.int64)
    nnodes = coords.shape[0]
    s = coords[:, axis] - level
    s_ele = s[tets]
    positive = s_ele >= 0.0
    npos = positive.sum(axis=1)
    cut = (npos > 0) & (npos < 4)
    tets, positive, npos = tets[cut], positive[cut], npos[cut]
    # local vertices sorted: negative side first, then the non-negative side
    order = np.argsort(positive, axis=1, kind="stable")
    nodes = np.take_along_axis(tets, order, axis=1)

    edge_i, edge_j, corners = [], [], []   # crossing edges (neg, pos) and section polygons
    for nneg, pairs in ((1, [(0, 1), (0, 2), (0, 3)]),
                        (3, [(0, 3), (1, 3), (2, 3)]),
                        (2, [(0, 2), (0, 3), (1, 3), (1, 2)])):
        sel = nodes[npos == 4 - nneg]
        if len(sel) == 0:
            continue
        base = sum(len(e) for e in edge_i)
        edge_i.append(np.concatenate([sel[:, a] for a, _ in pairs]))
        edge_j.append(np.concatenate([sel[:, b] for _, b in pairs]))
        ncorner = len(pairs)
        corners.append(base + np.arange(len(sel) * ncorner).reshape(ncorner, len(sel)).T)
    empty = np.empty(0, np.int64)
    if not edge_i:
        return SectionMesh(axis, float(level), np.empty((0, 2)), np.empty((0, 3), np.int64),
                           empty, empty, np.empty(0), np.empty((0, 2), np.int64))
    ei, ej = np.concatenate(edge_i), np.concatenate(edge_j)
    # one section vertex per crossed edge, or per node lying in the plane
    on_plane = s[ej] == 0.0
    key = np.where(on_plane, ej * nnodes + ej, ei * nnodes + ej)
    unique_key, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    ui, uj = ei[first], ej[first]
    in_node = s[uj] == 0.0
    t = np.where(in_node, 1.0, s[ui] / np.where(in_node, 1.0, s[ui] - s[uj]))
    ui = np.where(in_node, uj, ui)                  # a node in the plane: its own value
    in_plane = list(a for a in range(3) if a != axis)
    xyz = coords[ui] + t[:, None] * (coords[uj] - coords[ui])
    xyz[in_node] = coords[uj[in_node]]
    points = xyz[:, in_plane]

    triangles = []
    for poly in corners:
        poly = inverse[poly]
        triangles.append(poly[:, [0, 1, 2]])
        if poly.shape[1] == 4:  # convex quadrilateral (0, 1, 2, 3) -> two triangles
            triangles.append(poly[:, [0, 2, 3]])
    tri = np.concatenate(triangles)
    extent = np.ptp(points, axis=0).max() if len(points) else 0.0
    points, kept, tri = _merge_close_points(points, np.arange(len(points)), tri,
                                            _MERGE_RTOL * extent)
    ui, uj, t = ui[kept], uj[kept], t[kept]
    distinct = (tri[:, 0] != tri[:, 1]) & (tri[:, 1] != tri[:, 2]) & (tri[:, 0] != tri[:, 2])
    tri = tri[distinct]
    p0, p1, p2 = points[tri[:, 0]], points[tri[:, 1]], points[tri[:, 2]]
    area2 = np.abs((p1[:, 0] - p0[:, 0]) * (p2[:, 1] - p0[:, 1])
                   - (p1[:, 1] - p0[:, 1]) * (p2[:, 0] - p0[:, 0]))
    tri = tri[area2 > 1e-12 * extent * extent]

    edges = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1)
    unique_edges, counts = np.unique(edges, axis=0, return_counts=True)
    return SectionMesh(axis, float(level), points, tri, ui, uj, t,
                       unique_edges[counts == 1])


def plane_section(coords: np.ndarray, tets: np.ndarray, values: np.ndarray, *, axis: int,
                  level: float) -> PlaneSection:
    """Cut a tetrahedral P1 field with an axis-aligned plane (:func:`section_mesh`, then
    :meth:`SectionMesh.values` of ``values``).

    Parameters
    ----------
    coords, tets, axis, level
        The mesh and the plane, as for :func:`section_mesh`.
    values : ndarray (nnodes,) float64
        Nodal values of the P1 field.

    Returns
    -------
    PlaneSection
        Possibly empty (no triangles) when the plane misses the mesh.
    """
    mesh = section_mesh(coords, tets, axis=axis, level=level)
    return PlaneSection(axis, mesh.level, mesh.points, mesh.triangles, mesh.values(values),
                        mesh.boundary_edges)


#: section vertices closer than this fraction of the section's extent are one vertex: a node a
#: round-off off the plane (1e-13 m in a gmsh mesh) otherwise gives crossing points a round-off
#: apart, whose sliver triangles are dropped as degenerate and leave cracks in the section
_MERGE_RTOL = 1e-9


def _merge_close_points(points, vals, tri, tol):
    """Merge the section vertices within ``tol`` [m] of each other (the lowest index of each
    cluster is kept, with its value); returns ``(points, vals, tri)`` renumbered."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    if tol <= 0.0 or len(points) < 2:
        return points, vals, tri
    pairs = cKDTree(points).query_pairs(tol, output_type="ndarray")
    if len(pairs) == 0:
        return points, vals, tri
    n = len(points)
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    ncomp, label = connected_components(graph, directed=False)
    first = np.empty(ncomp, dtype=np.int64)
    first[label[::-1]] = np.arange(n)[::-1]                     # lowest index of each cluster
    return points[first], vals[first], label[tri]


def _triangulation(section: PlaneSection):
    from matplotlib.tri import Triangulation

    return Triangulation(section.points[:, 0], section.points[:, 1], section.triangles)


def sample_section(section: PlaneSection, a: np.ndarray, b: np.ndarray) -> np.ma.MaskedArray:
    """Evaluate the section's piecewise-linear field at in-plane points (a, b).

    Parameters
    ----------
    section : PlaneSection
    a, b : ndarray, same shape
        In-plane coordinates [m] (the order of ``section.in_plane_axes``).

    Returns
    -------
    numpy.ma.MaskedArray, shape of ``a``
        Linear interpolation inside the section triangle containing each point; masked where a
        point lies outside the mesh (e.g. below the terrain).
    """
    from matplotlib.tri import LinearTriInterpolator

    if len(section.triangles) == 0:
        return np.ma.masked_all(np.shape(a))
    interp = LinearTriInterpolator(_triangulation(section), section.values)
    return interp(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


@dataclass(frozen=True)
class GroundSurface:
    """The ground of a mesh as a height field over the (x, y) plane.

    Attributes
    ----------
    xy : ndarray (m, 2) float64
        Horizontal position [m] of the ground nodes.
    triangles : ndarray (k, 3) int64
        Ground faces (indices into ``xy``).
    height : ndarray (m,) float64
        Ground height z [m] at ``xy``.
    """

    xy: np.ndarray
    triangles: np.ndarray
    height: np.ndarray


#: a boundary face is ground when its outward unit normal has n_z below -this (lateral faces of
#: a box have n_z = 0, the lid +1; terrain slopes up to 89.9 degrees count as ground)
_GROUND_NZ = 1e-3


def ground_surface(coords: np.ndarray, tets: np.ndarray) -> GroundSurface:
    """The boundary faces whose outward normal points down: the terrain, read from the mesh.

    Parameters
    ----------
    coords : ndarray (nnodes, 3) float64
        Node coordinates [m].
    tets : ndarray (nele, 4) int
        0-based connectivity, positively oriented (as every dycore output file holds).

    Returns
    -------
    GroundSurface
        Possibly empty (no triangles) for a mesh without downward faces.

    Raises
    ------
    MeshError
        From :func:`dycore.mesh.boundary.boundary_faces` for a non-conforming mesh.
    """
    from dycore.mesh.boundary import boundary_faces

    coords = np.asarray(coords, dtype=np.float64)
    faces = boundary_faces(tets).faces.astype(np.int64)
    x = coords[faces]
    n = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])
    down = n[:, 2] < -_GROUND_NZ * np.linalg.norm(n, axis=1)
    nodes, local = np.unique(faces[down], return_inverse=True)
    return GroundSurface(coords[nodes, :2], local.reshape(-1, 3), coords[nodes, 2])


def _draw_terrain_contours(ax, ground: GroundSurface, z_level: float) -> str:
    """Terrain height contours (brown, labelled) and, in grey, the ground above ``z_level`` (where
    the horizontal section has a hole); returns the legend text for the panel's title."""
    from matplotlib.tri import Triangulation

    if len(ground.triangles) == 0:
        return ""
    km = 1e-3
    h = ground.height
    lo, hi = float(h.min()), float(h.max())
    tri = Triangulation(ground.xy[:, 0] * km, ground.xy[:, 1] * km, ground.triangles)
    if hi > z_level:
        ax.tricontourf(tri, h, levels=[z_level, max(hi, z_level) + 1.0], colors="0.6", zorder=2)
    if hi - lo <= 1e-6 * max(abs(hi), 1.0):
        return f"flat ground at z = {lo:g} m"
    step = nice_interval(hi - lo)
    levels = [k * step for k in range(math.floor(lo / step) + 1, math.ceil(hi / step))
              if lo < k * step < hi]
    if not levels:
        return ""
    lines = ax.tricontour(tri, h, levels=levels, colors="saddlebrown", linewidths=1.1, zorder=3)
    ax.clabel(lines, fmt=lambda v: f"{v:g} m", fontsize=7, inline=True)
    return f"terrain (brown) every {step:g} m"


def _outline_segments(section: PlaneSection) -> np.ndarray:
    """Outline edges not on the bounding box of the section (terrain, holes), (n, 2, 2) [m]."""
    if len(section.boundary_edges) == 0:
        return np.empty((0, 2, 2))
    pts = section.points
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    tol = 1e-9 * max(float(np.ptp(pts, axis=0).max()), 1.0)
    seg = pts[section.boundary_edges]                              # (n, 2 ends, 2 coords)
    on_box = np.zeros(len(seg), dtype=bool)
    for d in range(2):
        for bound in (lo[d], hi[d]):
            on_box |= np.all(np.abs(seg[:, :, d] - bound) <= tol, axis=1)
    return seg[~on_box]


#: default window of the sections [m]: the lee-wave region of mountainwave3D (mountain at x = 0)
DEFAULT_XLIM, DEFAULT_YLIM, DEFAULT_ZLIM = (-10e3, 20e3), (-10e3, 10e3), (0.0, 10e3)


def nice_interval(vmax: float, lines: int = 5) -> float:
    """A contour interval of 1, 2, 2.5 or 5 × 10^k giving about ``lines`` lines from 0 to
    ``vmax`` (> 0)."""
    raw = vmax / lines
    k = math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * 10.0 ** k >= raw:
            return m * 10.0 ** k
    return 10.0 ** (k + 1)


def _window(lim, lo, hi):
    """(lim ∩ [lo, hi]) or [lo, hi] when lim is None or misses it."""
    if lim is None:
        return lo, hi
    a, b = max(min(lim), lo), min(max(lim), hi)
    return (a, b) if b > a else (lo, hi)


#: fields whose background is zero (perturbations, the spanwise and vertical velocity): a
#: symmetric diverging scale around 0. The others (u = U + u', the mixing ratios) get a
#: sequential scale over their own range, or one colour saturates the whole panel.
PERTURBATION_FIELDS = ("v", "w", "p", "theta_prime")


@dataclass(frozen=True)
class ColourScale:
    """Colour limits and contour levels of one panel.

    Attributes
    ----------
    vmin, vmax : float
        Colour limits, in the field's units.
    levels : list of float
        Contour levels (multiples of ``step``; 0 left out on a diverging scale).
    step : float
        Contour interval, in the field's units (> 0).
    cmap : str
        Matplotlib colour map: ``RdBu_r`` (diverging) or ``viridis`` (sequential).
    """

    vmin: float
    vmax: float
    levels: list
    step: float
    cmap: str


def colour_scale(values: np.ndarray, diverging: bool) -> ColourScale:
    """The colour scale of a panel from the values shown in it.

    Parameters
    ----------
    values : ndarray (m,) float64
        The field's values in the window shown (non-finite ones are ignored).
    diverging : bool
        True for a field whose background is 0 (:data:`PERTURBATION_FIELDS`): limits
        ``±`` the 99th percentile of ``|value|`` (a thin layer of strong flow does not wash out
        the rest). False: limits the 1st and 99th percentiles of the values, so ``u`` around its
        inflow speed or a mixing ratio fills the panel with a gradient instead of one colour.

    Returns
    -------
    ColourScale
        Contour interval from :func:`nice_interval` (about 5 lines over the half range, or
        over the range of a sequential scale); a constant field gets a range of ``±1e-12`` (or
        ``±1e-9 |value|``) around its value.
    """
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if diverging:
        vmax = float(np.percentile(np.abs(values), 99)) if values.size else 0.0
        vmax = vmax if vmax > 0.0 else 1e-12
        step = nice_interval(vmax)
        n = int(vmax / step) + 1
        levels = [k * step for k in range(-n, n + 1) if k != 0]
        return ColourScale(-vmax, vmax, levels, step, "RdBu_r")
    lo, hi = ((float(np.percentile(values, 1)), float(np.percentile(values, 99)))
              if values.size else (0.0, 0.0))
    if not hi > lo:
        pad = max(1e-9 * abs(lo), 1e-12)
        lo, hi = lo - pad, hi + pad
    step = nice_interval(hi - lo)
    levels = [k * step for k in range(math.floor(lo / step), math.ceil(hi / step) + 1)]
    return ColourScale(lo, hi, levels, step, "viridis")


def _draw_section(fig, ax, section: PlaneSection, title: str, label: str, fill_below: bool,
                  window, ground: GroundSurface | None = None, *, diverging: bool = True,
                  units: str = "") -> None:
    """Filled colours on the :func:`colour_scale` of the window shown (symmetric around 0 for
    a perturbation, the field's own range otherwise), contour lines at a fixed interval (in
    ``units``; negative dashed on a diverging scale), the terrain (grey below a vertical
    section; height contours of ``ground`` on a horizontal one) and the mesh outline."""
    from matplotlib.collections import LineCollection

    km = 1e-3
    tri = _triangulation(section)
    tri.x, tri.y = tri.x * km, tri.y * km
    (x0, x1), (y0, y1) = (_window(window[0], tri.x.min() / km, tri.x.max() / km),
                          _window(window[1], tri.y.min() / km, tri.y.max() / km))
    x0, x1, y0, y1 = x0 * km, x1 * km, y0 * km, y1 * km
    inside = (tri.x >= x0) & (tri.x <= x1) & (tri.y >= y0) & (tri.y <= y1)
    scale = colour_scale(section.values[inside] if inside.any() else section.values, diverging)
    image = ax.tripcolor(tri, section.values, shading="gouraud", cmap=scale.cmap,
                         vmin=scale.vmin, vmax=scale.vmax, rasterized=True)
    ax.tricontour(tri, section.values, levels=scale.levels, colors="k", linewidths=0.5)
    step = scale.step
    outline = _outline_segments(section) * km
    if len(outline):
        if fill_below:
            ends = outline.reshape(-1, 2)
            order = np.argsort(ends[:, 0], kind="stable")
            x, z = ends[order, 0], ends[order, 1]
            ax.fill_between(x, tri.y.min(), z, color="0.6", zorder=2)
        ax.add_collection(LineCollection(outline, colors="k", linewidths=1.0, zorder=3))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    if ground is not None:
        ax.set_aspect("equal")          # before the terrain labels are placed (in pixels)
    # after the limits: contour labels are sized and placed in the window shown
    terrain = "" if ground is None else _draw_terrain_contours(ax, ground, section.level)
    names = [_AXES[a] for a in section.in_plane_axes]
    ax.set_xlabel(f"{names[0]} [km]")
    ax.set_ylabel(f"{names[1]} [km]")
    interval = f"{step:g} {units}".strip()
    ax.set_title(f"{title}; contours every {interval}" + (f"\n{terrain}" if terrain else ""))
    fig.colorbar(image, ax=ax, label=label, shrink=0.9, extend="both")


def _file_title(path: Path) -> str:
    """The run's title attribute and mesh size, for the figure title."""
    ds = open_output(path)
    try:
        return (f"{getattr(ds, 'title', path.stem)}: {len(ds.dimensions['nodes']):,} nodes, "
                f"{len(ds.dimensions['cells']):,} tetrahedra")
    finally:
        ds.close()


def plot_w(path: str | Path, png_path: str | Path | None = None, *, field: str = "w",
           at: float | None = None, z_level: float = 3000.0, y_section: float = 0.0,
           xlim=DEFAULT_XLIM, ylim=DEFAULT_YLIM, zlim=DEFAULT_ZLIM) -> Path:
    """Plot a node field (default w) on the planes y = ``y_section`` and z = ``z_level``.

    Both panels show the terrain: filled grey below the vertical section; on the horizontal one
    brown height contours of the ground (:func:`ground_surface`: the mesh's downward boundary
    faces) and grey where the ground rises above ``z_level``.

    Parameters
    ----------
    path : str or Path
        Output file of a run (:class:`dycore.io.netcdf.SnapshotWriter`).
    png_path : str or Path, optional
        Image to write; default ``<path stem>_<field>.png`` beside ``path``.
    field : str
        A node field of the file (:data:`dycore.io.netcdf.FIELDS`).
    at : float, optional
        Model time [s]: the snapshot nearest to it (default: the last).
    z_level : float
        Height of the horizontal section [m].
    y_section : float
        Position of the vertical section [m] (the mountain is at y = 0).
    xlim, ylim, zlim : (lo, hi) [m] or None
        The window shown (None: the whole domain); the colour scale is chosen inside it.

    Returns
    -------
    Path
        The PNG written: two panels, the vertical section on the left.

    Raises
    ------
    OutputError
        The file cannot be read, has no such field, a plane misses the mesh, or the PNG cannot
        be written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path, png_path = _paths(path, png_path, field)
    if field not in FIELDS:
        raise OutputError(f"--field {field!r}: expected one of {', '.join(FIELDS)}")
    t, fields, coords, cell_nodes = read_last_snapshot(path, fields=(field,), at=at)
    values = fields[field]
    if not np.any(np.isfinite(values)):
        raise OutputError(f"{path}: {field} was not written in the snapshot at t = {t:g} s")
    sections = []
    for axis, level in ((1, y_section), (2, z_level)):
        section = plane_section(coords, cell_nodes, values, axis=axis, level=level)
        if len(section.triangles) == 0:
            lo, hi = coords[:, axis].min(), coords[:, axis].max()
            raise OutputError(f"{path}: the plane {_AXES[axis]} = {level:g} m does not cut the "
                              f"mesh ({_AXES[axis]} from {lo:g} to {hi:g} m)")
        sections.append(section)

    label = f"{field} [{FIELDS[field][1]}]"
    fig = Figure(figsize=(15, 5.6), layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(f"{_file_title(path)}; t = {t:g} s")
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.7, 1.0]})
    style = {"diverging": field in PERTURBATION_FIELDS, "units": FIELDS[field][1]}
    _draw_section(fig, left, sections[0], f"{field} on y = {y_section * 1e-3:g} km", label,
                  True, (xlim, zlim), **style)
    _draw_section(fig, right, sections[1], f"{field} on z = {z_level * 1e-3:g} km", label,
                  False, (xlim, ylim), ground_surface(coords, cell_nodes), **style)
    right.set_aspect("equal")
    return save_png(fig, png_path, dpi=120)


def plot_diagnostics(path: str | Path, png_path: str | Path | None = None) -> Path:
    """Time series of the per-step diagnostics of an output file, one panel each.

    Parameters
    ----------
    path : str or Path
        Output file of a run.
    png_path : str or Path, optional
        Image to write; default ``<path stem>_diagnostics.png`` beside ``path``.

    Returns
    -------
    Path
        The PNG written.

    Raises
    ------
    OutputError
        The file cannot be read, holds no step yet, or the PNG cannot be written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path, png_path = _paths(path, png_path, "diagnostics")
    ds = open_output(path)
    try:
        t = np.asarray(ds.variables["diag_time"][:], dtype=float)
        series = {}
        for name, (long_name, units, dtype) in DIAGNOSTICS.items():
            if name in ds.variables:
                v = np.asarray(ds.variables[name][:], dtype=float)
                if dtype != "f8":
                    v[v == float(NOT_RECORDED)] = np.nan      # integer: not recorded
                if np.isfinite(v).any():
                    series[name] = (long_name, units, v)
        title = _file_title(path)
    except (KeyError, OSError, RuntimeError) as exc:
        raise OutputError(f"{path}: cannot read the diagnostics ({exc})") from None
    finally:
        ds.close()
    ok = np.isfinite(t)
    if not ok.any():
        raise OutputError(f"{path}: the file holds no time step yet")
    fig = Figure(figsize=(13, 2.4 * ((len(series) + 1) // 2) + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(f"{title}: per-step diagnostics")
    axes = fig.subplots((len(series) + 1) // 2, 2, squeeze=False).ravel()
    for ax, (name, (long_name, units, v)) in zip(axes, series.items()):
        ax.plot(t[ok], v[ok], lw=1.2)
        ax.set_title(long_name, fontsize=9)
        ax.set_ylabel(f"{name} [{units}]", fontsize=8)
        ax.set_xlabel("t [s]", fontsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[len(series):]:
        ax.set_visible(False)
    return save_png(fig, png_path, dpi=110)


def _paths(path: str | Path, png_path: str | Path | None, what: str) -> tuple[Path, Path]:
    """``path`` and the image to write, as Paths: ``png_path``, default ``<path stem>_<what>.png``
    beside ``path``."""
    path = Path(path)
    return path, (Path(png_path) if png_path is not None
                  else path.with_name(f"{path.stem}_{what}.png"))


def save_png(fig, path, dpi: int):
    """Write ``fig`` to ``path`` (parent folders created); returns ``path``.

    Raises
    ------
    OutputError naming the path when it cannot be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the plot ({exc})") from None
    return path
