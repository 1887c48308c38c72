"""Halo exchange on CPU ranks (mpi4py point-to-point) and the gather of owned values to rank 0.

:class:`HaloExchange` fills the ghost slots of a local vector with the owners' values:
non-blocking ``Irecv`` from every neighbour into a receive buffer, pack + ``Isend`` of the
owned values each neighbour holds as ghosts, ``Waitall``, unpack. ``begin`` / ``end`` split the
two halves so a caller can compute between them (the interior rows of an SpMV,
:mod:`dycore.parallel.spmv`). The plan (who sends which local indices to whom) is a
:class:`~dycore.parallel.partition.HaloPlan`; a value moves as float64.

On GPU ranks the same plan drives NCCL send/recv of device buffers (docs/architecture.md,
"Scaling out"); this module is the CPU-rank implementation.
"""
from __future__ import annotations

import time
from typing import ClassVar

import numpy as np

__all__ = ["HaloExchange", "RootGather", "gather_to_root"]

_TAG = 1515


class HaloExchange:
    """Ghost update of local vectors for one :class:`HaloPlan` and one block size.

    Parameters
    ----------
    comm : mpi4py communicator (the ranks of the partition, rank = partition rank)
    plan : HaloPlan of this rank
    block : int — values per node (1: scalar fields, 3: velocity)

    Attributes
    ----------
    bytes_sent : int — bytes sent by this rank since construction (all exchanges)
    exchanges : int — number of completed exchanges
    totals : class-wide dict over every exchange of this process — ``bytes`` sent,
        ``exchanges`` completed, ``seconds`` spent in begin + end (packing, posting, waiting,
        unpacking; the overlapped interior work is not counted)
    """

    totals: ClassVar[dict] = {"bytes": 0, "exchanges": 0, "seconds": 0.0}

    def __init__(self, comm, plan, block: int = 1):
        self.comm, self.plan, self.block = comm, plan, int(block)
        shape = (() if self.block == 1 else (self.block,))
        self._sbuf = {q: np.empty((idx.size,) + shape) for q, idx in plan.send.items()}
        self._rbuf = {q: np.empty((idx.size,) + shape) for q, idx in plan.recv.items()}
        self._reqs = []
        self.bytes_sent = 0
        self.exchanges = 0

    def _check(self, x) -> None:
        want = (self.plan.n_local,) + (() if self.block == 1 else (self.block,))
        if x.shape[:len(want)] != want or x.dtype != np.float64:
            raise ValueError(f"halo exchange: local vector must be float64 of shape {want}, "
                             f"got {x.dtype} {x.shape}")

    def begin(self, x: np.ndarray) -> None:
        """Post the receives and sends of ``x``'s owned values (x: (n_local[, block]) float64).

        ``x``'s owned part must not change and its ghost part must not be read until
        :meth:`end`.
        """
        if self._reqs:
            raise RuntimeError("halo exchange: begin() called twice without end()")
        self._check(x)
        t0 = time.perf_counter()
        reqs = [self.comm.Irecv(self._rbuf[q], source=q, tag=_TAG) for q in self._rbuf]
        for q, idx in self.plan.send.items():
            buf = self._sbuf[q]
            np.take(x, idx, axis=0, out=buf)
            reqs.append(self.comm.Isend(buf, dest=q, tag=_TAG))
            self.bytes_sent += buf.nbytes
            HaloExchange.totals["bytes"] += buf.nbytes
        self._reqs = reqs
        HaloExchange.totals["seconds"] += time.perf_counter() - t0

    def end(self, x: np.ndarray) -> None:
        """Wait for the messages of :meth:`begin` and write the ghost values into ``x``."""
        from mpi4py import MPI
        t0 = time.perf_counter()
        MPI.Request.Waitall(self._reqs)
        self._reqs = []
        for q, idx in self.plan.recv.items():
            x[idx] = self._rbuf[q]
        self.exchanges += 1
        HaloExchange.totals["exchanges"] += 1
        HaloExchange.totals["seconds"] += time.perf_counter() - t0

    def update(self, x: np.ndarray) -> None:
        """``begin`` + ``end``: fill the ghosts of ``x`` now."""
        self.begin(x)
        self.end(x)


