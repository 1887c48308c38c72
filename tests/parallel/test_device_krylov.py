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


@pytest.fixture(scope="module")
def problem(tiny_systems):
    s = tiny_systems
    n = s["nnodes"]
    a = sps.csr_matrix((s["p_values"], s["p_indices"], s["p_indptr"]), shape=(n, n))
    b = s["b_pressure"]
    x, its = cg(SimpleNamespace(matvec=lambda v: a @ v), b, Reducer(None, "exact"),
                m=Jacobi(a.diagonal()), rtol=RTOL)
    return SimpleNamespace(s=s, n=n, a=a, b=b, x_cpu=x, its_cpu=its)


def _ranks(problem, k):
    s = problem.s
    part = metis_partition(s["indptr"], s["indices"], k)
    return partition_mesh(s["tets"], problem.n, s["indptr"], s["indices"], part)


def _solve(backend, problem, k, **kw):
    """(global x, iterations per rank, solvers) of K loopback ranks."""
    rps = _ranks(problem, k)
    world = LoopbackWorld(k)
    opts = dict(FAST, rtol=RTOL)
    opts.update(kw)
    solvers = [DeviceRankPCG(backend, world.transport(rp.rank), rp.plan(2),
                             owned_rows(rp, problem.n, problem.a), **opts) for rp in rps]
    out = solve_lockstep(solvers, [problem.b[rp.owned].copy() for rp in rps])
    x = np.full(problem.n, np.nan)
    for rp, (xo, _) in zip(rps, out):
        x[rp.owned] = np.asarray(backend.to_host(xo))
    return x, [its for _, its in out], solvers


def _residual(problem, x):
    return float(np.linalg.norm(problem.b - problem.a @ x))


@pytest.mark.parametrize("k", (1, 2, 4))
def test_jacobi_exact_is_the_cpu_ranks_cg_bit_for_bit(backend, problem, k):
    x, its, solvers = _solve(backend, problem, k)
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
