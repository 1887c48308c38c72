"""Each rank's set-up from its own elements: the mesh-only operators without a serial build.

The scattered set-up (:class:`~dycore.parallel.simulation.DistributedSimulation`,
``setup="scattered"``) has rank 0 assemble every mesh-only operator of the whole mesh and cut
out each rank's piece. Here rank 0 builds only the mesh, its node graph and the partition, and
sends each rank the part of the mesh it needs (:func:`setup_mesh`); each rank then assembles
the operators over that part with the serial code (:func:`local_piece`) and keeps the same
piece, array for array, as the scattered set-up would give it (tested:
tests/parallel/test_local_setup.py).

Why the piece is the same bits. The part of rank r is every element touching one of its local
nodes (owned, ghost layers 1 and 2) — the elements of ghost layer 3 included — over their
nodes, numbered by ascending global id, with the boundary faces of those elements in global
order:

- every operator entry the piece keeps is summed from the same elements (or faces) in the same
  order as serially: a row of a local node of depth ≤ 2 has all its elements here, and the
  element and face loops run in ascending global order (the deterministic assembly's
  contribution order, :mod:`dycore.assembly.sparsity`);
- the lumped mass, Dirichlet flags and no-normal-flow frames of nodes of depth ≤ 2 are
  complete (their elements and faces are all here);
- the products CMC = C P Cᵀ and KMK = K_p M_L⁻¹ K_p are SciPy's over matrices whose columns
  come in the global order (the node numbering is monotone in the global id), so an owned row
  sums the same products in the same order; the columns of Cᵀ an owned row reaches (nodes of
  depth ≤ 1) hold every row of C that touches them;
- the coefficients and the initial state are pointwise functions of the coordinates.

Rows of the outermost nodes (depth 3) are incomplete and never read. Rank 0 gathers the owned
rows of the pinned pressure matrix back into the global matrix where the pressure solve needs
it (:func:`gather_rows`: the pressure AMG hierarchy, the replicated factorisation).
"""
from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp

from dycore.dtypes import INDEX
from dycore.mesh.mesh import Mesh
from dycore.parallel.mpi import large

__all__ = ["setup_mesh", "local_piece", "gather_rows", "shared_setup_cache", "load_pieces",
           "store_piece", "partition_digest"]

#: the packages whose code shapes a piece beyond what the set-up cache's key covers (the
#: partition and the piece: parallel; the coefficients and state: physics; the no-normal-flow
#: setting: timestepping) — their digest is part of every piece's entry name
PIECE_SOURCES = ("parallel", "physics", "timestepping")

log = logging.getLogger("dycore")


def setup_mesh(mesh, rp) -> dict:
    """The part of ``mesh`` rank ``rp.rank`` builds its operators on (run on rank 0).

    Parameters
    ----------
    mesh : the global Mesh; rp : RankPartition of the rank

    Returns
    -------
    dict: ``ids`` (m,) int64 — the global ids of the part's nodes, ascending (every node of an
    element touching a local node of ``rp``); ``coords`` (m, 3); ``tets`` (e, 4) int32 in
    part numbering, the elements in ascending global order; ``faces`` (f, 3), ``face_tags``,
    ``face_ele`` (in part numbering) — the boundary faces of those elements, in global order.
    """
    tets = np.asarray(mesh.tets)
    local = np.zeros(mesh.nnodes, bool)
    local[rp.l2g] = True
    elems = np.flatnonzero(local[tets].any(axis=1))
    del local
    ids = np.unique(tets[elems])
    fsel = np.flatnonzero(np.isin(mesh.face_ele, elems))
    return {"ids": ids, "coords": np.asarray(mesh.coords)[ids],
            "tets": np.searchsorted(ids, tets[elems]).astype(INDEX),
            "faces": np.searchsorted(ids, np.asarray(mesh.faces)[fsel]).astype(INDEX),
            "face_tags": np.asarray(mesh.face_tags)[fsel],
            "face_ele": np.searchsorted(elems, np.asarray(mesh.face_ele)[fsel]).astype(INDEX)}


