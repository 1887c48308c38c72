"""How GPU ranks move device buffers: NCCL through CuPy, or an in-process loopback for tests.

A transport has three operations on device arrays of the backend (CuPy arrays on a GPU,
NumPy arrays under numba-cuda's simulator):

- ``post(sends, recvs)``: start sending each ``(peer, array)`` of ``sends`` and receiving into
  each ``(peer, array)`` of ``recvs`` (one message per peer and direction, matched in order);
- ``complete()``: after it, every receive of the last ``post`` has landed (stream order on a
  GPU: kernels launched later on the backend's stream see the data);
- ``allreduce(array, op)``: in place, ``op`` "sum" or "max", over all ranks;
- ``capturable``: whether the operations can be captured into a CUDA graph of one rank and
  replayed there (NCCL: yes; the loopback: only with one rank, since K loopback ranks in one
  process must take turns between a post and its completion).

:class:`NcclTransport` issues NCCL point-to-point calls inside one ``groupStart`` /
``groupEnd`` on the backend's stream (no host staging, no host synchronisation) and
``allReduce`` for the reductions; ``complete`` has nothing to do. The NCCL communicator is made
from a unique id that rank 0 draws and the launcher's MPI broadcasts
(:meth:`NcclTransport.from_mpi`), or that the caller hands over (:meth:`NcclTransport.from_uid`).
Keep NVLink multicast off (``NCCL_NVLS_ENABLE=0``) on machines that have it.

:class:`LoopbackWorld` connects K "ranks" inside one process (tests under the simulator): a post
copies the sends into mailboxes, ``complete`` copies the mailboxes into the receives, so the
ranks of a test post first and complete after, as real ranks would overlap.
"""
from __future__ import annotations

import numpy as np

__all__ = ["LoopbackWorld", "NcclTransport"]


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
        self.nccl = nccl
        self.rank, self.size, self.stream = int(rank), int(size), stream
        self.comm = nccl.NcclCommunicator(self.size, uid, self.rank)
        self.bytes_sent = 0

    @classmethod
    def from_mpi(cls, comm, stream) -> "NcclTransport":
        """The transport of ``comm``'s ranks (mpi4py communicator; rank 0 draws the id)."""
        from cupy.cuda import nccl
        uid = nccl.get_unique_id() if comm.rank == 0 else None
        return cls(comm.rank, comm.size, comm.bcast(uid, root=0), stream)

    def _type(self, a) -> int:
        n = self.nccl
        return {np.dtype(np.float64): n.NCCL_FLOAT64, np.dtype(np.float32): n.NCCL_FLOAT32,
                np.dtype(np.int64): n.NCCL_INT64}[np.dtype(a.dtype)]

    def post(self, sends, recvs) -> None:
        n, s = self.nccl, self.stream.ptr
        n.groupStart()
        try:
            for peer, a in sends:
                self.comm.send(a.data.ptr, a.size, self._type(a), int(peer), s)
                self.bytes_sent += a.nbytes
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


class LoopbackWorld:
    """K ranks in one process: ``world.transport(rank)`` gives each its transport.

    Sends are copied at ``post``; a rank's ``complete`` fills its receives from the mailboxes,
    so every rank must have posted before any completes (raises ``RuntimeError`` naming the
    missing message otherwise). ``allreduce`` works the same way in two calls per rank:
    ``allreduce`` posts, and the result is written into every rank's array once the last rank
    has posted (ranks reduced in rank order).
    """

    def __init__(self, size: int):
        self.size = int(size)
        self.box: dict = {}
        self.pending: dict = {}          # rank -> array of the all-reduce being posted

    def transport(self, rank: int) -> "_Loopback":
        return _Loopback(self, int(rank))


class _Loopback:
    def __init__(self, world: LoopbackWorld, rank: int):
        self.world, self.rank, self.size = world, rank, world.size
        self._recvs = []
        self.bytes_sent = 0

    @property
    def capturable(self) -> bool:
        """One rank only: its messages complete within its own calls, so its work can be
        re-issued as a unit (a "graph" under the simulator); with K > 1 ranks the others must
        post in between."""
        return self.size == 1

    def post(self, sends, recvs) -> None:
        for peer, a in sends:
            self.world.box[(self.rank, int(peer))] = np.array(a, copy=True)
            self.bytes_sent += a.nbytes
        self._recvs = list(recvs)

    def complete(self) -> None:
        for peer, a in self._recvs:
            key = (int(peer), self.rank)
            if key not in self.world.box:
                raise RuntimeError(f"loopback: rank {self.rank} completes before rank {peer} "
                                   "posted its message")
            a[...] = self.world.box.pop(key)
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
