"""The ``symmetric_y`` split: 18 tetrahedra per hexahedral cell, each cell mirror-symmetric about
its own mid-plane in y.

Why (a channel of free-slip walls, dycore/cases/schar): no split of a hexahedron into tetrahedra
on its 8 corners alone is mirror-symmetric about the cell's mid-plane y = const (a face spanning
y, cut by one diagonal, is mapped onto the other diagonal). With only the Kuhn split, mirrored or
not, the mirror images of a channel's cells about its walls do not tile it by translation in y,
so a flow that is uniform in y picks up a y-dependence of the size of the discretisation error
(measured: 47 % of max|w| on the 2,400-tet Schär channel). Here the four faces of a cell that
span y (the two x-faces and the two z-faces) get a node at their centre and are cut into 4
triangles around it; the two y-faces are cut along the diagonal through their (x, zeta)-lowest
corner c00 and highest corner. The four face centres form a diamond D in the cell's mid-plane.
The cell is then (in computational coordinates, where it is the unit cube):

* 4 tetrahedra around its y-edges: (the edge's two corners, the centres of the two faces that
  meet at the edge) -- each its own mirror image;
* for each y-face R, the convex hull of R and D (volume 5/12) as the cone from R's corner c00
  over the 7 hull faces without c00 (two triangles of D cut along the x-face centres, two
  face triangles, three corner triangles) -- the two halves are mirror images.

18 tetrahedra, volume 4/24 + 2 x 5/12 = 1. Every cell is its own mirror image about its
mid-plane, all layers of cells in y are the same, and the mirror images of a free-slip channel
about its walls tile the infinite channel by translation: the discrete solution of a problem
uniform in y is uniform in y (to round-off) on the grid planes. No node is inside a cell (a
first version with a cell-centre node, 20 tets, let those bubble-like nodes oscillate: their
w error was 2.4x that of the corners on the 1 km Schär mesh).

Conforming: an x-face (or z-face) shared by two cells is cut around the same centre node from
both sides; a y-face along the same diagonal in every layer; the diamond D is shared by the two
halves of a cell only. Node positions: computational (x, y, zeta), face centres at the mean of
the face's corner values, then lifted by the same terrain-following map as the corners,
``z = h(x, y) + zeta (lz - h) / lz``.
"""
from __future__ import annotations

import numpy as np

from dycore.dtypes import INDEX, REAL
from dycore.mesh.mesh import OUTWARD_LOCAL_FACES, FaceTag, Mesh

__all__ = ["symmetric_y_mesh", "TETS_PER_CELL", "symmetric_y_node_count"]

#: tetrahedra per hexahedral cell of the split
TETS_PER_CELL = 18


def symmetric_y_node_count(nx: int, ny: int, nz: int) -> int:
    """Nodes of the split: corners, x-face centres and z-face centres."""
    return (nx + 1) * (ny + 1) * (nz + 1) + (nx + 1) * ny * nz + nx * ny * (nz + 1)


