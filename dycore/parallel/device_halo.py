"""Halo exchange of device vectors between GPU ranks (pack, NCCL send/recv, unpack).

The same :class:`~dycore.parallel.partition.HaloPlan` as the CPU ranks'
:class:`~dycore.parallel.halo.HaloExchange` (who sends which owned local indices to whom, which
ghost slots each neighbour fills), on the device: one kernel packs the owned values every
neighbour needs into one send buffer, the transport (:mod:`dycore.parallel.nccl`) moves each
neighbour's slice straight between the GPUs' buffers, one kernel unpacks the receive buffer into
the ghost slots. Nothing is staged through the host and nothing synchronises the host: on a GPU
the three steps are ordered on the backend's stream. Index arrays and buffers are allocated once,
so an exchange allocates nothing.

Where every neighbour's ghost slots are one run of consecutive local ids (two ranks: all the
ghosts come from the one neighbour), NCCL receives straight into that slice of the vector and
the unpack kernel is skipped; likewise the pack kernel where every neighbour's owned ids are
one run. Inside a CUDA graph an exchange costs about 11 µs on NVLink, of which the pack and
unpack nodes are a part (``scripts/device/halo_overlap.py``).

With ``overlap`` the messages travel on a second stream (the backend's :meth:`branch`, one per
backend, :func:`comm_branch`): :meth:`DeviceHaloExchange.begin` packs on the main stream and
forks the send/receive onto the branch, so the kernels the caller launches before
:meth:`~DeviceHaloExchange.end` (a product's interior rows, :mod:`dycore.parallel.overlap`) run
while the messages are in flight; ``end`` joins the branch and unpacks on the main stream.
Inside a CUDA-graph capture the fork and the join are graph edges. Under the simulator the
branch is inline: the same launches in the same order.
"""
from __future__ import annotations

import numpy as np

from dycore.backend.gpu_kernels import grid
from dycore.parallel.device_kernels import get_rank_kernels

__all__ = ["DeviceHaloExchange", "comm_branch"]


def comm_branch(backend):
    """The backend's one branch for halo messages (:meth:`GPUBackend.branch`: a second CUDA
    stream on a GPU, inline under the simulator), made on first use and kept on the backend."""
    branch = getattr(backend, "_comm_branch", None)
    if branch is None:
        branch = backend._comm_branch = backend.branch()
    return branch


def _run_starts(idx_lists):
    """The first id of each index array when every one is a run of consecutive ids (an empty
    one counts as a run), else None."""
    starts = []
    for idx in idx_lists:
        if idx.size and not (idx[-1] - idx[0] + 1 == idx.size and np.all(np.diff(idx) == 1)):
            return None
        starts.append(int(idx[0]) if idx.size else 0)
    return starts


