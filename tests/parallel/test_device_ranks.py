"""The GPU-rank building blocks under numba-cuda's simulator, K ranks in one process.

- ``exact_dot_parts`` gives the same integers as the NumPy ``exact_parts`` (wide exponent
  range, subnormals, signed zeros, NaN and infinities; smooth fields whose products run in one
  exponent), with and without the runs summed in registers, and the parts of a split vector
  add up to the parts of the whole; ``exact_round`` gives ``math.fsum``'s bits with one thread
  or every thread adding the buckets;
- :class:`DeviceExactReducer` over 1–4 loopback ranks gives ``math.fsum`` of the global
  products bit for bit, whatever the partition;
- :class:`DeviceHaloExchange` over a METIS partition fills every ghost slot (depth 1 and 2,
  scalars and 3-vectors) with its owner's value and leaves the owned values alone.
The NCCL transport itself needs GPUs: ``scripts/nccl_ranks_check.py`` runs the same checks on
2 or 4 of them.
"""
import math

import numpy as np
import pytest

from dycore.backend.gpu import gpu_backend
from dycore.parallel.device_halo import DeviceHaloExchange
from dycore.parallel.device_kernels import NPARTS, get_rank_kernels
from dycore.parallel.device_reduce import DeviceExactReducer
from dycore.parallel.nccl import LoopbackWorld
from dycore.parallel.partition import metis_partition, partition_mesh
from dycore.parallel.reduce import exact_parts, parts_to_float


@pytest.fixture(scope="module")
def backend():
    return gpu_backend(solver_mode="device")


def _awkward(rng, n):
    """Products spread over ~600 binades, with cancellation, subnormals and signed zeros."""
    x = rng.standard_normal(n) * 2.0 ** rng.integers(-300, 300, n)
    y = rng.standard_normal(n) * 2.0 ** rng.integers(-300, 300, n)
    x[:5] = (5e-324, -5e-324, 0.0, -0.0, 1e-310)
    y[:5] = (1.0, 3.0, 7.0, 2.0, 0.5)
    x[5], y[5] = 1e300, 1.0                 # a large term and its negative: cancellation
    x[6], y[6] = -1e300, 1.0
    return x, y


def _smooth(n):
    """Products of two smooth fields over a few binades: long runs of one exponent per
    thread (what the ``runs`` accumulation sums in registers), and negative products."""
    s = np.linspace(0.0, 6.0, n)
    return 1.0 + 0.9 * np.sin(s) + 1e-3 * np.cos(7 * s), np.exp(np.sin(3 * s)) - 0.2


def _parts(backend, x, y, blocks=3, runs=True):
    out = backend.zeros(NPARTS, np.int64)
    backend.launch(get_rank_kernels(runs=runs)["exact_dot_parts"], (blocks, 32),
                   backend.nb(x), backend.nb(y), x.shape[0], backend.nb(out))
    return np.asarray(backend.to_host(out))


@pytest.mark.parametrize("runs", (True, False))
@pytest.mark.parametrize("data", ("awkward", "smooth"))
def test_exact_parts_kernel_equals_numpy(backend, runs, data):
    x, y = _awkward(np.random.default_rng(3), 400) if data == "awkward" else _smooth(700)
    got = _parts(backend, x, y, runs=runs)
    assert np.array_equal(got, exact_parts(x * y))
    assert parts_to_float(got) == math.fsum(x * y)
    # disjoint pieces add, as integers, to the whole
    a = _parts(backend, x[:150], y[:150], runs=runs)
    b = _parts(backend, x[150:], y[150:], blocks=1, runs=runs)
    assert np.array_equal(a + b, got)


@pytest.mark.parametrize("parallel_round", (True, False))
def test_exact_round_kernel_is_fsum(backend, parallel_round):
    """The rounding kernel over several dot products at once (one block each): cancellation,
    a wide span of exponents, an exact zero, +inf, NaN — the bits of ``math.fsum`` (NaN and
    inf as :func:`parts_to_float`)."""
    rng = np.random.default_rng(5)
    cases = [_awkward(rng, 300), _smooth(500), (np.array([1e300, -1e300]), np.ones(2)),
             (np.array([1.0, np.inf]), np.ones(2)), (np.array([np.nan, 1.0]), np.ones(2)),
             (np.array([2.0 ** -1074, 2.0 ** -1074]), np.array([1.0, 0.5]))]
    parts = np.concatenate([exact_parts(x * y) for x, y in cases])
    out = backend.zeros(len(cases))
    backend.launch(get_rank_kernels(parallel_round=parallel_round)["exact_round"],
                   (len(cases), 32), backend.nb(backend.to_device(parts)), len(cases),
                   backend.nb(out))
    got = np.asarray(backend.to_host(out))
    want = [parts_to_float(exact_parts(x * y)) for x, y in cases]
    assert want[0] == math.fsum(cases[0][0] * cases[0][1]) and want[2] == 0.0
    assert np.array_equal(got, np.array(want), equal_nan=True), (got, want)


