"""The pressure solve of GPU ranks as one factorisation over the ranks
(dycore.parallel.distributed_direct), under numba-cuda's simulator:

- the rank-by-rank numbering: rank r's owned node i is row offsets[r] + i; anything but a
  partition of the nodes is refused;
- each rank's rows in that numbering are the rows of P A Pᵀ (the global pinned pressure matrix
  permuted), columns sorted, built from the owned rows each rank has (no global matrix);
- over 2 and 3 loopback ranks, with a stand-in for cuDSS's MGMN factorisation (SuperLU of
  P A Pᵀ, each rank's block of its solution written in place — what MGMN returns to each
  process), every rank's solution at its owned nodes AND both ghost layers is that solution at
  its nodes bit for bit (the owned part in place, the ghosts by one halo exchange), the
  right-hand side's ghosts are not read, and it solves the global system;
- the choice between the distributed and the replicated factorisation: one rank and
  ``replicated`` replicate; ranks without NCCL / the MGMN layer / Open MPI cannot join
  (``mgmn_support`` names why), so ``auto`` replicates and ``distributed`` is a ConfigError
  naming the key, the rank and the reason; ``auto`` also replicates below MGMN_MIN_ROWS rows
  and when the run asks for reproducible sums; ``method: auto`` factorises up to K times the
  one-GPU row limit where K ranks share one factorisation.

cuDSS's MGMN mode itself needs GPUs: scripts/device/cudss_mgmn.py and gpu_ranks_check.py run
it (docs/performance.md).
"""
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from test_device_direct_ranks import _local_rhs, _pressure, _ranks

from dycore.backend.gpu import gpu_backend
from dycore.config import load_config
from dycore.errors import ConfigError
from dycore.parallel.device_krylov import solve_lockstep
from dycore.parallel.distributed_direct import (MGMN_MIN_ROWS, DistributedDirectPressure,
                                                distributed_numbering, distributed_rows,
                                                mgmn_support)
from dycore.parallel.gpu_simulation import GpuRankSimulation
from dycore.parallel.nccl import LoopbackWorld


@pytest.fixture(scope="module")
def backend():
    return gpu_backend(solver_mode="device")


def _owned_rows(a, rp):
    """rp's owned rows of a with LOCAL column ids (as piece["pressure_rows"] holds them)."""
    g2l = np.full(a.shape[0], -1, np.int64)
    g2l[rp.l2g] = np.arange(rp.l2g.size)
    rows = a[rp.owned]
    cols = g2l[rows.indices]
    assert np.all(cols >= 0)                      # an owned row's columns are local nodes
    return rows.indptr, cols, rows.data


def test_distributed_numbering_is_rank_by_rank():
    dist, offsets = distributed_numbering([np.array([4, 0]), np.array([3, 1, 2])], 5)
    assert offsets.tolist() == [0, 2, 5]
    assert dist.tolist() == [1, 3, 4, 2, 0]
    for owned in ([np.array([0, 3]), np.array([1, 3, 4])],       # 3 twice, 2 by no rank
                  [np.array([0, 1]), np.array([2, 3])],          # 4 by no rank
                  [np.array([0, 1, 2]), np.array([3, 4, 5])]):   # 5 out of range
        with pytest.raises(ValueError, match="distributed direct solve"):
            distributed_numbering(owned, 5)


@pytest.mark.parametrize("k", (2, 3))
def test_each_rank_holds_its_rows_of_the_permuted_matrix(systems, k):
    s = systems
    a = _pressure(s)
    rps = _ranks(s, k)
    dist, offsets = distributed_numbering([rp.owned for rp in rps], s["nnodes"])
    order = np.argsort(dist)                      # distributed row -> global node
    want = a[order][:, order].tocsr()
    want.sort_indices()
    for rp in rps:
        rows = distributed_rows(_owned_rows(a, rp), rp.l2g, dist, s["nnodes"])
        lo, hi = offsets[rp.rank], offsets[rp.rank + 1]
        block = want[lo:hi]
        assert rows.shape == (rp.n_owned, s["nnodes"])
        assert np.array_equal(rows.indptr, block.indptr)
        assert np.array_equal(rows.indices, block.indices)
        assert np.array_equal(rows.data, block.data)


