"""Whole time steps on GPU ranks under the CUDA simulator (tests/parallel/gpu_step_driver.py
under ``mpiexec``, ``NUMBA_ENABLE_CUDASIM=1``, the staged MPI transport): the small
mountain-wave case on a 48-node mesh, 2 steps, deterministic assembly, strict floating point,
exact dot products, Jacobi CG for pressure, block-Jacobi / Jacobi BiCGStab.

- 2 and 4 GPU ranks give every field, diagnostic and iteration count of 1 GPU rank bit for
  bit (every owned operation is the serial one on any partition, every dot product is
  correctly rounded);
- the GPU ranks agree with the CPU ranks (DistributedSimulation, same configuration) to the
  solver tolerance, not bitwise: the device BiCGStab tests convergence in squares, inverts the
  3×3 blocks by cofactors (LAPACK on the CPU) and its kinetic energy is Σ (M_L·u)·u summed
  exactly (the CPU's Σ M_L·|u|² rounds |u|² first). Measured: ≤ 3e-13 relative (p).
- a run on one GPU without MPI with ``backend.reduction: exact`` (the GPU ranks' solvers over
  one rank, :mod:`dycore.parallel.one_gpu`) gives the fields and iteration counts of 2 and 4
  GPU ranks bit for bit;
- ``mpiexec -n 2 python -m dycore run CONFIG --backend gpu --solver-mode device`` writes the
  output file with the gathered fields of the same run, and a run restarted from its snapshot
  continues it bit for bit.
- pressure ``amg`` as the V-cycle of one global hierarchy gives the same bits on 1 and 2 GPU
  ranks;
- θ′ and q_v solved together (one solve of two right-hand sides) give the bits of solving
  each on its own;
- from the second step every Picard iteration is captured (one graph per rank, the solves'
  budgeted iterations inline, verified at the end of the step): the same bits as every step
  issued from Python with every solve checked (``backend.graphs: false``), and when the
  captured solves fall short of their tolerance (budgets cut to 3 iterations) the step is
  repeated with every solve checked — the same bits again — and captured anew after it.
"""
import numpy as np
import pytest
from test_mpi import HERE, launch

STEPS = 2
FIELDS = ("u", "v", "w", "p", "theta_prime", "q_v", "q_c", "q_r")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    # (backend, ranks, driver mode, steps): one rank with graphs and the cut budgets run a
    # third step (captured again after the repeated one)
    for backend, k, mode, steps in (("gpu", 1, "graphs", STEPS + 1), ("gpu", 2, "graphs", STEPS),
                                    ("gpu", 4, "graphs", STEPS), ("cpu", 2, "graphs", STEPS),
                                    ("gpu", 1, "nographs", STEPS), ("gpu", 2, "short", STEPS + 1),
                                    ("gpu", 2, "apart", STEPS), ("gpu", 1, "switch", STEPS + 1)):
        dst = tmp_path_factory.mktemp(f"{backend}{k}{mode}") / "out.npz"
        proc = launch(k, str(HERE / "gpu_step_driver.py"), str(dst), str(steps), backend,
                      mode, timeout=900)
        assert proc.returncode == 0, (f"mpiexec -n {k} ({backend}) failed:\n{proc.stdout}\n"
                                      f"{proc.stderr}")
        out[(backend, k) if mode == "graphs" else (backend, k, mode)] = dict(np.load(dst))
    return out


@pytest.fixture(scope="module")
def one_gpu_exact():
    """The serial device run (Simulation, no MPI) of the driver's configuration with
    ``backend.reduction: exact``: the fields after each step, iteration counts, max |w|,
    max |div u| (as the driver gathers them), and the systems' class."""
    import sys

    from gpu_step_driver import config

    from dycore.timestepping.simulation import Simulation
    cfg = config("gpu")
    cfg.backend.reduction = "exact"
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)          # the simulated blocks' barriers (as GpuRankSimulation)
    try:
        sim = Simulation(cfg)
        out = {"systems": type(sim.systems).__name__}
        for k in range(1, STEPS + 1):
            diag = sim.step()
            out.update({f"{name}_{k}": v for name, v in sim.output_fields().items()})
            for name in ("max_abs_w", "max_abs_div_u"):
                out.setdefault(name, []).append(diag[name])
            for name in ("pressure", "momentum", "tracer"):
                out.setdefault(f"its_{name}", []).append(diag[f"solver_iterations_{name}"])
    finally:
        sys.setswitchinterval(interval)
    return out


