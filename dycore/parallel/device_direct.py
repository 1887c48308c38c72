"""The pressure solve of GPU ranks as one direct solve of the whole system, replicated per rank.

The pinned pressure matrix (CMC + s·KMK) is constant, so a serial GPU run factorises it once
(:mod:`dycore.solvers.direct`: cuDSS) and solves in ~3 ms. GPU ranks with CG need a
preconditioner that works across ranks, and theirs (``amg``) is rank-local V-cycles —
block-Jacobi over ranks: 271 CG iterations per step on 2 ranks against 38 on one (the paper
mesh, 98,441 rows, two H200s), so the rank step took 197 ms against 51 ms on one rank. With
``solvers.pressure.method: direct`` (or ``auto`` where the serial run would factorise) every
rank instead factorises the WHOLE global matrix on its own GPU:

- set-up: rank 0 holds the global matrix and broadcasts it as raw CSR arrays
  (:func:`broadcast_csr`, no pickling: ~50 M nonzeros on a 4.4 M-tet mesh); the ranks'
  owned global ids are all-gathered once; each rank factorises with
  :func:`~dycore.solvers.direct.direct_solver` (cuDSS on a GPU, in its deterministic mode
  for reproducible runs; SuperLU under numba-cuda's simulator). Memory per rank is the serial
  factorisation's (≈ 35 GB at :data:`~dycore.solvers.direct.AUTO_DIRECT_MAX_ROWS`). On a GPU
  the ordering and partition tree of cuDSS's analysis come from rank 0's set-up cache
  (:func:`shared_ordering`: every rank factorises with rank 0's entry) or, on a miss, rank 0
  stores its own after the factorisation (:func:`keep_ordering`) — as the serial run does;
- each solve: the owned right-hand-side entries of every rank are all-gathered into a (K, m)
  device buffer (m: the largest owned count; one transport all-gather of m float64 per rank),
  one gather kernel puts them in global order, the factorisation solves the global system on
  every rank, and one gather kernel reads the local solution — owned nodes AND ghosts, depth 2
  — out of the global one: ``x[i] = x_global[l2g[i]]``. No halo exchange follows: every rank
  holds the whole solution. With a deterministic factorisation (SuperLU, cuDSS's deterministic
  mode) a ghost gets its owner's bits; cuDSS's fast mode may differ in the last bits from solve
  to solve, and so a ghost from its owner.

Nothing is copied to the host on a GPU (the all-gather runs on the backend's stream over
NCCL, cuDSS's solve on the same stream); over the staged MPI transport the all-gather goes
through the host.
"""
from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from dycore.backend.gpu_kernels import grid
from dycore.parallel.device_kernels import get_rank_kernels
from dycore.solvers.direct import (ORDERING_ENTRY, direct_solver, ordering_arrays,
                                   solve_in_step)

__all__ = ["ReplicatedDirectPressure", "broadcast_csr", "gather_positions", "shared_ordering",
           "keep_ordering", "owned_rhs", "distributed_numbering"]

log = logging.getLogger("dycore")

#: elements per MPI broadcast of one CSR array (keeps every count far below 2^31)
BCAST_CHUNK = 1 << 26


