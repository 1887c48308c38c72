"""The peer transport (:mod:`dycore.parallel.peer`) under numba-cuda's simulator, K ranks in
one process (:class:`PeerWorld`: each rank stores into the others' NumPy mailboxes).

- a halo exchange through it fills every ghost with its owner's value, the pack and unpack
  fused into the store and the copy (no pack kernel counted), in place or by index;
- messages keep their order through more messages than a mailbox has slots, both ways;
- an all-reduce is the rank-order sum (or max) on every rank, the same bits everywhere,
  float64 and int64 (the exact reducer's integer parts); an all-gather puts every rank's
  block at its place;
- the acknowledgements hold a sender back: a rank that sends more messages than there are
  slots before its neighbour copies one out fails its wait and says so (``check`` raises), as
  does a wait for a message that never comes; a message larger than a slot is refused.
On GPUs the same transport is checked against NCCL bit for bit in whole steps
(``scripts/gpu_ranks_check.py --transport peer``).
"""
import numpy as np
import pytest

from dycore.backend.gpu import gpu_backend
from dycore.parallel.device_halo import DeviceHaloExchange
from dycore.parallel.partition import metis_partition, partition_mesh
from dycore.parallel.peer import SLOTS, PeerWorld


@pytest.fixture(scope="module")
def backend():
    return gpu_backend(solver_mode="device")


def _world(backend, k, capacity=4096):
    w = PeerWorld([backend] * k, capacity)
    return w, [w.transport(r) for r in range(k)]


@pytest.mark.parametrize("k", (2, 3))
@pytest.mark.parametrize("block", (1, 3))
@pytest.mark.parametrize("in_place", (True, False))
def test_a_halo_exchange_through_the_peer_transport_fills_every_ghost(
        backend, systems, k, block, in_place, monkeypatch):
    """Every ghost gets its owner's value and the owned values stay; the owned values are
    gathered by the store kernel itself (no pack kernel counted, no buffers), and on two
    ranks the ghosts, one run, are copied straight into the vector."""
    monkeypatch.setattr(DeviceHaloExchange, "allow_in_place", in_place)
    s = systems
    n = s["nnodes"]
    part = metis_partition(s["indptr"], s["indices"], k)
    rps = partition_mesh(s["tets"], n, s["indptr"], s["indices"], part)
    _, ts = _world(backend, k)
    glob = np.arange(n * block, dtype=np.float64).reshape((n, block) if block > 1 else (n,))
    glob = glob * 1.5 + 0.25
    xs, halos = [], []
    for rp in rps:
        plan = rp.plan(1)
        x = np.full((plan.n_local,) + ((block,) if block > 1 else ()), np.nan)
        x[:rp.n_owned] = glob[rp.owned]
        xs.append(x)
        halos.append(DeviceHaloExchange(backend, ts[rp.rank], plan, block))
    c0 = backend.counters.snapshot()
    for _ in range(SLOTS + 2):                         # (the slots wrap)
        for h, x in zip(halos, xs):
            h.begin(x)
        for h, x in zip(halos, xs):
            h.end(x)
        for rp, x in zip(rps, xs):
            assert np.array_equal(x, glob[rp.l2g[:x.shape[0]]])
            x[rp.n_owned:] = np.nan
        glob = glob * 2.0 - 1.0
        for rp, x in zip(rps, xs):
            x[:rp.n_owned] = glob[rp.owned]
    c1 = backend.counters.snapshot()
    assert c1["halo_packs"] == c0["halo_packs"]
    assert c1["halo_exchanges"] - c0["halo_exchanges"] == k * (SLOTS + 2)
    for h in halos:
        assert h.direct is not None and not hasattr(h, "sbuf") and not hasattr(h, "rbuf")
        if k == 2 and in_place:        # one neighbour: the ghosts are one run, copied in place
            assert h.recv_in_place and all(idx is None for _, _, idx, _ in h.direct[1])
        if not in_place:
            assert all(idx is not None for side in h.direct for _, _, idx, _ in side)
    for t in ts:
        t.check()


@pytest.mark.parametrize("k", (2, 4))
@pytest.mark.parametrize("op", ("sum", "max"))
def test_an_all_reduce_is_the_rank_order_combination_on_every_rank(backend, k, op):
    """float64: ((a₀ + a₁) + a₂) + a₃ (or the max), bit for bit, on every rank — values of
    very different magnitudes, so another order would round differently; int64 sums exact."""
    _, ts = _world(backend, k)
    rng = np.random.default_rng(7)
    vals = [rng.standard_normal(5) * 10.0 ** rng.integers(-8, 9, 5) for _ in range(k)]
    ints = [rng.integers(-2 ** 40, 2 ** 40, 7) for _ in range(k)]
    for _ in range(SLOTS + 1):                         # (through the wrap of the slots)
        arrs = [v.copy() for v in vals]
        iarr = [v.copy() for v in ints]
        for t, a, i in zip(ts, arrs, iarr):
            t.reduce_post(a)
            t.reduce_post(i)
        for t, a, i in zip(ts, arrs, iarr):
            t.reduce_end(a, op)
            t.reduce_end(i, "sum")
        want = vals[0].copy()
        for v in vals[1:]:
            want = want + v if op == "sum" else np.maximum(want, v)
        for a, i in zip(arrs, iarr):
            assert np.array_equal(a, want)
            assert np.array_equal(i, np.sum(ints, axis=0))
        vals = [v * 0.5 + 1.0 for v in vals]
    for t in ts:
        t.check()


