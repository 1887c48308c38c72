"""Exact evaluation of a P1 (piecewise-linear) node field on a tetrahedral mesh at arbitrary points.

A point is located in its tetrahedron by barycentric coordinates: candidates are the tetrahedra
whose centroids are nearest to the point (``scipy.spatial.cKDTree``; 16, then 256 for the points
not found), and points still not found are retried with every tetrahedron whose centroid lies
within the largest centroid-to-vertex distance of the mesh (which must contain the point if any
tetrahedron does), so the search is exact, not heuristic. The last pass runs over a few points
at a time: on a strongly graded mesh (10 km outer cells beside 1 km core cells) that ball holds
thousands of tetrahedra per point, and holding all of them at once took 24 GB. The value is
``sum_i lambda_i f(v_i)``, exactly the P1 field. Points outside the mesh (outside the box, below
the terrain) get NaN.
"""
from __future__ import annotations

import numpy as np

__all__ = ["P1Locator"]


class P1Locator:
    """Locate points in a tetrahedral mesh and interpolate P1 node fields there.

    Parameters
    ----------
    coords : ndarray (nnodes, 3) float
        Node coordinates [m].
    cell_nodes : ndarray (ncells, 4) int
        0-based node numbers of each tetrahedron.
    points : ndarray (npoints, 3) float
        Where to sample [m].
    candidates : int
        Nearest centroids tried first (default 16; then 16 times as many).
    tol : float
        Barycentric tolerance: a point with every ``lambda_i >= -tol`` is inside (default 1e-9).

    Attributes
    ----------
    cell : ndarray (npoints,) int64
        Containing tetrahedron, -1 outside the mesh.
    weights : ndarray (npoints, 4) float64
        Barycentric coordinates (NaN outside).
    """

    #: points per ball query of the exact fallback (bounds its memory)
    FALLBACK_BATCH = 64

    def __init__(self, coords, cell_nodes, points, *, candidates: int = 16, tol: float = 1e-9):
        from scipy.spatial import cKDTree

        self.coords = np.asarray(coords, dtype=float)
        self.cell_nodes = np.asarray(cell_nodes, dtype=np.int64)
        points = np.asarray(points, dtype=float).reshape(-1, 3)
        self.npoints = len(points)
        self.tol = tol
        v = self.coords[self.cell_nodes]                       # (ncells, 4, 3)
        self._v0 = v[:, 0, :]
        edges = np.transpose(v[:, 1:, :] - v[:, :1, :], (0, 2, 1))    # columns v_i - v_0
        self._inv = np.linalg.inv(edges)                        # (ncells, 3, 3)
        centroids = v.mean(axis=1)
        self._radius = float(np.max(np.linalg.norm(v - centroids[:, None, :], axis=2)))
        self._tree = cKDTree(centroids)
        self.cell = np.full(self.npoints, -1, dtype=np.int64)
        self.weights = np.full((self.npoints, 4), np.nan)

        left = np.arange(self.npoints)
        for k in (candidates, 16 * candidates):
            k = min(k, len(centroids))
            _, cand = self._tree.query(points[left], k=k)
            self._assign(left, points[left], np.asarray(cand).reshape(len(left), k))
            left = left[self.cell[left] < 0]
            if not len(left) or k == len(centroids):
                break
        # exact fallback: all tets whose centroid is within the largest circum-distance, a
        # batch of points at a time (the balls can hold thousands of tets each)
        r = self._radius * (1 + 1e-12)
        for s in range(0, len(left), self.FALLBACK_BATCH):
            batch = left[s:s + self.FALLBACK_BATCH]
            for idx, cands in zip(batch, self._tree.query_ball_point(points[batch], r=r)):
                if cands:
                    self._assign(np.array([idx]), points[idx:idx + 1],
                                 np.asarray(cands, dtype=np.int64)[None, :])

    def _barycentric(self, points, cells) -> np.ndarray:
        """lambda (..., 4) of ``points`` (n, 3) in ``cells`` (n, c)."""
        d = points[:, None, :] - self._v0[cells]                       # (n, c, 3)
        lam = np.einsum("ncij,ncj->nci", self._inv[cells], d)          # (n, c, 3)
        return np.concatenate([1.0 - lam.sum(axis=2, keepdims=True), lam], axis=2)

    def _assign(self, idx, points, cand) -> None:
        chunk = max(1, 200_000 // cand.shape[1])
        for s in range(0, len(idx), chunk):
            sl = slice(s, s + chunk)
            lam = self._barycentric(points[sl], cand[sl])                # (n, c, 4)
            inside = np.all(lam >= -self.tol, axis=2)
            found = inside.any(axis=1)
            first = np.argmax(inside, axis=1)
            rows = np.flatnonzero(found)
            target = idx[sl][rows]
            self.cell[target] = cand[sl][rows, first[rows]]
            self.weights[target] = lam[rows, first[rows]]

    @property
    def inside(self) -> np.ndarray:
        """True where the point lies in the mesh."""
        return self.cell >= 0

    def __call__(self, values) -> np.ndarray:
        """The P1 field with node values ``values`` (nnodes,) at the points (NaN outside)."""
        values = np.asarray(values, dtype=float)
        out = np.full(self.npoints, np.nan)
        ok = self.inside
        nodes = self.cell_nodes[self.cell[ok]]
        out[ok] = np.einsum("pi,pi->p", self.weights[ok], values[nodes])
        return out
