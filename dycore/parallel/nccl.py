"""How GPU ranks move device buffers: NCCL through CuPy, or an in-process loopback for tests.

A transport has three operations on device arrays of the backend (CuPy arrays on a GPU,
NumPy arrays under numba-cuda's simulator):

- ``post(sends, recvs, stream=None)``: start sending each ``(peer, array)`` of ``sends`` and
  receiving into each ``(peer, array)`` of ``recvs`` (one message per peer and direction,
  matched in order), on ``stream`` (a CuPy stream; None: the transport's; NCCL only);
- ``complete()``: after it, every receive of the last ``post`` has landed (stream order on a
  GPU: kernels launched later on the backend's stream see the data);
- ``allreduce(array, op)``: in place, ``op`` "sum" or "max", over all ranks;
- ``allgather(send, recv)``: every rank's (m,) ``send`` into every rank's ``recv`` ((K·m,) or
  (K, m)), rank r's block at position r (the replicated direct pressure solve,
  :mod:`dycore.parallel.device_direct`);
- ``capturable``: whether the operations can be captured into a CUDA graph of one rank and
  replayed there (NCCL: yes; the loopback: only with one rank, since K loopback ranks in one
  process must take turns between a post and its completion).

:class:`NcclTransport` issues NCCL point-to-point calls inside one ``groupStart`` /
``groupEnd`` on the backend's stream (no host staging, no host synchronisation),
``allReduce`` for the reductions and ``allGather`` for the all-gathers; ``complete`` has nothing to do. The NCCL communicator is made
from a unique id that rank 0 draws and the launcher's MPI broadcasts
(:meth:`NcclTransport.from_mpi`), or that the caller hands over (:meth:`NcclTransport.from_uid`).
Keep NVLink multicast off (``NCCL_NVLS_ENABLE=0``) on machines that have it. Before its
communicator is made, :class:`NcclTransport` sets ``NCCL_GRAPH_MIXING_SUPPORT=0`` unless the
environment already sets it (:func:`stream_ordered_nccl`): a rank issues every NCCL call in
one stream order, so NCCL's serialisation of captured with uncaptured operations is not needed,
and it costs about 2 ms a step on two GPUs.

:class:`LoopbackWorld` connects K "ranks" inside one process (tests under the simulator): a post
copies the sends into mailboxes, ``complete`` copies the mailboxes into the receives, so the
ranks of a test post first and complete after, as real ranks would overlap.

:class:`MpiStagedTransport` is the transport of GPU ranks without NCCL (numba-cuda's
simulator in CI, or a machine whose CuPy lacks NCCL): every message and reduction is copied to
the host and moved with mpi4py, so ``mpiexec -n K`` runs the GPU-rank code path anywhere.
"""
from __future__ import annotations

import logging
import os
from collections import deque

import numpy as np

__all__ = ["LoopbackWorld", "MpiStagedTransport", "NcclTransport", "SelfTransport",
           "captured_graphs_alive", "close_after_graphs", "stream_ordered_nccl"]

log = logging.getLogger("dycore")

#: NCCL's switch for captured and uncaptured operations in flight together (NCCL ≥ 2.13)
GRAPH_MIXING = "NCCL_GRAPH_MIXING_SUPPORT"


def stream_ordered_nccl(environ=None) -> bool:
    """Tell NCCL that this process issues its operations in stream order: set
    ``NCCL_GRAPH_MIXING_SUPPORT=0`` in ``environ`` (default ``os.environ``) unless it is set.

    With graph mixing on (NCCL's default) every captured NCCL operation waits on, and
    records, an event of the communicator's internal stream, so that operations of CUDA graphs
    launched on different streams, or graphs and uncaptured calls in flight together, do not
    overtake one another (NCCL user guide, "Using NCCL with CUDA Graphs"). A GPU rank needs
    none of that: every NCCL call of the rank, captured or not, is issued on the backend's one
    stream (the opt-in overlap forks a second stream for the messages and joins it before the
    next NCCL call), so the calls run in the order they were issued. On two H200s turning it
    off took 2.1 ms off the 132-ms step at 4.42 M tets and 1.1–1.5 µs off every message
    (docs/performance.md, "NCCL in stream order"). NCCL reads the variable when the first
    communicator is made, so call this before.

    Parameters
    ----------
    environ : mutable mapping, or None for ``os.environ``

    Returns
    -------
    bool — whether NCCL runs stream-ordered (the variable is now "0"); False when the caller
    set it to anything else, which is kept.
    """
    env = os.environ if environ is None else environ
    env.setdefault(GRAPH_MIXING, "0")
    return env[GRAPH_MIXING].strip() == "0"


