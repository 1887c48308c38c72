"""Device kernels of the peer transport: messages stored straight into a neighbour GPU's memory.

Every ordered pair of ranks (p → q) has a mailbox in q's memory: ``S`` slots of ``cap`` float64
(``box``), one flag per slot (``flags``: the number of the message that landed there), and in
p's memory one acknowledgement per slot (``acks``: the number of the message q has copied out).
Messages from p to q are numbered 1, 2, … in the order both ranks issue them (the same order on
every rank, as NCCL's point-to-point calls need too); message s goes into slot s mod S.

=================  ============================================================================
peer_put           message s = sent[q] + 1: wait until q has acknowledged message s − S (the
                   slot is free), store x[:n] (or x[idx[i]·bs + c]: the pack fused in) into the
                   slot in q's memory, fence at system scope, then set q's flag of the slot to s
peer_wait          message s = received[q] + 1: wait until this rank's flag of the slot says s,
                   copy the slot into y[:n] (or y[idx[i]·bs + c]: the unpack fused in), then
                   set the acknowledgement of the slot in q's memory to s
peer_exchange      peer_put then peer_wait in one kernel: the halo exchange of a rank with one
                   neighbour (two ranks) is one launch, as an NCCL send/recv pair is
peer_reduce_pair   the all-reduce of two ranks in one kernel: store, wait, a₀ + a₁ (or the max)
peer_combine       a[i] = the ranks' values of a[i] summed (or their max) in rank order, from
                   this rank's ``a`` and every other rank's message in ``g`` (K > 2 ranks)
=================  ============================================================================

Every rank gets the same bits from a reduction: the values are combined in rank order.

The ordering is the flag protocol of cooperative groups' grid synchronisation and NVSHMEM's
put-with-signal: the block's threads store, the block synchronises, one thread fences at
system scope (``threadfence_system``) and publishes the flag; the reader's one thread polls
with an atomic read, fences, and the block synchronises before it reads the slot. A kernel of
several blocks publishes once, from its last block (a ticket counted with an atomic, reset by
that block). A wait that lasts more than ``spin`` polls stops, sets ``err[0]`` (the host
raises: :meth:`dycore.parallel.peer.PeerTransport.check`) and goes on with what the slot holds,
so a rank that died cannot hang the others' GPUs for ever.

The acknowledgements make the slots safe whatever the message pattern: a rank that only sends
(a one-way halo plan) waits at its (S+1)-th message until the first has been copied out. A
deadlock cannot arise as long as all ranks issue their messages in one common order: a put
waits only for a copy that comes earlier in that order, and a fused exchange stores before it
waits.
"""
from __future__ import annotations

from numba import cuda, int64

from dycore.backend import _cudasim_compat  # noqa: F401  (the simulator's shared arrays)

__all__ = ["get_peer_kernels"]

_CACHE: dict = {}