def test_exact_parts_kernel_counts_non_finite(backend):
    x = np.array([1.0, np.nan, np.inf, -np.inf, np.inf, 2.0])
    y = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 0.25])
    got = _parts(backend, x, y)
    assert list(got[-3:]) == [1, 2, 1]
    assert np.array_equal(got, exact_parts(x * y))
    assert math.isnan(parts_to_float(got))       # +inf and -inf: NaN, as np.sum


@pytest.mark.parametrize("k", (1, 2, 3, 4))
def test_exact_reducer_is_fsum_on_any_rank_count(backend, k):
    rng = np.random.default_rng(11)
    n = 1000
    x, y = _awkward(rng, n)
    z = rng.standard_normal(n)
    cuts = np.sort(rng.choice(np.arange(1, n), k - 1, replace=False)) if k > 1 else []
    pieces = np.split(np.arange(n), cuts)
    world = LoopbackWorld(k)
    reducers = [DeviceExactReducer(backend, world.transport(r), blocks=2) for r in range(k)]
    for r, idx in enumerate(pieces):
        reducers[r].post_dots((x[idx].copy(), y[idx].copy()), (z[idx].copy(), z[idx].copy()))
    on_device = [list(np.asarray(red.finish_on_device())) for red in reducers]
    values = [red.finish() for red in reducers]
    want = [math.fsum(x * y), math.fsum(z * z)]
    assert all(v == want for v in values), (values, want)
    assert all(v == want for v in on_device), (on_device, want)
    with pytest.raises(ValueError, match="at most 3"):
        reducers[0].post_dots(*[(x, y)] * 4)


def _halving(v):
    """sh[t] += sh[t + off] for off = len/2, len/4, …, 1 (len a power of two); sh[0]."""
    sh = list(v)
    off = len(sh) // 2
    while off > 0:
        for t in range(off):
            sh[t] += sh[t + off]
        off //= 2
    return sh[0]


def _tree(v):
    """The tree of ``dot_pairs`` over one block's thread values (len rb, a power of two):
    each warp's lanes halved (groups of min(32, rb) threads), then the warps' sums."""
    w = min(32, len(v))
    return _halving([_halving(v[k:k + w]) for k in range(0, len(v), w)])


def _fixed_order_dot(x, y, blocks, rb):
    """The sum-mode dot's order written out in Python: thread t of block b sums i = b·rb + t,
    step blocks·rb; each block's tree gives its partial; the partials summed by the
    finishing block's threads (t, t + rb, …) and its tree."""
    partial = []
    for blk in range(blocks):
        th = [0.0] * rb
        for t in range(rb):
            for i in range(blk * rb + t, x.size, blocks * rb):
                th[t] += float(x[i]) * float(y[i])
        partial.append(_tree(th))
    th = [0.0] * rb
    for t in range(rb):
        for b in range(t, blocks, rb):
            th[t] += partial[b]
    return _tree(th)