class NcclTransport:
    """NCCL on the backend's CUDA stream.

    Parameters
    ----------
    rank, size : int — this rank and the rank count
    uid : NCCL unique id (``cupy.cuda.nccl.get_unique_id()`` drawn on rank 0, the same on all)
    stream : CuPy stream the backend launches on

    Raises
    ------
    RuntimeError (from CuPy) when NCCL cannot build the communicator.
    """

    #: NCCL calls on the stream can be captured into a CUDA graph
    capturable = True

    def __init__(self, rank: int, size: int, uid, stream):
        from cupy.cuda import nccl
        #: NCCL_GRAPH_MIXING_SUPPORT is "0" (:func:`stream_ordered_nccl`)
        self.stream_ordered = stream_ordered_nccl()
        self.nccl = nccl
        self.rank, self.size, self.stream = int(rank), int(size), stream
        self.comm = nccl.NcclCommunicator(self.size, uid, self.rank)
        self.allgather_bytes = 0

    @classmethod
    def from_mpi(cls, comm, stream) -> "NcclTransport":
        """The transport of ``comm``'s ranks (mpi4py communicator; rank 0 draws the id)."""
        from cupy.cuda import nccl
        uid = nccl.get_unique_id() if comm.rank == 0 else None
        return cls(comm.rank, comm.size, comm.bcast(uid, root=0), stream)

    def close(self) -> None:
        """Destroy the NCCL communicator (after the graphs that captured its operations:
        :func:`close_after_graphs`); later calls do nothing."""
        if self.comm is not None:
            self.comm.destroy()
            self.comm = None

    def _type(self, a) -> int:
        n = self.nccl
        return {np.dtype(np.float64): n.NCCL_FLOAT64, np.dtype(np.float32): n.NCCL_FLOAT32,
                np.dtype(np.int64): n.NCCL_INT64}[np.dtype(a.dtype)]

    def post(self, sends, recvs, stream=None) -> None:
        n, s = self.nccl, (stream or self.stream).ptr
        n.groupStart()
        try:
            for peer, a in sends:
                self.comm.send(a.data.ptr, a.size, self._type(a), int(peer), s)
            for peer, a in recvs:
                self.comm.recv(a.data.ptr, a.size, self._type(a), int(peer), s)
        finally:
            n.groupEnd()

    def complete(self) -> None:
        """Nothing: the receives land in stream order."""

    def allreduce(self, a, op: str = "sum") -> None:
        n = self.nccl
        code = {"sum": n.NCCL_SUM, "max": n.NCCL_MAX}[op]
        self.comm.allReduce(a.data.ptr, a.data.ptr, a.size, self._type(a), code,
                            self.stream.ptr)

    def allgather(self, send, recv) -> None:
        """recv[r·m:(r+1)·m] = rank r's ``send`` (m,), on every rank (NCCL ``allGather`` on
        the stream); ``recv`` (K·m,) or (K, m), contiguous, of ``send``'s dtype."""
        _check_allgather(send, recv, self.size)
        self.comm.allGather(send.data.ptr, recv.data.ptr, send.size, self._type(send),
                            self.stream.ptr)
        self.allgather_bytes += send.nbytes


class SelfTransport:
    """The transport of a world of one rank (a serial run that takes the GPU ranks' solvers,
    :mod:`dycore.parallel.one_gpu`): no peer to message, every all-reduce of one rank is its
    own value (left as it is: the bits of a one-rank NCCL all-reduce), an all-gather a copy.
    Nothing is staged or synchronised, so it can be captured into a CUDA graph."""

    capturable = True
    rank, size = 0, 1

    def __init__(self):
        self.allgather_bytes = 0

    def post(self, sends, recvs, stream=None) -> None:
        if sends or recvs:
            raise ValueError("a one-rank transport has no peer to message")

    def complete(self) -> None:
        pass

    def allreduce(self, a, op: str = "sum") -> None:
        if op not in ("sum", "max"):
            raise ValueError(f"all-reduce op must be 'sum' or 'max', got {op!r}")

    def allgather(self, send, recv) -> None:
        _check_allgather(send, recv, 1)
        recv.reshape(-1)[...] = send


