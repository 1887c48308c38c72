"""BiCGStab for the momentum (BCSR 3×3, block-Jacobi) and tracer (CSR, Jacobi) systems on GPU
ranks (:mod:`dycore.parallel.device_bicgstab`) under the CUDA simulator, K loopback ranks in
one process (the 36-node mesh's assembled systems, METIS partitions):

- exact dot products: the solution and the iteration count are the same bits on 1, 2 and 4
  ranks (every owned operation is the serial one, the dots are correctly rounded);
- they agree with the CPU ranks' :func:`dycore.parallel.krylov.bicgstab` to the solver
  tolerance (not bitwise: the stopping test is in squares, as the serial device solver's, and
  the 3×3 inverses are the device's cofactor formula, not LAPACK's);
- the "sum" reduction converges to the same tolerance; a solve that stops short raises;
- later solves replay the first one's learnt budget (2 loopback ranks: re-issued in lock
  step; 1 rank: captured, which the simulator re-issues) with the checked solve's bits;
- s·s reduced with t·s and t·t (three reductions per iteration, the default) gives the bits of
  s·s reduced on its own (four).
"""
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sps

from dycore.backend.gpu import gpu_backend
from dycore.errors import SolverDivergedError
from dycore.parallel.device_bicgstab import DeviceRankBiCGStab
from dycore.parallel.device_krylov import solve_lockstep
from dycore.parallel.krylov import BlockJacobi3, Jacobi, bicgstab
from dycore.parallel.nccl import LoopbackWorld
from dycore.parallel.partition import extract_rows, metis_partition, partition_mesh
from dycore.parallel.reduce import Reducer

RTOL = 1e-8
FAST = dict(reducer_options=dict(exact_blocks=1, exact_threads=1, sum_blocks=2,
                                 sum_threads=1), block=8, check_every=4)


@pytest.fixture(scope="module")
def backend():
    return gpu_backend(solver_mode="device", strict=True)


def _system(s, name):
    n = s["nnodes"]
    if name == "tracer":
        a = sps.csr_matrix((s["tracer"], s["indices"], s["indptr"]), shape=(n, n))
        return a, s["tracer"], s["tracer_b"], 1
    a = sps.bsr_matrix((s["momentum"], s["indices"], s["indptr"]), shape=(3 * n, 3 * n))
    return a, s["momentum"], s["momentum_b"].reshape(-1), 3


def _solvers(backend, s, name, k, **kw):
    """(solvers, right-hand sides, rank partitions) of K loopback ranks."""
    n = s["nnodes"]
    part = metis_partition(s["indptr"], s["indices"], k)
    rps = partition_mesh(s["tets"], n, s["indptr"], s["indices"], part)
    a, vals, b, bs = _system(s, name)
    world = LoopbackWorld(k)
    opts = dict(FAST, rtol=RTOL, name=name)
    opts.update(kw)
    pc = "block_jacobi" if bs == 3 else "jacobi"
    solvers, rhs = [], []
    for rp in rps:
        ptr, cols, pos = extract_rows(s["indptr"], s["indices"], rp, n, 1)
        sol = DeviceRankBiCGStab(backend, world.transport(rp.rank), rp.plan(1), ptr, cols, bs,
                                 pc, **opts)
        sol.values[...] = vals[pos]
        solvers.append(sol)
        rhs.append(b.reshape(n, bs)[rp.owned].reshape(-1).copy())
    return solvers, rhs, rps


def _gathered(backend, s, rps, out, bs):
    x = np.full((s["nnodes"], bs), np.nan)
    for rp, (xo, _) in zip(rps, out):
        x[rp.owned] = np.asarray(backend.to_host(xo)).reshape(-1, bs)
    return x.reshape(-1)