@pytest.mark.parametrize("npairs, rb", [(1, 4), (3, 4), (7, 4), (2, 64)])
def test_sum_reducer_one_launch_gives_the_fixed_order_sum(backend, npairs, rb):
    """Each pair's Σ x·y of one ``dot_pairs`` launch (partials and their finish by the last
    block) is bit for bit the fixed-order tree written out in Python, for 1 pair, 3 pairs and
    7 (two launches: 6 slots, then 1), and with blocks of two warps (64 threads: the warps'
    trees, then their sums — warp shuffles on a GPU, the same tree in shared memory here);
    one loopback rank, so the all-reduce adds nothing. The counters are left at 0, so a
    second post (a replayed graph) gives the same bits."""
    from dycore.parallel.device_bicgstab import rank_reducer
    rng = np.random.default_rng(5)
    n, blocks = 203 if rb < 32 else 457, 3
    red = rank_reducer(backend, LoopbackWorld(1).transport(0), "sum", 8, sum_blocks=blocks,
                       sum_threads=rb)
    pairs = [tuple(rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n) for _ in range(2))
             for _ in range(npairs)]
    assert red.k["dot_pairs"] is not None
    want = [_fixed_order_dot(x, y, blocks, rb) for x, y in pairs]
    for _ in range(2):
        before = backend.counters.launches
        red.post_dots(*[(backend.to_device(x), backend.to_device(y)) for x, y in pairs])
        assert backend.counters.launches - before == (npairs + 5) // 6
        got = [float(v) for v in np.asarray(backend.to_host(red.finish_on_device()))]
        assert got == want
        assert not np.asarray(backend.to_host(red.count)).any()
    assert all(abs(g - math.fsum(x * y)) <= 1e-12 * math.fsum(abs(x * y))
               for g, (x, y) in zip(got, pairs))


def test_sum_reducer_refuses_mixed_lengths_and_too_many_pairs(backend):
    from dycore.parallel.device_bicgstab import rank_reducer
    red = rank_reducer(backend, LoopbackWorld(1).transport(0), "sum", 2, sum_blocks=2,
                       sum_threads=2)
    a, b = backend.zeros(5), backend.zeros(6)
    with pytest.raises(ValueError, match="differ in shape"):
        red.post_dots((a, a), (b, b))
    with pytest.raises(ValueError, match="at most 2"):
        red.post_dots((a, a), (a, a), (a, a))


@pytest.mark.parametrize("k", (2, 3, 4))
@pytest.mark.parametrize("depth", (1, 2))
@pytest.mark.parametrize("block", (1, 3))
@pytest.mark.parametrize("in_place", (True, False))
def test_device_halo_fills_every_ghost_from_its_owner(backend, systems, k, depth, block,
                                                      in_place, monkeypatch):
    """Every ghost gets its owner's value, in place (NCCL into the vector where the ids run)
    or through the pack / unpack buffers (``allow_in_place`` off, the A/B switch)."""
    monkeypatch.setattr(DeviceHaloExchange, "allow_in_place", in_place)
    s = systems
    n = s["nnodes"]
    part = metis_partition(s["indptr"], s["indices"], k)
    rps = partition_mesh(s["tets"], n, s["indptr"], s["indices"], part)
    world = LoopbackWorld(k)
    glob = np.arange(n * block, dtype=np.float64).reshape((n, block) if block > 1 else (n,))
    glob = glob * 1.5 + 0.25
    xs, halos = [], []
    for rp in rps:
        plan = rp.plan(depth)
        x = np.full((plan.n_local,) + ((block,) if block > 1 else ()), np.nan)
        x[:rp.n_owned] = glob[rp.owned]
        xs.append(x)
        halos.append(DeviceHaloExchange(backend, world.transport(rp.rank), plan, block))
    for h, x in zip(halos, xs):
        h.begin(x)
    for h, x in zip(halos, xs):
        h.end(x)
    for rp, h, x in zip(rps, halos, xs):
        assert np.array_equal(x, glob[rp.l2g[:x.shape[0]]])      # owned kept, ghosts filled
        assert h.values_received == (x.shape[0] - rp.n_owned) * block
        if k == 2 and in_place:     # one neighbour: its ghosts are one run, received in place
            assert h.recv_in_place and h.values_received > 0 and not hasattr(h, "rbuf")
        if not in_place:
            assert not (h.send_in_place or h.recv_in_place)
            assert h.rbuf.shape[0] == h.values_received and h.sbuf.shape[0] == h.values_sent
    with pytest.raises(ValueError, match="float64 of shape"):
        halos[0].begin(np.zeros(3))


