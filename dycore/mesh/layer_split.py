"""The ``symmetric_y`` split: 20 tetrahedra per hexahedral cell, each cell mirror-symmetric about
its own mid-plane in y.

Why (a channel of free-slip walls, cases/schar): no split of a hexahedron into tetrahedra
on its 8 corners alone is mirror-symmetric about the cell's mid-plane y = const (a face spanning
y, cut by one diagonal, is mapped onto the other diagonal). With only the Kuhn split, mirrored or
not, the mirror images of a channel's cells about its walls do not tile it by translation in y,
so a flow that is uniform in y picks up a y-dependence of the size of the discretisation error
(measured: 47 % of max|w| on the 2,400-tet Schär channel). Here every cell gets a node at its
centre and at the centres of its four faces that span y (the two x-faces and the two z-faces);
those faces are cut into 4 triangles around their centre node, the two y-faces along the
diagonal through their (x, zeta)-lowest and highest corners, and each of the 20 triangles with
the cell centre is a tetrahedron. Every cell is then its own mirror image about its mid-plane,
all layers of cells in y are the same, and the mirror images of a free-slip channel about its
walls tile the infinite channel by translation: the discrete solution of a problem uniform in y
is uniform in y (to round-off) on the grid planes.

Measured on the 1 km Schär mesh (h0 = 250 m, t = 5400-7200 s): the cell-centre nodes, each
inside one cell only, carry more noise than the corners (w error RMS 0.072 against 0.030 m/s),
so a section through them (y = 0 of a one-cell channel) is noisier; keep y = 0 on a grid plane
(even ny). An 18-tet variant without the centre node (cones from a corner over the hull of a
y-face and the mid-plane diamond of face centres) is also mirror-symmetric and y-independent,
but its long cone tetrahedra gave grid-scale noise everywhere (section nRMS 1.02 against 0.32).

Conforming: an x-face (or z-face) shared by two cells is cut around the same centre node from
both sides; a y-face along the same diagonal in every layer. Node positions: computational
(x, y, zeta), centre nodes at the mean of the cell's (or face's) corner values, then lifted by
the same terrain-following map as the corners, ``z = h(x, y) + zeta (lz - h) / lz``.
"""
from __future__ import annotations

import numpy as np

from dycore.dtypes import INDEX, REAL
from dycore.mesh.mesh import OUTWARD_LOCAL_FACES, FaceTag, Mesh

__all__ = ["symmetric_y_mesh", "TETS_PER_CELL", "symmetric_y_node_count"]

#: tetrahedra per hexahedral cell of the split
TETS_PER_CELL = 20


def symmetric_y_node_count(nx: int, ny: int, nz: int) -> int:
    """Nodes of the split: corners, cell centres, x-face and z-face centres."""
    return ((nx + 1) * (ny + 1) * (nz + 1) + nx * ny * nz + (nx + 1) * ny * nz
            + nx * ny * (nz + 1))


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
    split), then cell centres, x-face centres, z-face centres; 20 tets per cell, cell
    ``c = i + nx (j + ny k)`` owning elements ``20c .. 20c + 19``; boundary faces in tag order
    GROUND, TOP, WEST, EAST, SOUTH, NORTH, outward.
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
    kk, jj, ii = np.meshgrid(zm, ym, xm, indexing="ij")
    centres = lift(ii, jj, kk)
    kk, jj, ii = np.meshgrid(zm, ym, x, indexing="ij")
    xfaces = lift(ii, jj, kk)
    kk, jj, ii = np.meshgrid(zeta, ym, xm, indexing="ij")
    zfaces = lift(ii, jj, kk)
    coords = np.concatenate([corners, centres, xfaces, zfaces]).astype(REAL)
    o_c = corners.shape[0]
    o_x = o_c + centres.shape[0]
    o_z = o_x + xfaces.shape[0]

    k, j, i = (a.ravel() for a in np.indices((nz, ny, nx), dtype=np.int64))

    def corner(di, dj, dk):
        return (i + di) + (nx + 1) * ((j + dj) + (ny + 1) * (k + dk))

    centre = o_c + i + nx * (j + ny * k)

    def xface(di):
        return o_x + (i + di) + (nx + 1) * (j + ny * k)

    def zface(dk):
        return o_z + i + nx * (j + ny * (k + dk))

    tris, kinds = [], []                                          # (ncell, 3) each, + tag
    for dj, tag in ((0, FaceTag.SOUTH), (1, FaceTag.NORTH)):     # y-faces: one diagonal
        a, b = corner(0, dj, 0), corner(1, dj, 0)
        c, d = corner(1, dj, 1), corner(0, dj, 1)
        tris += [np.stack([a, b, c], 1), np.stack([a, c, d], 1)]
        kinds += [(tag, j == (0 if dj == 0 else ny - 1))] * 2
    for di, tag in ((0, FaceTag.WEST), (1, FaceTag.EAST)):       # x-faces: 4 around the centre
        f = xface(di)
        ring = [corner(di, 0, 0), corner(di, 1, 0), corner(di, 1, 1), corner(di, 0, 1)]
        for q in range(4):
            tris.append(np.stack([f, ring[q], ring[(q + 1) % 4]], 1))
            kinds.append((tag, i == (0 if di == 0 else nx - 1)))
    for dk, tag in ((0, FaceTag.GROUND), (1, FaceTag.TOP)):      # z-faces: 4 around the centre
        f = zface(dk)
        ring = [corner(0, 0, dk), corner(1, 0, dk), corner(1, 1, dk), corner(0, 1, dk)]
        for q in range(4):
            tris.append(np.stack([f, ring[q], ring[(q + 1) % 4]], 1))
            kinds.append((tag, k == (0 if dk == 0 else nz - 1)))
    ncell = centre.size
    tets = np.empty((ncell, TETS_PER_CELL, 4), dtype=np.int64)
    for t, tri in enumerate(tris):
        tets[:, t, 0] = centre
        tets[:, t, 1:] = tri
    tets = tets.reshape(-1, 4)
    p = coords[tets]
    vol = np.einsum("ij,ij->i", p[:, 1] - p[:, 0],
                    np.cross(p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]))
    neg = vol < 0.0
    tets[neg, 1], tets[neg, 2] = tets[neg, 2].copy(), tets[neg, 1].copy()

    # boundary faces: the face opposite the cell centre (local node 0) of the tets on a plane
    order = [FaceTag.GROUND, FaceTag.TOP, FaceTag.WEST, FaceTag.EAST, FaceTag.SOUTH,
             FaceTag.NORTH]
    faces_l, tags_l, ele_l = [], [], []
    for tag in order:
        for t, (kind, on) in enumerate(kinds):
            if kind != tag:
                continue
            cells = np.flatnonzero(on)
            ele = TETS_PER_CELL * cells + t
            faces_l.append((ele, tag))
    for tag in order:
        eles = np.sort(np.concatenate([e for e, tg in faces_l if tg == tag]))
        faces_l_tag = tets[eles[:, None], OUTWARD_LOCAL_FACES[0][None, :]]
        tags_l.append(np.full(eles.size, int(tag), dtype=np.int8))
        ele_l.append((eles, faces_l_tag))
    mesh = Mesh(coords=coords, tets=tets.astype(INDEX),
                faces=np.concatenate([f for _, f in ele_l]).astype(INDEX),
                face_tags=np.concatenate(tags_l),
                face_ele=np.concatenate([e for e, _ in ele_l]).astype(INDEX))
    mesh.check()
    return mesh