class _StandIn:
    """What cuDSS's MGMN factorisation does for each rank, on the host: every rank's
    right-hand side entries make the global one (rank order = the distributed numbering), one
    SuperLU solve of P A Pᵀ, each rank's block written into its solution buffer."""

    name = "SuperLU stand-in"

    def __init__(self, world_rows, offsets):
        self.ranks = {}
        self.offsets = offsets
        a = sp.vstack(world_rows).tocsc()
        self.lu = spla.splu(a, permc_spec="MMD_AT_PLUS_A")
        self.solved = None

    def factor(self, backend, rows, first_row, b, x):
        rank = int(np.searchsorted(self.offsets, first_row, side="right") - 1)
        self.ranks[rank] = (b, x)
        return SimpleNamespace(solve=lambda: self._solve(rank), fill=0, setup_s=0.0,
                               residual=0.0, name=self.name)

    def _solve(self, rank):
        if rank == 0:                 # the first rank of a round: all right-hand sides are in
            b = np.concatenate([np.asarray(self.ranks[r][0]) for r in sorted(self.ranks)])
            self.solved = self.lu.solve(b)
        lo, hi = self.offsets[rank], self.offsets[rank + 1]
        self.ranks[rank][1][:] = self.solved[lo:hi]


@pytest.mark.parametrize("k", (2, 3))
def test_distributed_solve_fills_owned_nodes_in_place_and_ghosts_by_exchange(backend, systems,
                                                                             k):
    s = systems
    a = _pressure(s)
    n = s["nnodes"]
    rps = _ranks(s, k)
    world = LoopbackWorld(k)
    dist, offsets = distributed_numbering([rp.owned for rp in rps], n)
    rows = [distributed_rows(_owned_rows(a, rp), rp.l2g, dist, n) for rp in rps]
    stand_in = _StandIn(rows, offsets)
    solvers = [DistributedDirectPressure(backend, world.transport(rp.rank), rows[rp.rank],
                                         int(offsets[rp.rank]), rp.plan(2),
                                         factor=stand_in.factor) for rp in rps]
    rng = np.random.default_rng(8)
    for _ in range(2):
        b = rng.standard_normal(n)
        out = solve_lockstep(solvers, _local_rhs(b, rps))      # NaN ghosts: never read
        x_dist = stand_in.solved                        # the solution in distributed order
        x_global = x_dist[dist]
        assert np.linalg.norm(b - a @ x_global) <= 1e-9 * np.linalg.norm(b)
        for rp, (x, its) in zip(rps, out):
            assert x.shape == (rp.n_local(2),) and rp.n_local(2) > rp.n_owned
            assert np.array_equal(x, x_global[rp.l2g]), rp.rank     # owned and ghosts
            assert its == 0
    with pytest.raises(ValueError, match="right-hand side of shape"):
        solvers[0].solve(np.zeros(rps[0].n_owned - 1))


def _chooser(backend, transport, nnodes, size=2, votes=None):
    """A stand-in GpuRankSimulation for _factorisation: size ranks, this one rank 0; the other
    ranks vote ``votes`` (default: as this one)."""
    comm = SimpleNamespace(size=size, rank=0,
                           allgather=lambda v: [v] + list(votes or [v] * (size - 1)))
    return SimpleNamespace(comm=comm, transport=transport, nnodes=nnodes, backend=backend)