class DeviceHaloExchange:
    """Ghost update of local device vectors for one plan and block size.

    Parameters
    ----------
    backend : GPUBackend (or its simulator) — arrays, kernel launches, the stream
    transport : NcclTransport or a loopback transport (:mod:`dycore.parallel.nccl`), or the
        peer transport (:mod:`dycore.parallel.peer`), whose kernels gather the owned values
        and scatter the ghosts themselves (no buffers; one kernel with one neighbour)
    plan : HaloPlan of this rank
    block : int — values per node (1: scalar fields, 3: velocity)
    overlap : post the messages on :func:`comm_branch` (module docstring): the caller may run
        kernels that do not touch the ghosts between :meth:`begin` and :meth:`end`
    in_place : the sides that may go in place, a subset of ("send", "recv"); None: both
        when :attr:`allow_in_place`, else neither (the message benchmark times each side)

    Attributes
    ----------
    values_sent, values_received : int — float64 values moved per exchange by this rank
    send_in_place, recv_in_place : bool — NCCL reads the owned values from / writes the ghost
        values into the vector itself (no pack / unpack kernel): every neighbour's ids are
        one run of consecutive local ids; the pack / unpack buffers exist only on a side
        that is not in place

    ``DeviceHaloExchange.allow_in_place = False`` (a class switch, read when an exchange is
    built) sends every exchange through the buffers: the A/B of
    ``scripts/gpu_ranks_check.py --halo-buffers``.
    """

    #: build exchanges that send / receive in place where the ids allow it
    allow_in_place: bool = True

    def __init__(self, backend, transport, plan, block: int = 1, overlap: bool = False,
                 in_place=None):
        self.b, self.t, self.plan, self.block = backend, transport, plan, int(block)
        self.branch = comm_branch(backend) if overlap else None
        self.k = get_rank_kernels(getattr(backend, "strict", False))
        #: threads per block of pack / unpack (256 on a GPU; the simulator's 32 keep it fast)
        self.threads = min(256, int(getattr(backend, "solver_block", 256)))
        peers = list(plan.neighbours)
        send = [np.asarray(plan.send.get(q, np.zeros(0, np.int64)), np.int64) for q in peers]
        recv = [np.asarray(plan.recv.get(q, np.zeros(0, np.int64)), np.int64) for q in peers]
        bs = self.block
        so = np.cumsum([0] + [s.size * bs for s in send])
        ro = np.cumsum([0] + [r.size * bs for r in recv])
        self.values_sent, self.values_received = int(so[-1]), int(ro[-1])
        # (peer, first value, values) of the messages that go from / into the vector itself
        sides = (("send", "recv") if self.allow_in_place else ()) if in_place is None \
            else tuple(in_place)
        if not set(sides) <= {"send", "recv"}:
            raise ValueError(f"device halo exchange: in_place sides must be among 'send' and "
                             f"'recv', got {in_place!r}")
        starts = tuple(_run_starts(ids) if side in sides else None
                       for side, ids in (("send", send), ("recv", recv)))
        self.send_in_place, self.recv_in_place = (s is not None for s in starts)
        self._send_runs, self._recv_runs = (
            None if st is None else [(q, st[i] * bs, len(ids[i]) * bs)
                                     for i, q in enumerate(peers) if len(ids[i])]
            for st, ids in zip(starts, (send, recv)))
        # a transport that stores into the neighbours' memory itself (the peer transport,
        # :mod:`dycore.parallel.peer`) gathers the owned values and scatters the ghosts in
        # its own kernels: per peer (peer, first id or None, device ids or None, values)
        self.direct = None
        if hasattr(transport, "put"):
            self.direct = tuple(
                [(q, None if st is None else st[i] * bs, None if st is not None or not len(ids[i])
                  else backend.to_device(ids[i]), len(ids[i]) * bs)
                 for i, q in enumerate(peers) if len(ids[i])]
                for st, ids in zip(starts, (send, recv)))
        # the pack / unpack buffers and their index lists, only on a side not in place
        self._sends = self._recvs = None
        if self.direct is None and not self.send_in_place:
            self.send_idx, self.sbuf, self._sends = self._buffers(send, so, peers)
        if self.direct is None and not self.recv_in_place:
            self.recv_idx, self.rbuf, self._recvs = self._buffers(recv, ro, peers)
        self._open = self._fused = False

    def _buffers(self, ids, offsets, peers):
        """Device index list, buffer and per-peer buffer slices of one side of the exchange."""
        b = self.b
        idx = b.to_device(np.concatenate(ids) if ids else np.zeros(0, np.int64))
        buf = b.zeros(int(offsets[-1]))
        views = [(q, buf[offsets[i]:offsets[i + 1]]) for i, q in enumerate(peers)
                 if offsets[i + 1] > offsets[i]]
        return idx, buf, views

    def _check(self, x) -> None:
        want = (self.plan.n_local,) + (() if self.block == 1 else (self.block,))
        if tuple(x.shape[:len(want)]) != want or np.dtype(x.dtype) != np.float64:
            raise ValueError(f"device halo exchange: local vector must be float64 of shape "
                             f"{want}, got {x.dtype} {tuple(x.shape)}")

    def begin(self, x) -> None:
        """Pack ``x``'s owned values for the neighbours and post the messages.

        x : (n_local[, block]) float64 device array; its owned part must not change and its
        ghosts must not be read until :meth:`end`.

        Raises
        ------
        ValueError for a wrong shape or dtype; RuntimeError when begun twice.
        """
        if self._open:
            raise RuntimeError("device halo exchange: begin() called twice without end()")
        self._check(x)
        b, bs, n = self.b, self.block, self.values_sent
        counters = getattr(b, "counters", None)
        if counters is not None:                 # (a capture counts them for its replays)
            counters.halo_exchanges += 1
            counters.halo_bytes += 8 * n
            counters.halo_packs += int(bool(n) and not self.send_in_place
                                       and self.direct is None)
        flat = x.reshape(-1)
        if self.direct is not None:
            pair = self._pair()
            if pair is not None and self.branch is None and self.t.fuse:   # one kernel
                (q, s0, sidx, ns), (_, r0, ridx, nr) = pair
                self.t.exchange(q, flat if sidx is not None else flat[s0:s0 + ns], ns,
                                flat if ridx is not None else flat[r0:r0 + nr], nr,
                                sidx, ridx, self.block)
                self._open, self._fused = True, True
                return
            work = lambda: self._direct(self.t.put, 0, flat)     # noqa: E731
            if self.branch is None:
                work()
            else:
                self.branch.issue(work)
            self._open = True
            return
        if self.send_in_place:
            sends = [(q, flat[s:s + m]) for q, s, m in self._send_runs]
        else:
            sends = self._sends
            if n:
                b.launch(self.k["pack_rows"], grid(n, self.threads), b.nb(flat),
                         b.nb(self.send_idx), bs, b.nb(self.sbuf))
        recvs = ([(q, flat[s:s + m]) for q, s, m in self._recv_runs] if self.recv_in_place
                 else self._recvs)
        if self.branch is None or not (sends or recvs):
            self.t.post(sends, recvs)
        else:                             # the messages beside the main stream's next kernels
            self.branch.issue(lambda: self.t.post(sends, recvs, stream=self.b.stream))
        self._open = True

    def _pair(self):
        """The send and the receive of the one neighbour both are with, or None."""
        sends, recvs = self.direct
        if len(sends) == 1 and len(recvs) == 1 and sends[0][0] == recvs[0][0]:
            return sends[0], recvs[0]
        return None

    def _direct(self, move, side: int, flat) -> None:
        """The peer transport's ``put`` (side 0: every neighbour's owned values into its
        mailbox) or ``take`` (side 1: every neighbour's message into the ghost slots), from
        / into the vector's run of ids or by index."""
        for q, start, idx, m in self.direct[side]:
            if idx is None:
                move(q, flat[start:start + m], m)
            else:
                move(q, flat, m, idx, self.block)

    def end(self, x) -> None:
        """Complete the messages of :meth:`begin` and write the ghost values into ``x``."""
        if self._fused:                            # (begin's one kernel did both)
            self._open = self._fused = False
            return
        if self.direct is not None:
            self._direct(self.t.take, 1, x.reshape(-1))
            if self.branch is not None:
                self.branch.join()
            self._open = False
            return
        self.t.complete()
        if self.branch is not None:
            self.branch.join()
        n = self.values_received
        if n and not self.recv_in_place:
            b = self.b
            b.launch(self.k["unpack_rows"], grid(n, self.threads), b.nb(x.reshape(-1)),
                     b.nb(self.recv_idx), self.block, b.nb(self.rbuf))
        self._open = False

    def update(self, x) -> None:
        """``begin`` + ``end``: fill the ghosts of ``x`` now (in stream order)."""
        self.begin(x)
        self.end(x)