def _solve(backend, s, name, k, **kw):
    """(global flat x, iterations per rank) of K loopback ranks."""
    solvers, rhs, rps = _solvers(backend, s, name, k, **kw)
    out = solve_lockstep(solvers, rhs)
    return _gathered(backend, s, rps, out, 3 if name == "momentum" else 1), \
        [its for _, its in out]


@pytest.fixture(scope="module")
def one_rank(backend, tiny_systems):
    return {name: _solve(backend, tiny_systems, name, 1) for name in ("tracer", "momentum")}


@pytest.mark.parametrize("name", ("tracer", "momentum"))
@pytest.mark.parametrize("k", (2, 4))
def test_exact_dots_give_the_same_bits_on_1_2_4_ranks(backend, tiny_systems, one_rank, name,
                                                      k):
    x1, its1 = one_rank[name]
    x, its = _solve(backend, tiny_systems, name, k)
    assert its == [its1[0]] * k and its1[0] >= 2
    assert np.array_equal(x, x1)


@pytest.mark.parametrize("name", ("tracer", "momentum"))
def test_agrees_with_the_cpu_ranks_bicgstab(tiny_systems, one_rank, name):
    s = tiny_systems
    a, vals, b, bs = _system(s, name)
    diag = a.diagonal()
    if bs == 3:
        rows = np.repeat(np.arange(s["nnodes"]), np.diff(s["indptr"]))
        m = BlockJacobi3(vals[np.flatnonzero(s["indices"] == rows)])
    else:
        m = Jacobi(diag)
    x_cpu, its_cpu = bicgstab(SimpleNamespace(matvec=lambda v: a @ v), b,
                              Reducer(None, "exact"), m=m, rtol=RTOL)
    x, its = one_rank[name]
    assert abs(its[0] - its_cpu) <= 1
    assert np.linalg.norm(b - a @ x) <= RTOL * np.linalg.norm(b) * (1 + 1e-6)
    err = np.linalg.norm(x - x_cpu) / np.linalg.norm(x_cpu)
    assert err < 1e-6, err
    x_true = s[f"{name}_x"].reshape(-1)
    assert np.linalg.norm(x - x_true) / np.linalg.norm(x_true) < 1e-4


def test_sum_reduction_converges(backend, tiny_systems, one_rank):
    x, its = _solve(backend, tiny_systems, "momentum", 2, reduction="sum")
    a, _, b, _ = _system(tiny_systems, "momentum")
    assert its[0] == its[1] and abs(its[0] - one_rank["momentum"][1][0]) <= 2
    assert np.linalg.norm(b - a @ x) <= RTOL * np.linalg.norm(b) * (1 + 1e-6)


def test_iteration_limit_raises_on_every_rank(backend, tiny_systems):
    with pytest.raises(SolverDivergedError, match="tracer solve .*iteration limit"):
        _solve(backend, tiny_systems, "tracer", 2, maxiter=1)