def broadcast_csr(comm, a=None, root: int = 0):
    """Rank ``root``'s sparse matrix on every rank, as buffers (not pickled).

    Parameters
    ----------
    comm : mpi4py communicator
    a : scipy sparse (n, m) on ``root`` (converted to CSR); ignored elsewhere
    root : the rank that holds ``a``

    Returns
    -------
    scipy.sparse.csr_matrix (n, m): ``a``'s indptr, indices and data with their dtypes, on
    every rank (``root`` gets ``a`` itself back where it already is CSR).

    The shape, dtypes and sizes are broadcast first (one small pickled message), then each
    array by ``Bcast`` in chunks of at most :data:`BCAST_CHUNK` elements.
    """
    head = None
    if comm.rank == root:
        if not (sp.issparse(a) and a.format == "csr"):
            a = sp.csr_matrix(a)
        head = (a.shape, [(x.dtype.str, int(x.size)) for x in (a.indptr, a.indices, a.data)])
    shape, specs = comm.bcast(head, root=root)
    if comm.rank == root:
        arrays = [np.ascontiguousarray(x) for x in (a.indptr, a.indices, a.data)]
    else:
        arrays = [np.empty(size, np.dtype(dt)) for dt, size in specs]
    for x in arrays:
        for start in range(0, x.size, BCAST_CHUNK):
            comm.Bcast(x[start:start + BCAST_CHUNK], root=root)
    if comm.rank == root:
        return a
    indptr, indices, data = arrays
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def owned_rhs(backend, rhs, n_owned: int, what: str):
    """The owned entries ``rhs[:n_owned]`` of a direct solve's right-hand side, as a float64
    array of ``backend``'s (a view where it already is one).

    rhs : (n_local,) or (n_owned,) array; what : the solver's name for the error.

    Raises
    ------
    ValueError "<what>: right-hand side of shape …" for an array that is not 1-D or has fewer
    than n_owned entries.
    """
    if len(rhs.shape) != 1 or rhs.shape[0] < n_owned:
        raise ValueError(f"{what}: right-hand side of shape {tuple(rhs.shape)}, expected "
                         f"({n_owned},) or longer")
    return backend.as_device(rhs, np.float64)[:n_owned]


