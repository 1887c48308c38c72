"""Strong free-slip no-normal-flow at ground and lid nodes, by rotation to node-normal coordinates.

At every node of a no-normal-flow face (ground, lid) that is not a Dirichlet node, the velocity is
split into the component along the area-weighted node normal **n** and two tangential components
(Fluidity's rotated boundary condition; Engelman, Sani & Gresho 1982, "The implementation of
normal and/or tangential boundary conditions in finite element codes for incompressible fluid
flow", Int. J. Numer. Meth. Fluids 2, 225–238). With Rᵢ the orthonormal frame of node i (rows
**n**, **t**₁, **t**₂; Rᵢ = I elsewhere):

- momentum: the assembled system A δu = r becomes (R A Rᵀ) δũ = R r, block by block
  A'ᵢⱼ = Rᵢ Aᵢⱼ Rⱼᵀ; at a rotated node the normal row is replaced by the constraint
  δũₙ = −(**n**·uⁿ)/Δt (kept at the scale of its diagonal entry), so u* = uⁿ + Δt δu has
  **n**·u* = 0; after the solve δu = Rᵀ δũ;
- projection: the velocity correction M_L⁻¹Cᵀδp loses its normal component at rotated nodes,
  u = u* + P M_L⁻¹Cᵀδp with Pᵢ = I − **n**ᵢ**n**ᵢᵀ, and the pressure matrix is C P M_L⁻¹ Cᵀ
  (docs/equations.md §3), so that **n**·u = 0 holds at the end of every Picard iteration.

Edges where two no-normal-flow surfaces meet at an angle (a side wall of a channel and the
ground or the lid: the tag normals' |cos| < :data:`EDGE_COS`) get two constraints: the frame's
first two rows are the two surfaces' normals (orthonormalised, the first tag's exact), both rows
are constraint rows and the projection removes both components (``fixed`` = 2); everywhere else
one (``fixed`` = 1), which is bit for bit the one-constraint arithmetic.

The four per-node/per-block operations below are the one source of that arithmetic: the CPU
drivers (``@njit``) loop over them and the GPU kernels (:mod:`dycore.backend.vector_kernels`)
call them one thread per item, with arrays passed flat (block k of 3×3 values at 9k, node i of a
(n,3) field at 3i) — the same operations in the same order, so strict mode keeps CPU = GPU bits.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from dycore.errors import MeshError
from dycore.fem._jit import element_function

#: two no-normal-flow surfaces meeting at a node with |cos angle| below this are both imposed
EDGE_COS = 0.9

__all__ = ["NoNormalFlow", "build_no_normal_flow", "EDGE_COS", "localise", "node_normals", "normal_frames",
           "rotate_block", "rotate_rhs_node", "unrotate_node", "remove_normal_node",
           "rotate_system", "unrotate", "remove_normal"]


@dataclass
class NoNormalFlow:
    """The rotated nodes of a mesh and where their frames act in the BCSR pattern (host arrays).

    Attributes
    ----------
    nodes : (nr,) int64 — rotated nodes (on a no-normal-flow face, not Dirichlet)
    frames : (nr, 3, 3) float64 — rows **n** (outward unit node normal), **t**₁, **t**₂
    blk_pos : (nb,) int64 — positions of the nonzero blocks whose row or column is rotated
    blk_row, blk_col : (nb,) int64 — frame index of the block's row / column node (−1: none)
    blk_diag : (nb,) int64 — 1 for a diagonal block
    diag_pos : (nr,) int64 — position of each rotated node's diagonal block
    fixed : (nr,) int64 — constrained directions of each rotated node (1, or 2 on an edge
        between two no-normal-flow surfaces: the first ``fixed`` rows of its frame); None
        means all 1
    """

    nodes: np.ndarray
    frames: np.ndarray
    blk_pos: np.ndarray
    blk_row: np.ndarray
    blk_col: np.ndarray
    blk_diag: np.ndarray
    diag_pos: np.ndarray
    fixed: np.ndarray | None = None

    def __post_init__(self):
        if self.fixed is None:
            self.fixed = np.ones(self.nodes.shape[0], dtype=np.int64)

    @property
    def normals(self):
        """(nr, 3) unit outward node normals (frames held as (nr,3,3) or flat (9·nr,))."""
        return self.frames.reshape(-1, 3, 3)[:, 0, :]


def node_normals(coords, faces, n_nodes):
    """Area-weighted outward node normals of a set of boundary faces.

    Parameters
    ----------
    coords : (n, 3) float64 node coordinates [m]
    faces : (nf, 3) int boundary triangles, ordered so that (x1−x0)×(x2−x0) points out
    n_nodes : int

    Returns
    -------
    (n, 3) float64: Σ over the faces at each node of area·n̂ (zero at nodes on none), not
    normalised [m²].
    """
    x = coords[faces]
    area_n = 0.5 * np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])
    out = np.zeros((n_nodes, 3))
    for a in range(3):
        np.add.at(out, faces[:, a], area_n)
    return out


def normal_frames(normals):
    """Orthonormal frames whose first row is the given normal.

    Parameters
    ----------
    normals : (nr, 3) float64, nonzero

    Returns
    -------
    (nr, 3, 3) float64 with rows **n**/|**n**|, **t**₁ = (e × **n**)/|e × **n**| (e the
    coordinate axis least aligned with **n**), **t**₂ = **n** × **t**₁ — right-handed.
    """
    n = normals / np.linalg.norm(normals, axis=1)[:, None]
    e = np.zeros_like(n)
    e[np.arange(n.shape[0]), np.argmin(np.abs(n), axis=1)] = 1.0
    t1 = np.cross(e, n)
    t1 /= np.linalg.norm(t1, axis=1)[:, None]
    t2 = np.cross(n, t1)
    return np.stack([n, t1, t2], axis=1)


def build_no_normal_flow(mesh, sparsity, tags, dirichlet_nodes,
                         surface_normals=None) -> NoNormalFlow:
    """Rotated nodes, frames and affected BCSR blocks for the faces tagged ``tags``.

    The normal of a node is the area-weighted outward normal of its no-normal-flow faces
    (Σ area·n̂ = 3∫ψᵢ n dΓ, the discretely consistent normal), unless ``surface_normals`` gives
    the exact normal of the surface the node lies on.

    Parameters
    ----------
    mesh : Mesh (coords, faces, face_tags); sparsity : Sparsity (indptr, indices, row_of)
    tags : iterable of FaceTag — the no-normal-flow faces (mountainwave3D: ground and lid)
    dirichlet_nodes : (nd,) int — nodes with strong Dirichlet velocity (never rotated)
    surface_normals : dict tag -> callable(coords (m,3)) -> (normals (m,3), valid (m,) bool), or
        None — exact outward normals for nodes whose faces all carry that tag (used where
        ``valid``; e.g. the analytic terrain normal at nodes on the terrain)

    Raises
    ------
    MeshError naming the node, its coordinates and the tags if a node's faces have normals that
    cancel (Σ area·n̂ = 0); ValueError for a rotated node of no element (a pattern without its
    diagonal block).
    """
    sel = np.isin(mesh.face_tags, np.asarray([int(t) for t in tags]))
    faces = mesh.faces[sel].astype(np.int64)
    n = mesh.nnodes
    summed = node_normals(np.asarray(mesh.coords, dtype=np.float64), faces, n)
    on = np.zeros(n, bool)
    on[faces.ravel()] = True
    on[np.asarray(dirichlet_nodes, np.int64)] = False
    nodes = np.flatnonzero(on).astype(np.int64)
    length = np.linalg.norm(summed[nodes], axis=1)
    if np.any(length <= 0.0):
        bad = int(nodes[np.argmin(length)])
        raise MeshError(f"node {bad} (at {np.asarray(mesh.coords[bad]).tolist()} m): the "
                        f"normals of its faces tagged {sorted(int(t) for t in tags)} "
                        "(physics.no_normal_flow) cancel — a face listed twice with opposite "
                        "orientations, or a sheet of faces seen from both sides")
    for tag, fn in (surface_normals or {}).items():
        other = np.zeros(n, bool)
        other[mesh.faces[sel & (mesh.face_tags != int(tag))].ravel()] = True
        own = np.zeros(n, bool)
        own[mesh.faces[mesh.face_tags == int(tag)].ravel()] = True
        pick = nodes[own[nodes] & ~other[nodes]]
        if pick.size:
            exact, valid = fn(np.asarray(mesh.coords)[pick])
            summed[pick[valid]] = exact[valid]
    frames = normal_frames(summed[nodes])
    fixed = np.ones(nodes.size, np.int64)
    edge = _edge_frames(mesh, sel, tags, nodes, surface_normals)
    for f, frame in edge.items():
        frames[f] = frame
        fixed[f] = 2
    return _with_blocks(nodes, frames, sparsity, fixed)


def _edge_frames(mesh, sel, tags, nodes, surface_normals) -> dict:
    """{frame index: (3, 3) frame} of the rotated nodes on two no-normal-flow surfaces that meet
    at an angle (|cos| < EDGE_COS): rows n₁ (the earlier tag in ``tags``; its exact normal when
    ``surface_normals`` has one valid there), n₂ (the later tag's, minus its n₁ part,
    normalised), n₁ × n₂."""
    tags = [int(t) for t in tags]
    if len(tags) < 2:
        return {}
    coords = np.asarray(mesh.coords, dtype=np.float64)
    per_tag = []
    for t in tags:
        faces = mesh.faces[sel & (mesh.face_tags == t)].astype(np.int64)
        per_tag.append(node_normals(coords, faces, mesh.nnodes)[nodes])
    per_tag = np.stack(per_tag)                                  # (ntags, nr, 3)
    length = np.linalg.norm(per_tag, axis=2)
    on = length > 0.0
    out = {}
    for f in np.flatnonzero(on.sum(axis=0) >= 2):
        first, second = np.flatnonzero(on[:, f])[:2]
        n1 = per_tag[first, f] / length[first, f]
        n2 = per_tag[second, f] / length[second, f]
        if abs(float(n1 @ n2)) >= EDGE_COS:
            continue
        fn = (surface_normals or {}).get(tags[first]) or next(
            (v for k, v in (surface_normals or {}).items() if int(k) == tags[first]), None)
        if fn is not None:
            exact, valid = fn(coords[nodes[f]][None, :])
            if bool(np.asarray(valid)[0]):
                n1 = np.asarray(exact[0], dtype=np.float64)
                n1 = n1 / np.linalg.norm(n1)
        n2 = n2 - (n1 @ n2) * n1
        n2 /= np.linalg.norm(n2)
        out[int(f)] = np.stack([n1, n2, np.cross(n1, n2)])
    return out


def _with_blocks(nodes, frames, sparsity, fixed=None) -> NoNormalFlow:
    """NoNormalFlow of sorted ``nodes`` with ``frames`` over the BCSR pattern ``sparsity``."""
    index = np.full(sparsity.n, -1, np.int64)
    index[nodes] = np.arange(nodes.size)
    row, col = sparsity.row_of.astype(np.int64), sparsity.indices.astype(np.int64)
    hit = np.flatnonzero((index[row] >= 0) | (index[col] >= 0))
    diag = row[hit] == col[hit]
    diag_pos = np.full(nodes.size, -1, np.int64)
    diag_pos[index[row[hit[diag]]]] = hit[diag]
    if np.any(diag_pos < 0):
        raise ValueError(f"node {int(nodes[np.argmin(diag_pos)])}: rotated, but it has no "
                         "diagonal block in the pattern (a node of no element)")
    return NoNormalFlow(nodes=np.asarray(nodes, np.int64),
                        frames=np.ascontiguousarray(frames, dtype=np.float64),
                        blk_pos=hit.astype(np.int64), blk_row=index[row[hit]],
                        blk_col=index[col[hit]], blk_diag=diag.astype(np.int64),
                        diag_pos=diag_pos,
                        fixed=(np.ones(nodes.size, np.int64) if fixed is None
                               else np.asarray(fixed, np.int64)))


def localise(nnf: NoNormalFlow, g2l, sparsity) -> NoNormalFlow:
    """The rotated nodes of ``nnf`` (host arrays; frames (nr,3,3) or flat) that a rank holds
    with rows in its pattern ``sparsity``, renumbered by ``g2l`` ((n_global,) int, −1 where the
    rank has no copy), with the blocks of that pattern — the same frames, so every rotated block
    and row is computed as in the serial run. Outer ghost nodes (in no local element) are left
    out: their values come from their owners."""
    frames = np.asarray(nnf.frames).reshape(-1, 3, 3)
    loc = np.asarray(g2l)[np.asarray(nnf.nodes)]
    has_row = np.diff(sparsity.indptr) > 0               # outer ghosts have no rows here
    keep = np.flatnonzero(loc >= 0)
    keep = keep[has_row[loc[keep]]]
    order = keep[np.argsort(loc[keep])]
    return _with_blocks(loc[order], frames[order], sparsity, np.asarray(nnf.fixed)[order])


# ------------------------------------------------------------------ the one-source arithmetic
@element_function
def rotate_block(values, pos, frames, fixed, fr, fc, diag):
    """Block ``pos`` of flat 3×3 BCSR ``values`` ← R_fr · block · R_fcᵀ in place (fr/fc < 0:
    that side is not rotated); a rotated row's ``fixed[fr]`` normal rows then keep only their
    diagonal entries a_nn = nᵀAᵢᵢn (on the diagonal block; zero elsewhere): the constraint row
    a_nn·δũₙ = a_nn·g
    is scaled like its neighbours, which keeps the Krylov solve's attainable relative residual
    at the level of the unrotated system (a row of 1 beside rows of M_L ~ 1e6 m³ stalls GMRES
    near 1e-10)."""
    o = 9 * pos
    if fc >= 0:
        for a in range(3):
            x0 = values[o + 3 * a]
            x1 = values[o + 3 * a + 1]
            x2 = values[o + 3 * a + 2]
            for b in range(3):
                values[o + 3 * a + b] = (x0 * frames[9 * fc + 3 * b]
                                         + x1 * frames[9 * fc + 3 * b + 1]
                                         + x2 * frames[9 * fc + 3 * b + 2])
    if fr >= 0:
        for b in range(3):
            y0 = values[o + b]
            y1 = values[o + 3 + b]
            y2 = values[o + 6 + b]
            for a in range(3):
                values[o + 3 * a + b] = (frames[9 * fr + 3 * a] * y0
                                         + frames[9 * fr + 3 * a + 1] * y1
                                         + frames[9 * fr + 3 * a + 2] * y2)
        for a in range(fixed[fr]):
            for b in range(3):
                if not (diag and a == b):
                    values[o + 3 * a + b] = 0.0


@element_function
def rotate_rhs_node(rhs, u_old, node, frames, f, dt, values, dpos, nfix):
    """rhs of ``node`` (flat (n,3)) ← R_f rhs, its first ``nfix`` (normal) entries a ←
    a_aa·(−(**n**_a·uⁿ)/Δt) with a_aa the rotated diagonal entry of that row, at
    ``values[9·dpos + 4a]`` (the node's diagonal block, see :func:`rotate_block`)."""
    r0 = rhs[3 * node]
    r1 = rhs[3 * node + 1]
    r2 = rhs[3 * node + 2]
    for a in range(nfix, 3):
        rhs[3 * node + a] = (frames[9 * f + 3 * a] * r0 + frames[9 * f + 3 * a + 1] * r1
                             + frames[9 * f + 3 * a + 2] * r2)
    for a in range(nfix):
        rhs[3 * node + a] = values[9 * dpos + 4 * a] * (
            -(frames[9 * f + 3 * a] * u_old[3 * node]
              + frames[9 * f + 3 * a + 1] * u_old[3 * node + 1]
              + frames[9 * f + 3 * a + 2] * u_old[3 * node + 2]) / dt)


@element_function
def unrotate_node(x, node, frames, f):
    """x of ``node`` (flat (n,3)) ← R_fᵀ x (rotated components back to Cartesian)."""
    d0 = x[3 * node]
    d1 = x[3 * node + 1]
    d2 = x[3 * node + 2]
    for b in range(3):
        x[3 * node + b] = (frames[9 * f + b] * d0 + frames[9 * f + 3 + b] * d1
                           + frames[9 * f + 6 + b] * d2)


@element_function
def remove_normal_node(x, node, frames, f, nfix):
    """x of ``node`` (flat (n,3)) ← x − **n**(**n**·x) for each of its ``nfix`` orthonormal
    normals (the first rows of its frame), one after the other."""
    for a in range(nfix):
        o = 9 * f + 3 * a
        s = (frames[o] * x[3 * node] + frames[o + 1] * x[3 * node + 1]
             + frames[o + 2] * x[3 * node + 2])
        for b in range(3):
            x[3 * node + b] = x[3 * node + b] - s * frames[o + b]


# ------------------------------------------------------------------------------ CPU drivers
@njit(cache=True)
def _rotate_system(values, rhs, u_old, dt, nodes, frames, fixed, pos, frow, fcol, diag,
                   diag_pos):
    for k in range(pos.shape[0]):
        rotate_block(values, pos[k], frames, fixed, frow[k], fcol[k], diag[k])
    for f in range(nodes.shape[0]):
        rotate_rhs_node(rhs, u_old, nodes[f], frames, f, dt, values, diag_pos[f], fixed[f])


@njit(cache=True)
def _unrotate(x, nodes, frames):
    for f in range(nodes.shape[0]):
        unrotate_node(x, nodes[f], frames, f)


@njit(cache=True)
def _remove_normal(x, nodes, frames, fixed):
    for f in range(nodes.shape[0]):
        remove_normal_node(x, nodes[f], frames, f, fixed[f])


def rotate_system(values, rhs, u_old, dt, nnf: NoNormalFlow) -> None:
    """Rotate the momentum system in place (CPU): values (nnz,3,3), rhs (n,3), u_old (n,3)
    float64 C-contiguous NumPy arrays; dt [s]. See the module docstring."""
    _rotate_system(values.reshape(-1), rhs.reshape(-1), u_old.reshape(-1), float(dt),
                   nnf.nodes, nnf.frames.reshape(-1), nnf.fixed, nnf.blk_pos, nnf.blk_row,
                   nnf.blk_col, nnf.blk_diag, nnf.diag_pos)


def unrotate(x, nnf: NoNormalFlow) -> None:
    """x (n,3) ← Rᵀ x at the rotated nodes, in place (CPU)."""
    _unrotate(x.reshape(-1), nnf.nodes, nnf.frames.reshape(-1))


def remove_normal(x, nnf: NoNormalFlow) -> None:
    """x (n,3) ← (I − Σ **n****n**ᵀ) x at the rotated nodes (their ``fixed`` normals), in place
    (CPU)."""
    _remove_normal(x.reshape(-1), nnf.nodes, nnf.frames.reshape(-1), nnf.fixed)
