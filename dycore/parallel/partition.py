"""Domain decomposition of the node graph: owned nodes, ghost layers, halo elements, send lists.

Pure functions of the mesh (no MPI): every rank of a run calls them with the same inputs and
keeps its own :class:`RankPartition`; the tests call them for all K ranks in one process.

Rules (docs/architecture.md, "Scaling out"):

- **Nodes.** METIS (pymetis, ``part_graph``) splits the first-order node graph of the CSR
  sparsity (diagonal removed) into K parts; rank r *owns* the nodes of part r. Its local
  numbering is: owned nodes (ascending global id), then ghost nodes ordered by
  (layer, owning rank, global id). Layer-1 ghosts are the non-owned nodes that share an element
  with an owned node (the columns of owned rows of a first-order matrix: tracer, momentum, C,
  K_p); layer-2 ghosts are one graph edge further (the extra columns of the second-order
  pressure matrix CMC + KMK).
- **Elements.** Every element touching an owned node is local (the halo layer), in ascending
  global order, so the deterministic gather of docs/equations.md §6 sums each owned row's
  contributions in the serial element order: owned rows assemble bit for bit with no reverse
  communication. An element is *owned* by the rank owning its first node (each counted once).
- **Rows.** Owned rows keep their global column order (:func:`extract_rows`), so a
  row-sequential SpMV sums in the serial order.
- **Halo.** Rank r receives the values of its ghosts from their owners and sends each
  neighbour q the owned nodes q holds as ghosts, in q's ghost order (:meth:`RankPartition.plan`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dycore.dtypes import INDEX

__all__ = [
    "MAX_DEPTH",
    "HaloPlan",
    "RankPartition",
    "extract_rows",
    "metis_partition",
    "owned_row_order",
    "partition_mesh",
    "row_subset",
]

#: ghost layers kept: 2 covers the second-order pattern of the pressure matrix
MAX_DEPTH = 2


def metis_partition(indptr: np.ndarray, indices: np.ndarray, nparts: int, seed: int = 0
                    ) -> np.ndarray:
    """Partition the node graph of a CSR pattern with METIS (k-way, pymetis).

    Parameters
    ----------
    indptr : (n+1,) int — CSR row pointers of a symmetric pattern (diagonal may be present)
    indices : (nnz,) int — column indices
    nparts : int ≥ 1 — number of ranks
    seed : int — METIS random seed (the partition is a deterministic function of the inputs)

    Returns
    -------
    part : (n,) int32 — owning rank of every node; every rank owns at least one node.

    Raises
    ------
    ValueError if ``nparts`` < 1 or > n, or METIS leaves a part empty.
    """
    indptr = np.asarray(indptr, np.int64)
    n = indptr.size - 1
    if not 1 <= nparts <= n:
        raise ValueError(f"nparts must be between 1 and the number of nodes ({n}), got {nparts}")
    if nparts == 1:
        return np.zeros(n, np.int32)
    import pymetis
    a = sp.csr_matrix((np.ones(len(indices), np.int8), np.asarray(indices, np.int64), indptr),
                      shape=(n, n))
    a.setdiag(0)
    a.eliminate_zeros()
    a.sort_indices()
    opts = pymetis.Options(seed=seed)
    graph = pymetis.CSRAdjacency(a.indptr.astype(np.int64), a.indices.astype(np.int64))
    _, part = pymetis.part_graph(nparts, graph, options=opts)
    part = np.asarray(part, np.int32)
    counts = np.bincount(part, minlength=nparts)
    if np.any(counts == 0):
        raise ValueError(f"METIS left rank(s) {np.flatnonzero(counts == 0).tolist()} without "
                         f"nodes ({n} nodes into {nparts} parts): use fewer ranks")
    return part


@dataclass(frozen=True)
class HaloPlan:
    """Who sends what to whom for one ghost depth (local indices of one rank).

    Attributes
    ----------
    depth : int — ghost layers exchanged (1: first-order matrices, 2: pressure)
    n_local : int — owned + ghosts of layers ≤ depth (length of a local vector)
    neighbours : tuple of int — ranks exchanged with, ascending
    send : dict rank -> (m,) int64 local indices of owned nodes sent, in the receiver's order
    recv : dict rank -> (m,) int64 local indices of ghost slots filled, in ghost order
    """

    depth: int
    n_local: int
    neighbours: tuple
    send: dict
    recv: dict

    def count(self) -> tuple[int, int]:
        """(values sent, values received) per exchange of one scalar field."""
        return (sum(int(v.size) for v in self.send.values()),
                sum(int(v.size) for v in self.recv.values()))

    def stacked(self, k: int) -> "HaloPlan":
        """The plan of k local vectors stored one after another (one (k·n_local,) array):
        each message carries the k vectors' values, vector by vector (the same order on the
        sending and the receiving rank). k = 1 returns this plan."""
        if k == 1:
            return self
        nl = self.n_local

        def stack(idx):
            return {q: np.concatenate([v + j * nl for j in range(k)]) for q, v in idx.items()}
        return HaloPlan(self.depth, k * nl, self.neighbours, stack(self.send), stack(self.recv))


@dataclass(frozen=True)
class RankPartition:
    """One rank's share of the mesh (all node and element ids are 0-based).

    Attributes
    ----------
    rank, nparts : int
    owned : (n_owned,) int64 — global ids of owned nodes, ascending (local ids 0..n_owned-1)
    ghosts : (n_ghost,) int64 — global ids of ghosts, by (layer, owner, global id)
    ghost_owner : (n_ghost,) int32; ghost_layer : (n_ghost,) int8 (1 or 2)
    elements : (n_ele,) int64 — global ids of local elements (owned + halo), ascending
    element_owned : (n_ele,) bool — first node owned here
    local_tets : (n_ele, 4) int32 — local node numbers (all < n_local(1))
    send_nodes : dict rank q -> (m,) int64 global ids of owned nodes q holds as ghosts, in q's
        ghost order; send_layer : dict q -> (m,) int8 their layer as seen by q
    """

    rank: int
    nparts: int
    owned: np.ndarray
    ghosts: np.ndarray
    ghost_owner: np.ndarray
    ghost_layer: np.ndarray
    elements: np.ndarray
    element_owned: np.ndarray
    local_tets: np.ndarray
    send_nodes: dict = field(default_factory=dict)
    send_layer: dict = field(default_factory=dict)

    @property
    def n_owned(self) -> int:
        return int(self.owned.size)

    @property
    def l2g(self) -> np.ndarray:
        """(n_owned + n_ghost,) int64 — global id of every local node."""
        return np.concatenate([self.owned, self.ghosts])

    def n_local(self, depth: int = 1) -> int:
        """Owned nodes + ghosts of layers ≤ depth."""
        _check_depth(depth)
        return self.n_owned + int(np.count_nonzero(self.ghost_layer <= depth))

    def global_to_local(self, nodes: np.ndarray, nnodes: int) -> np.ndarray:
        """Local ids of global ``nodes`` (-1 where the node is not local)."""
        g2l = np.full(nnodes, -1, np.int64)
        l2g = self.l2g
        g2l[l2g] = np.arange(l2g.size)
        return g2l[np.asarray(nodes, np.int64)]

    def plan(self, depth: int = 1) -> HaloPlan:
        """The halo exchange filling the ghosts of layers ≤ ``depth``."""
        _check_depth(depth)
        send, recv = {}, {}
        for q, nodes in self.send_nodes.items():
            sel = nodes[self.send_layer[q] <= depth]
            if sel.size:                          # owned is ascending: local id by bisection
                send[q] = np.searchsorted(self.owned, sel).astype(np.int64)
        for q in np.unique(self.ghost_owner):
            idx = np.flatnonzero((self.ghost_owner == q) & (self.ghost_layer <= depth))
            if idx.size:
                recv[int(q)] = self.n_owned + idx.astype(np.int64)
        neigh = tuple(sorted(set(send) | set(recv)))
        return HaloPlan(depth=depth, n_local=self.n_local(depth), neighbours=neigh,
                        send=send, recv=recv)


def _check_depth(depth: int) -> None:
    if depth not in range(1, MAX_DEPTH + 1):
        raise ValueError(f"ghost depth must be 1..{MAX_DEPTH}, got {depth}")


def _layer_table(indptr, indices, part, nparts):
    """(node, rank, layer) of every node within MAX_DEPTH edges of a rank that does not own it."""
    n = part.size
    g = sp.csr_matrix((np.ones(len(indices), np.int8), np.asarray(indices, np.int64),
                       np.asarray(indptr, np.int64)), shape=(n, n)).astype(bool)
    own = sp.csr_matrix((np.ones(n, bool), (np.arange(n), part)), shape=(n, nparts))
    reach = [own]
    for _ in range(MAX_DEPTH):
        reach.append((g @ reach[-1]).astype(bool))
    layer = np.zeros((n, nparts), np.int8)      # dense: n × K bytes
    for d in range(MAX_DEPTH, 0, -1):
        r = reach[d].tocoo()
        layer[r.row, r.col] = d
    layer[np.arange(n), part] = 0
    node, rank = np.nonzero(layer)
    return node.astype(np.int64), rank.astype(np.int32), layer[node, rank]


def partition_mesh(tets: np.ndarray, nnodes: int, indptr: np.ndarray, indices: np.ndarray,
                   part: np.ndarray, ranks=None) -> list[RankPartition]:
    """Build the :class:`RankPartition` of every rank (or of ``ranks`` only).

    Parameters
    ----------
    tets : (nele, 4) int — connectivity; nnodes : int
    indptr, indices : first-order CSR pattern of the mesh (``Sparsity.indptr/indices``)
    part : (nnodes,) int — owner of every node (:func:`metis_partition`)
    ranks : iterable of int or None (all ranks)

    Returns
    -------
    list of RankPartition, one per requested rank, in that order.

    Raises
    ------
    ValueError if ``part`` has the wrong length or a rank owns no node.
    """
    tets = np.asarray(tets, np.int64)
    part = np.asarray(part, np.int32)
    if part.shape != (nnodes,):
        raise ValueError(f"part has shape {part.shape}, expected ({nnodes},)")
    nparts = int(part.max()) + 1
    counts = np.bincount(part, minlength=nparts)
    if np.any(counts == 0):
        raise ValueError(f"rank(s) {np.flatnonzero(counts == 0).tolist()} own no node")
    node, rank_of, layer = _layer_table(indptr, indices, part, nparts)
    ele_owner = part[tets[:, 0]]
    out = []
    for r in (range(nparts) if ranks is None else ranks):
        owned = np.flatnonzero(part == r).astype(np.int64)
        sel = rank_of == r
        gn, gl = node[sel], layer[sel]
        go = part[gn]
        order = np.lexsort((gn, go, gl))
        ghosts, gowner, glayer = gn[order], go[order], gl[order]
        # elements touching an owned node, ascending
        elements = np.flatnonzero(np.any(part[tets] == r, axis=1)).astype(np.int64)
        g2l = np.full(nnodes, -1, np.int64)
        l2g = np.concatenate([owned, ghosts])
        g2l[l2g] = np.arange(l2g.size)
        local_tets = g2l[tets[elements]]
        n1 = owned.size + int(np.count_nonzero(glayer == 1))
        if local_tets.size and (local_tets.min() < 0 or local_tets.max() >= n1):
            raise AssertionError("halo element with a node beyond the first ghost layer")
        # what r sends: its owned nodes that another rank q holds as ghosts, in q's order
        mine = part[node] == r
        send_nodes, send_layer = {}, {}
        for q in np.unique(rank_of[mine]):
            s = mine & (rank_of == q)
            sn, sl = node[s], layer[s]
            o = np.lexsort((sn, sl))
            send_nodes[int(q)], send_layer[int(q)] = sn[o], sl[o]
        out.append(RankPartition(
            rank=int(r), nparts=nparts, owned=owned, ghosts=ghosts,
            ghost_owner=gowner.astype(np.int32), ghost_layer=glayer.astype(np.int8),
            elements=elements, element_owned=ele_owner[elements] == r,
            local_tets=local_tets.astype(INDEX), send_nodes=send_nodes,
            send_layer=send_layer))
    return out


def extract_rows(indptr: np.ndarray, indices: np.ndarray, rp: RankPartition, nnodes: int,
                 depth: int, ids=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The owned rows of a global CSR/BCSR pattern in local column numbers, column order kept.

    Parameters
    ----------
    indptr : (n+1,) int; indices : (nnz,) int — global pattern (any column order), or with
        ``ids`` the pattern over the nodes ``ids`` only
    rp : RankPartition; nnodes : int
    depth : ghost layers the pattern reaches (1: first-order, 2: second-order pressure)
    ids : (m,) int64 ascending global ids of the pattern's nodes (every owned node among
        them), or None (the pattern over all global nodes)

    Returns
    -------
    local_indptr : (n_owned+1,) int64
    local_indices : (nnz_owned,) int64 — local column ids (< rp.n_local(depth)), in the
        global matrix's order within each row
    positions : (nnz_owned,) int64 — positions of these entries in the global ``values``
        (``values[positions]`` are the owned rows' values)

    Raises
    ------
    ValueError naming the first owned row with a column beyond the ghost layers of ``depth``.
    """
    indptr = np.asarray(indptr, np.int64)
    own = rp.owned if ids is None else np.searchsorted(ids, rp.owned)
    starts, ends = indptr[own], indptr[own + 1]
    lens = ends - starts
    local_indptr = np.zeros(rp.n_owned + 1, np.int64)
    np.cumsum(lens, out=local_indptr[1:])
    positions = (np.repeat(starts - local_indptr[:-1], lens)
                 + np.arange(local_indptr[-1], dtype=np.int64))
    node = np.asarray(indices, np.int64)[positions]
    if ids is not None:
        node = np.asarray(ids)[node]
    cols = rp.global_to_local(node, nnodes)
    bad = np.flatnonzero((cols < 0) | (cols >= rp.n_local(depth)))
    if bad.size:
        row = int(rp.owned[np.searchsorted(local_indptr, bad[0], side="right") - 1])
        raise ValueError(f"rank {rp.rank}: row {row} couples to node {int(node[bad[0]])}, "
                         f"beyond {depth} ghost layer(s); pass depth={depth + 1}")
    return local_indptr, cols, positions


