"""The peer transport: GPU ranks of one host message each other with their own kernels.

GPU ranks on one host can move their messages without a communication library: every
rank's mailbox is mapped into the other ranks' address spaces with CUDA IPC, and two small
kernels of ours (:mod:`dycore.parallel.peer_kernels`) do the rest. The sender stores the
values straight into the receiver's memory (NVLink or PCIe peer access carries the stores),
every 64-bit word tagged with the message's number; the receiver copies each value where it
belongs as soon as its words carry the tag. The stores gather the owned values by index and the copy scatters into the ghost
slots, so a halo exchange needs no separate pack or unpack kernel. Every operation is a kernel
on the backend's stream, captured into the CUDA graphs like any other launch. On two H200s
joined by NVLink an exchange costs 4.8–6.0 µs against NCCL's 7.3–10.1 and an all-reduce 3.5
against 5.0 µs, and the 4.42 M-tet step is 84.9 ms against 88.3 ms over NCCL in the same call
(docs/performance.md), so ``auto`` takes it for two ranks. With more ranks ``auto`` keeps
NCCL (the peer transport has run on two GPUs only); where CuPy has no NCCL the peer transport
keeps the messages on the GPUs, ten times faster than staging them through the host.

It has :mod:`dycore.parallel.nccl`'s transport interface (``post`` / ``complete`` /
``allreduce`` / ``allgather``, ``capturable``): an all-reduce stores this rank's values in
every other rank's mailbox, copies theirs out, and combines all of them in rank order, so
every rank gets the same bits (on two ranks, the bits of NCCL's sum); an all-gather stores
this rank's block in every other rank's mailbox and copies theirs into the receive buffer.

:meth:`PeerTransport.from_mpi` builds it over one host's ranks (CUDA IPC does not cross
hosts); :class:`PeerWorld` connects K ranks inside one process (tests under numba-cuda's
simulator, where the "remote" mailbox is the other rank's NumPy array). Every rank must issue
its messages in the same order as its neighbours (the SPMD order that NCCL needs as well).
"""
from __future__ import annotations

import numpy as np

from dycore.backend.gpu_kernels import grid
from dycore.parallel.peer_kernels import get_peer_kernels

__all__ = ["DEFAULT_CAPACITY", "PeerTransport", "PeerWorld", "peer_access_problem"]

#: float64 values one message may carry (a slot of a mailbox): 8 MiB
DEFAULT_CAPACITY = 1 << 20
#: slots of each mailbox: how many messages a rank may have in flight to one neighbour
SLOTS = 4                 # (at most peer_kernels.MAX_SLOTS)
#: polls of a flag before a wait gives up (GPU: minutes; the simulator: no rank can post
#: while another spins, so a missing message must fail at once)
SPIN_GPU, SPIN_SIMULATOR = 1 << 28, 2
#: most blocks one message's kernel takes
MAX_BLOCKS = 32


class _Mailbox:
    """The views of one rank's mailbox memory: ``box`` (K, S, 2·cap) float64 — slots of the
    messages from every rank, two 64-bit words a value (each half of the value's bits under
    the message's tag: :mod:`~dycore.parallel.peer_kernels`); ``acks`` (K, S) int64 — the
    number of the last message each rank has copied out of each slot; ``sent``, ``received``
    (K,) int64 — messages sent to / received from each rank; ``ticket`` (2K,) int64;
    ``err`` (1,) int64."""

    def __init__(self, head, box, size: int):
        k, s = size, SLOTS
        self.acks = head[:k * s].reshape(k, s)
        o = k * s
        self.sent, self.received = head[o:o + k], head[o + k:o + 2 * k]
        self.ticket = head[o + 2 * k:o + 4 * k]
        self.err = head[o + 4 * k:o + 4 * k + 1]
        self.box = box

    @staticmethod
    def head_size(size: int) -> int:
        return size * SLOTS + 4 * size + 1


