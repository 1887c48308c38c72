"""The tetrahedral mesh: a frozen container of node coordinates, P1 connectivity and tagged faces.

Contract (docs/architecture.md, "Mesh (dycore/mesh) -- exact contract"):

* ``coords`` (nnodes, 3) float64 [m];
* ``tets`` (nele, 4) int32, every tetrahedron positively oriented,
  ``det([x1 - x0, x2 - x0, x3 - x0]) > 0``;
* ``faces`` (nfaces, 3) int32 boundary triangles ordered so that the right-hand normal
  ``(x1 - x0) x (x2 - x0)`` points OUT of the domain;
* ``face_tags`` (nfaces,) int8, values of :class:`FaceTag`;
* ``face_ele`` (nfaces,) int32, the element that owns each boundary face.

The arrays are not made read-only (NumPy read-only arrays are a separate Numba type and would
trigger extra specialisations), but a ``Mesh`` is meant to be immutable: derive new meshes with
:meth:`Mesh.permuted` instead of editing the arrays in place.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
from numba import njit, prange

from dycore.dtypes import DIM, INDEX, NFACE_LOC, NLOC, REAL
from dycore.errors import MeshError

__all__ = ["FaceTag", "Mesh", "OUTWARD_LOCAL_FACES", "min_horizontal_extent"]


class FaceTag(IntEnum):
    """Tags of the six boundary surfaces of the mountain-wave box (stored as int8)."""

    GROUND = 1  #: terrain surface z = h(x, y)
    TOP = 2     #: rigid lid z = lz
    WEST = 3    #: x = -lx/2 (inflow side for u0 > 0)
    EAST = 4    #: x = +lx/2
    SOUTH = 5   #: y = -ly/2
    NORTH = 6   #: y = +ly/2


#: ``OUTWARD_LOCAL_FACES[m]`` = local node indices of the face opposite local node ``m`` of a
#: positively oriented tetrahedron, ordered so that its right-hand normal points out of the tet.
OUTWARD_LOCAL_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]], dtype=np.int64)

# Elements whose |signed volume| is below this fraction of (largest edge component)^3 count as
# degenerate (zero volume) in :meth:`Mesh.check`.
_DEGENERATE_RTOL = 1e-12


def min_horizontal_extent(coords, tets) -> float:
    """The smallest x or y extent (max − min over its 4 nodes) of any element with a positive
    one [m]; 0.0 when there is none.

    coords : (nnodes, 3) float64 [m]; tets : (nele, 4) int. The spacing of the advective
    Courant number (:func:`dycore.preflight.courant_number`): right for any mesh, and on the
    generated mesh, whose every tetrahedron spans its whole hexahedral cell, the smallest grid
    spacing.
    """
    coords, tets = np.asarray(coords), np.asarray(tets)
    extent = np.empty(0)
    for axis in (0, 1):                 # one (nele, 4) gather per axis, not (nele, 4, 3)
        c = np.ascontiguousarray(coords[:, axis])[tets]
        e = c.max(axis=1) - c.min(axis=1)
        extent = e if axis == 0 else np.minimum(extent, e)
    extent = extent[extent > 0]
    return float(extent.min()) if extent.size else 0.0


@njit(parallel=True, cache=True)
def _renumbered(tets, ele_perm, node_inv):
    """(nele, k) INDEX: ``node_inv[tets[ele_perm]]`` in one pass over the elements, split
    between numba's threads (at 30.7 M tets NumPy's gather, fancy index and cast take 7 s;
    this 1.5 s on one thread)."""
    nele, k = ele_perm.size, tets.shape[1]
    out = np.empty((nele, k), INDEX)
    for e in prange(nele):
        for a in range(k):
            out[e, a] = node_inv[tets[ele_perm[e], a]]
    return out


def _is_permutation(p: np.ndarray, n: int) -> bool:
    if p.shape != (n,):
        return False
    seen = np.zeros(n, dtype=bool)
    if n and (p.min() < 0 or p.max() >= n):
        return False
    seen[p] = True
    return bool(seen.all())


@dataclass(frozen=True, eq=False)
class Mesh:
    """Unstructured P1 tetrahedral mesh with tagged boundary faces.

    Parameters
    ----------
    coords : ndarray, shape (nnodes, 3), float64
        Node coordinates [m].
    tets : ndarray, shape (nele, 4), int32
        Node indices of each tetrahedron, positively oriented.
    faces : ndarray, shape (nfaces, 3), int32
        Boundary triangles; right-hand normal points out of the domain.
    face_tags : ndarray, shape (nfaces,), int8
        :class:`FaceTag` value of each boundary face.
    face_ele : ndarray, shape (nfaces,), int32
        Owning element of each boundary face.

    Notes
    -----
    Inputs are converted to C-contiguous arrays of the dtypes above (``dycore.dtypes``);
    shapes are checked at construction (``MeshError``), geometry only by :meth:`check`.
    """

    coords: np.ndarray
    tets: np.ndarray
    faces: np.ndarray
    face_tags: np.ndarray
    face_ele: np.ndarray

    def __post_init__(self) -> None:
        conv = {
            "coords": (REAL, (None, DIM)),
            "tets": (INDEX, (None, NLOC)),
            "faces": (INDEX, (None, NFACE_LOC)),
            "face_tags": (np.int8, (None,)),
            "face_ele": (INDEX, (None,)),
        }
        for name, (dtype, shape) in conv.items():
            arr = np.ascontiguousarray(getattr(self, name), dtype=dtype)
            if arr.ndim != len(shape) or (len(shape) == 2 and arr.shape[1] != shape[1]):
                want = "(n,)" if len(shape) == 1 else f"(n, {shape[1]})"
                raise MeshError(f"Mesh.{name} must have shape {want}, got {arr.shape}")
            object.__setattr__(self, name, arr)
        nf = self.faces.shape[0]
        for name in ("face_tags", "face_ele"):
            if getattr(self, name).shape[0] != nf:
                raise MeshError(
                    f"Mesh.{name} has {getattr(self, name).shape[0]} entries but there are "
                    f"{nf} faces"
                )

    # ------------------------------------------------------------------ sizes
    @property
    def nnodes(self) -> int:
        """Number of nodes."""
        return int(self.coords.shape[0])

    @property
    def nele(self) -> int:
        """Number of tetrahedra."""
        return int(self.tets.shape[0])

    @property
    def nfaces(self) -> int:
        """Number of boundary faces."""
        return int(self.faces.shape[0])

    # --------------------------------------------------------------- geometry
    def signed_volumes(self) -> np.ndarray:
        """Signed volume of every tetrahedron.

        Returns
        -------
        ndarray, shape (nele,), float64
            ``det([x1 - x0, x2 - x0, x3 - x0]) / 6`` [m^3]; positive for a correctly oriented
            element.
        """
        return _volumes_and_scales(self.coords, self.tets)[0]

    def face_normals(self) -> np.ndarray:
        """Area-weighted outward normals of the boundary faces.

        Returns
        -------
        ndarray, shape (nfaces, 3), float64
            ``(x1 - x0) x (x2 - x0) / 2``: unit outward normal times face area [m^2].
        """
        x = self.coords[self.faces]
        return 0.5 * np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])

    def min_horizontal_extent(self) -> float:
        """:func:`min_horizontal_extent` of this mesh [m]."""
        return min_horizontal_extent(self.coords, self.tets)

    def tagged_nodes(self, tags) -> np.ndarray:
        """Sorted unique nodes lying on boundary faces with any of ``tags``.

        Parameters
        ----------
        tags : iterable of FaceTag or int

        Returns
        -------
        ndarray, shape (n,), int32
        """
        sel = np.isin(self.face_tags, np.asarray([int(t) for t in tags], dtype=np.int8))
        return np.unique(self.faces[sel]).astype(INDEX)

    # ----------------------------------------------------------------- checks
    def check(self) -> None:
        """Validate indices, element orientation and boundary faces.

        Checks, in this order: finite coordinates; node indices of ``tets`` and ``faces`` in
        ``[0, nnodes)``; ``face_ele`` in ``[0, nele)``; tags are :class:`FaceTag` values; every
        element has positive, non-degenerate volume (``vol > 1e-12 * s^3``, s the largest
        edge-vector component of that element); each face's nodes belong to its owning element;
        each face's normal points away from its owning element's centroid.

        Raises
        ------
        MeshError
            Naming the first offending node / element / face (index and coordinates).
        """
        nn, ne = self.nnodes, self.nele
        bad = np.flatnonzero(~np.isfinite(self.coords).all(axis=1))
        if bad.size:
            raise MeshError(f"node {bad[0]} has non-finite coordinates {self.coords[bad[0]]}")
        for name, arr, hi in (("tets", self.tets, nn), ("faces", self.faces, nn),
                              ("face_ele", self.face_ele, ne)):
            a2 = arr.reshape(arr.shape[0], -1)
            badrow = np.flatnonzero(((a2 < 0) | (a2 >= hi)).any(axis=1))
            if badrow.size:
                r = badrow[0]
                raise MeshError(f"{name}[{r}] = {arr[r].tolist()} has an index outside [0, {hi})")
        valid_tags = np.array([t.value for t in FaceTag], dtype=np.int8)
        badtag = np.flatnonzero(~np.isin(self.face_tags, valid_tags))
        if badtag.size:
            f = badtag[0]
            raise MeshError(f"face {f} has unknown tag {int(self.face_tags[f])}")

        vol, scale = _volumes_and_scales(self.coords, self.tets)
        badele = np.flatnonzero(~(vol > _DEGENERATE_RTOL * scale ** 3))
        if badele.size:
            e = int(badele[0])
            x = self.coords[self.tets[badele[:1]]]
            kind = "inverted" if vol[e] < 0 else "zero-volume"
            raise MeshError(
                f"element {e} is {kind} (signed volume {vol[e]:.6g} m^3; "
                f"{badele.size} bad element(s) in total); nodes {self.tets[e].tolist()} at "
                f"{np.array2string(x[0], precision=6, separator=', ')}"
            )

        if self.nfaces:
            owner = self.tets[self.face_ele]                         # (nfaces, 4)
            in_owner = (self.faces[:, :, None] == owner[:, None, :]).any(axis=2).all(axis=1)
            badf = np.flatnonzero(~in_owner)
            if badf.size:
                f = int(badf[0])
                raise MeshError(
                    f"face {f} (nodes {self.faces[f].tolist()}) is not a face of its owning "
                    f"element {int(self.face_ele[f])} (nodes {owner[f].tolist()})"
                )
            out = self.coords[self.faces].mean(axis=1) - self.coords[owner].mean(axis=1)
            dots = np.einsum("ij,ij->i", self.face_normals(), out)
            badf = np.flatnonzero(~(dots > 0))
            if badf.size:
                f = int(badf[0])
                raise MeshError(
                    f"face {f} (nodes {self.faces[f].tolist()}, tag {int(self.face_tags[f])}) "
                    f"is oriented inward relative to its owning element {int(self.face_ele[f])}"
                )

    # ------------------------------------------------------------ renumbering
    def permuted(self, node_perm, ele_perm) -> "Mesh":
        """Return the mesh with nodes and elements renumbered.

        New node ``k`` is old node ``node_perm[k]``; new element ``k`` is old element
        ``ele_perm[k]``. Local node order inside each tetrahedron and inside each face is kept
        (so orientation is unchanged); the face list keeps its order, with its node indices and
        owning elements translated to the new numbering.

        Parameters
        ----------
        node_perm : array_like, shape (nnodes,), integer
            A permutation of ``range(nnodes)`` (new -> old).
        ele_perm : array_like, shape (nele,), integer
            A permutation of ``range(nele)`` (new -> old).

        Returns
        -------
        Mesh

        Raises
        ------
        MeshError
            If either argument is not a permutation of the right length.
        """
        node_perm = np.asarray(node_perm, dtype=np.int64)
        ele_perm = np.asarray(ele_perm, dtype=np.int64)
        if not _is_permutation(node_perm, self.nnodes):
            raise MeshError(f"node_perm is not a permutation of range({self.nnodes})")
        if not _is_permutation(ele_perm, self.nele):
            raise MeshError(f"ele_perm is not a permutation of range({self.nele})")
        node_inv = np.empty(self.nnodes, dtype=np.int64)
        node_inv[node_perm] = np.arange(self.nnodes)
        ele_inv = np.empty(self.nele, dtype=np.int64)
        ele_inv[ele_perm] = np.arange(self.nele)
        return Mesh(
            coords=self.coords[node_perm],
            tets=_renumbered(self.tets, ele_perm, node_inv),
            faces=node_inv[self.faces].astype(INDEX),
            face_tags=self.face_tags.copy(),
            face_ele=ele_inv[self.face_ele].astype(INDEX),
        )

    def __repr__(self) -> str:
        return f"Mesh(nnodes={self.nnodes}, nele={self.nele}, nfaces={self.nfaces})"


@njit(parallel=True, cache=True)
def _volumes_and_scales(coords, tets):
    """(signed volume det([x1 − x0, x2 − x0, x3 − x0]) / 6 [m³], largest |edge-vector
    component| [m]) of every element, both (nele,) float64, in one pass split between numba's
    threads (the determinant's operations in :meth:`Mesh.signed_volumes`' documented order;
    each element on its own, so the same bits on any number of threads)."""
    nele = tets.shape[0]
    vol = np.empty(nele)
    scale = np.empty(nele)
    for k in prange(nele):
        a = tets[k, 0]
        b, c, d = tets[k, 1], tets[k, 2], tets[k, 3]
        e00, e01, e02 = (coords[b, 0] - coords[a, 0], coords[b, 1] - coords[a, 1],
                         coords[b, 2] - coords[a, 2])
        e10, e11, e12 = (coords[c, 0] - coords[a, 0], coords[c, 1] - coords[a, 1],
                         coords[c, 2] - coords[a, 2])
        e20, e21, e22 = (coords[d, 0] - coords[a, 0], coords[d, 1] - coords[a, 1],
                         coords[d, 2] - coords[a, 2])
        s = 0.0
        for v in (e00, e01, e02, e10, e11, e12, e20, e21, e22):
            s = max(s, abs(v))
        det = (e00 * (e11 * e22 - e12 * e21)
               - e01 * (e10 * e22 - e12 * e20)
               + e02 * (e10 * e21 - e11 * e20))
        vol[k] = det / 6.0
        scale[k] = s
    return vol, scale