class LoopbackWorld:
    """K ranks in one process: ``world.transport(rank)`` gives each its transport.

    Sends are copied at ``post`` into a first-in first-out mailbox per (sender, receiver); a
    rank's ``complete`` fills its receives from the mailboxes, so every rank must have posted
    before any completes (raises ``RuntimeError`` naming the missing message otherwise). A
    rank may post its next exchange before a neighbour has completed the previous one (two
    exchanges with nothing between them, as a V-cycle's levels have): messages are taken in
    the order they were posted, as NCCL's and MPI's are. ``allreduce`` works the same way in
    two calls per rank: ``allreduce`` posts, and the result is written into every rank's array once the last rank
    has posted (ranks reduced in rank order); so does ``allgather`` (each rank's send copied
    at its call, every rank's receive written at the last rank's call).
    """

    def __init__(self, size: int):
        self.size = int(size)
        self.box: dict = {}
        self.pending: dict = {}          # rank -> array of the all-reduce being posted
        self.gathering: dict = {}        # rank -> (send copy, recv) of the all-gather posted

    def transport(self, rank: int) -> "_Loopback":
        return _Loopback(self, int(rank))


class _Loopback:
    def __init__(self, world: LoopbackWorld, rank: int):
        self.world, self.rank, self.size = world, rank, world.size
        self._recvs = []
        self.allgather_bytes = 0

    @property
    def capturable(self) -> bool:
        """One rank only: its messages complete within its own calls, so its work can be
        re-issued as a unit (a "graph" under the simulator); with K > 1 ranks the others must
        post in between."""
        return self.size == 1

    def post(self, sends, recvs, stream=None) -> None:
        for peer, a in sends:
            self.world.box.setdefault((self.rank, int(peer)), deque()).append(
                np.array(a, copy=True))
        self._recvs = list(recvs)

    def complete(self) -> None:
        for peer, a in self._recvs:
            key = (int(peer), self.rank)
            if not self.world.box.get(key):
                raise RuntimeError(f"loopback: rank {self.rank} completes before rank {peer} "
                                   "posted its message")
            a[...] = self.world.box[key].popleft()
        self._recvs = []

    def allreduce(self, a, op: str = "sum") -> None:
        pending = self.world.pending
        pending[self.rank] = a
        if len(pending) < self.size:
            return
        arrays = [pending[r] for r in range(self.size)]
        total = np.array(arrays[0], copy=True)
        for other in arrays[1:]:
            total = total + other if op == "sum" else np.maximum(total, other)
        for arr in arrays:
            arr[...] = total
        pending.clear()

    def allgather(self, send, recv) -> None:
        _check_allgather(send, recv, self.size)
        gathering = self.world.gathering
        if self.rank in gathering:
            raise RuntimeError(f"loopback: rank {self.rank} all-gathers twice before the other "
                               "ranks posted")
        gathering[self.rank] = (np.array(send, copy=True), recv)
        self.allgather_bytes += send.nbytes
        if len(gathering) < self.size:
            return
        blocks = np.concatenate([gathering[r][0].reshape(-1) for r in range(self.size)])
        for _, out in gathering.values():
            out[...] = blocks.reshape(out.shape)
        gathering.clear()


#: MPI tag of the staged halo messages
_STAGED_TAG = 2121


def _host(a) -> np.ndarray:
    """A host copy of a backend array (CuPy: a device→host copy on the current stream, which
    waits for the kernels before it; NumPy under the simulator: a copy)."""
    if isinstance(a, np.ndarray):
        return np.array(a, copy=True)
    return a.get()


def _store(a, host: np.ndarray) -> None:
    """Write ``host`` into the backend array ``a`` (same shape; a contiguous slice of a
    buffer on a GPU)."""
    if isinstance(a, np.ndarray):
        a[...] = host
    else:
        a.set(host)