def _same_bits(a, b, steps):
    for step in range(1, steps + 1):
        for name in FIELDS:
            assert np.array_equal(a[f"{name}_{step}"], b[f"{name}_{step}"]), (name, step)
    for name in ("its_pressure", "its_momentum", "its_tracer", "max_abs_w", "kinetic_energy",
                 "max_abs_div_u"):
        assert np.array_equal(a[name][:steps], b[name][:steps]), name


def test_captured_picard_iterations_give_the_bits_of_the_uncaptured_step(runs):
    graphs, plain = runs[("gpu", 1)], runs[("gpu", 1, "nographs")]
    assert list(graphs["captured"]) == [0, 2, 2]     # step 1 checks; steps 2, 3 captured
    assert list(plain["captured"]) == [0, 0]
    _same_bits(graphs, plain, STEPS)


def test_a_captured_step_that_falls_short_is_repeated_with_every_solve_checked(runs):
    short, graphs = runs[("gpu", 2, "short")], runs[("gpu", 1)]
    # step 2: the 4-iteration budgets fall short (pressure needs > 100): repeated uncaptured,
    # the budgets learnt afresh; step 3 captured again
    assert list(short["captured"]) == [0, 0, 2]
    assert short["its_pressure"][1] > 100
    _same_bits(short, graphs, STEPS + 1)


@pytest.mark.parametrize("step", range(1, STEPS + 1))
@pytest.mark.parametrize("k", (2, 4))
def test_two_and_four_gpu_ranks_give_the_bits_of_one(runs, k, step):
    one, two = runs[("gpu", 1)], runs[("gpu", k)]
    for name in FIELDS:
        assert np.array_equal(two[f"{name}_{step}"], one[f"{name}_{step}"]), name
    for name in ("its_pressure", "its_momentum", "its_tracer", "max_abs_w", "kinetic_energy",
                 "max_abs_div_u"):
        assert np.array_equal(two[name][:step], one[name][:step]), name
    assert one["its_pressure"][step - 1] > 20 and one["its_momentum"][step - 1] >= 2


def test_tracers_solved_together_give_the_bits_of_their_own_solves(runs):
    """θ′ and q_v (one matrix) in one solve of two right-hand sides — one halo exchange and
    one reduction for both at each point — give every field and iteration count of solving
    each on its own, on 2 ranks, captured from the second step."""
    together, apart = runs[("gpu", 2)], runs[("gpu", 2, "apart")]
    assert "solve tracers" in together["stages"]
    assert "solve tracer theta_prime" not in together["stages"]
    assert {"solve tracer theta_prime", "solve tracer q_v"} <= set(apart["stages"])
    assert "solve tracers" not in apart["stages"]
    assert np.max(np.abs(together[f"q_v_{STEPS}"])) > 0       # q_v is solved, not skipped
    assert list(apart["captured"]) == list(together["captured"]) == [0, 2]
    _same_bits(together, apart, STEPS)


def test_switching_the_tracer_grouping_mid_run_runs_one_step_uncaptured(runs):
    """Solved together for two steps (the second captured), then apart: the third step is
    issued uncaptured (its solves learn their budgets for one right-hand side) with the bits
    of the run that stayed together."""
    switch, graphs = runs[("gpu", 1, "switch")], runs[("gpu", 1)]
    assert list(switch["captured"]) == [0, 2, 0]
    assert {"solve tracer theta_prime", "solve tracers"} <= set(switch["stages"])
    _same_bits(switch, graphs, STEPS + 1)


def test_gpu_ranks_agree_with_the_cpu_ranks(runs):
    gpu, cpu = runs[("gpu", 2)], runs[("cpu", 2)]
    for name in FIELDS:
        ref, got = cpu[f"{name}_{STEPS}"], gpu[f"{name}_{STEPS}"]
        scale = np.max(np.abs(ref))
        if scale == 0.0:
            assert np.array_equal(got, ref), name          # q_c, q_r stay exactly zero
            continue
        err = np.max(np.abs(got - ref)) / scale
        assert err < 1e-10, (name, err)
    for name in ("kinetic_energy", "max_abs_w", "max_abs_div_u"):
        assert np.allclose(gpu[name], cpu[name], rtol=1e-10, atol=0.0), name