def gather_to_root(comm, owned: np.ndarray, values: np.ndarray, nnodes: int, root: int = 0):
    """Collect every rank's owned values into one global array on ``root`` (collective; a
    :class:`RootGather` used once — keep one to gather the same partition again).

    Parameters
    ----------
    comm : mpi4py communicator
    owned : (n_owned,) int — global ids of this rank's owned nodes
    values : (n_owned, ...) — their values (any trailing shape and dtype, the same on every
        rank; stack several fields as columns to gather them in one message)
    nnodes : int — global node count

    Returns
    -------
    (nnodes, ...) array on ``root`` (values in global node order), None elsewhere.

    Raises
    ------
    ValueError on root if the ranks' owned sets do not cover every node exactly once.
    """
    return RootGather(comm, owned, nnodes, root)(values)


class RootGather:
    """The gathers to ``root`` of one partition's owned values (a snapshot every few steps).

    Made once (collective): one ``gather`` of the owned counts and one ``Gatherv`` of the
    owned global ids, checked on ``root`` to cover every node exactly once. Each call is then
    ONE ``Gatherv`` of the values (raw buffers, no pickling) straight into one array on
    ``root``, scattered into node order by one fancy-index assignment.

    Parameters
    ----------
    comm : mpi4py communicator
    owned : (n_owned,) int — global ids of this rank's owned nodes
    nnodes : int — global node count; root : int — the rank that receives

    Raises
    ------
    ValueError on root if the ranks' owned sets do not cover every node exactly once.
    """

    def __init__(self, comm, owned: np.ndarray, nnodes: int, root: int = 0):
        self.comm, self.root, self.nnodes = comm, int(root), int(nnodes)
        owned = np.ascontiguousarray(owned, np.int64)
        self.n_owned = int(owned.size)
        counts = comm.gather(self.n_owned, root=self.root)
        self.ids = self.counts = None
        if comm.rank != self.root:
            comm.Gatherv(owned, None, root=self.root)
            return
        self.counts = np.asarray(counts, np.int64)
        ids = self.ids = np.empty(int(self.counts.sum()), np.int64)
        comm.Gatherv(owned, [ids, self.counts], root=self.root)
        if ids.size and (ids.min() < 0 or ids.max() >= nnodes):
            raise ValueError(f"gather_to_root: a node id outside 0..{nnodes - 1}")
        seen = np.bincount(ids, minlength=nnodes)
        if np.any(seen != 1):
            bad = int(np.flatnonzero(seen != 1)[0])
            raise ValueError(f"gather_to_root: node {bad} owned by {int(seen[bad])} ranks")

    def __call__(self, values: np.ndarray):
        """values : (n_owned, ...) of this rank (trailing shape and dtype the same on every
        rank) -> (nnodes, ...) array in global node order on ``root``, None elsewhere
        (collective). ValueError for a block whose row count is not this rank's owned count."""
        values = np.ascontiguousarray(values)
        if values.shape[0] != self.n_owned:
            raise ValueError(f"gather_to_root: {values.shape[0]} rows of values for "
                             f"{self.n_owned} owned nodes on rank {self.comm.rank}")
        if self.comm.rank != self.root:
            self.comm.Gatherv(values, None, root=self.root)
            return None
        per = int(np.prod(values.shape[1:], dtype=np.int64))
        vals = np.empty((self.ids.size,) + values.shape[1:], dtype=values.dtype)
        self.comm.Gatherv(values, [vals, self.counts * per], root=self.root)
        out = np.empty((self.nnodes,) + values.shape[1:], dtype=values.dtype)
        out[self.ids] = vals
        return out
