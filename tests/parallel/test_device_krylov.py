"""CG for the pressure matrix on GPU ranks (:mod:`dycore.parallel.device_krylov`) under the CUDA
simulator, K loopback ranks in one process (a 36-node mesh's pinned pressure matrix, METIS
partitions):

- Jacobi + exact dot products on 1, 2 and 4 ranks: the solution and the iteration count are
  bitwise those of the CPU ranks' :func:`dycore.parallel.krylov.cg` with the exact reduction
  (whose iterates are the serial ones: its products are the serial rows' bits, its dots
  ``math.fsum``), so also bitwise the same on every rank count;
- the ``"sum"`` reduction (per-rank partial + all-reduce): within rtol of that solution;
- the rank-local V-cycle (block-Jacobi over ranks, one V-cycle per owned block): bitwise the
  CPU's ``cg`` with :func:`~dycore.solvers.amg.vcycle_reference` on the same blocks, for a
  one-level (the coarsest solve A⁺ r alone) and a two-level hierarchy;
- the global V-cycle (one hierarchy of the whole matrix distributed by rows): bitwise the CPU's
  ``cg`` with the serial :func:`~dycore.solvers.amg.vcycle_reference` on 1, 2 and 4 ranks;
  with several threads a row (``group``), the same bits on 1, 2 and 4 ranks;
- the stopping test, the bytes per iteration, and the errors.
"""
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sps

from dycore.backend.gpu import gpu_backend
from dycore.errors import SolverDivergedError
from dycore.parallel.device_kernels import NPARTS
from dycore.parallel.device_krylov import DeviceRankPCG, solve_lockstep
from dycore.parallel.krylov import Jacobi, cg
from dycore.parallel.nccl import LoopbackWorld
from dycore.parallel.partition import metis_partition, partition_mesh
from dycore.parallel.rank_ops import owned_rows
from dycore.parallel.reduce import Reducer
from dycore.solvers.amg import vcycle_reference

RTOL = 1e-8
#: launch shapes that keep the simulator fast (every simulated thread is a Python thread)
FAST = dict(exact_blocks=1, exact_threads=1, sum_blocks=2, sum_threads=1, block=8,
            check_every=4)


@pytest.fixture(scope="module")
def backend():
    return gpu_backend(solver_mode="device")


def _pressure_problem(s):
    """The systems' pinned pressure matrix and right-hand side, with the CPU's Jacobi CG
    solution (exact reductions) as the reference."""
    n = s["nnodes"]
    a = sps.csr_matrix((s["p_values"], s["p_indices"], s["p_indptr"]), shape=(n, n))
    b = s["b_pressure"]
    x, its = cg(SimpleNamespace(matvec=lambda v: a @ v), b, Reducer(None, "exact"),
                m=Jacobi(a.diagonal()), rtol=RTOL)
    return SimpleNamespace(s=s, n=n, a=a, b=b, x_cpu=x, its_cpu=its)


@pytest.fixture(scope="module")
def problem(tiny_systems):
    return _pressure_problem(tiny_systems)


def _ranks(problem, k):
    s = problem.s
    part = metis_partition(s["indptr"], s["indices"], k)
    return partition_mesh(s["tets"], problem.n, s["indptr"], s["indices"], part)


def _solve(backend, problem, k, global_amg=None, **kw):
    """(global x, iterations per rank, solvers) of K loopback ranks; ``global_amg``: the
    options of :func:`~dycore.parallel.amg.rank_pieces` (one sweep) for the global V-cycle
    as the preconditioner, checked every two iterations."""
    rps = _ranks(problem, k)
    world = LoopbackWorld(k)
    opts = dict(FAST, rtol=RTOL)
    pieces = [None] * k
    if global_amg is not None:
        from dycore.parallel.amg import rank_pieces
        owner = np.empty(problem.n, np.int64)
        for rp in rps:
            owner[rp.owned] = rp.rank
        pieces = rank_pieces(problem.a, owner, k, sweeps=1, **global_amg)
        opts.update(precond="global_amg", check_every=2)
    opts.update(kw)
    solvers = [DeviceRankPCG(backend, world.transport(rp.rank), rp.plan(2),
                             owned_rows(rp, problem.n, problem.a),
                             vcycle_piece=pieces[rp.rank], **opts) for rp in rps]
    out = solve_lockstep(solvers, [problem.b[rp.owned].copy() for rp in rps])
    x = np.full(problem.n, np.nan)
    for rp, (xo, _) in zip(rps, out):
        x[rp.owned] = np.asarray(backend.to_host(xo))
    return x, [its for _, its in out], solvers