def test_cli_run_on_two_gpu_ranks_writes_the_gathered_fields_and_restarts_bitwise(runs,
                                                                                  tmp_path):
    """The CLI's MPI branch builds GpuRankSimulation for ``--backend gpu --solver-mode
    device``: its snapshot after one step holds the driver's fields of step 1. A run restarted
    from that snapshot (``--restart FILE@dt``, a new process: its first step checked, not
    replayed) writes after its one step every field of the uninterrupted run's step 2 (the
    driver's, whose step 2 is a replayed capture), bit for bit."""
    import yaml
    from gpu_step_driver import config

    netcdf = pytest.importorskip("netCDF4")
    data = yaml.safe_load(config("gpu").resolved_yaml())
    dt = data["time"]["dt"]
    data["output"].update(path=str(tmp_path / "gpu2.nc"), progress=False, output_interval=dt)
    data["time"]["t_end"] = dt
    cfg = tmp_path / "gpu2.yaml"
    cfg.write_text(yaml.safe_dump(data))
    args = ("--backend", "gpu", "--solver-mode", "device")
    proc = launch(2, "-m", "dycore", "run", str(cfg), *args, timeout=900)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "on 2 MPI ranks" in proc.stdout
    with netcdf.Dataset(tmp_path / "gpu2.nc") as ds:
        assert np.asarray(ds.variables["time"][:]).tolist() == [0.0, dt]
        for name in ("u", "w", "p", "theta_prime"):
            got = np.asarray(ds.variables[name][-1])
            assert np.array_equal(got, runs[("gpu", 1)][f"{name}_1"]), name
    data["time"]["t_end"] = 2 * dt
    cfg.write_text(yaml.safe_dump(data))
    again = tmp_path / "restarted.nc"
    proc = launch(2, "-m", "dycore", "run", str(cfg), *args, "--restart",
                  f"{tmp_path / 'gpu2.nc'}@{dt:g}", "--output", str(again), timeout=900)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    with netcdf.Dataset(again) as ds:
        assert np.asarray(ds.variables["time"][:]).tolist() == [dt, 2 * dt]
        for name in FIELDS:
            got = np.asarray(ds.variables[name][-1])
            assert np.array_equal(got, runs[("gpu", 2)][f"{name}_2"]), name


def test_closing_gpu_ranks_drops_the_graphs_before_the_transport():
    """GpuRankSimulation.close: the objects holding CUDA graphs are released and collected, then
    every rank meets at a barrier, then the transport (NCCL's communicator) is closed — the
    order that lets ranks exit (NCCL's destruction waits for graphs that captured its
    operations); a second close does nothing; NcclTransport.close destroys its communicator
    once."""
    import types
    import weakref

    from dycore.parallel.gpu_simulation import GpuRankSimulation
    from dycore.parallel.nccl import NcclTransport

    events = []

    class Holder:                       # stands in for a stepper holding captured graphs
        pass

    stepper = Holder()
    stepper.graphs = types.SimpleNamespace(clear=lambda: events.append("iterations dropped"))
    weakref.finalize(stepper, events.append, "graphs released")
    systems = Holder()                  # (its solvers may be referenced elsewhere: a caller's
    systems.drop_graphs = lambda: events.append("solver graphs dropped")    # loop variable)
    sim = GpuRankSimulation.__new__(GpuRankSimulation)
    sim.backend = types.SimpleNamespace(synchronize=lambda: events.append("sync"), _ops=object())
    sim.comm = types.SimpleNamespace(Barrier=lambda: events.append("barrier"))
    sim.transport = types.SimpleNamespace(close=lambda: events.append("transport closed"))
    sim.stepper, sim.systems, sim.local_ops = stepper, systems, Holder()
    del stepper, systems
    sim.close()
    sim.close()
    assert events == ["sync", "solver graphs dropped", "iterations dropped", "graphs released",
                      "sync", "barrier", "transport closed"]
    assert sim.stepper is None and sim.systems is None and sim.backend._ops is None

    class Comm:
        destroyed = 0

        def destroy(self):
            Comm.destroyed += 1
    t = NcclTransport.__new__(NcclTransport)
    t.comm = Comm()
    t.close()
    t.close()
    assert Comm.destroyed == 1 and t.comm is None