def test_an_all_gather_puts_every_block_in_its_place(backend):
    k, m = 3, 6
    _, ts = _world(backend, k)
    sends = [np.arange(m, dtype=np.float64) + 100.0 * r for r in range(k)]
    recvs = [np.full((k, m), np.nan) for _ in range(k)]
    for t, s, r in zip(ts, sends, recvs):
        t.gather_post(s, r)
    for t, s, r in zip(ts, sends, recvs):
        t.gather_end(s, r)
    for r in recvs:
        assert np.array_equal(r, np.stack(sends))
    assert ts[0].allgather_bytes == 8 * m


def test_a_sender_ahead_by_more_than_the_slots_fails_and_says_so(backend):
    """Rank 0 stores SLOTS messages that rank 1 has not copied out; the next store must wait
    for an acknowledgement that never comes: it gives up and ``check`` raises. A wait for a
    message never sent does the same."""
    _, ts = _world(backend, 2)
    x = np.arange(8, dtype=np.float64)
    for _ in range(SLOTS):
        ts[0].put(1, x, 8)
    ts[0].check()                                      # the slots were free
    ts[0].put(1, x, 8)
    with pytest.raises(RuntimeError, match="rank 0 waited past"):
        ts[0].check()
    y = np.zeros(8)
    _, ts = _world(backend, 2)
    ts[1].take(0, y, 8)
    with pytest.raises(RuntimeError, match="rank 1 waited past"):
        ts[1].check()


def test_a_message_larger_than_a_slot_or_of_another_dtype_is_refused(backend):
    _, ts = _world(backend, 2, capacity=16)
    with pytest.raises(ValueError, match="exceeds the mailbox slot of 16"):
        ts[0].post([(1, np.zeros(17))], [])
    with pytest.raises(ValueError, match="float64 or int64"):
        ts[0].post([(1, np.zeros(4, np.float32))], [])
    with pytest.raises(ValueError, match="'sum' or 'max'"):
        ts[0].allreduce(np.zeros(2), "min")


def test_the_fused_exchange_and_pair_reduction_meet_the_separate_kernels(backend, systems):
    """Two ranks, rank 0 with the one-kernel forms (``fuse``), rank 1 with the separate
    put and take (one process: rank 1 stores first, rank 0's kernel stores and finds rank 1's
    message, rank 1 then copies rank 0's out). The halo exchange fills every ghost by index
    and in place, and the all-reduce is a₀ + a₁ on both ranks, float64 and int64."""
    s = systems
    n = s["nnodes"]
    part = metis_partition(s["indptr"], s["indices"], 2)
    rps = partition_mesh(s["tets"], n, s["indptr"], s["indices"], part)
    _, ts = _world(backend, 2)
    ts[0].fuse = True
    glob = np.arange(n, dtype=np.float64) * 0.75 - 2.0
    xs, halos = [], []
    for rp in rps:
        x = np.full(rp.plan(1).n_local, np.nan)
        x[:rp.n_owned] = glob[rp.owned]
        xs.append(x)
        halos.append(DeviceHaloExchange(backend, ts[rp.rank], rp.plan(1), 1))
    c0 = backend.counters.snapshot()
    for _ in range(SLOTS + 1):
        halos[1].begin(xs[1])                           # rank 1: put
        halos[0].begin(xs[0])                           # rank 0: put and take, one kernel
        halos[0].end(xs[0])
        halos[1].end(xs[1])                             # rank 1: take
        for rp, x in zip(rps, xs):
            assert np.array_equal(x, glob[rp.l2g[:x.shape[0]]])
    c1 = backend.counters.snapshot()
    assert c1["launches"] - c0["launches"] == (SLOTS + 1) * 3
    vals = [np.array([1e16, 3.0, -2.5, 7.0]), np.array([1.0, 1e-3, 2.5, -7.0])]
    ints = [np.array([2 ** 50, -3], np.int64), np.array([5, 2 ** 40], np.int64)]
    for _ in range(SLOTS + 1):
        for op in ("sum", "max"):
            a, i = [v.copy() for v in vals], [v.copy() for v in ints]
            ts[1].reduce_post(a[1])
            ts[0].allreduce(a[0], op)                   # one kernel
            ts[1].reduce_end(a[1], op)
            ts[1].reduce_post(i[1])
            ts[0].allreduce(i[0], "sum")
            ts[1].reduce_end(i[1], "sum")
            want = vals[0] + vals[1] if op == "sum" else np.maximum(vals[0], vals[1])
            assert np.array_equal(a[0], want) and np.array_equal(a[1], want)
            assert np.array_equal(i[0], ints[0] + ints[1]) and np.array_equal(i[1], i[0])
    for t in ts:
        t.check()


def test_the_fused_all_gather_of_two_ranks(backend):
    """Rank 0's all-gather in one kernel (``fuse``) meets rank 1's two halves."""
    _, ts = _world(backend, 2)
    ts[0].fuse = True
    sends = [np.array([1.0, 2.0, 3.0]), np.array([-4.0, 5.5, 6.25])]
    recvs = [np.full(6, np.nan), np.full(6, np.nan)]
    ts[1].gather_post(sends[1], recvs[1])
    ts[0].allgather(sends[0], recvs[0])
    ts[1].gather_end(sends[1], recvs[1])
    for r in recvs:
        assert np.array_equal(r, np.concatenate(sends))
    for t in ts:
        t.check()