def _residual(problem, x):
    return float(np.linalg.norm(problem.b - problem.a @ x))


@pytest.mark.parametrize("k, overlap", [(1, False), (2, False), (4, False), (2, True)])
def test_jacobi_exact_is_the_cpu_ranks_cg_bit_for_bit(backend, problem, k, overlap):
    """... also with A p split around the halo exchange (overlap): the same bits."""
    x, its, solvers = _solve(backend, problem, k, overlap=overlap)
    if overlap:           # both launches of the split product ran on some rank
        assert any(0 < s.n_interior < s.n_owned for s in solvers)
    assert its == [problem.its_cpu] * k
    assert problem.its_cpu > 20                       # a real solve, not a lucky start
    assert np.array_equal(x, problem.x_cpu)           # hence the same bits on 1, 2, 4 ranks
    # the stop test is on the recursive residual; the true one agrees to rounding
    assert _residual(problem, x) <= RTOL * np.linalg.norm(problem.b) * (1 + 1e-6)
    sent = [s.halo.values_sent for s in solvers]
    assert (sum(sent) > 0) == (k > 1)
    for s in solvers:
        assert s.bytes_per_iteration() == {"halo": 8 * s.halo.values_sent,
                                           "allreduce": 3 * 8 * NPARTS}


def test_interior_first_numbering_gives_the_same_bits(backend, small_systems):
    """On the 75-node mesh both ranks have interior rows scattered among the boundary ones, so
    overlap renumbers the owned rows (b permuted in, x back out) and splits A p: the solution
    is still the CPU's cg bit for bit, in the caller's numbering."""
    big = _pressure_problem(small_systems)
    x, its, solvers = _solve(backend, big, 2, overlap=True)
    assert all(sv.order is not None and 0 < sv.n_interior < sv.n_owned for sv in solvers)
    assert its == [big.its_cpu] * 2 and np.array_equal(x, big.x_cpu)


def test_sum_reduction_is_within_rtol_of_the_exact_solution(backend, problem):
    x, its, solvers = _solve(backend, problem, 2, reduction="sum")
    assert its[0] == its[1] and abs(its[0] - problem.its_cpu) <= 2
    err = np.linalg.norm(x - problem.x_cpu) / np.linalg.norm(problem.x_cpu)
    assert err <= RTOL, err
    assert _residual(problem, x) <= RTOL * np.linalg.norm(problem.b) * (1 + 1e-6)
    assert solvers[0].bytes_per_iteration()["allreduce"] == 3 * 8


@pytest.mark.parametrize("k, max_coarse", ((1, 500), (2, 8)))
def test_local_vcycle_is_block_jacobi_over_ranks(backend, problem, k, max_coarse):
    """Each rank's V-cycle on its owned block (one rank: the whole matrix below max_coarse, so
    its coarsest solve A⁺ r alone; two ranks: a two-level hierarchy per block) — the CPU's cg
    with those V-cycles applied by :func:`vcycle_reference` (one thread per row: the device's
    row order) on the owned blocks gives the same bits."""
    x, its, solvers = _solve(backend, problem, k, precond="local_amg",
                             amg_max_coarse=max_coarse, amg_sweeps=1, check_every=2)
    rps = _ranks(problem, k)
    assert [len(s.amg_sizes) for s in solvers] == [1 if k == 1 else 2] * k
    assert [s.amg_sizes[0] for s in solvers] == [rp.n_owned for rp in rps]

    def m(r):
        z = np.empty_like(r)
        for rp, s in zip(rps, solvers):
            z[rp.owned] = vcycle_reference(s.hierarchy, r[rp.owned], max_group=1)
        return z
    x_ref, its_ref = cg(SimpleNamespace(matvec=lambda v: problem.a @ v), problem.b,
                        Reducer(None, "exact"), m=m, rtol=RTOL)
    assert its == [its_ref] * k
    assert np.array_equal(x, x_ref)
    assert _residual(problem, x) <= RTOL * np.linalg.norm(problem.b) * (1 + 1e-6)
    assert its[0] == 1 if k == 1 else its[0] > 10     # A⁺ alone: one iteration