def test_a_graph_still_referenced_at_close_is_named_before_the_communicator_waits(caplog):
    """close_after_graphs counts the captured graphs still alive after collection and warns
    (NCCL's destruction would wait for them); a solver's drop_graphs forgets its replay
    graphs and budget, so a solver kept by a caller holds none."""
    import logging
    import types

    from dycore.backend.graphs import Graph
    from dycore.parallel.device_replay import ReplayedSolve
    from dycore.parallel.nccl import captured_graphs_alive, close_after_graphs

    base = captured_graphs_alive()
    kept = Graph.__new__(Graph)
    kept.graph = object()               # stands in for a captured CUDA graph
    assert captured_graphs_alive() == base + 1
    closed = []
    backend = types.SimpleNamespace(synchronize=lambda: None)
    with caplog.at_level(logging.WARNING, logger="dycore"):
        close_after_graphs(backend, types.SimpleNamespace(close=lambda: closed.append(1)))
    assert closed == [1]
    assert f"{base + 1} CUDA graph(s)" in caplog.text and "still referenced" in caplog.text
    del kept
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dycore"):
        close_after_graphs(backend, types.SimpleNamespace(close=lambda: closed.append(2)))
    assert closed == [1, 2] and (base > 0 or "still referenced" not in caplog.text)

    solver = ReplayedSolve()
    solver._first, solver._more, solver.budget = object(), object(), 12
    solver.drop_graphs()
    assert solver._first is None and solver._more is None and solver.budget == 0


def test_the_transport_of_gpu_ranks_and_ranks_sharing_gpus(caplog):
    """auto: NCCL where CuPy has it and each rank has a GPU of its own, else the peer transport
    where the ranks allow it, else the staged MPI transport (with a warning when ranks share
    GPUs: NCCL cannot put two ranks of one communicator on one GPU); an explicit nccl or peer
    that cannot work is a ConfigError naming why."""
    from dycore.errors import ConfigError
    from dycore.parallel.gpu_simulation import transport_kind

    assert transport_kind("auto", simulator=False, nccl=True, shared=False) == "nccl"
    assert transport_kind("auto", simulator=True, nccl=False, shared=False) == "mpi"
    assert transport_kind("auto", simulator=False, nccl=False, shared=False) == "mpi"
    # no NCCL, but one host whose GPUs reach each other: the peer transport
    assert transport_kind("auto", simulator=False, nccl=False, shared=False,
                          peer=True) == "peer"
    assert transport_kind("auto", simulator=False, nccl=True, shared=False,
                          peer=True) == "nccl"
    # two ranks that allow it take the peer transport even with NCCL there; more keep NCCL
    assert transport_kind("auto", simulator=False, nccl=True, shared=False, peer=True,
                          ranks=2) == "peer"
    assert transport_kind("auto", simulator=False, nccl=True, shared=False, peer=True,
                          ranks=4) == "nccl"
    assert transport_kind("auto", simulator=False, nccl=True, shared=False, peer=False,
                          ranks=2) == "nccl"
    assert transport_kind("auto", simulator=True, nccl=False, shared=False, peer=True) == "mpi"
    assert not caplog.records
    assert transport_kind("auto", simulator=False, nccl=True, shared=True) == "mpi"
    assert "one rank per GPU" in caplog.text
    assert transport_kind("mpi", simulator=False, nccl=True, shared=True) == "mpi"
    assert transport_kind("nccl", simulator=False, nccl=True, shared=False) == "nccl"
    with pytest.raises(ConfigError, match="more MPI ranks than GPUs"):
        transport_kind("nccl", simulator=False, nccl=True, shared=True)
    with pytest.raises(ConfigError, match="no NCCL"):
        transport_kind("nccl", simulator=True, nccl=False, shared=False)
    assert transport_kind("peer", simulator=False, nccl=False, shared=False) == "peer"
    with pytest.raises(ConfigError, match="peer: needs GPUs"):
        transport_kind("peer", simulator=True, nccl=False, shared=False)
    with pytest.raises(ConfigError, match="peer: more MPI ranks than GPUs"):
        transport_kind("peer", simulator=False, nccl=True, shared=True)
    with pytest.raises(ValueError, match="'auto', 'nccl', 'peer' or 'mpi'"):
        transport_kind("ucx", simulator=False, nccl=True, shared=False)


@pytest.mark.parametrize("k", (2, 4))
def test_one_gpu_without_mpi_with_exact_dots_gives_the_bits_of_the_gpu_ranks(runs, one_gpu_exact,
                                                                             k):
    one, ranks = one_gpu_exact, runs[("gpu", k)]
    assert one["systems"] == "DeviceDistributedSystems"
    for step in range(1, STEPS + 1):
        for name in FIELDS:
            assert np.array_equal(one[f"{name}_{step}"], ranks[f"{name}_{step}"]), (name, step)
    for name in ("its_pressure", "its_momentum", "its_tracer", "max_abs_w", "max_abs_div_u"):
        assert np.array_equal(one[name], ranks[name][:STEPS]), name
    assert one["its_pressure"][0] > 20