def local_piece(config, part: dict, rp, nnodes: int, pin: int, timers=None) -> dict:
    """Rank ``rp.rank``'s piece built from its part of the mesh: the dictionary
    :func:`~dycore.parallel.piece.rank_piece` gives from the serial set-up, with
    ``detj_min`` over the part's elements (the caller takes the minimum over ranks).

    Parameters
    ----------
    config : Config; part : :func:`setup_mesh` of this rank; rp : RankPartition
    nnodes : int — global node count; pin : the global pinned pressure node (the highest node,
        as the serial set-up picks it)
    timers : StageTimers or None

    Raises
    ------
    MeshError for an element of the part with det J ≤ 0 (numbered in the part), as the serial
    build raises it.
    """
    from dycore import cases
    from dycore.assembly.operators import mesh_operator_arrays, mesh_operators_from_arrays
    from dycore.assembly.sparsity import build_sparsity
    from dycore.backend.cpu import CPUBackend
    from dycore.backend.timers import StageTimers
    from dycore.parallel.piece import rank_piece
    from dycore.physics.coefficients import build_coefficients
    from dycore.physics.state import State
    from dycore.timestepping.simulation import no_normal_flow_setting

    timers = StageTimers() if timers is None else timers
    ids = part["ids"]
    mesh = Mesh(coords=part["coords"], tets=part["tets"], faces=part["faces"],
                face_tags=part["face_tags"], face_ele=part["face_ele"])
    case = cases.load_case(config.case.name)
    params = config.case.build_parameters()
    backend = CPUBackend(threads=config.backend.threads)
    with timers("local set-up: sparsity"):
        sparsity = build_sparsity(mesh.tets, mesh.nnodes)
    assembler = backend.assembler(mesh, sparsity, timers)
    k = int(np.searchsorted(ids, pin))
    local_pin = k if k < ids.size and ids[k] == pin else -1
    arrays = mesh_operator_arrays(mesh, backend, assembler, sparsity, case.DIRICHLET_TAGS,
                                  config.physics.stabilisation, timers,
                                  *no_normal_flow_setting(config, case, params), pin=local_pin)
    del assembler
    ops = mesh_operators_from_arrays(arrays, backend, sparsity)
    state = State.from_fields(case.initial_state(params, mesh.coords), np.asarray)
    coeffs = build_coefficients(case, params, mesh, config.physics, backend)
    view = SimpleNamespace(mesh=mesh, sparsity=sparsity, ops=ops, coeffs=coeffs, state=state)
    return rank_piece(view, rp, nnodes=nnodes, ids=ids, pin=pin)


def shared_setup_cache(comm, setup_cache):
    """Rank 0's set-up cache on every rank (collective): rank 0 broadcasts its folder and key,
    each other rank opens a :class:`~dycore.io.setup_cache.SetupCache` at them, so that every
    rank keeps its own entries (its rank-local AMG hierarchy) beside rank 0's. The ranks of one
    host share the folder; on another node an absent folder only means misses. None on every
    rank where rank 0 has no cache or caching is off.

    comm : mpi4py communicator; setup_cache : rank 0's SetupCache or None (ignored elsewhere)
    """
    from dycore.io.setup_cache import SetupCache
    where = None
    if comm.rank == 0 and setup_cache is not None and setup_cache.directory is not None:
        where = (str(setup_cache.directory), setup_cache.key)
    where = comm.bcast(where, root=0)
    if where is None:
        return None
    return setup_cache if comm.rank == 0 else SetupCache.at(*where)