@pytest.mark.parametrize("k, whole, overlap", [
    (1, "coarsest", False), (2, "coarsest", False), (4, "coarsest", False), (2, 1, False),
    (4, 2, False), (2, "one level", False), (2, "coarsest", True), (4, 2, True),
    (2, "one level", True)])
def test_global_vcycle_gives_the_serial_vcycles_bits_on_every_rank_count(backend, problem, k,
                                                                         whole, overlap):
    """One hierarchy of the whole matrix cut by rows (rank_pieces, max_coarse 2: four levels,
    36 / 15 / 3 / 1 unknowns, and an all-gathered coarsest solve): CG on 1, 2 and 4 ranks takes the iterations and gives
    the bits of the CPU's cg with the serial V-cycle (vcycle_reference, one thread per row) —
    also with levels from 1 or 2 down held whole by every rank (replicate_below), and for a
    hierarchy of one level (the whole pseudo-inverse on every rank). With ``overlap``, CG and the
    distributed levels number their owned rows interior first and split every product of A
    around its halo exchange: the same bits."""
    from dycore.parallel.amg import rank_pieces
    from dycore.solvers.amg import HostHierarchy

    rps = _ranks(problem, k)
    owner = np.empty(problem.n, np.int64)
    for rp in rps:
        owner[rp.owned] = rp.rank
    max_coarse = problem.n if whole == "one level" else 2
    h = HostHierarchy(problem.a, "chebyshev", 1, max_coarse=max_coarse)
    below = h.sizes[whole] if isinstance(whole, int) else 0
    pieces = rank_pieces(problem.a, owner, k, sweeps=1, max_coarse=max_coarse,
                         replicate_below=below)
    top = {"coarsest": len(h.sizes) - 1, "one level": 0}.get(whole, whole)
    assert pieces[0]["whole"]["level"] == top and pieces[0]["sizes"] == h.sizes
    assert len(h.sizes) == 1 if whole == "one level" else len(h.sizes) >= 4
    rps_pieces = iter(pieces)
    world = LoopbackWorld(k)
    solvers = [DeviceRankPCG(backend, world.transport(rp.rank), rp.plan(2),
                             owned_rows(rp, problem.n, problem.a), precond="global_amg",
                             vcycle_piece=next(rps_pieces), rtol=RTOL, overlap=overlap,
                             **dict(FAST, check_every=2)) for rp in rps]
    out = solve_lockstep(solvers, [problem.b[rp.owned].copy() for rp in rps])
    x = np.full(problem.n, np.nan)
    for rp, (xo, _) in zip(rps, out):
        x[rp.owned] = np.asarray(backend.to_host(xo))
    its = [i for _, i in out]
    x_ref, its_ref = cg(SimpleNamespace(matvec=lambda v: problem.a @ v), problem.b,
                        Reducer(None, "exact"),
                        m=lambda r: vcycle_reference(h, r, max_group=1), rtol=RTOL)
    assert its == [its_ref] * k and (its_ref == 1 if whole == "one level"
                                     else 2 < its_ref < problem.its_cpu)
    assert np.array_equal(x, x_ref)
    assert _residual(problem, x) <= RTOL * np.linalg.norm(problem.b) * (1 + 1e-6)
    assert [s.amg_sizes for s in solvers] == [h.sizes] * k
    # the levels above top exchange halos, the ones held whole none
    v = solvers[0].vcycle
    assert v.top == top
    assert sum(lev["ha"] is not None for lev in v.levels) == top
    if overlap and k == 2 and top > 0:     # some rank sums interior rows before the exchange
        assert any(0 < s.vcycle.n_interior < s.n_owned for s in solvers)
    if not overlap and k == 2 and top > 0:
        # each distributed level numbered with A's sent rows last (send_last): its exchanges
        # send from the vector itself (no pack), and the bits above did not change
        assert all(lev["ha"].send_in_place for s in solvers for lev in s.vcycle.levels[:top])