def owned_row_order(local_indptr: np.ndarray, local_indices: np.ndarray, rp: RankPartition
                    ) -> np.ndarray:
    """Reorder a pattern assembled on the rank's local mesh into global column order.

    A :class:`~dycore.assembly.sparsity.Sparsity` built from ``rp.local_tets`` sorts columns
    by LOCAL id; the distributed matrix keeps the GLOBAL order (the serial summation order).

    Parameters
    ----------
    local_indptr, local_indices : local CSR pattern over ``rp.n_local(1)`` nodes (rows
        0..n_owned-1 are the owned rows)

    Returns
    -------
    perm : (nnz_owned,) int64 — ``local_values[perm]`` are the owned rows' values in global
        column order (the layout of :func:`extract_rows` for the global pattern)
    """
    end = int(local_indptr[rp.n_owned])
    rows = np.repeat(np.arange(rp.n_owned), np.diff(np.asarray(local_indptr[:rp.n_owned + 1])))
    gcol = rp.l2g[np.asarray(local_indices[:end], np.int64)]
    return np.lexsort((gcol, rows)).astype(np.int64)


def row_subset(indptr, indices, values, rows):
    """Rows ``rows`` of a CSR / BCSR matrix, entry order kept (no sorting).

    Parameters
    ----------
    indptr : (n+1,) int; indices : (nnz,) int; values : (nnz,) or (nnz, b, b)
    rows : (m,) int

    Returns
    -------
    (indptr (m+1,) int64, indices (nnz_m,) int64, values (nnz_m, ...))
    """
    indptr = np.asarray(indptr, np.int64)
    rows = np.asarray(rows, np.int64)
    lens = indptr[rows + 1] - indptr[rows]
    ptr = np.zeros(rows.size + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    pos = np.repeat(indptr[rows] - ptr[:-1], lens) + np.arange(ptr[-1], dtype=np.int64)
    return ptr, np.asarray(indices, np.int64)[pos], np.asarray(values)[pos]