def gather_rows(comm, rp, rows, nnodes: int, root: int = 0):
    """The global matrix of every rank's owned rows, on ``root`` (collective; None elsewhere).

    Parameters
    ----------
    comm : mpi4py communicator; rp : RankPartition of this rank
    rows : (indptr (n_owned+1,), indices (nnz,) local column ids, values (nnz,)) — the owned
        rows, columns in the global matrix's order within each row (``pressure_rows``)
    nnodes : int — the global size

    Returns
    -------
    scipy.sparse.csr_matrix (nnodes, nnodes) on ``root``: row ``rp.owned[i]`` of each rank is
    its row i, column ids mapped to global ones, order kept (so a matrix with sorted rows comes
    back with sorted rows); None on the other ranks.
    """
    ptr, cols, vals = rows
    mine = (rp.owned, np.diff(np.asarray(ptr, np.int64)), rp.l2g[np.asarray(cols, np.int64)],
            np.asarray(vals, np.float64))
    got = large(comm).gather(mine, root=root)      # a rank's rows may exceed 2 GiB
    if comm.rank != root:
        return None
    counts = np.zeros(nnodes, np.int64)
    for owned, lens, _, _ in got:
        counts[owned] = lens
    indptr = np.zeros(nnodes + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(indptr[-1], np.int64)
    data = np.empty(indptr[-1], np.float64)
    for owned, lens, gcols, v in got:
        start = np.repeat(indptr[owned], lens)
        offset = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        indices[start + offset] = gcols
        data[start + offset] = v
    index = INDEX if indptr[-1] < np.iinfo(INDEX).max else np.int64
    a = sp.csr_matrix((data, indices.astype(index), indptr.astype(index)),
                      shape=(nnodes, nnodes))
    a.sort_indices()              # (sorted already where the rows were: only the flag is set)
    return a


def partition_digest(part) -> str:
    """SHA-256 (hex) of a node partition ((nnodes,) owner ranks, any integer dtype)."""
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(part, np.int64).tobytes()).hexdigest()


def _piece_entry(rank: int, size: int) -> str:
    from dycore.io.setup_cache import source_digest
    return f"piece-rank{rank}of{size}-{source_digest(PIECE_SOURCES)[:16]}"


def load_pieces(comm, cache):
    """Every rank's piece from the set-up cache, or on every rank None (collective).

    A second run of the same mesh and configuration on as many ranks skips the partition,
    the parts rank 0 sends and the assembly of each piece (:func:`store_piece` kept them).
    All or none: the pieces are used only where every rank loaded its own and all of them
    come from one partition (its digest, stored in each); otherwise every rank builds anew.

    Parameters
    ----------
    comm : mpi4py communicator; cache : :func:`shared_setup_cache` (None: off)

    Returns
    -------
    (piece, part): this rank's piece (the dict :func:`local_piece` returns, ``detj_min``
    of its own elements) and, on rank 0, the (nnodes,) partition (None elsewhere) — or
    (None, None) on every rank.
    """
    from dycore.io.nested import unpack
    if cache is None:                       # (None on every rank alike)
        return None, None
    got = None
    arrays = cache.load(_piece_entry(comm.rank, comm.size))
    if arrays is not None:
        try:
            got = unpack(arrays)
        except (ValueError, TypeError, KeyError) as exc:       # another layout: rebuild
            log.warning("warning: the set-up cache's piece of rank %d is unreadable (%s); "
                        "rebuilding", comm.rank, exc)
            got = None
    digests = comm.allgather(None if got is None else got.get("partition_digest"))
    ok = all(d is not None for d in digests) and len(set(digests)) == 1
    if ok and comm.rank == 0:                  # rank 0's partition is the one they share
        ok = "partition" in got and partition_digest(got["partition"]) == digests[0]
    if not comm.bcast(ok, root=0):
        return None, None
    return got["piece"], got.get("partition")


def store_piece(comm, cache, piece: dict, part) -> None:
    """Keep this rank's freshly built ``piece`` in the set-up cache for :func:`load_pieces`,
    with the digest of the partition ``part`` ((nnodes,) owners, read on rank 0 only, which
    broadcasts the digest: collective) and, on rank 0, the partition itself. The cache's
    writer thread writes it while the set-up goes on (5.2 GB a rank at 30.7 M tets on four
    ranks: about 5 s); ``cache.flush()`` waits for it, and the piece's arrays must not change
    until then. A write that fails only warns (the run goes on)."""
    from dycore.io.nested import pack
    if cache is None:                       # (None on every rank alike)
        return
    digest = comm.bcast(partition_digest(part) if comm.rank == 0 else None, root=0)
    entry = {"piece": piece, "partition_digest": digest}
    if comm.rank == 0:
        entry["partition"] = np.asarray(part)
    try:
        arrays = pack(entry)
    except TypeError as exc:              # a piece of a shape the packer lacks: no cache
        log.warning("warning: the piece of rank %d is not cached (%s)", comm.rank, exc)
        return
    cache.store(_piece_entry(comm.rank, comm.size), arrays, background=True)
