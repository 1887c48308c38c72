"""Node / element renumbering: reverse Cuthill-McKee for locality, random shuffling to test it.

Both return a new :class:`~dycore.mesh.mesh.Mesh` through :meth:`Mesh.permuted`, so element
orientation and the boundary-face list are preserved. Source: docs/equations.md §6 / §8 (memory locality;
MPTRAC paper's "sorting for locality"), SciPy's ``reverse_cuthill_mckee``.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from scipy.sparse.csgraph import reverse_cuthill_mckee as _scipy_rcm

from dycore.mesh.graph import counting_order, element_map_and_pattern
from dycore.mesh.mesh import Mesh

__all__ = ["node_graph", "bandwidth", "reverse_cuthill_mckee", "lexicographic_element_order",
           "shuffle"]

_EDGES = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]], dtype=np.int64)


def node_graph(mesh: Mesh) -> sp.csr_matrix:
    """Symmetric node adjacency (first-order neighbours, no diagonal) of the mesh.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (nnodes, nnodes), int8
        Entry (i, j) = 1 when nodes i and j share a tetrahedron edge; sorted indices (every
        pair of a tetrahedron's nodes is an edge: the first-order pattern
        :func:`~dycore.mesh.graph.node_pattern` without its diagonal).
    """
    n = mesh.nnodes
    _, _, indptr, indices = element_map_and_pattern(mesh.tets, n, diagonal=False)
    g = sp.csr_matrix((np.ones(indices.size, dtype=np.int8), indices, indptr), shape=(n, n))
    g.has_sorted_indices = True
    return g


def bandwidth(mesh: Mesh) -> int:
    """Bandwidth of the node graph: ``max |i - j|`` over the element edges (int)."""
    e = mesh.tets[:, _EDGES].astype(np.int64)
    return int(np.abs(e[..., 0] - e[..., 1]).max()) if mesh.nele else 0


def reverse_cuthill_mckee(mesh: Mesh) -> Mesh:
    """Renumber nodes by reverse Cuthill-McKee and elements by their smallest node.

    Node order: ``scipy.sparse.csgraph.reverse_cuthill_mckee`` of :func:`node_graph`
    (``symmetric_mode=True``); its output ``perm[k]`` is the old index of new node ``k``, the
    convention of :meth:`Mesh.permuted`. Element order: lexicographic in the element's new node
    indices sorted ascending (primary key: smallest new node index), so elements touching
    nearby nodes are stored together. Deterministic for a given input mesh.

    Parameters
    ----------
    mesh : Mesh

    Returns
    -------
    Mesh
        Same geometry, volumes and boundary faces/tags, renumbered.
    """
    node_perm = np.asarray(_scipy_rcm(node_graph(mesh), symmetric_mode=True), dtype=np.int64)
    inv = np.empty(mesh.nnodes, dtype=np.int64)
    inv[node_perm] = np.arange(mesh.nnodes)
    ele_perm = lexicographic_element_order(inv, np.asarray(mesh.tets))
    return mesh.permuted(node_perm, ele_perm)


#: a bucket of elements with one smallest node longer than this is left to ``np.lexsort``
#: (a node of very many elements, in a mesh read from a file) rather than sorted by insertion
_INSERTION_MAX = 64


@njit(parallel=True, cache=True)
def _sorted_keys(inv, tets):
    """(nele, k) int64: each element's new node ids ``inv[tets[e]]``, ascending (elements
    split between numba's threads)."""
    nele, k = tets.shape
    keys = np.empty((nele, k), np.int64)
    for e in prange(nele):
        for a in range(k):
            v = inv[tets[e, a]]
            b = a
            while b > 0 and keys[e, b - 1] > v:        # insertion of k ≤ 4 values
                keys[e, b] = keys[e, b - 1]
                b -= 1
            keys[e, b] = v
    return keys


@njit(cache=True)
def _after(keys, a, b):
    """Whether element a's keys come after element b's, from the second key on."""
    for c in range(1, keys.shape[1]):
        if keys[a, c] != keys[b, c]:
            return keys[a, c] > keys[b, c]
    return False


@njit(parallel=True, cache=True)
def _element_order(keys, ptr, order, insertion_max):
    """Sort each bucket ``order[ptr[t]:ptr[t+1]]`` of at most ``insertion_max`` elements (the
    elements of smallest node t, ascending) by the other keys, in place (stable insertion;
    the buckets are independent, split between numba's threads); the longer buckets are left
    for the caller."""
    for t in prange(ptr.size - 1):
        lo, hi = ptr[t], ptr[t + 1]
        if hi - lo > insertion_max:
            continue
        for i in range(lo + 1, hi):
            e = order[i]
            j = i - 1
            while j >= lo and _after(keys, order[j], e):
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = e


def lexicographic_element_order(inv, tets) -> np.ndarray:
    """The elements ordered by their new node ids sorted ascending, compared lexicographically
    (primary key the smallest): ``np.lexsort`` of the sorted keys, element for element, by a
    stable counting sort on the smallest node and an insertion sort within each of its
    buckets (at 30.7 M tets 2.5 s against 8.0 s for ``np.sort`` + ``np.lexsort`` on the
    development machine).

    Parameters
    ----------
    inv : (nnodes,) int64 — new id of each old node; tets : (nele, k) int old connectivity

    Returns
    -------
    (nele,) int64 — new element k is old element ``order[k]`` (the convention of
    :meth:`Mesh.permuted`)
    """
    inv = np.asarray(inv, np.int64)
    keys = _sorted_keys(inv, np.asarray(tets))
    ptr, order = counting_order(keys[:, 0], inv.size)      # by the smallest node, stable
    _element_order(keys, ptr, order, _INSERTION_MAX)
    long = np.flatnonzero(np.diff(ptr) > _INSERTION_MAX)
    for t in long:                                   # np.lexsort is stable, as the rest
        sub = order[ptr[t]:ptr[t + 1]]
        k = keys[sub]
        order[ptr[t]:ptr[t + 1]] = sub[np.lexsort(k[:, ::-1].T)]
    return order


def shuffle(mesh: Mesh, seed: int = 0) -> Mesh:
    """Randomly permute nodes and elements (``numpy.random.default_rng(seed)``).

    Node permutation first, then element permutation, from the same generator. Local node order
    (hence orientation) and the face list order are kept.

    Parameters
    ----------
    mesh : Mesh
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    Mesh
    """
    rng = np.random.default_rng(seed)
    node_perm = rng.permutation(mesh.nnodes)
    ele_perm = rng.permutation(mesh.nele)
    return mesh.permuted(node_perm, ele_perm)
