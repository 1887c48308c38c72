"""Boundary faces of a tetrahedral mesh: the faces that belong to exactly one element.

Every element contributes its four faces, each ordered so that its right-hand normal points out
of a positively oriented element (:data:`dycore.mesh.mesh.OUTWARD_LOCAL_FACES`). A face met once
is on the boundary; a face met twice is interior, and then the two copies must have opposite
orientations (the two elements lie on opposite sides of it: a conforming, non-folded mesh); a
face met three or more times is an error. Vectorised NumPy: one ``lexsort`` of the 4 nele faces.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dycore.dtypes import INDEX
from dycore.errors import MeshError
from dycore.mesh.mesh import OUTWARD_LOCAL_FACES

__all__ = ["BoundaryFaces", "boundary_faces"]


@dataclass(frozen=True)
class BoundaryFaces:
    """The boundary faces of a tetrahedral mesh.

    Attributes
    ----------
    faces : ndarray, shape (nfaces, 3), int32
        Node indices, right-hand normal pointing out of the owning element (out of the domain)
        when the elements are positively oriented.
    owner : ndarray, shape (nfaces,), int64
        The element each face belongs to.
    local : ndarray, shape (nfaces,), int64
        Local index (0-3) of the owning element's node opposite the face.

    Faces are listed by owning element, then local index.
    """

    faces: np.ndarray
    owner: np.ndarray
    local: np.ndarray


def _parity(tri: np.ndarray) -> np.ndarray:
    """Parity (0 even, 1 odd) of the permutation that sorts each row of ``tri`` (n, 3)."""
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    return ((a > b).astype(np.int8) + (a > c) + (b > c)) % 2


def boundary_faces(tets) -> BoundaryFaces:
    """Find the boundary faces of a conforming tetrahedral mesh.

    Parameters
    ----------
    tets : array_like, shape (nele, 4), integer
        Node indices of each tetrahedron (positively oriented for the faces to point outward).

    Returns
    -------
    BoundaryFaces

    Raises
    ------
    MeshError
        A face shared by more than two elements (non-manifold mesh), or an interior face whose
        two elements lie on the same side of it (overlapping elements: the mesh folds over),
        naming the elements and the face's nodes.
    """
    tets = np.asarray(tets, dtype=np.int64)
    oriented = tets[:, OUTWARD_LOCAL_FACES].reshape(-1, 3)            # (4 nele, 3)
    key = np.sort(oriented, axis=1)
    order = np.lexsort((key[:, 2], key[:, 1], key[:, 0]))
    k = key[order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = np.any(k[1:] != k[:-1], axis=1)
    start = np.flatnonzero(new)
    count = np.diff(np.append(start, order.size))
    if count.size and count.max() > 2:
        g = int(np.argmax(count > 2))
        eles = sorted(int(i) // 4 for i in order[start[g]:start[g] + count[g]])
        raise MeshError(f"the face with nodes {k[start[g]].tolist()} is shared by "
                        f"{count[g]} tetrahedra {eles} (at most two may share a face)")
    pairs = start[count == 2]
    if pairs.size:
        first, second = order[pairs], order[pairs + 1]
        same = _parity(oriented[first]) == _parity(oriented[second])
        if same.any():
            i = int(np.argmax(same))
            e1, e2 = sorted((int(first[i]) // 4, int(second[i]) // 4))
            raise MeshError(f"tetrahedra {e1} and {e2} lie on the same side of their shared face "
                            f"(nodes {key[first[i]].tolist()}): the elements overlap (the mesh "
                            f"folds over); {int(same.sum())} such face(s)")
    once = np.sort(order[start[count == 1]])                         # element, then local order
    return BoundaryFaces(faces=oriented[once].astype(INDEX), owner=once // 4, local=once % 4)
