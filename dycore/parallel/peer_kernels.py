"""Device kernels of the peer transport: messages stored straight into a neighbour GPU's memory.

Every ordered pair of ranks (p → q) has a mailbox in q's memory: ``S`` slots of 2·cap 64-bit
words (``box``), and in p's memory one acknowledgement per slot (``acks``: the number of the
last message q has copied out of it). Messages from p to q are numbered 1, 2, … in the order
both ranks issue them (the same order on every rank, as NCCL's point-to-point calls need too);
message s goes into slot s mod S.

**Every word carries its own flag** (the low-latency protocol of NCCL's ``LL``): value i of a
message is stored as two words, each holding 32 bits of the value in its low half and the
message's tag (s mod 2³¹) in its high half. An aligned 8-byte store lands whole, so the
receiver, polling a word with an atomic read until its tag is the message's, has that half of
the value: no fence, no separate flag, and every thread waits only for its own words. On two
H200s this took the 4.42 M-tet step from 88.5 ms (a fence and a flag per message) to 86.7 ms,
against 88.1 ms over NCCL; with the round trips below taken out of every message, 84.9 against
88.3 ms (docs/performance.md). The kernels move bits (int64 views of the
float64 vectors), so the values arrive exactly.

=================  ============================================================================
peer_put           message s = sent[q] + 1: wait until q has acknowledged message s − S (the
                   slot is free), then store xb[:n] (or xb[idx[i]·bs + c]: the pack fused in)
                   into the slot in q's memory, tagged
peer_wait          message s = received[q] + 1: copy each value into yb[:n] (or yb[idx[i]·bs
                   + c]: the unpack fused in) as soon as its two words carry the tag, then set
                   the acknowledgement of the slot in q's memory to s
peer_exchange      peer_put then peer_wait in one kernel: the halo exchange of a rank with one
                   neighbour (two ranks) is one launch, as an NCCL send/recv pair is
peer_reduce_pair   the all-reduce of two ranks in one kernel: store, wait, a₀ + a₁ (or the max)
peer_combine       a[i] = the ranks' values of a[i] summed (or their max) in rank order, from
                   this rank's ``a`` and every other rank's message in ``g`` (K > 2 ranks)
=================  ============================================================================

Every rank gets the same bits from a reduction: the values are combined in rank order.

A kernel waits for as few round trips as it can: before the first store, the message's number,
every slot's acknowledgement and the number to receive are loaded by different threads at once
(each thread's first value meanwhile), and the acknowledgement after the last load is a plain
store into the sender's memory, posted without waiting for a reply; a value's two words are
polled with both reads in flight. Each of these took 0.4–1 µs off a message on two H200s.

A kernel of several blocks counts its blocks out with a ticket (an atomic, reset by the last
block), and that last block updates the counters and writes the acknowledgement. A wait that
lasts more than ``spin`` polls stops, sets ``err[0]`` (the host raises:
:meth:`dycore.parallel.peer.PeerTransport.check`) and goes on with what the slot holds, so a
rank that died cannot hang the others' GPUs for ever.

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

#: the most slots a mailbox may have (the kernels' shared array holds every slot's
#: acknowledgement after the four words of the message's numbers)
MAX_SLOTS = 8
SHARED = 4 + MAX_SLOTS


def _build(jit) -> dict:
    dev = cuda.jit(device=True)

    @dev
    def begin(sent, acks, nslot, received, rslots, q, sh, send, recv):
        """Before the block's first barrier, each load by its own thread, all at once:
        thread 0 the number of the message to send (sh[0]), threads 1…S the slots'
        acknowledgements (sh[4 + slot]), the last thread the number of the message to
        receive and its slot (sh[2], sh[3]); meanwhile every thread loads its first value
        (:func:`first_value`). ``send`` / ``recv``: which of the two the kernel does."""
        t = cuda.threadIdx.x
        if send:
            if t == 0:
                sh[0] = sent[q] + 1
            elif t <= nslot:
                sh[3 + t] = cuda.atomic.max(acks, t - 1, 0)       # (an atomic read)
        if recv and t == cuda.blockDim.x - 1:
            sh[2] = received[q] + 1
            sh[3] = sh[2] % rslots

    @dev
    def claim(acks, nslot, spin, err, sh):
        """Thread 0, after the first barrier: the slot of message s = sh[0] into sh[1], once
        the slot's previous message (s − S) has been acknowledged — from the value loaded
        before the barrier, read again only while it falls short."""
        s = sh[0]
        slot = s % nslot
        a = sh[4 + slot] if cuda.blockDim.x > nslot else cuda.atomic.max(acks, slot, 0)
        k = 0
        while a < s - nslot:
            k += 1
            if k > spin:
                cuda.atomic.max(err, 0, 1)
                break
            a = cuda.atomic.max(acks, slot, 0)
        sh[1] = slot

    @dev
    def position(idx, bs, i):
        """Where value i of a message sits in the vector: i, or idx[i // bs]·bs + i mod bs
        (the owned values of a halo plan, or its ghost slots)."""
        if idx.shape[0] > 0:
            j = i // bs
            return idx[j] * bs + i - j * bs
        return i

    @dev
    def ready_to_send(xb, idx, bs, n, acks, nslot, spin, err, sh):
        """After :func:`begin`: this thread's first value loaded, the block's barrier, thread
        0's :func:`claim` of the slot, a second barrier; returns the first value."""
        v = first_value(xb, idx, bs, n)
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            claim(acks, nslot, spin, err, sh)
        cuda.syncthreads()
        return v

    @dev
    def value(xb, idx, bs, i):
        """Value i of the message (gathered by :func:`position`: the pack fused in)."""
        return xb[position(idx, bs, i)]

    @dev
    def first_value(xb, idx, bs, n):
        """This thread's first value of the message (0 past its end), loaded before the
        block's barrier so that the load overlaps thread 0's wait for the slot."""
        i = cuda.grid(1)
        return value(xb, idx, bs, i) if i < n else int64(0)

    @dev
    def store(xb, idx, bs, n, box, slot, tag, v):
        """box[slot, 2i], box[slot, 2i + 1] = the low and high 32 bits of value i, each
        under the message's tag (bits 32–62): a word carries its own flag. ``v`` is this
        thread's first value (:func:`first_value`)."""
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        hi = tag << 32
        while i < n:
            box[slot, 2 * i] = hi | (v & 0xFFFFFFFF)
            box[slot, 2 * i + 1] = hi | ((v >> 32) & 0xFFFFFFFF)
            i += stride
            if i < n:
                v = value(xb, idx, bs, i)

    @dev
    def poll(box, slot, j):
        """box[slot, j] read atomically (the remote stores land in L2, past the L1 cache)."""
        return cuda.atomic.max(box, (slot, j), 0)

    @dev
    def words(box, slot, i, tag, spin, err):
        """The two words of value i once both carry ``tag``: both reads are issued before
        either is tested, so their round trips overlap; a word is read again only while
        its tag is not yet the message's."""
        lo = poll(box, slot, 2 * i)
        hi = poll(box, slot, 2 * i + 1)
        k = 0
        while (lo >> 32) != tag or (hi >> 32) != tag:
            k += 1
            if k > spin:
                cuda.atomic.max(err, 0, 1)
                break
            if (lo >> 32) != tag:
                lo = poll(box, slot, 2 * i)
            if (hi >> 32) != tag:
                hi = poll(box, slot, 2 * i + 1)
        return (hi << 32) | (lo & 0xFFFFFFFF)

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
    def load(yb, idx, bs, n, box, slot, tag, spin, err):
        """This thread's share of yb[:n] (or yb[idx[i]·bs + c]), each value as soon as its
        two words carry the tag."""
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        while i < n:
            yb[position(idx, bs, i)] = words(box, slot, i, tag, spin, err)
            i += stride

    @dev
    def acknowledge(acks, received, q, sh):
        """Thread 0 of the last block, after its barrier (every block's loads of the slot
        have returned): acknowledge message sh[2] (slot sh[3]) in the sender's memory — a
        plain store, posted over the link without waiting for a reply (an atomic there
        would hold the kernel for the round trip; this rank is the slot's only writer)."""
        acks[sh[3]] = sh[2]
        received[q] = sh[2]

    def peer_put(xb, idx, bs, n, box, acks, sent, q, ticket, spin, err):
        """xb : int64 view of the values (or of the vector the owned ids ``idx`` index, block
        ``bs``); box : (S, 2·cap) int64 in the peer's memory (its mailbox from this rank);
        acks : (S,) int64 here; sent : (K,) int64 here; ticket : (1,) int64."""
        sh = cuda.shared.array(SHARED, int64)
        t = cuda.threadIdx.x
        begin(sent, acks, box.shape[0], sent, 1, q, sh, True, False)
        v = ready_to_send(xb, idx, bs, n, acks, box.shape[0], spin, err, sh)
        store(xb, idx, bs, n, box, sh[1], sh[0] & 0x7FFFFFFF, v)
        cuda.syncthreads()
        if t == 0 and last_block(ticket):
            sent[q] = sh[0]

    def peer_wait(yb, idx, bs, n, box, acks, received, q, ticket, spin, err):
        """box : (S, 2·cap) int64 here (the mailbox from peer q); acks : (S,) int64 in the
        peer's memory; received : (K,) int64 here; yb : int64 view of the destination."""
        sh = cuda.shared.array(SHARED, int64)
        t = cuda.threadIdx.x
        begin(received, acks, 1, received, box.shape[0], q, sh, False, True)
        cuda.syncthreads()
        load(yb, idx, bs, n, box, sh[3], sh[2] & 0x7FFFFFFF, spin, err)
        cuda.syncthreads()
        if t == 0 and last_block(ticket):
            acknowledge(acks, received, q, sh)

    def peer_exchange(xb, sidx, ns, yb, ridx, nr, bs, sbox, sacks, rbox, racks,
                      sent, received, q, tickets, spin, err):
        """peer_put of ns values to peer q, then peer_wait of q's message (nr values), in one
        kernel (the halo exchange of a rank with one neighbour); tickets : (2,) int64 (the
        first counts the blocks out of both halves)."""
        sh = cuda.shared.array(SHARED, int64)
        t = cuda.threadIdx.x
        begin(sent, sacks, sbox.shape[0], received, rbox.shape[0], q, sh, True, True)
        v = ready_to_send(xb, sidx, bs, ns, sacks, sbox.shape[0], spin, err, sh)
        store(xb, sidx, bs, ns, sbox, sh[1], sh[0] & 0x7FFFFFFF, v)
        load(yb, ridx, bs, nr, rbox, sh[3], sh[2] & 0x7FFFFFFF, spin, err)
        cuda.syncthreads()
        if t == 0 and last_block(tickets[0:1]):
            sent[q] = sh[0]
            acknowledge(racks, received, q, sh)

    def peer_reduce_pair(a, ab, gb, ga, me, op, sbox, sacks, rbox, racks, sent, received,
                         q, tickets, spin, err):
        """a (n,) and ab, its int64 view; gb / ga: int64 and typed views of a scratch row."""
        sh = cuda.shared.array(SHARED, int64)
        t = cuda.threadIdx.x
        n = a.shape[0]
        begin(sent, sacks, sbox.shape[0], received, rbox.shape[0], q, sh, True, True)
        v = ready_to_send(ab, ab[:0], 1, n, sacks, sbox.shape[0], spin, err, sh)
        store(ab, ab[:0], 1, n, sbox, sh[1], sh[0] & 0x7FFFFFFF, v)
        load(gb, gb[:0], 1, n, rbox, sh[3], sh[2] & 0x7FFFFFFF, spin, err)
        cuda.threadfence_block()
        cuda.syncthreads()
        for i in range(t, n, cuda.blockDim.x):
            v = ga[i]
            if op == 0:
                a[i] = a[i] + v if me < q else v + a[i]
            elif v > a[i]:
                a[i] = v
        cuda.syncthreads()
        if t == 0 and last_block(tickets[0:1]):
            sent[q] = sh[0]
            acknowledge(racks, received, q, sh)

    def peer_combine(a, g, me, op):
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