class DeviceOwnedRowsOperator:
    """y = A x on the owned rows of a mesh-only operator on a GPU rank, ghosts of y filled by
    their owners: the device twin of :class:`dycore.parallel.rank_ops.OwnedRowsOperator`.

    Parameters
    ----------
    backend : GPUBackend (or its simulator); transport : NcclTransport or loopback transport
    plan : HaloPlan of depth 2 of this rank
    rows : the owned rows in local columns, serial entry order kept
        (:func:`dycore.parallel.rank_ops.owned_rows` of the serial operator: indptr, indices,
        values, shape (row_block·n_owned, col_block·n_local), row_block — C: 1, Cᵀ: 3, KMK: 1)

    ``matvec(x, out)``: x (n_local[, col_block]) with every ghost filled; out (n_local[,
    row_block]) overwritten: the owned rows by :class:`~dycore.backend.gpu_ops.DeviceCSR` (one
    thread per row, index order from 0.0: the serial product's bits in strict mode), then the
    ghosts by :class:`DeviceHaloExchange`.
    """

    def __init__(self, backend, transport, plan, rows):
        ptr, cols, vals, shape, row_block = rows
        self.rows = int(shape[0])
        self.csr = backend.csr(vals, cols, ptr, shape)
        self.halo = DeviceHaloExchange(backend, transport, plan, row_block)

    def matvec(self, x, out) -> None:
        self.csr.matvec(x, out.reshape(-1)[:self.rows])
        self.halo.update(out)