class PeerTransport:
    """Messages and reductions between GPU ranks by stores into each other's memory.

    Parameters
    ----------
    backend : GPUBackend (or its simulator) — kernel launches on its stream
    rank, size : int — this rank and the rank count
    mine : _Mailbox of this rank's own memory; peers : dict rank -> _Mailbox of that rank's
        memory as this rank sees it (IPC-mapped on a GPU)
    capacity : int — float64 values a message may carry
    closer : callable or None — unmaps the peers' memory (:meth:`close`)
    keep : object kept alive with the transport (this rank's mailbox allocation)
    turns : the ranks take turns in one process (:class:`PeerWorld`): a rank's wait cannot
        see a message its neighbour has yet to issue, so nothing is fused and a missing
        message fails at once

    Attributes
    ----------
    allgather_bytes : int — what this rank contributed to all-gathers
    """

    #: every operation is a kernel on the backend's stream
    capturable = True

    def __init__(self, backend, rank: int, size: int, mine, peers: dict, capacity: int,
                 closer=None, keep=None, turns: bool = False):
        self.b, self.rank, self.size = backend, int(rank), int(size)
        self.mine, self.peers, self.capacity = mine, peers, int(capacity)
        self.k = get_peer_kernels()
        sim = bool(getattr(backend, "simulator", False))
        self.spin = SPIN_SIMULATOR if sim or turns else SPIN_GPU
        #: threads per block of the kernels (the simulator runs a Python thread for each)
        self.threads, self.max_blocks = (16, 2) if sim else (512, MAX_BLOCKS)
        self._closer, self._keep = closer, keep
        #: two ranks: an exchange with the one neighbour and an all-reduce are one kernel
        #: each (``peer_exchange``, ``peer_reduce_pair``), which stores and then waits. Off
        #: for ranks taking turns in one process (:class:`PeerWorld`), where a rank's wait
        #: cannot see a message its neighbour has yet to issue
        self.fuse = not turns
        self._no_idx = backend.zeros(0, np.int64)
        #: every rank's values of an all-reduce, row r from rank r (this rank's row unused)
        self.gathered = backend.zeros((self.size, self.capacity))
        self._recvs = []
        self.allgather_bytes = 0

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_mpi(cls, comm, backend, capacity: int = DEFAULT_CAPACITY) -> "PeerTransport":
        """The transport of ``comm``'s ranks, all on one host, one GPU each: every rank
        allocates its mailbox (one ``cudaMalloc``), and the ranks swap CUDA IPC handles
        through ``comm`` and map each other's mailboxes.

        Raises
        ------
        ConfigError when the ranks are not on one host or two of their GPUs cannot access
        each other (:func:`peer_access_problem`); RuntimeError (CuPy) when IPC fails.
        """
        import cupy

        from dycore.errors import ConfigError
        problem = peer_access_problem(comm)
        if problem:
            raise ConfigError(f"GPU-rank transport peer: {problem}; use --transport nccl")
        k = comm.size
        nhead = _Mailbox.head_size(k)
        nbytes = 8 * (nhead + k * SLOTS * 2 * int(capacity))
        mem = cupy.cuda.Memory(nbytes)                 # (its own cudaMalloc: IPC maps it whole)
        cupy.cuda.runtime.memset(mem.ptr, 0, nbytes)

        def views(ptr_mem):
            p = cupy.cuda.MemoryPointer(ptr_mem, 0)
            head = cupy.ndarray((nhead,), np.int64, p)
            box = cupy.ndarray((k, SLOTS, 2 * int(capacity)), np.float64, p + 8 * nhead)
            return _Mailbox(head, box, k)

        handles = comm.allgather(cupy.cuda.runtime.ipcGetMemHandle(mem.ptr))
        dev = cupy.cuda.runtime.getDevice()
        opened, peers = [], {}
        for q, h in enumerate(handles):
            if q == comm.rank:
                continue
            ptr = cupy.cuda.runtime.ipcOpenMemHandle(h)
            opened.append(ptr)
            peers[q] = views(cupy.cuda.UnownedMemory(ptr, nbytes, None, dev))

        def closer():
            for ptr in opened:
                cupy.cuda.runtime.ipcCloseMemHandle(ptr)
            opened.clear()
        comm.Barrier()                                  # (every mailbox zeroed and mapped)
        return cls(backend, comm.rank, k, views(mem), peers, capacity, closer, keep=mem)

    def close(self) -> None:
        """Unmap the other ranks' mailboxes (after every rank's stream has drained and the
        ranks have met: :func:`dycore.parallel.nccl.close_after_graphs`); raises as
        :meth:`check` when a wait gave up."""
        if self._closer is not None:
            self._closer()
            self._closer = None
        self.check()

    def check(self, comm=None) -> None:
        """Raise RuntimeError when a wait gave up (a neighbour never sent or never copied a
        message: a rank that died or issued its messages in another order): this rank's, or
        with ``comm`` (mpi4py, collective) any rank's, so that every rank raises alike. One
        device→host copy of one int64. Called before every gathered snapshot and at
        :meth:`close`."""
        bad = int(self.b.to_host(self.mine.err)[0])
        if comm is not None:
            from mpi4py import MPI
            bad = comm.allreduce(bad * (self.rank + 1), op=MPI.MAX)
            who = bad - 1 if bad else self.rank
        else:
            who = self.rank
        if bad:
            raise RuntimeError(f"peer transport: rank {who} waited past {self.spin} polls "
                               "for a neighbour's message or acknowledgement; the results of "
                               "this run are not valid")

    # -- the kernels ---------------------------------------------------------------------------
    def _shape(self, n: int):
        """A block per 2 × ``threads`` values (up to 1,024 on a GPU: one block, whose store
        needs no ticket), at most ``max_blocks``: one SM's stores into the other GPU are too
        few for a large message (two blocks took 13.2 µs for 15,000 values on two H200s,
        where NCCL takes 6.9; docs/performance.md)."""
        blocks = -(-max(n, 1) // (2 * self.threads))
        return (max(1, min(blocks, self.max_blocks)), self.threads)

    def _flat(self, a):
        """``a`` flattened, its dtype and size checked (the kernels move its bits)."""
        f = a.reshape(-1)
        if np.dtype(f.dtype) not in (np.dtype(np.float64), np.dtype(np.int64)):
            raise ValueError(f"peer transport moves float64 or int64, got {f.dtype}")
        if f.size > self.capacity:
            raise ValueError(f"peer transport: a message of {f.size} values exceeds the "
                             f"mailbox slot of {self.capacity} (PeerTransport capacity)")
        return f

    def put(self, q: int, x, n: int, idx=None, bs: int = 1) -> None:
        """Send n values to rank q: x[:n] (x 1-D float64), or with ``idx`` ((n/bs,) int64)
        x[idx[i]·bs + c] — the owned values of a halo plan, gathered by the same kernel
        (x float64 or int64: its bits are moved)."""
        b, m, p = self.b, self.mine, self.peers[q]
        b.launch(self.k["peer_put"], self._shape(n), b.nb(_bits(x)),
                 b.nb(self._no_idx if idx is None else idx), int(bs), int(n),
                 b.nb(_bits(p.box[self.rank])), b.nb(m.acks[q]),
                 b.nb(m.sent), int(q), b.nb(m.ticket[2 * q:2 * q + 1]), self.spin,
                 b.nb(m.err))

    def take(self, q: int, y, n: int, idx=None, bs: int = 1) -> None:
        """Receive rank q's next message of n values into y[:n], or with ``idx``
        y[idx[i]·bs + c] (the ghost slots, scattered by the same kernel)."""
        b, m, p = self.b, self.mine, self.peers[q]
        b.launch(self.k["peer_wait"], self._shape(n), b.nb(_bits(y)),
                 b.nb(self._no_idx if idx is None else idx), int(bs), int(n),
                 b.nb(_bits(m.box[q])), b.nb(p.acks[self.rank]),
                 b.nb(m.received), int(q), b.nb(m.ticket[2 * q + 1:2 * q + 2]), self.spin,
                 b.nb(m.err))

    def exchange(self, q: int, x, ns: int, y, nr: int, sidx=None, ridx=None,
                 bs: int = 1) -> None:
        """:meth:`put` of x to rank q and :meth:`take` of q's message into y in one kernel
        (a halo exchange with one neighbour: one launch)."""
        b, m, p, no = self.b, self.mine, self.peers[q], self._no_idx
        b.launch(self.k["peer_exchange"], self._shape(max(ns, nr)), b.nb(_bits(x)),
                 b.nb(no if sidx is None else sidx), int(ns), b.nb(_bits(y)),
                 b.nb(no if ridx is None else ridx), int(nr), int(bs),
                 b.nb(_bits(p.box[self.rank])), b.nb(m.acks[q]),
                 b.nb(_bits(m.box[q])), b.nb(p.acks[self.rank]),
                 b.nb(m.sent), b.nb(m.received), int(q), b.nb(m.ticket[2 * q:2 * q + 2]),
                 self.spin, b.nb(m.err))

    # -- the transport interface ---------------------------------------------------------------
    def post(self, sends, recvs, stream=None) -> None:
        """Store each ``(peer, array)`` of ``sends`` in the peer's mailbox now (stream order)
        and keep ``recvs`` for :meth:`complete` (``stream``: ignored, the backend's current
        stream is used, as a :class:`~dycore.backend.streams.SideStream` sets it)."""
        for q, a in sends:
            f = self._flat(a)
            self.put(int(q), f, f.size)
        self._recvs = list(recvs)

    def complete(self) -> None:
        """Copy every receive of the last :meth:`post` out of the mailboxes (each value as
        soon as its words carry the message's tag)."""
        for q, a in self._recvs:
            f = self._flat(a)
            self.take(int(q), f, f.size)
        self._recvs = []

    def allreduce(self, a, op: str = "sum") -> None:
        """In place over all ranks, combined in rank order (every rank the same bits):
        ``op`` "sum" or "max"; ``a`` float64 or int64, contiguous. Two ranks: one kernel
        (``peer_reduce_pair``); more: two halves (:meth:`reduce_post`, :meth:`reduce_end`),
        which ranks taking turns in one process also call."""
        if op not in ("sum", "max"):
            raise ValueError(f"all-reduce op must be 'sum' or 'max', got {op!r}")
        if self.size != 2 or not self.fuse:
            self.reduce_post(a)
            self.reduce_end(a, op)
            return
        self._flat(a)                                  # (the checks)
        b, m, q = self.b, self.mine, 1 - self.rank
        p, f = self.peers[q], a.reshape(-1)
        g = self.gathered[q][:f.size]
        b.launch(self.k["peer_reduce_pair"], (1, self.threads), b.nb(f), b.nb(_bits(f)),
                 b.nb(_bits(g)), b.nb(g.view(f.dtype)), self.rank, 0 if op == "sum" else 1,
                 b.nb(_bits(p.box[self.rank])), b.nb(m.acks[q]), b.nb(_bits(m.box[q])),
                 b.nb(p.acks[self.rank]), b.nb(m.sent), b.nb(m.received), int(q),
                 b.nb(m.ticket[2 * q:2 * q + 2]), self.spin, b.nb(m.err))

    def _others(self):
        return [q for q in range(self.size) if q != self.rank]

    def reduce_post(self, a) -> None:
        """This rank's values of an all-reduce stored in every other rank's mailbox."""
        f = self._flat(a)
        for q in self._others():
            self.put(q, f, f.size)

    def reduce_end(self, a, op: str = "sum") -> None:
        """The other ranks' values copied out, and ``a`` = all of them combined in rank
        order (sum: ((a₀ + a₁) + a₂) + …; max)."""
        if op not in ("sum", "max"):
            raise ValueError(f"all-reduce op must be 'sum' or 'max', got {op!r}")
        if self.size == 1:
            return
        b, f = self.b, self._flat(a)
        n = f.size
        for q in self._others():
            self.take(q, self.gathered[q], n)
        g = (self.gathered.view(np.int64) if np.dtype(a.dtype) == np.int64
             else self.gathered)[:, :n]
        b.launch(self.k["peer_combine"], grid(n, self.threads), b.nb(a.reshape(-1)), b.nb(g),
                 self.rank, 0 if op == "sum" else 1)

    def allgather(self, send, recv) -> None:
        """recv[r·m:(r+1)·m] = rank r's ``send`` (m,), on every rank; ``recv`` (K·m,) or
        (K, m), contiguous, of ``send``'s dtype (float64 or int64). Two halves
        (:meth:`gather_post`, :meth:`gather_end`) as :meth:`allreduce`; two ranks: the
        exchange with the other rank in one kernel."""
        if self.size == 2 and self.fuse:
            from dycore.parallel.nccl import _check_allgather
            _check_allgather(send, recv, 2)
            f, q = self._flat(send), 1 - self.rank
            blocks = recv.reshape(2, -1)
            blocks[self.rank][...] = send
            self.exchange(q, f, f.size, self._flat(blocks[q]), f.size)
            self.allgather_bytes += send.nbytes
            return
        self.gather_post(send, recv)
        self.gather_end(send, recv)

    def gather_post(self, send, recv) -> None:
        """This rank's block stored in every other rank's mailbox, and in its own ``recv``."""
        from dycore.parallel.nccl import _check_allgather
        _check_allgather(send, recv, self.size)
        f = self._flat(send)
        for q in self._others():
            self.put(q, f, f.size)
        recv.reshape(self.size, -1)[self.rank][...] = send
        self.allgather_bytes += send.nbytes

    def gather_end(self, send, recv) -> None:
        """The other ranks' blocks copied into ``recv``."""
        blocks = recv.reshape(self.size, -1)
        for q in self._others():
            f = self._flat(blocks[q])
            self.take(q, f, f.size)


def _bits(a):
    """The int64 view of a float64 (or int64) backend array: the kernels move bits."""
    return a if np.dtype(a.dtype) == np.int64 else a.view(np.int64)


class PeerWorld:
    """K ranks of the peer transport inside one process (tests under the simulator): every
    rank's mailbox is a NumPy array the others write into, as IPC-mapped memory would be.

    A rank's waits find their messages only if the sender's kernels ran first, so the ranks
    of a test post in turn and complete after (as :class:`~dycore.parallel.nccl.LoopbackWorld`
    asks); a message that has not been sent fails the wait at once (``check`` raises).
    """

    def __init__(self, backends, capacity: int = 4096):
        self.size = len(backends)
        self.backends, self.capacity = list(backends), int(capacity)
        nhead = _Mailbox.head_size(self.size)
        self.boxes = [_Mailbox(np.zeros(nhead, np.int64),
                               np.zeros((self.size, SLOTS, 2 * self.capacity)), self.size)
                      for _ in range(self.size)]

    def transport(self, rank: int) -> PeerTransport:
        peers = {q: self.boxes[q] for q in range(self.size) if q != rank}
        return PeerTransport(self.backends[rank], rank, self.size, self.boxes[rank], peers,
                             self.capacity, turns=True)


def peer_access_problem(comm) -> str | None:
    """Why this communicator's GPU ranks cannot use the peer transport, or None: all ranks
    must be on one host (CUDA IPC) and every pair of their GPUs must have peer access
    (``cudaDeviceCanAccessPeer``; NVLink or PCIe). Collective over ``comm``."""
    import socket

    import cupy
    dev = cupy.cuda.runtime.getDevice()
    seen = comm.allgather((socket.gethostname(), dev))
    hosts = {h for h, _ in seen}
    if len(hosts) > 1:
        return f"the ranks run on {len(hosts)} hosts (CUDA IPC needs one)"
    bad = [d for _, d in seen if d != dev and not cupy.cuda.runtime.deviceCanAccessPeer(dev, d)]
    bad = comm.allgather(bad)
    for r, devs in enumerate(bad):
        if devs:
            return f"rank {r}'s GPU cannot access GPU(s) {sorted(set(devs))} as a peer"
    if len({d for _, d in seen}) < len(seen):
        return "two ranks share a GPU"
    return None