@pytest.mark.parametrize("k, overlap", [(1, False), (2, False), (4, False), (2, True)])
def test_global_vcycle_in_float32_gives_the_rounded_hierarchys_bits(backend, problem, k,
                                                                    overlap):
    """Level matrices stored in float32 (``amg_dtype``, what ``solvers.pressure.precision:
    auto`` gives outside strict mode): CG on 1, 2 and 4 ranks gives the bits of the CPU's cg
    with the serial V-cycle of the hierarchy rounded to float32 (``HostHierarchy.rounded``),
    for distributed levels and levels held whole alike, and not the float64 cycle's."""
    from dycore.solvers.amg import HostHierarchy

    h = HostHierarchy(problem.a, "chebyshev", 1, max_coarse=2)
    x, its, solvers = _solve(backend, problem, k, overlap=overlap, amg_dtype=np.float32,
                             global_amg=dict(max_coarse=2, replicate_below=h.sizes[2]))
    v = solvers[0].vcycle
    assert v.top == 2 and v.dtype == np.float32
    assert all(lev[m].data.dtype == np.float32 for lev in v.levels for m in "ARP")
    rounded = h.rounded(np.float32)
    x_ref, its_ref = cg(SimpleNamespace(matvec=lambda r: problem.a @ r), problem.b,
                        Reducer(None, "exact"),
                        m=lambda r: vcycle_reference(rounded, r, max_group=1), rtol=RTOL)
    assert its == [its_ref] * k
    assert np.array_equal(x, x_ref)
    x64, _ = cg(SimpleNamespace(matvec=lambda r: problem.a @ r), problem.b,
                Reducer(None, "exact"), m=lambda r: vcycle_reference(h, r, max_group=1),
                rtol=RTOL)
    assert not np.array_equal(x, x64)           # the rounding reached the preconditioner
    assert _residual(problem, x) <= RTOL * np.linalg.norm(problem.b) * (1 + 1e-6)


def test_level_dtype_is_float32_outside_strict_mode_unless_asked_for_float64():
    from dycore.solvers.amg import level_dtype
    assert [level_dtype(p, False) for p in ("auto", "float32", "float64")] == \
        [np.float32, np.float32, np.float64]
    assert {level_dtype(p, True) for p in ("auto", "float32", "float64")} == \
        {np.dtype(np.float64)}
    with pytest.raises(ValueError, match="precision.*'half'"):
        level_dtype("half", False)


def test_a_solve_that_stops_unconverged_raises_on_every_rank(backend, problem):
    with pytest.raises(SolverDivergedError, match="iteration limit reached after 3 "):
        _solve(backend, problem, 2, maxiter=3, check_every=2)
    # a solver is reusable: each solve re-opens the control array and counts from 0
    rps = _ranks(problem, 1)
    s = DeviceRankPCG(backend, LoopbackWorld(1).transport(0), rps[0].plan(2),
                      owned_rows(rps[0], problem.n, problem.a), rtol=RTOL,
                      **dict(FAST, maxiter=3))
    x0, its0 = s.solve(np.zeros(problem.n))
    assert its0 == 0 and not np.any(np.asarray(x0))          # b = 0: converged at the start
    for _ in range(2):
        with pytest.raises(SolverDivergedError, match="after 3 iterations"):
            s.solve(problem.b.copy())


def test_bad_options_raise(backend, problem):
    rps = _ranks(problem, 1)
    args = (backend, LoopbackWorld(1).transport(0), rps[0].plan(2),
            owned_rows(rps[0], problem.n, problem.a))
    with pytest.raises(ValueError, match="reduction must be one of"):
        DeviceRankPCG(*args, reduction="ordered")
    with pytest.raises(ValueError, match="precond must be one of"):
        DeviceRankPCG(*args, precond="ilu")
    with pytest.raises(ValueError, match="not a power of two"):
        DeviceRankPCG(*args, sum_threads=3)
    with pytest.raises(ValueError, match="right-hand side of shape"):
        DeviceRankPCG(*args, **FAST).solve(np.zeros(3))
    ptr, cols, vals, shape, rb = args[3]
    with pytest.raises(ValueError, match="depth-2 plan"):
        DeviceRankPCG(*args[:3], (ptr, cols, vals, (shape[0], shape[1] - 1), rb))
    vals = vals.copy()
    vals[(cols == 0) & (np.arange(cols.size) < ptr[1])] = 0.0
    with pytest.raises(ValueError, match="zero diagonal at owned row 0"):
        DeviceRankPCG(*args[:3], (ptr, cols, vals, shape, rb))


def _lockstep(solvers, rhs, backend):
    """(x per rank as host arrays, iterations per rank, host reads of the solve)."""
    before = backend.counters.syncs
    out = solve_lockstep(solvers, [r.copy() for r in rhs])
    reads = backend.counters.syncs - before
    return [np.asarray(backend.to_host(x)).copy() for x, _ in out], [i for _, i in out], reads