def _build(jit) -> dict:
    dev = cuda.jit(device=True)

    @dev
    def send_begin(sent, q, acks, nslot, spin, err, sh):
        """Thread 0: this message's number and slot into sh[0], sh[1], once the slot's
        previous message (s − S) has been acknowledged."""
        s = sent[q] + 1
        slot = s % nslot
        k = 0
        while cuda.atomic.max(acks, slot, 0) < s - nslot:     # (an atomic read)
            k += 1
            if k > spin:
                cuda.atomic.max(err, 0, 1)
                break
        sh[0] = s
        sh[1] = slot

    @dev
    def store(x, idx, bs, n, box, slot):
        """This thread's share of box[slot, :n] = x[:n] (or x[idx[i]·bs + c])."""
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        if idx.shape[0] > 0:
            while i < n:
                j = i // bs
                box[slot, i] = x[idx[j] * bs + i - j * bs]
                i += stride
        else:
            while i < n:
                box[slot, i] = x[i]
                i += stride

    @dev
    def last_block(ticket):
        """Thread 0 of a block: True for the last block to get here (the ticket reset)."""
        if cuda.gridDim.x == 1:
            return True
        if cuda.atomic.add(ticket, 0, 1) == cuda.gridDim.x - 1:
            ticket[0] = 0
            return True
        return False

    @dev
    def send_end(flags, sent, q, ticket, sh):
        """Thread 0, after the block's barrier: fence the block's stores at system scope,
        and from the last block publish the flag (the message has landed)."""
        cuda.threadfence_system()
        if last_block(ticket):
            cuda.atomic.max(flags, sh[1], sh[0])
            sent[q] = sh[0]

    @dev
    def recv_begin(received, q, flags, nslot, spin, err, sh):
        """Thread 0: wait for this message's flag; its number and slot into sh[2], sh[3]."""
        s = received[q] + 1
        slot = s % nslot
        k = 0
        while cuda.atomic.max(flags, slot, 0) < s:
            k += 1
            if k > spin:
                cuda.atomic.max(err, 0, 1)
                break
        cuda.threadfence()
        sh[2] = s
        sh[3] = slot

    @dev
    def load(y, idx, bs, n, box, slot):
        """This thread's share of y[:n] (or y[idx[i]·bs + c]) = box[slot, :n]."""
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        if idx.shape[0] > 0:
            while i < n:
                j = i // bs
                y[idx[j] * bs + i - j * bs] = box[slot, i]
                i += stride
        else:
            while i < n:
                y[i] = box[slot, i]
                i += stride

    @dev
    def recv_end(acks, received, q, ticket, sh):
        """Thread 0, after the block's barrier (every load of the slot has returned): from
        the last block acknowledge the message in the sender's memory."""
        if last_block(ticket):
            cuda.atomic.max(acks, sh[3], sh[2])
            received[q] = sh[2]

    def peer_put(x, idx, bs, n, box, flags, acks, sent, q, ticket, spin, err):
        """x : (≥ n,) float64 (or the vector the owned ids ``idx`` index, block ``bs``);
        box : (S, cap) float64 and flags : (S,) int64 in the peer's memory (its mailbox from
        this rank); acks : (S,) int64 here; sent : (K,) int64 here; ticket : (1,) int64."""
        sh = cuda.shared.array(4, int64)
        t = cuda.threadIdx.x
        if t == 0:
            send_begin(sent, q, acks, flags.shape[0], spin, err, sh)
        cuda.syncthreads()
        store(x, idx, bs, n, box, sh[1])
        cuda.syncthreads()
        if t == 0:
            send_end(flags, sent, q, ticket, sh)

    def peer_wait(y, idx, bs, n, box, flags, acks, received, q, ticket, spin, err):
        """box : (S, cap) float64 and flags : (S,) int64 here (the mailbox from peer q);
        acks : (S,) int64 in the peer's memory (its acknowledgements of this rank's copies);
        received : (K,) int64 here; y : (≥ n,) float64, or the vector ``idx`` indexes."""
        sh = cuda.shared.array(4, int64)
        t = cuda.threadIdx.x
        if t == 0:
            recv_begin(received, q, flags, flags.shape[0], spin, err, sh)
        cuda.syncthreads()
        load(y, idx, bs, n, box, sh[3])
        cuda.syncthreads()
        if t == 0:
            recv_end(acks, received, q, ticket, sh)

    def peer_exchange(x, sidx, ns, y, ridx, nr, bs, sbox, sflags, sacks, rbox, rflags, racks,
                      sent, received, q, tickets, spin, err):
        """peer_put of x (ns values) to peer q, then peer_wait of q's message (nr values)
        into y, in one kernel (the halo exchange of a rank with one neighbour); tickets :
        (2,) int64."""
        sh = cuda.shared.array(4, int64)
        t = cuda.threadIdx.x
        if t == 0:
            send_begin(sent, q, sacks, sflags.shape[0], spin, err, sh)
        cuda.syncthreads()
        store(x, sidx, bs, ns, sbox, sh[1])
        cuda.syncthreads()
        if t == 0:
            send_end(sflags, sent, q, tickets[0:1], sh)
            recv_begin(received, q, rflags, rflags.shape[0], spin, err, sh)
        cuda.syncthreads()
        load(y, ridx, bs, nr, rbox, sh[3])
        cuda.syncthreads()
        if t == 0:
            recv_end(racks, received, q, tickets[1:2], sh)

    def peer_reduce_pair(a, me, op, sbox, sflags, sacks, rbox, rflags, racks, sent, received,
                         q, tickets, spin, err):
        """The all-reduce of two ranks in one kernel of one block: a (n,) float64 (or int64,
        with int64 views of the boxes) stored into peer q's mailbox, q's values waited for,
        then a[i] = a₀[i] + a₁[i] in rank order (op 0; 1: the max)."""
        sh = cuda.shared.array(4, int64)
        t = cuda.threadIdx.x
        n = a.shape[0]
        if t == 0:
            send_begin(sent, q, sacks, sflags.shape[0], spin, err, sh)
        cuda.syncthreads()
        slot = sh[1]
        for i in range(t, n, cuda.blockDim.x):
            sbox[slot, i] = a[i]
        cuda.syncthreads()
        if t == 0:
            send_end(sflags, sent, q, tickets[0:1], sh)
            recv_begin(received, q, rflags, rflags.shape[0], spin, err, sh)
        cuda.syncthreads()
        slot = sh[3]
        for i in range(t, n, cuda.blockDim.x):
            v = rbox[slot, i]
            if op == 0:
                a[i] = a[i] + v if me < q else v + a[i]
            elif v > a[i]:
                a[i] = v
        cuda.syncthreads()
        if t == 0:
            recv_end(racks, received, q, tickets[1:2], sh)

    def peer_combine(a, g, me, op):
        """a : (n,) float64 or int64 — this rank's values, overwritten by all ranks' values
        combined in rank order; g : (K, ≥ n) of a's dtype — row r: rank r's values (row
        ``me`` unused); op : 0 sum, 1 max."""
        i = cuda.grid(1)
        if i < a.shape[0]:
            acc = a[i] if me == 0 else g[0, i]
            for r in range(1, g.shape[0]):
                v = a[i] if r == me else g[r, i]
                if op == 0:
                    acc = acc + v
                elif v > acc:
                    acc = v
            a[i] = acc

    return {name: jit(fn) for name, fn in (
        ("peer_put", peer_put), ("peer_wait", peer_wait), ("peer_exchange", peer_exchange),
        ("peer_reduce_pair", peer_reduce_pair), ("peer_combine", peer_combine))}


def get_peer_kernels() -> dict:
    """The peer transport's kernels (name -> compiled kernel), built on first use through the
    one compile path :func:`dycore.backend.gpu_kernels.kernel_compiler` (never strict: they
    move and compare values, and the sum of ``peer_combine`` is one rounded addition per
    rank, the same under any compile flags)."""
    if "k" not in _CACHE:
        from dycore.backend.gpu_kernels import kernel_compiler
        _CACHE["k"] = _build(kernel_compiler(False))
    return _CACHE["k"]