def symmetric_y_mesh(x: np.ndarray, y: np.ndarray, zeta: np.ndarray, lz: float,
                     terrain) -> Mesh:
    """The ``symmetric_y`` mesh of the tensor grid ``x`` x ``y`` x ``zeta`` (module docstring).

    Parameters
    ----------
    x, y, zeta : (nx+1,), (ny+1,), (nz+1,) float64, strictly increasing [m] (zeta from 0 to lz)
    lz : float — lid height [m]
    terrain : callable ``h(x, y)`` on float64 arrays, finite and below lz (checked by the caller)

    Returns
    -------
    Mesh (checked): corner node ``i + (nx+1)(j + (ny+1)k)`` first (the numbering of the 6-tet
    split), then x-face centres, z-face centres; 18 tets per cell, cell
    ``c = i + nx (j + ny k)`` owning elements ``18c .. 18c + 17``; boundary faces in tag order
    GROUND, TOP, WEST, EAST, SOUTH, NORTH, each tag's in element order, outward.
    """
    nx, ny, nz = len(x) - 1, len(y) - 1, len(zeta) - 1
    xm, ym, zm = 0.5 * (x[:-1] + x[1:]), 0.5 * (y[:-1] + y[1:]), 0.5 * (zeta[:-1] + zeta[1:])

    def lift(px, py, pz):                                        # computational -> physical
        px, py, pz = np.broadcast_arrays(px, py, pz)
        h = np.broadcast_to(np.asarray(terrain(px, py), dtype=REAL), px.shape)
        z = h + pz * ((lz - h) / lz)
        z = np.where(pz == 0.0, h, np.where(pz == lz, lz, z))
        return np.stack([px, py, z], axis=-1).reshape(-1, 3)

    # node blocks, each in x-fastest order
    kk, jj, ii = np.meshgrid(zeta, y, x, indexing="ij")
    corners = lift(ii, jj, kk)
    kk, jj, ii = np.meshgrid(zm, ym, x, indexing="ij")
    xfaces = lift(ii, jj, kk)
    kk, jj, ii = np.meshgrid(zeta, ym, xm, indexing="ij")
    zfaces = lift(ii, jj, kk)
    coords = np.concatenate([corners, xfaces, zfaces]).astype(REAL)
    o_x = corners.shape[0]
    o_z = o_x + xfaces.shape[0]

    k, j, i = (a.ravel() for a in np.indices((nz, ny, nx), dtype=np.int64))

    def corner(di, dj, dk):
        return (i + di) + (nx + 1) * ((j + dj) + (ny + 1) * (k + dk))

    fx = [o_x + (i + d) + (nx + 1) * (j + ny * k) for d in (0, 1)]        # x-face centres
    fz = [o_z + i + nx * (j + ny * (k + d)) for d in (0, 1)]              # z-face centres

    tets_l = []
    # the 4 tets around the y-edges: (corner at y0, corner at y1, its two face centres)
    for di, dk in ((0, 0), (1, 0), (1, 1), (0, 1)):
        tets_l.append([corner(di, 0, dk), corner(di, 1, dk), fx[di], fz[dk]])
    # each half (y0, y1): the cone from its corner (0, ., 0) over the faces of the convex hull
    # of its y-face and the mid-plane diamond of face centres that do not contain that corner
    for dj in (0, 1):
        c00, c10 = corner(0, dj, 0), corner(1, dj, 0)
        c11, c01 = corner(1, dj, 1), corner(0, dj, 1)
        for tri in ((c10, c11, fx[1]), (c01, c11, fz[1]),              # face triangles
                    (fz[0], fx[1], c10), (fx[1], fz[1], c11), (fz[1], fx[0], c01),   # corners
                    (fx[0], fx[1], fz[0]), (fx[0], fx[1], fz[1])):   # the diamond D
            tets_l.append([c00, *tri])
    tets = np.stack([np.stack(t, axis=1) for t in tets_l], axis=1).reshape(-1, 4)
    p = coords[tets]
    vol = np.einsum("ij,ij->i", p[:, 1] - p[:, 0],
                    np.cross(p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]))
    neg = vol < 0.0
    tets[neg, 1], tets[neg, 2] = tets[neg, 2].copy(), tets[neg, 1].copy()

    # boundary faces: every tet face that no other tet shares, tagged by the plane it lies on
    # (computational coordinates: the node's grid index along x, y and its zeta level)
    cand = tets[:, OUTWARD_LOCAL_FACES].reshape(-1, 3)
    key = np.sort(cand, axis=1)
    _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    once = np.zeros(len(cand), bool)
    once[first[counts == 1]] = True
    bface = np.flatnonzero(once)
    tri = cand[bface]
    ele = bface // 4
    cx, cy, cz = (coords[tri, a] for a in range(3))
    on = {FaceTag.WEST: np.all(cx == x[0], axis=1), FaceTag.EAST: np.all(cx == x[-1], axis=1),
          FaceTag.SOUTH: np.all(cy == y[0], axis=1), FaceTag.NORTH: np.all(cy == y[-1], axis=1),
          FaceTag.TOP: np.all(cz == lz, axis=1)}
    ground = ~np.any(np.stack(list(on.values())), axis=0)
    order = [FaceTag.GROUND, FaceTag.TOP, FaceTag.WEST, FaceTag.EAST, FaceTag.SOUTH,
             FaceTag.NORTH]
    sel = {FaceTag.GROUND: ground, **on}
    faces_l, tags_l, ele_l = [], [], []
    for tag in order:
        pick = np.flatnonzero(sel[tag])
        pick = pick[np.argsort(ele[pick], kind="stable")]
        faces_l.append(tri[pick])
        tags_l.append(np.full(pick.size, int(tag), dtype=np.int8))
        ele_l.append(ele[pick])
    mesh = Mesh(coords=coords, tets=tets.astype(INDEX),
                faces=np.concatenate(faces_l).astype(INDEX),
                face_tags=np.concatenate(tags_l),
                face_ele=np.concatenate(ele_l).astype(INDEX))
    mesh.check()
    return mesh