def test_rows_numbered_send_last_go_out_of_the_vector_on_both_sides(backend, systems):
    """Two ranks, each numbering its owned rows with the plan's sent rows last
    (``overlap.send_last``): both sides of the exchange go in place (no pack, no unpack
    kernel: ``counters.halo_packs`` does not move), and every ghost gets its owner's value."""
    from dycore.parallel.overlap import local_relabel, relabel_plan, send_last
    s = systems
    n = s["nnodes"]
    part = metis_partition(s["indptr"], s["indices"], 2)
    rps = partition_mesh(s["tets"], n, s["indptr"], s["indices"], part)
    world = LoopbackWorld(2)
    glob = np.arange(n, dtype=np.float64) * 0.25 + 1.0
    xs, halos = [], []
    for rp in rps:
        plan = rp.plan(2)
        order = send_last(plan, rp.n_owned)
        new = local_relabel(order, plan.n_local)
        x = np.full(plan.n_local, np.nan)
        x[new[:rp.n_owned]] = glob[rp.owned]          # owned values in the new numbering
        xs.append((x, new))
        halos.append(DeviceHaloExchange(backend, world.transport(rp.rank),
                                        relabel_plan(plan, new), 1))
    c0 = backend.counters.snapshot()
    for h, (x, _) in zip(halos, xs):
        h.begin(x)
    for h, (x, _) in zip(halos, xs):
        h.end(x)
    c1 = backend.counters.snapshot()
    assert c1["halo_exchanges"] - c0["halo_exchanges"] == 2
    assert c1["halo_packs"] == c0["halo_packs"]
    for rp, h, (x, new) in zip(rps, halos, xs):
        assert h.send_in_place and h.recv_in_place and h.values_sent > 0
        assert not hasattr(h, "sbuf") and not hasattr(h, "rbuf")
        assert np.array_equal(x[new], glob[rp.l2g[:x.shape[0]]])   # back in the old order


def test_an_exchange_may_go_in_place_on_one_side_only(backend, systems):
    """``in_place=("recv",)`` (the message benchmark's middle case): received into the vector,
    sent through the pack buffer, every ghost filled; a side that is not a side is refused."""
    s = systems
    n = s["nnodes"]
    part = metis_partition(s["indptr"], s["indices"], 2)
    rps = partition_mesh(s["tets"], n, s["indptr"], s["indices"], part)
    world = LoopbackWorld(2)
    glob = np.arange(n, dtype=np.float64) * 0.5 - 3.0
    xs, halos = [], []
    for rp in rps:
        plan = rp.plan(1)
        x = np.full(plan.n_local, np.nan)
        x[:rp.n_owned] = glob[rp.owned]
        xs.append(x)
        halos.append(DeviceHaloExchange(backend, world.transport(rp.rank), plan, 1,
                                        in_place=("recv",)))
    c0 = backend.counters.snapshot()
    for h, x in zip(halos, xs):
        h.begin(x)
    for h, x in zip(halos, xs):
        h.end(x)
    c1 = backend.counters.snapshot()
    assert c1["halo_exchanges"] - c0["halo_exchanges"] == 2                 # counted per rank
    assert c1["halo_packs"] - c0["halo_packs"] == 2                  # neither sent in place
    assert c1["halo_bytes"] - c0["halo_bytes"] == 8 * sum(h.values_sent for h in halos)
    for rp, h, x in zip(rps, halos, xs):
        assert np.array_equal(x, glob[rp.l2g[:x.shape[0]]])
        assert h.recv_in_place and not h.send_in_place
        assert h.sbuf.shape[0] == h.values_sent > 0 and not hasattr(h, "rbuf")
    with pytest.raises(ValueError, match="'send' and 'recv'"):
        DeviceHaloExchange(backend, world.transport(0), rps[0].plan(1), 1, in_place=("both",))


