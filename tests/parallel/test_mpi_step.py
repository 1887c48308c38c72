"""Distributed time steps of the mountain-wave case on 1, 2 and 4 CPU ranks
(tests/parallel/step_driver.py under mpiexec): with the exact reduction, the distributed
V-cycle for pressure and (block-)Jacobi BiCGStab for momentum and tracers, every field after 1
and after 20 steps is the same bits on every rank count, and a one-rank run agrees with the
serial Simulation to the solver tolerance."""
import numpy as np
import pytest
from test_mpi import HERE, launch

RANKS = (1, 2, 4)
STEPS = 20
FIELDS = ("u", "v", "w", "p", "theta_prime", "q_v", "q_c", "q_r")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for k in RANKS:
        dst = tmp_path_factory.mktemp(f"step{k}") / "out.npz"
        proc = launch(k, str(HERE / "step_driver.py"), str(dst), str(STEPS), "amg",
                      timeout=300)
        assert proc.returncode == 0, f"mpiexec -n {k} failed:\n{proc.stdout}\n{proc.stderr}"
        out[k] = dict(np.load(dst))
    return out


@pytest.mark.parametrize("step", (1, STEPS))
@pytest.mark.parametrize("k", RANKS[1:])
def test_fields_after_1_and_20_steps_are_bitwise_equal_on_1_2_4_ranks(runs, k, step):
    for name in FIELDS:
        assert np.array_equal(runs[k][f"{name}_{step}"], runs[1][f"{name}_{step}"]), name
    for name in ("its_pressure", "its_momentum", "its_tracer", "max_abs_w",
                 "kinetic_energy", "max_abs_div_u"):
        assert np.array_equal(runs[k][name][:step], runs[1][name][:step]), name
    assert np.all(runs[k]["halo_values"] > 0)


def test_one_rank_agrees_with_the_serial_simulation(runs):
    """The serial Simulation (SciPy's CG with PyAMG's own cycle, SciPy's BiCGStab, rtol 1e-10)
    iterates differently from ours: its fields agree to the solver tolerance, not bitwise."""
    from step_driver import MESH, solvers

    import dycore
    cfg = dycore.load_config("configs/mountainwave3d_small.yaml", mesh=dict(MESH),
                             solvers=solvers("amg"))
    sim = dycore.Simulation(cfg)
    sim.run(steps=STEPS)
    ser = sim.host_fields()
    for name in ("u", "w", "p", "theta_prime"):
        got = runs[1][f"{name}_{STEPS}"]
        err = np.max(np.abs(got - ser[name])) / np.max(np.abs(ser[name]))
        assert err < 1e-9, (name, err)          # measured: <= 1.1e-13 (p)


def test_a_second_run_loads_every_ranks_piece_and_takes_the_same_steps(tmp_path, monkeypatch,
                                                                        runs):
    """2 CPU ranks with a set-up cache folder: the first run stores each rank's piece
    (``piece-rank<r>of2-...``, beside the rest of rank 0's set-up cache), the second loads
    them instead of partitioning and assembling — the files are not written again — and both
    take the steps of the run without a cache, bit for bit."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DYCORE_CACHE_DIR", str(cache))
    steps = 2
    for run in range(2):
        dst = tmp_path / f"run{run}.npz"
        proc = launch(2, str(HERE / "step_driver.py"), str(dst), str(steps), "amg", timeout=300)
        assert proc.returncode == 0, f"run {run}:\n{proc.stdout}\n{proc.stderr}"
        out = dict(np.load(dst))
        for step in range(1, steps + 1):
            for name in FIELDS:
                assert np.array_equal(out[f"{name}_{step}"], runs[2][f"{name}_{step}"]), (
                    run, step, name)
        files = sorted(cache.glob("*/piece-rank*of2-*.npz"))
        assert [f.name.split("-")[1] for f in files] == ["rank0of2", "rank1of2"]
        if run == 0:
            written = [f.stat().st_mtime_ns for f in files]
    assert [f.stat().st_mtime_ns for f in files] == written        # loaded, not rebuilt


def test_the_classical_global_vcycle_is_bitwise_on_1_and_2_ranks_and_differs(tmp_path):
    """``amg_coarsening: classical``: the distributed V-cycle of the Ruge-Stuben hierarchy
    gives 1 rank's fields bit for bit on 2 ranks, and is another preconditioner than the
    aggregation one: other pressure iterations (an 8 x 8 x 6 mesh, 567 nodes: above the
    coarsest size of 500, so both hierarchies have levels)."""
    out = {}
    for k, pc in ((1, "amg_classical"), (2, "amg_classical"), (1, "amg")):
        dst = tmp_path / f"{pc}{k}.npz"
        proc = launch(k, str(HERE / "step_driver.py"), str(dst), "2", pc, "8,8,6",
                      timeout=300)
        assert proc.returncode == 0, f"mpiexec -n {k} failed:\n{proc.stdout}\n{proc.stderr}"
        out[k, pc] = dict(np.load(dst))
    rs1, rs2, sa1 = out[1, "amg_classical"], out[2, "amg_classical"], out[1, "amg"]
    for step in (1, 2):
        for name in FIELDS:
            assert np.array_equal(rs2[f"{name}_{step}"], rs1[f"{name}_{step}"]), name
    assert np.array_equal(rs2["its_pressure"], rs1["its_pressure"])
    assert not np.array_equal(rs1["its_pressure"], sa1["its_pressure"]), (
        rs1["its_pressure"], sa1["its_pressure"])
    err = np.max(np.abs(rs1["p_2"] - sa1["p_2"])) / np.max(np.abs(sa1["p_2"]))
    assert err < 1e-8                       # the same solution to the solver tolerance
