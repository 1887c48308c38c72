"""Node / element renumbering: reverse Cuthill-McKee for locality, random shuffling to test it.

Both return a new :class:`~dycore.mesh.mesh.Mesh` through :meth:`Mesh.permuted`, so element
orientation and the boundary-face list are preserved. Source: docs/equations.md §6 / §8 (memory locality;
MPTRAC paper's "sorting for locality"), SciPy's ``reverse_cuthill_mckee``.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee as _scipy_rcm

from dycore.mesh.graph import element_map_and_pattern
from dycore.mesh.mesh import Mesh

__all__ = ["node_graph", "bandwidth", "reverse_cuthill_mckee", "shuffle"]

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
    _, _, indptr, indices = element_map_and_pattern(mesh.tets, n)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    off = indices != rows
    keep = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows[off], minlength=n), out=keep[1:])
    g = sp.csr_matrix((np.ones(int(keep[-1]), dtype=np.int8), indices[off], keep),
                      shape=(n, n))
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
    keys = np.sort(inv[mesh.tets], axis=1)
    ele_perm = np.lexsort((keys[:, 3], keys[:, 2], keys[:, 1], keys[:, 0]))
    return mesh.permuted(node_perm, ele_perm)


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