def distributed_numbering(owned_global, n: int, what: str = "distributed direct solve"
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Global node → row of the rank-by-rank numbering, and each rank's first row.

    Parameters
    ----------
    owned_global : sequence of K int arrays — rank r's owned nodes' global ids in its local
        order (``rp.owned`` of every rank)
    n : int — the global node count; what : the solver's name for the errors

    Returns
    -------
    (dist, offsets) : dist (n,) int64 with ``dist[owned_global[r][i]] = offsets[r] + i``;
    offsets (K + 1,) int64, the running sum of the owned counts (offsets[K] = n)

    Raises
    ------
    ValueError when the owned sets are not a partition of 0..n−1.
    """
    owned = [np.asarray(o, np.int64).ravel() for o in owned_global]
    offsets = np.zeros(len(owned) + 1, np.int64)
    np.cumsum([o.size for o in owned], out=offsets[1:])
    dist = np.full(n, -1, np.int64)
    for r, o in enumerate(owned):
        if o.size and (o.min() < 0 or o.max() >= n):
            raise ValueError(f"{what}: rank {r} owns global ids outside 0..{n - 1}")
        dist[o] = offsets[r] + np.arange(o.size)
    if offsets[-1] != n or np.any(dist < 0):
        raise ValueError(f"{what}: the ranks own {int(offsets[-1])} nodes covering "
                         f"{int(np.count_nonzero(dist >= 0))} of the {n} global ones (each "
                         "node must be owned by exactly one rank)")
    return dist, offsets


def gather_positions(owned_global, n: int) -> tuple[np.ndarray, int]:
    """Where each global node's value lands in the all-gathered buffer.

    Parameters
    ----------
    owned_global : sequence of K int arrays — rank r's owned nodes' global ids in its local
        order (``rp.l2g[:rp.n_owned]`` of every rank)
    n : int — the global node count

    Returns
    -------
    (pos, m) : pos (n,) int64 with ``pos[owned_global[r][i]] = r·m + i`` — so the global
    right-hand side is ``buf.reshape(-1)[pos]`` for the (K, m) all-gather buffer — and m, the
    largest owned count (each rank's block is padded to it).

    Raises
    ------
    ValueError when the owned sets are not a partition of 0..n−1 (a node owned twice, by no
    rank, or out of range).
    """
    dist, offsets = distributed_numbering(owned_global, n, "replicated direct solve")
    counts = np.diff(offsets)
    m = int(counts.max(initial=0))
    rank = np.repeat(np.arange(counts.size, dtype=np.int64), counts)[dist]
    return rank * m + (dist - offsets[rank]), m


def shared_ordering(comm, setup_cache, gpu: bool) -> dict | None:
    """Rank 0's cached cuDSS ordering on every rank (collective: one broadcast).

    Parameters
    ----------
    comm : mpi4py communicator; setup_cache : rank 0's SetupCache (:mod:`dycore.io.
    setup_cache`; its key covers the mesh, hence the pressure matrix) or None; ignored on the
    other ranks; gpu : whether the ranks factorise with cuDSS (no ordering is read otherwise)

    Returns
    -------
    {"perm": (n,) int32, "tree": (k,) uint8 where stored} — the entry
    :data:`~dycore.solvers.direct.ORDERING_ENTRY` —, or None on every rank (a miss, the
    cache off, or no GPU). Rank 0's cache counts the hit or the miss.
    """
    entry = None
    if comm.rank == 0 and gpu and setup_cache is not None:
        entry = setup_cache.load(ORDERING_ENTRY)
        (setup_cache.misses if entry is None else setup_cache.hits).append(ORDERING_ENTRY)
    return comm.bcast(entry, root=0)


def keep_ordering(comm, setup_cache, direct, entry) -> None:
    """After a factorisation without a cached ordering (``entry`` None: :func:`shared_ordering`
    missed), rank 0 stores its factorisation's ordering and tree in ``setup_cache`` (the
    serial run's entry: :func:`~dycore.solvers.direct.ordering_arrays`); otherwise nothing.

    Parameters
    ----------
    comm : mpi4py communicator; setup_cache : rank 0's SetupCache or None; direct : the
    factorisation (:class:`~dycore.solvers.direct.CudssDirect` — anything with
    ``permutation()`` and ``partition_tree()``), or None where the ranks solve by CG;
    entry : what :func:`shared_ordering` returned
    """
    if (comm.rank == 0 and entry is None and direct is not None and setup_cache is not None
            and hasattr(direct, "permutation")):
        setup_cache.store(ORDERING_ENTRY, ordering_arrays(direct))


class ReplicatedDirectPressure:
    """The pinned pressure system solved by a factorisation of the global matrix on every rank.

    Why: the rank-local V-cycles of ``amg`` need 7× the CG iterations on 2 ranks (271 against
    38 per step on the paper mesh); the replicated factor costs the serial factor's memory on
    every GPU, which the serial run's ``auto`` limit already bounds.

    Parameters
    ----------
    backend : GPUBackend (or its simulator) — arrays, kernels, the stream the transport uses
    transport : NcclTransport / MpiStagedTransport / loopback transport (its ``allgather``)
    a : scipy sparse (n, n) float64 — the GLOBAL pinned pressure matrix (the same on every rank)
    owned_global : sequence of K int arrays — every rank's owned nodes' global ids, in local
        order (:func:`gather_positions`)
    l2g : (n_local,) int — this rank's local → global map (owned nodes first, then the
        ghosts of both layers: ``rp.l2g``, of length ``rp.n_local(2)``)
    rtol : tolerance of the factorisation's set-up check
        (:func:`~dycore.solvers.direct.check_factorisation`)
    ordering : {"perm", "tree"} of a cached cuDSS ordering (:func:`shared_ordering`) or None

    Attributes
    ----------
    x : (n_local,) float64 backend array — the last solution over every local node (the
        solver's own, overwritten by the next solve); iterations : 0 (as the serial direct
        path counts); direct : the CudssDirect / HostDirect of the global matrix;
    n, n_owned, n_local, m (the padded owned count of the all-gather)

    Raises
    ------
    ValueError for owned sets that do not partition the global nodes, an ``l2g`` whose owned
    part is not this rank's entry of ``owned_global``, or global ids out of range;
    ConfigError (CudssDirect) when cuDSS cannot be loaded on a GPU; SolverDivergedError when
    the factorisation or its check fails.
    """

    #: pressure iterations counted per solve (the serial direct path counts 0)
    iterations = 0

    def __init__(self, backend, transport, a, owned_global, l2g, rtol: float = 1e-10,
                 ordering: dict | None = None):
        self.b, self.t = backend, transport
        n = int(a.shape[0])
        if a.shape != (n, n):
            raise ValueError(f"replicated direct solve: matrix of shape {a.shape} is not square")
        if len(owned_global) != transport.size:
            raise ValueError(f"replicated direct solve: {len(owned_global)} owned sets for "
                             f"{transport.size} ranks")
        pos, m = gather_positions(owned_global, n)
        l2g = np.asarray(l2g, np.int64).ravel()
        own = np.asarray(owned_global[transport.rank], np.int64).ravel()
        if l2g.size < own.size or not np.array_equal(l2g[:own.size], own):
            raise ValueError("replicated direct solve: the local map's first entries must be "
                             f"this rank's ({transport.rank}) owned nodes")
        if l2g.size and (l2g.min() < 0 or l2g.max() >= n):
            raise ValueError(f"replicated direct solve: local nodes outside 0..{n - 1}")
        self.n, self.m, self.n_owned, self.n_local = n, m, int(own.size), int(l2g.size)
        self.k = get_rank_kernels(getattr(backend, "strict", False))["pack_rows"]
        self.threads = min(256, int(getattr(backend, "solver_block", 256)))
        z = backend.zeros
        self.send, self.recv = z(max(m, 1)), z(max(m, 1) * transport.size)
        self.pos, self.l2g = backend.to_device(pos), backend.to_device(l2g)
        self.b_global, self.x_global, self.x = z(n), z(n), z(self.n_local)
        ordering = ordering or {}
        self.direct = direct_solver(backend, a, self.b_global, self.x_global, rtol,
                                    perm=ordering.get("perm"), tree=ordering.get("tree"))
        if transport.rank == 0:
            log.info("pressure: the direct solve replicated on %d GPU ranks (every rank holds "
                     "the %d-row factorisation; one all-gather of %d values per rank and "
                     "solve, no halo exchange)", transport.size, n, m)

    def steps(self, rhs):
        """The solve as a generator that yields once, after the all-gather's post (so K
        loopback ranks in one process run it in lock step: every rank's block must be posted
        before any rank reads the gathered buffer); exhausted when :attr:`x` holds the
        solution.

        Parameters
        ----------
        rhs : (n_local,) or (n_owned,) float64 backend array — the right-hand side; its owned
            entries ``rhs[:n_owned]`` are read (the ghosts are not)

        Raises
        ------
        ValueError for a right-hand side with fewer than n_owned entries or not 1-D.
        """
        b, o = self.b, self.n_owned
        self.send[:o] = owned_rhs(b, rhs, o, "replicated direct solve")
        self.t.allgather(self.send, self.recv)
        yield
        # b_global[g] = recv[pos[g]]: the gathered blocks in global order
        b.launch(self.k, grid(self.n, self.threads), b.nb(self.recv), b.nb(self.pos), 1,
                 b.nb(self.b_global))
        solve_in_step(self.b, self.direct)
        # x[i] = x_global[l2g[i]] for owned nodes and ghosts: no halo exchange
        b.launch(self.k, grid(self.n_local, self.threads), b.nb(self.x_global),
                 b.nb(self.l2g), 1, b.nb(self.x))

    def solve(self, rhs):
        """Solve A x = rhs on this rank (every rank calls it: the all-gather is collective).

        rhs : as :meth:`steps`. Returns (x (n_local,) backend array — the solver's own, every
        ghost filled —, 0 iterations).
        """
        for _ in self.steps(rhs):
            pass
        return self.x, self.iterations