class MpiStagedTransport:
    """The transport interface over mpi4py, staged through host memory (no NCCL).

    Parameters
    ----------
    comm : mpi4py communicator (its ranks are the GPU ranks)

    ``post`` copies each send buffer to the host and posts ``Isend`` / ``Irecv`` (one message
    per peer and direction, tag 2121, matched in order as MPI does not overtake); ``complete``
    waits for them and copies the received values into the device buffers; ``allreduce`` is a
    host ``Allreduce`` (``MPI.SUM`` of float64 / int64 — integer sums are exact, so the exact
    reducer's parts are the same integers as over NCCL — or ``MPI.MAX``), ``allgather`` a host
    ``Allgather``. Each operation
    synchronises the host with the device, so on a GPU nothing can be captured into a CUDA
    graph (:attr:`capturable` False). Used by the simulator tests (``mpiexec -n 2`` under
    ``NUMBA_ENABLE_CUDASIM=1``) and where NCCL is missing.

    reissue : True under numba-cuda's simulator, where a "graph" is its kernels re-issued from
        Python in the captured order: each staged operation completes within its own call, so
        a rank's work can be re-issued as a unit (:attr:`capturable` True) and the simulator
        runs the GPU path's captured Picard iterations; False on a GPU

    Attributes
    ----------
    seconds : float — host time spent in ``post`` + ``complete``; allreduce_bytes : int —
        payload of its all-reduces; allgather_bytes : int — what it contributed to all-gathers
        (the halo exchanges and their bytes are counted in the backend's ``counters``)
    """

    def __init__(self, comm, reissue: bool = False):
        self.comm = comm
        self.capturable = bool(reissue)
        self.rank, self.size = int(comm.rank), int(comm.size)
        self.allreduce_bytes = self.allgather_bytes = 0
        self.seconds = 0.0
        self._reqs, self._recvs, self._keep = [], [], []

    def post(self, sends, recvs, stream=None) -> None:
        import time
        t0 = time.perf_counter()
        if self._reqs:
            raise RuntimeError("staged MPI transport: post() called twice without complete()")
        reqs, self._recvs, self._keep = [], [], []
        for peer, a in recvs:
            h = np.empty(a.shape, np.dtype(a.dtype))
            reqs.append(self.comm.Irecv(h, source=int(peer), tag=_STAGED_TAG))
            self._recvs.append((a, h))
        for peer, a in sends:
            h = _host(a)
            self._keep.append(h)                    # alive until the send completes
            reqs.append(self.comm.Isend(h, dest=int(peer), tag=_STAGED_TAG))
        self._reqs = reqs
        self.seconds += time.perf_counter() - t0

    def complete(self) -> None:
        import time

        from mpi4py import MPI
        t0 = time.perf_counter()
        MPI.Request.Waitall(self._reqs)
        for a, h in self._recvs:
            _store(a, h)
        self._reqs, self._recvs, self._keep = [], [], []
        self.seconds += time.perf_counter() - t0

    def allreduce(self, a, op: str = "sum") -> None:
        from mpi4py import MPI
        h = _host(a)
        out = np.empty_like(h)
        self.comm.Allreduce(h, out, op={"sum": MPI.SUM, "max": MPI.MAX}[op])
        self.allreduce_bytes += h.nbytes
        _store(a, out)

    def allgather(self, send, recv) -> None:
        _check_allgather(send, recv, self.size)
        h = np.ascontiguousarray(_host(send))
        out = np.empty(h.size * self.size, h.dtype)
        self.comm.Allgather(h, out)
        self.allgather_bytes += h.nbytes
        _store(recv, out.reshape(recv.shape))


def _check_allgather(send, recv, size: int) -> None:
    """Raise ValueError unless ``recv`` holds ``size`` blocks of the 1-D ``send`` (K·m
    entries, (K·m,) or (K, m)) of its dtype."""
    m = int(send.size)
    if (len(send.shape) != 1 or np.dtype(recv.dtype) != np.dtype(send.dtype)
            or tuple(recv.shape) not in ((size * m,), (size, m))):
        raise ValueError(f"all-gather of {size} ranks: send {send.dtype} {tuple(send.shape)} "
                         f"needs recv of shape ({size * m},) or ({size}, {m}) and the same "
                         f"dtype, got {recv.dtype} {tuple(recv.shape)}")


def captured_graphs_alive() -> int:
    """How many :class:`~dycore.backend.graphs.Graph` objects holding a captured CUDA graph
    are still alive (reachable or not yet collected)."""
    import gc

    from dycore.backend.graphs import Graph
    return sum(1 for o in gc.get_objects() if isinstance(o, Graph) and o.graph is not None)


def close_after_graphs(backend, transport, barrier=None) -> None:
    """Close ``transport`` once the CUDA graphs that captured its operations are gone.

    The caller drains the stream and drops every object holding such graphs first; here they
    are collected, the stream drained again, ``barrier()`` (the ranks' ``comm.Barrier``, when
    given) passed, and the transport closed where it has a ``close`` (NCCL: ``ncclCommDestroy``). Left to the
    interpreter's exit, the order is the garbage collector's: on two H200s (NCCL 2.28.9) both
    ranks of a finished run hung there until killed, and with this order they exit. NCCL
    counts the graphs that captured a communicator's operations, and destroying it waits
    until each of them is destroyed: a graph still referenced here (counted by
    :func:`captured_graphs_alive` and logged as a warning) makes it wait for ever, as a
    solver kept by a loop variable of ``scripts/gpu_ranks_check.py`` did on two H200s."""
    import gc
    gc.collect()
    live = captured_graphs_alive()
    if live:
        log.warning("%d CUDA graph(s) that may hold NCCL operations are still referenced; "
                    "destroying the NCCL communicator waits until they are gone (drop the "
                    "references, e.g. to a solver of the simulation, before close())", live)
    backend.synchronize()
    if barrier is not None:
        barrier()
    close = getattr(transport, "close", None)
    if close is not None:
        close()