def _concat(rps, xs, n):
    x = np.full(n, np.nan)
    for rp, xo in zip(rps, xs):
        x[rp.owned] = xo
    return x


def test_replayed_solves_give_the_checked_solves_bits(backend, problem):
    """Two loopback ranks (not capturable: the graphs' work is re-issued with its yields).
    A first solve with b = 0 learns 0 iterations (budget 3); the real right-hand side then
    replays ``first`` (3 iterations), reads the verdict, replays ``more`` until converged
    and learns its count (budget its + max(2, ⌈its/10⌉), agreed by the ranks); the next solve replays
    ``first`` alone with one host read per rank. Every solution is bitwise the CPU ranks' cg
    (= the solve issued from Python, test above) — iterations past convergence change
    nothing."""
    k, ce = 2, FAST["check_every"]
    rps = _ranks(problem, k)
    world = LoopbackWorld(k)
    solvers = [DeviceRankPCG(backend, world.transport(rp.rank), rp.plan(2),
                             owned_rows(rp, problem.n, problem.a), rtol=RTOL, **FAST)
               for rp in rps]
    assert [s.capture for s in solvers] == [False] * k
    rhs = [problem.b[rp.owned] for rp in rps]
    xs, its, reads = _lockstep(solvers, [np.zeros(rp.n_owned) for rp in rps], backend)
    assert its == [0] * k and not any(np.any(x) for x in xs)
    assert [s.budget for s in solvers] == [3] * k and not solvers[0].replayed
    assert reads == k * (1 + 1)                # one check, then the agreement's read

    n_its = problem.its_cpu
    xs, its, reads = _lockstep(solvers, rhs, backend)
    assert all(s.replayed for s in solvers) and its == [n_its] * k
    assert np.array_equal(_concat(rps, xs, problem.n), problem.x_cpu)
    more = -(-(n_its - 3) // ce)               # `more` replays after `first` fell short
    assert reads == k * (1 + more + 1)         # first, each more, the new agreement
    budget = n_its + max(2, -(-n_its // 10))
    assert [s.graph_info() for s in solvers] == [
        {"budget": budget, "cuda_graph": False, "kernels": 0}] * k     # re-issued, no graph

    xs, its, reads = _lockstep(solvers, rhs, backend)
    assert its == [n_its] * k and reads == k      # one host read per rank and solve
    assert np.array_equal(_concat(rps, xs, problem.n), problem.x_cpu)
    # switched off: issued from Python and checked every check_every iterations, same bits
    for s in solvers:
        s.graphs = False
    xs, its, reads = _lockstep(solvers, rhs, backend)
    assert not solvers[0].replayed and reads == k * -(-n_its // ce)
    assert np.array_equal(_concat(rps, xs, problem.n), problem.x_cpu)


def test_one_rank_is_captured_and_replayed(backend, problem):
    """One loopback rank is capturable: its budget runs as a ``backend.capture`` graph (the
    simulator re-issues it and counts a replay), with the bits of the solve from Python."""
    rps = _ranks(problem, 1)
    s = DeviceRankPCG(backend, LoopbackWorld(1).transport(0), rps[0].plan(2),
                      owned_rows(rps[0], problem.n, problem.a), rtol=RTOL, **FAST)
    assert s.capture
    x1, its1 = s.solve(problem.b.copy())
    x1 = np.asarray(x1).copy()
    assert not s.replayed and its1 == problem.its_cpu
    replays, syncs = backend.counters.graph_replays, backend.counters.syncs
    x2, its2 = s.solve(problem.b.copy())
    assert s.replayed and its2 == its1
    assert backend.counters.graph_replays - replays == 1          # `first` alone
    assert backend.counters.syncs - syncs == 1
    assert np.array_equal(np.asarray(x2), x1) and np.array_equal(x1, problem.x_cpu)
    info = s.graph_info()         # the simulator re-issues: no CUDA graph, its launches counted
    assert info["budget"] == its1 + max(2, -(-its1 // 10)) and not info["cuda_graph"]
    assert info["kernels"] > 5 * info["budget"]


def test_replayed_local_vcycle_with_sums_matches_its_first_solve(backend, problem):
    """The rank-local V-cycle with NCCL-style sums on two ranks: the replayed solve has the
    first (checked) solve's iteration count and bits."""
    k = 2
    rps = _ranks(problem, k)
    world = LoopbackWorld(k)
    solvers = [DeviceRankPCG(backend, world.transport(rp.rank), rp.plan(2),
                             owned_rows(rp, problem.n, problem.a), rtol=RTOL,
                             **dict(FAST, reduction="sum", precond="local_amg",
                                    amg_max_coarse=8, amg_sweeps=1, check_every=2))
               for rp in rps]
    rhs = [problem.b[rp.owned] for rp in rps]
    x1, its1, _ = _lockstep(solvers, rhs, backend)
    assert its1[0] > 10 and len(set(its1)) == 1
    x2, its2, reads = _lockstep(solvers, rhs, backend)
    assert all(s.replayed for s in solvers) and its2 == its1 and reads == k
    assert all(np.array_equal(a, b) for a, b in zip(x1, x2))


def test_the_dense_coarsest_solve_takes_a_row_group_and_the_same_bits_on_any_rank_count(
        backend, problem):
    """A one-level hierarchy (the whole pseudo-inverse, 36 × 36 dense, on every rank) with
    ``group`` 2: its rows are summed by row_group's threads (at most max_group), not one (one
    thread summed a 499-entry row in 232 µs a cycle on an H200); 1 and 2 ranks give the same
    bits, within rounding of the one-thread solve."""

    xs = []
    for k, group in ((1, 2), (2, 2), (1, 1)):
        x, _, solvers = _solve(backend, problem, k, group=group,
                               global_amg=dict(max_coarse=problem.n))
        v = solvers[0].vcycle
        assert v.top == 0 and v.coarse.nrow == problem.n
        assert v.coarse.g == (v.la.max_group if group > 1 else 1)
        assert group == 1 or v.la.max_group > 2
        xs.append(x)
    assert np.array_equal(xs[0], xs[1])
    assert np.max(np.abs(xs[0] - xs[2])) <= 1e-9 * np.max(np.abs(xs[2]))


def test_global_vcycle_with_row_groups_gives_the_same_bits_on_every_rank_count(backend,
                                                                               problem):
    """``group`` 2 (GPU ranks outside strict mode use ROW_GROUP = 4; two keep the simulator
    fast): two threads sum each row of the pressure matrix and of the A and R of every level
    above the first held whole, P's rows one; the levels held whole take row_group of their
    own rows, P's too (the same matrices on every rank); 1, 2 and 4 ranks take the same
    iterations and give the same bits (the sums' order does not depend on the partition) —
    also with ``overlap``, where each product's rows run in two launches around the exchange —
    within rounding of the one-thread-a-row solve and converged to the tolerance."""
    from dycore.solvers.krylov import row_group

    xs, its_all = [], []
    for k, overlap in ((1, False), (2, False), (4, False), (2, True)):
        # (levels of 36, 15, 3 and 1 unknowns: the first two distributed, the third held
        # whole, the coarsest as its pseudo-inverse)
        x, its, solvers = _solve(backend, problem, k, group=2, overlap=overlap,
                                 global_amg=dict(max_coarse=2, replicate_below=12))
        v = solvers[0].vcycle
        assert solvers[0].a.g == 2
        for i, lev in enumerate(v.levels):       # the levels held whole: their own groups
            want = ([2, 2, 1] if i < v.top else
                    [row_group(np.asarray(backend.to_host(m.indptr)), v.la.max_group)
                     for m in (lev["A"], lev["R"], lev["P"])])
            assert [lev["A"].g, lev["R"].g, lev["P"].g] == want
        assert v.top == 2 and [(lev["A"].g, lev["R"].g) for lev in v.levels[2:]] == [(1, 1)]
        #                                                      (three rows of ≤ 3 entries)
        xs.append(x)
        its_all.append(its)
    assert its_all[1:] == [[its_all[0][0]] * 2, [its_all[0][0]] * 4, [its_all[0][0]] * 2]
    assert all(np.array_equal(xs[0], x) for x in xs[1:])
    assert _residual(problem, xs[0]) <= RTOL * np.linalg.norm(problem.b) * (1 + 1e-6)
    one, _, _ = _solve(backend, problem, 1, global_amg=dict(max_coarse=2))
    assert np.max(np.abs(xs[0] - one)) <= 1e-6 * np.max(np.abs(one))