@pytest.mark.parametrize("k", (2, 3))
def test_device_owned_rows_product_is_the_serial_product(backend, systems, k):
    """C u, Cᵀ p (random values on the first-order pattern) and the pinned pressure matrix
    (second order) over loopback GPU ranks: every owned entry and every ghost equals
    the serial product's (the CSR row sums in stored order from 0.0, as SciPy's)."""
    import scipy.sparse as sps

    from dycore.parallel.device_halo import DeviceOwnedRowsOperator
    from dycore.parallel.rank_ops import owned_rows
    s = systems
    n = s["nnodes"]
    part = metis_partition(s["indptr"], s["indices"], k)
    rps = partition_mesh(s["tets"], n, s["indptr"], s["indices"], part)
    rng = np.random.default_rng(5)
    kp = sps.csr_matrix((s["p_values"], s["p_indices"], s["p_indptr"]), shape=(n, n))
    a1 = sps.csr_matrix((rng.standard_normal(len(s["indices"])), s["indices"], s["indptr"]),
                        shape=(n, n))
    ops = {"C": (sps.kron(a1, np.ones((1, 3))).tocsr(), 1, 3),
           "CT": (sps.kron(a1.T.tocsr(), np.ones((3, 1))).tocsr(), 3, 1),
           "CMC+KMK": (kp, 1, 1)}
    for name, (a, rb, cb) in ops.items():
        x = rng.standard_normal(n * cb)
        want = (a @ x).reshape((n, rb) if rb > 1 else (n,))
        world = LoopbackWorld(k)
        outs, dev = [], []
        for rp in rps:
            nl = rp.n_local(2)
            op = DeviceOwnedRowsOperator(backend, world.transport(rp.rank), rp.plan(2),
                                         owned_rows(rp, n, a, rb, cb))
            xl = x.reshape(n, cb)[rp.l2g[:nl]].reshape((nl, cb) if cb > 1 else (nl,))
            out = np.full((nl, rb) if rb > 1 else (nl,), np.nan)
            op.csr.matvec(xl, out.reshape(-1)[:op.rows])
            op.halo.begin(out)
            outs.append(out)
            dev.append(op)
        for op, out in zip(dev, outs):
            op.halo.end(out)
        for rp, out in zip(rps, outs):
            assert np.array_equal(out, want[rp.l2g[:out.shape[0]]]), (name, rp.rank)


def _round_on_device(backend, parts_list, threads=3):
    parts = np.concatenate(parts_list).astype(np.int64)
    out = backend.zeros(len(parts_list))
    backend.launch(get_rank_kernels()["exact_round"], (len(parts_list), threads),
                   backend.nb(parts), len(parts_list), backend.nb(out))
    return list(np.asarray(backend.to_host(out)))


@pytest.mark.parametrize("threads", [1, 3])
def test_exact_round_on_the_device_is_parts_to_float(backend, threads):
    """The device rounding of exact parts gives parts_to_float's bits: random sums over ~600
    binades, cancellation to zero, ties (to even), subnormal and overflowing totals, negative
    zero, non-finite counts — whatever the block's size (its threads find the span of
    non-zero buckets, thread 0 rounds)."""
    rng = np.random.default_rng(21)
    cases = []
    for _ in range(12):
        x, y = _awkward(rng, 300)
        cases.append(x * y)
    tiny = 5e-324
    cases += [np.array([1.0, -1.0]),                              # exact zero
              np.array([1.0, 2.0 ** -53]),                        # tie: stays 1.0 (even)
              np.array([1.0 + 2.0 ** -52, 2.0 ** -53]),           # tie: rounds up to even
              np.array([1.0, 2.0 ** -53, 2.0 ** -200]),           # just above the tie
              np.array([tiny, tiny, -tiny]),                      # subnormal
              np.array([2.0 ** -1022, -tiny]),                    # normal - subnormal
              np.array([-tiny]),                                  # negative subnormal
              np.array([1.7e308, 1.7e308]),                       # overflow: +inf
              np.array([-1.7e308, -1.7e308]),                     # -inf
              np.array([1.7e308, 1.7e308, -1.7e308]),             # back in range
              np.array([np.nan, 1.0]), np.array([np.inf, 1.0]), np.array([np.inf, -np.inf]),
              np.array([-np.inf]), np.zeros(5)]
    parts = [exact_parts(c) for c in cases]
    parts.append(np.zeros(NPARTS, np.int64))                      # no term at all
    got = (_round_on_device(backend, parts[:20], threads)
           + _round_on_device(backend, parts[20:], threads))
    want = [parts_to_float(p) for p in parts]
    for g, w, c in zip(got, want, cases + [None]):
        assert (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g)
                                                      == math.copysign(1, w)), (g, w, c)
    # the half of one binade below the smallest subnormal: ties to even from the parts alone
    half = np.zeros(NPARTS, np.int64)
    half[2098 + 51] = 1                       # lo = 1 at bucket 51: T = 2^51, value 2^-1075
    third = half.copy()
    third[2098 + 50] = 1                      # 2^-1075 + 2^-1076: above the tie
    assert _round_on_device(backend, [half, third]) == [parts_to_float(half),
                                                        parts_to_float(third)] == [0.0, tiny]
    # the lowest bucket's low half (the first low-half slot: the span's edge), just above the tie
    edge = half.copy()
    edge[2098 + 0] = 1                        # T = 2^51 + 1
    assert _round_on_device(backend, [edge], threads) == [parts_to_float(edge)] == [tiny]