@pytest.mark.parametrize("k", (1, 2))
def test_replayed_solves_give_the_checked_solves_bits(backend, tiny_systems, one_rank, k):
    solvers, rhs, rps = _solvers(backend, tiny_systems, "tracer", k)
    first = solve_lockstep(solvers, rhs)
    x1 = _gathered(backend, tiny_systems, rps, first, 1)
    assert not any(sol.replayed for sol in solvers)
    assert all(sol.budget == first[0][1] + max(2, -(-first[0][1] // 10)) for sol in solvers)
    again = solve_lockstep(solvers, rhs)
    assert all(sol.replayed for sol in solvers)
    assert [its for _, its in again] == [its for _, its in first]
    assert np.array_equal(_gathered(backend, tiny_systems, rps, again, 1), x1)
    assert np.array_equal(x1, one_rank["tracer"][0])


@pytest.mark.parametrize("k", (1, 2))
def test_lean_momentum_products_give_the_full_products_bits(backend, tiny_systems, k):
    """``lean=True`` (the products read the diagonal and Coriolis entries from the lean copy
    and only the blocks of ``full_pos`` in full) gives the solution and iteration count of the
    full products bit for bit (with the Coriolis entries read, and without where they are
    zero); leaving the full blocks out of ``full_pos`` changes the solution (the test sees
    them)."""
    s = tiny_systems
    n = s["nnodes"]
    vals = np.asarray(s["momentum"]).reshape(-1, 3, 3).copy()
    # a tenth of the blocks made full, as the no-normal-flow rotation makes the blocks of
    # rotated nodes (small entries: the system stays as easy to solve)
    rng = np.random.default_rng(5)
    live = np.flatnonzero(np.abs(vals[:, [0, 1, 2], [0, 1, 2]]).min(axis=1) > 0)
    rot = rng.choice(live, live.size // 10, replace=False)
    scale = 1e-3 * np.abs(vals[rot][:, [0, 1, 2], [0, 1, 2]]).min(axis=1)[:, None]
    vals[rot[:, None], [0, 1, 2, 2], [2, 2, 0, 1]] += scale * rng.uniform(-1, 1, (rot.size, 4))
    not_lean = np.flatnonzero(np.abs(vals[:, [0, 1, 2, 2], [2, 2, 0, 1]]).max(axis=1) > 0)
    coriolis = bool(np.any(vals[:, [0, 1], [1, 0]] != 0))
    assert not_lean.size == rot.size

    def solve(**kw):
        part = metis_partition(s["indptr"], s["indices"], k)
        rps = partition_mesh(s["tets"], n, s["indptr"], s["indices"], part)
        world = LoopbackWorld(k)
        solvers, rhs = [], []
        for rp in rps:
            ptr, cols, pos = extract_rows(s["indptr"], s["indices"], rp, n, 1)
            extra = dict(kw)
            if extra.pop("full", False):
                extra["full_pos"] = np.flatnonzero(np.isin(pos, not_lean))
            sol = DeviceRankBiCGStab(backend, world.transport(rp.rank), rp.plan(1), ptr, cols,
                                     3, "block_jacobi", **dict(FAST, rtol=RTOL), **extra)
            sol.values[...] = vals[pos]
            solvers.append(sol)
            rhs.append(s["momentum_b"].reshape(n, 3)[rp.owned].reshape(-1).copy())
        out = solve_lockstep(solvers, rhs)
        return _gathered(backend, s, rps, out, 3), [its for _, its in out]

    x_full, its_full = solve()
    for cor in {coriolis, True}:
        x, its = solve(lean=True, full=True, coriolis=cor)
        assert its == its_full and np.array_equal(x, x_full), cor
    try:                         # the lean product alone is another matrix
        x_wrong, _ = solve(lean=True, coriolis=True, maxiter=2 * its_full[0])
        assert not np.array_equal(x_wrong, x_full)
    except SolverDivergedError:  # (or one that does not converge as fast)
        pass


@pytest.mark.parametrize("name", ("tracer", "momentum"))
def test_s_check_reduced_with_omega_gives_the_bits_of_its_own_reduction(backend, tiny_systems,
                                                                        one_rank, name):
    """The default reduces s·s together with t·s and t·t (three reductions per iteration);
    ``set_merged(False)`` reduces s·s on its own before t = A ŝ (four): the same solution and
    iteration count bit for bit on 2 ranks, and rank 0 posts 3 against 4 reductions per issued
    iteration (plus the start's one)."""
    out, calls = {}, {}
    for merged in (True, False):
        solvers, rhs, rps = _solvers(backend, tiny_systems, name, 2)
        posted = []
        red = solvers[0].red
        post = red.post_dots

        def counting(*pairs, post=post, posted=posted):
            posted.append(len(pairs))
            return post(*pairs)
        red.post_dots = counting
        for sol in solvers:
            sol.set_merged(merged)
        res = solve_lockstep(solvers, rhs)
        out[merged] = (_gathered(backend, tiny_systems, rps, res, 3 if name == "momentum"
                                 else 1), [its for _, its in res])
        calls[merged] = posted
    assert np.array_equal(out[True][0], out[False][0])
    assert out[True][1] == out[False][1] and out[True][1][0] >= 2
    assert np.array_equal(out[True][0], one_rank[name][0])
    issued = (len(calls[True]) - 1) / 3
    assert issued == int(issued) and issued >= out[True][1][0]
    assert len(calls[False]) - 1 == 4 * issued
    assert calls[True].count(3) == issued            # s·s, t·s, t·t in one reduction


@pytest.mark.parametrize("k", (1, 2))
def test_two_systems_solved_together_give_each_solves_own_bits(backend, tiny_systems, k):
    """θ′ and q_v share the tracer matrix: two right-hand sides solved together (their
    kernels one after another, one halo exchange and one reduction for both) give each
    system's solution and iteration count of its own solve bit for bit on K ranks, with the
    reductions and exchanges of ONE solve of the larger count (the same number of posts), and
    a later solve replays one budget learnt from the larger count with the same bits."""
    s = tiny_systems
    n = s["nnodes"]
    a, _, b, _ = _system(s, "tracer")
    b2 = a @ np.ones(n)                       # another solution, another iteration count
    alone = []
    for rhs in (b, b2):
        solvers, _, rps = _solvers(backend, s, "tracer", k)
        owned = [rhs[rp.owned].copy() for rp in rps]
        out = solve_lockstep(solvers, owned)
        alone.append((_gathered(backend, s, rps, out, 1), out[0][1]))
    assert alone[0][1] != alone[1][1] and min(alone[0][1], alone[1][1]) >= 2

    solvers, _, rps = _solvers(backend, s, "tracer", k)
    both = [np.stack([b[rp.owned], b2[rp.owned]]) for rp in rps]
    for rnd in range(2):
        out = solve_lockstep(solvers, both)
        if rnd == 0:        # counted after the first solve allocated the two systems' work
            red, trans = solvers[0].red, solvers[0].t
            posted, sent = [], []
            post, tpost = red.post_dots, trans.post
            red.post_dots = lambda *pairs, post=post: posted.append(len(pairs)) or post(*pairs)
            trans.post = lambda *msg, tpost=tpost: sent.append(1) or tpost(*msg)
        x = np.full((2, n), np.nan)
        for rp, sol in zip(rps, solvers):
            x[:, rp.owned] = np.asarray(backend.to_host(sol.x))
        for j in range(2):
            assert np.array_equal(x[j], alone[j][0]), (rnd, j)
        assert all(sol.counts == [alone[0][1], alone[1][1]] for sol in solvers)
        assert all(sol.iterations == max(alone[0][1], alone[1][1]) for sol in solvers)
    assert all(sol.replayed for sol in solvers)
    its = max(alone[0][1], alone[1][1])
    assert solvers[0].budget == its + max(2, -(-its // 10))
    # the replay: the start's reduction and three per budgeted iteration (r̂·v; s·s, t·s,
    # t·t; r·r, r̂·r), each carrying both systems' dots; p̂ and ŝ: one exchange each
    assert posted == [2] + [2, 6, 4] * solvers[0].budget
    assert len(sent) == 2 * solvers[0].budget


def test_a_system_that_fails_together_is_named(backend, tiny_systems):
    s = tiny_systems
    a, _, b, _ = _system(s, "tracer")
    solvers, _, rps = _solvers(backend, s, "tracer", 2, maxiter=3)
    both = [np.stack([0.0 * b[rp.owned], b[rp.owned]]) for rp in rps]
    gens = [sol.steps(rhs, names=("tracer theta_prime", "tracer q_v"))
            for sol, rhs in zip(solvers, both)]
    with pytest.raises(SolverDivergedError, match="tracer q_v solve .*iteration limit"):
        for _ in range(10_000):
            for g in gens:
                next(g)