def test_the_factorisation_is_distributed_only_where_every_rank_can_join(backend, monkeypatch):
    loop = LoopbackWorld(2).transport(0)
    ok, why = mgmn_support(loop)
    assert not ok and "NCCL" in why
    cfg = load_config("configs/mountainwave3d_small.yaml").solvers.pressure
    choose = GpuRankSimulation._factorisation
    for f in ("auto", "replicated", "distributed"):
        c = cfg.model_copy(update={"factorisation": f})
        assert choose(_chooser(backend, loop, MGMN_MIN_ROWS, size=1), c) == "replicated"
    c = cfg.model_copy(update={"factorisation": "auto"})
    assert choose(_chooser(backend, loop, MGMN_MIN_ROWS), c) == "replicated"
    c = cfg.model_copy(update={"factorisation": "distributed"})
    with pytest.raises(ConfigError, match=r"factorisation: distributed: rank 0 .*NCCL.*"
                                          r"replicated"):
        choose(_chooser(backend, loop, MGMN_MIN_ROWS), c)
    # every rank able (a stand-in support): auto distributes from MGMN_MIN_ROWS rows, unless
    # the run asks for reproducible sums; explicit distributed whatever the size
    assert 98_441 < MGMN_MIN_ROWS <= 762_129     # (paper mesh: no gain; 4.42 M tets: gain)
    import dycore.parallel.distributed_direct as dd
    monkeypatch.setattr(dd, "mgmn_support", lambda t: (True, "/lib/libcudss_commlayer_nccl.so.0"))
    auto = cfg.model_copy(update={"factorisation": "auto"})
    assert choose(_chooser(backend, loop, MGMN_MIN_ROWS), auto) == "distributed"
    assert choose(_chooser(backend, loop, MGMN_MIN_ROWS - 1), auto) == "replicated"
    strict = SimpleNamespace(assembly="deterministic", strict=True)
    assert choose(_chooser(strict, loop, MGMN_MIN_ROWS), auto) == "replicated"
    assert choose(_chooser(backend, loop, 10), c) == "distributed"
    # one rank without the layer: auto replicates, distributed names that rank
    no = [(False, "cuDSS's NCCL communication layer is not installed")]
    assert choose(_chooser(backend, loop, MGMN_MIN_ROWS, votes=no), auto) == "replicated"
    with pytest.raises(ConfigError, match="rank 1 cannot join .*communication layer"):
        choose(_chooser(backend, loop, MGMN_MIN_ROWS, votes=no), c)


def test_auto_factorises_k_times_the_one_gpu_rows_when_k_ranks_share_the_factor():
    """pressure_method's row limit: AUTO_DIRECT_MAX_ROWS on one GPU (CG beyond, naming the
    count and the limit); the limit GpuRankSimulation passes for K ranks sharing one
    factorisation (K × AUTO_DIRECT_MAX_ROWS) lets a larger matrix factorise."""
    from dycore.solvers.direct import AUTO_DIRECT_MAX_ROWS, pressure_method
    cfg = load_config("configs/mountainwave3d_small.yaml").solvers.pressure.model_copy(
        update={"method": "auto"})
    gpu = SimpleNamespace(name="gpu", simulator=False, solver_mode="device", assembly="atomic",
                          strict=False)
    n = 1_476_225                          # 8.85 M tets: 193 × 97 × 81 nodes
    method, why = pressure_method(cfg, gpu, n)
    assert method == "cg" and why == f"{n:,} rows > {AUTO_DIRECT_MAX_ROWS:,} (factors too large)"
    method, why = pressure_method(cfg, gpu, n, max_rows=4 * AUTO_DIRECT_MAX_ROWS)
    assert method == "direct" or why.startswith("cuDSS not available")   # (no cuDSS here)
    method, why = pressure_method(cfg, gpu, 5 * AUTO_DIRECT_MAX_ROWS,
                                  max_rows=4 * AUTO_DIRECT_MAX_ROWS)
    assert method == "cg" and "rows > 4,000,000" in why


def test_an_explicit_distributed_factorisation_that_cannot_be_had_fails_only_a_direct_solve():
    """``factorisation: distributed`` on ranks that cannot join: with ``method: auto`` resolved
    to CG (a strict run) the run goes on with CG; with ``method: direct`` the ConfigError of
    _factorisation names the key."""
    def refuse(cfg):
        raise ConfigError("solvers.pressure.factorisation: distributed: rank 1 cannot join")
    comm = SimpleNamespace(size=2, rank=0, allgather=lambda v: [v, v])
    strict = SimpleNamespace(name="gpu", simulator=False, solver_mode="device",
                             assembly="deterministic", strict=True)
    sim = SimpleNamespace(comm=comm, backend=strict, nnodes=1000, _factorisation=refuse)
    base = load_config("configs/mountainwave3d_small.yaml").solvers.pressure
    auto = base.model_copy(update={"method": "auto", "factorisation": "distributed"})
    assert GpuRankSimulation._direct_pressure(sim, auto, None, {}) == {}
    direct = auto.model_copy(update={"method": "direct"})
    with pytest.raises(ConfigError, match="factorisation: distributed: rank 1"):
        GpuRankSimulation._direct_pressure(sim, direct, None, {})