def test_the_rank_local_amg_hierarchies_are_kept_in_the_set_up_cache(tmp_path, monkeypatch):
    """Pressure amg on 2 GPU ranks with a set-up cache folder: the first run stores each rank's
    hierarchy (``amg-rank<r>of2-...``, under the key of rank 0's set-up cache) and piece
    (``piece-rank<r>of2-...``), the second loads them — the files are not written again — and
    takes the same step bit for bit."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DYCORE_CACHE_DIR", str(cache))
    out = []
    for run in range(2):
        dst = tmp_path / f"run{run}.npz"
        proc = launch(2, str(HERE / "gpu_step_driver.py"), str(dst), "1", "gpu", "amg",
                      timeout=900)
        assert proc.returncode == 0, f"run {run}:\n{proc.stdout}\n{proc.stderr}"
        out.append(dict(np.load(dst)))
        files = sorted(cache.glob("*/amg-rank*of2-*.npz"))
        assert [f.name.split("-")[1] for f in files] == ["rank0of2", "rank1of2"]
        assert files[0].parent == files[1].parent            # one key: rank 0's cache
        files += sorted(cache.glob("*/piece-rank*of2-*.npz"))        # the ranks' pieces
        assert len(files) == 4 and files[2].parent == files[0].parent
        if run == 0:
            written = [f.stat().st_mtime_ns for f in files]
    assert [f.stat().st_mtime_ns for f in files] == written        # loaded, not rebuilt
    # rank 0's set-up split names the rank-local AMG's parts: built beside the GPU set-up
    # (CG is certain) and stored, then loaded
    for o in out:
        assert "rank-local AMG hierarchy started beside (the owned block)" in o["setup_phases"]
    parts = [[p.strip() for p in o["setup_phases"] if p.strip().startswith("pressure: ")]
             for o in out]
    waited = "pressure: waited for the hierarchy built beside"
    assert parts[0] == [waited, "pressure: matrix digest",
                        "pressure: looked up in the set-up cache", "pressure: PyAMG hierarchy",
                        "pressure: Chebyshev bounds and coarsest inverse",
                        "pressure: stored in the set-up cache", "pressure: V-cycle on the GPU"]
    assert parts[1] == [waited, "pressure: matrix digest",
                        "pressure: loaded from the set-up cache", "pressure: V-cycle on the GPU"]
    _same_bits(out[0], out[1], 1)
    assert out[0]["its_pressure"][0] > 0


def test_the_global_vcycle_gives_one_gpu_ranks_bits_on_two(tmp_path, monkeypatch):
    """Pressure amg as the V-cycle of ONE hierarchy of the whole matrix, distributed by rows
    (``GpuRankSimulation(global_amg=True)``): the 48-node matrix is below PyAMG's coarsest size,
    so the cycle is its pseudo-inverse applied to the all-gathered right-hand side — CG stops
    after one iteration per solve, and 2 GPU ranks give 1 GPU rank's step bit for bit (the
    rank-local hierarchies of 2 ranks are two block inverses: more iterations). A second run on
    2 ranks with the same set-up cache folder loads the global hierarchy (rank 0's
    ``amg-global-...``) and every rank's piece instead of building them — the files are not
    written again — and takes the same step. That second run and the 1-rank run leave the
    choice to GpuRankSimulation (``global_amg=None``): for this few rows it is the global
    V-cycle on any rank count."""
    out = {}
    for k, run in ((1, 1), (2, 1), (2, 2)):
        monkeypatch.setenv("DYCORE_CACHE_DIR", str(tmp_path / f"cache{k}"))
        dst = tmp_path / f"global{k}-{run}.npz"
        mode = "global_amg" if (k, run) == (2, 1) else "default_amg"
        proc = launch(k, str(HERE / "gpu_step_driver.py"), str(dst), "1", "gpu", mode,
                      timeout=900)
        assert proc.returncode == 0, f"{k} rank(s):\n{proc.stdout}\n{proc.stderr}"
        out[k, run] = dict(np.load(dst))
        assert str(out[k, run]["pressure_precond"]) == "global_amg"
        if k == 2:
            files = sorted(tmp_path.glob("cache2/*/amg-global-*.npz")) + sorted(
                tmp_path.glob("cache2/*/piece-rank*of2-*.npz"))
            assert len(files) == 3, files
            stamps = [f.stat().st_mtime_ns for f in files]
            if run == 1:
                written = stamps
    assert stamps == written                                  # loaded, not rebuilt
    _same_bits(out[1, 1], out[2, 1], 1)
    _same_bits(out[2, 1], out[2, 2], 1)
    picard = 2                                   # Picard iterations: one pressure solve each
    assert out[2, 1]["its_pressure"][0] == picard
