"""``dycore bench``: kernel launchers equal the fem functions, GPU == CPU, csr_find == lookup,
byte counts, and a CLI smoke run. No timing assertions."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import config as numba_config
from numba import cuda

from dycore.assembly.weak_forms import NGI, QUAD_N, QUAD_W
from dycore.errors import ConfigError
from dycore.assembly.sparsity import build_sparsity
from dycore.bench.assembly import csr_find, lookup_by_search, tracer_inputs
from dycore.bench.kernels import KERNELS, gpu_kernel, kernel_args, make_inputs
from dycore.bench.runner import parse_mesh, parse_sizes
from dycore.config import load_config
from dycore.fem import (
    EIG_JACOBI, dshape_tensor_dshape, get_edge_lengths, shape_dshape, shape_shape,
    transform_to_physical,
)

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "configs" / "mountainwave3d_small.yaml"
SIM = bool(numba_config.ENABLE_CUDASIM)
GPU_OK = SIM or cuda.is_available()
BY_NAME = {k.name: k for k in KERNELS}


@pytest.fixture(scope="module")
def mesh():
    """A 4x3x3-cell mountainwave3d mesh: 216 tetrahedra."""
    from dycore import cases

    cfg = load_config(SMALL, {"mesh": {"nx": 4, "ny": 3, "nz": 3}})
    m = cfg.mesh
    return cases.load_case(cfg.case.name).build_mesh(
        cfg.case.build_parameters(), nx=m.nx, ny=m.ny, nz=m.nz, dx_min=m.dx_min,
        dz_min=m.dz_min, renumber=m.renumber, shuffle=m.shuffle, seed=m.seed)


@pytest.fixture(scope="module")
def cpu_data(mesh):
    """Inputs and every CPU launcher's outputs."""
    d = make_inputs(mesh.tets, mesh.coords, seed=3)
    for k in KERNELS:
        k.cpu(*kernel_args(k, d))
    return d


@pytest.mark.slow
def test_cpu_launchers_equal_direct_fem_calls(mesh, cpu_data):
    d = cpu_data
    tets, coords, field_s = d["tets"], d["coords"], d["scalar"]
    for e in (0, 7, 101, mesh.nele - 1):
        nodes = tets[e]
        assert np.array_equal(d["ev_scalar"][e], field_s[nodes])
        assert np.array_equal(d["ev_vector"][e], d["vector"][nodes])
        assert np.array_equal(d["ev_tensor"][e], d["tensor_nodal"][nodes])
        X = np.ascontiguousarray(coords[nodes])
        ds, dw = np.empty((4, 3)), np.empty(NGI)
        transform_to_physical(X, QUAD_W.copy(), ds, dw)
        assert np.array_equal(d["dshape"][e], ds) and np.array_equal(d["detwei"][e], dw)
        sd = np.empty((3, 4, 4))
        shape_dshape(QUAD_N.copy(), ds, dw, sd)
        assert np.array_equal(d["out344"][e], sd)
        h = np.empty((3, 3))
        get_edge_lengths(X, np.empty((6, 6)), np.empty(6), np.empty(6), np.empty((3, 3)),
                         np.empty(3), np.empty((3, 3)), h, EIG_JACOBI)
        assert np.array_equal(d["hbar"][e], h)
    # out44 is shared by dshape_tensor_dshape and shape_shape: check each on its own
    for name, fn in (("dshape_tensor_dshape", dshape_tensor_dshape), ("shape_shape", shape_shape)):
        k = BY_NAME[name]
        k.cpu(*kernel_args(k, d))
        for e in (0, 55, mesh.nele - 1):
            out = np.empty((4, 4))
            if name == "shape_shape":
                fn(QUAD_N.copy(), d["detwei"][e].copy(), out)
            else:
                fn(d["dshape"][e].copy(), d["tensor_ele"][e].copy(), d["detwei"][e].copy(), out)
            assert np.array_equal(d["out44"][e], out), name


@pytest.mark.slow
def test_min_bytes_hand_count_and_argument_sizes(mesh, cpu_data):
    # ele_val_vector on 10 elements and 7 nodes: tets 10*4*4 + field 7*3*8 + out 10*4*3*8
    assert BY_NAME["ele_val_vector"].min_bytes(10, 7) == 160 + 168 + 960
    # get_edge_lengths: tets 10*16 + coords 7*24 + hbar 10*72
    assert BY_NAME["get_edge_lengths"].min_bytes(10, 7) == 160 + 168 + 720
    for k in KERNELS:   # each formula = every argument read or written exactly once
        assert k.min_bytes(mesh.nele, mesh.nnodes) == sum(
            a.nbytes for a in kernel_args(k, cpu_data)), k.name


@pytest.mark.gpu_sim
@pytest.mark.skipif(not GPU_OK, reason="needs the CUDA simulator or a GPU")
def test_gpu_launchers_equal_cpu(mesh, cpu_data):
    assert 200 <= mesh.nele <= 256
    block = 32
    grid = ((mesh.nele + block - 1) // block, block)
    for k in KERNELS:
        cpu_args = [a.copy() for a in kernel_args(k, cpu_data)]
        k.cpu(*cpu_args)
        dargs = [cuda.to_device(a if i < len(k.inputs) else np.full_like(a, np.nan))
                 for i, a in enumerate(cpu_args)]
        gpu_kernel(k)[grid](*dargs)
        cuda.synchronize()
        for i in range(len(k.inputs), len(dargs)):
            got, ref = dargs[i].copy_to_host(), cpu_args[i]
            if SIM:
                assert np.array_equal(got, ref), k.name
            else:   # FMA contraction on a real GPU
                np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())


@pytest.mark.slow
def test_csr_find_equals_lookup(mesh):
    sp = build_sparsity(mesh.tets, mesh.nnodes)
    assert np.array_equal(lookup_by_search(sp.indptr, sp.indices, mesh.tets), sp.lookup)
    row = 5
    absent = np.setdiff1d(np.arange(mesh.nnodes), sp.indices[sp.indptr[row]:sp.indptr[row + 1]])
    assert csr_find(sp.indptr, sp.indices, row, int(absent[0])) == -1


@pytest.mark.gpu_sim
@pytest.mark.skipif(not SIM, reason="runs the GPU assembly under the CUDA simulator")
def test_binary_search_assembly_equals_lookup_assembly(mesh):
    from dycore.backend.gpu import gpu_backend
    from dycore.backend.timers import StageTimers

    sp = build_sparsity(mesh.tets, mesh.nnodes)
    h = tracer_inputs(mesh.nnodes, seed=1)
    b = gpu_backend(solver_mode="host", assembly="atomic", block=32)
    asm = b.assembler(mesh, sp, StageTimers(b.marker))
    ref_v, ref_r = (np.array(a, copy=True) for a in asm.tracer(
        "t", h["u_nl"], h["c_old"], h["src"], h["sigma"], h["c_ref"], h["kdiag"], h["dt_theta"]))
    values, rhs = asm.tracer("t", h["u_nl"], h["c_old"], h["src"], h["sigma"], h["c_ref"],
                             h["kdiag"], h["dt_theta"], search=True)
    np.testing.assert_allclose(values, ref_v, rtol=1e-13, atol=1e-13 * np.abs(ref_v).max())
    np.testing.assert_allclose(rhs, ref_r, rtol=1e-13, atol=1e-13 * np.abs(ref_r).max())


def test_parse_sizes():
    assert parse_mesh("6,6,4") == (6, 6, 4)
    assert parse_sizes(["12x12x10", "24,24,20 4x4x3"]) == [(12, 12, 10), (24, 24, 20), (4, 4, 3)]
    with pytest.raises(Exception):
        parse_mesh("6,6")


@pytest.mark.slow
def test_cli_bench_smoke(tmp_path):
    out = tmp_path / "bench.json"
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-m", "dycore", "bench", str(SMALL), "--mesh", "4,4,3", "--repeat", "2",
         "--paths", "cpu", "--json", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    for name in ("kernels", "assembly", "steps", "scaling"):
        assert name in res and name in res["tables"], name
    assert set(res["kernels"]) == {k.name for k in KERNELS}
    assert "gpu" not in res["kernels"]["shape_shape"]          # no GPU columns on the CPU
    assert res["kernels"]["shape_shape"]["cpu_1_core_GB_per_s"] > 0
    assert "element kernels" in proc.stdout


def test_every_bench_loop_is_a_bench_kernel():
    """The kernel table and the loop table (dycore.bench.loops.BENCH) name the same loops, and
    each kernel's arguments are its loop's parameters."""
    from dycore.bench.kernels import kernel_names
    from dycore.bench.loops import BENCH

    assert kernel_names() == [loop.name for loop in BENCH.loops]
    assert BY_NAME["transform_to_physical"].inputs == ("tets", "coords", "weights")
    assert BY_NAME["transform_to_physical"].outputs == ("dshape", "detwei")
    assert BY_NAME["get_edge_lengths"].outputs == ("hbar",)


def test_bench_backend_flag_is_a_deprecated_paths(capsys):
    """`bench --backend` (which named code paths, unlike `run --backend`) is --paths now; the
    old flag still parses, says it is deprecated, and may not contradict --paths."""
    from dycore import cli

    status = cli.main(["bench", str(SMALL), "--paths", "gpu", "--backend", "cpu"])
    err = capsys.readouterr().err
    assert status != 0
    assert "--backend is deprecated here, use --paths" in err
    assert "--paths gpu and --backend cpu disagree" in err


def test_bench_run_part_splits_whole_runs(tmp_path, monkeypatch):
    """--parts run: one run per path into a temporary file; the parts add up to the total,
    the steps are the ones asked for, and no output file is left behind."""
    import tempfile

    from dycore.bench import run_bench
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    res = run_bench("configs/mountainwave3d_small.yaml", backend="cpu", steps=2, mesh=(3, 3, 2),
                    parts=["run"], echo=lambda *a: None, json_path=tmp_path / "b.json")
    r = res["run"]["cpu"]
    assert r["steps"] == 2 and r["first_step_s"] > 0 and r["step_ms"] > 0
    parts = r["setup_s"] + r["steps_s"] + r["output_s"]
    assert 0 < parts <= r["total_s"] and r["other_s"] == pytest.approx(r["total_s"] - parts)
    assert r["steps_s"] == pytest.approx(r["first_step_s"] + r["step_ms"] / 1e3, rel=1e-9)
    assert "run" in res["tables"] and "set-up s" in res["tables"]["run"]
    assert not list(tmp_path.rglob("*.nc"))
    with pytest.raises(ConfigError, match="unknown part 'runs'"):
        run_bench(None, backend="cpu", parts=["runs"], echo=lambda *a: None)


def test_gpu_machine_parts_under_the_simulator(tmp_path):
    """--parts operators,modes,device: every assembly operator on the CPU and the GPU code path
    (simulator: bitwise in deterministic mode, no FMA), the bitwise-mode table; the parts that
    need CuPy say why they are skipped."""
    from dycore.bench import run_bench
    from dycore.checks.operators import OPERATOR_LOOPS

    lines = []
    res = run_bench("configs/mountainwave3d_small.yaml", backend="gpu", repeat=1, steps=1,
                    mesh=(2, 2, 2), parts=["operators", "modes", "device"], block=32,
                    echo=lines.append)
    ops = res["operators"]
    assert sorted(ops) == sorted(["tracer t", "tracer t (rhs only)", "momentum",
                                  "divergence C", "stabilisation K_p", "lumped mass"])
    assert {k.split(" (")[0].replace("tracer t", "tracer") for k in ops} == set(OPERATOR_LOOPS)
    for label, row in ops.items():
        assert row["max_rel_diff_deterministic"] == 0.0, label
        assert row["max_rel_diff_atomic"] <= 1e-12, label
        assert "cpu_1_core" not in row                       # --paths gpu: no CPU columns
    assert set(res["modes"]) == {"atomic", "deterministic", "atomic + strict",
                                 "deterministic + strict"}
    assert res["modes"]["atomic"]["step"]["n"] == 1
    assert res["device"] == {"skipped": "device solvers need CuPy (not under the simulator)"}
    assert any("bench part device: skipped" in line for line in lines)
    assert "operators" in res["tables"] and "modes" in res["tables"]


def test_time_gpu_records_its_events_on_the_stream_the_work_runs_on(monkeypatch):
    """A backend issues on its own non-blocking stream: events on the default stream would not
    wait for its kernels (they timed the launches). Fake events show where they are recorded."""
    from dycore.bench.timing import time_gpu

    recorded, calls = [], []

    class Event:
        def __init__(self, timing=True):
            self.t = None

        def record(self, stream=0):
            recorded.append(stream)
            self.t = float(len(calls))           # "time" = the calls issued so far

        def synchronize(self):
            pass

    monkeypatch.setattr(numba_config, "ENABLE_CUDASIM", False)
    monkeypatch.setattr(cuda, "event", Event, raising=False)
    monkeypatch.setattr(cuda, "event_elapsed_time", lambda a, b: b.t - a.t, raising=False)
    monkeypatch.setattr(cuda, "synchronize", lambda: None, raising=False)
    side = object()                               # a backend's nb_stream
    out = time_gpu(lambda: calls.append(1), repeat=3, warmup=1, stream=side)
    assert recorded == [side] * 6                 # start and stop of each of the 3 timings
    assert out["n"] == 3 and out["median_ms"] == 1.0
    recorded.clear()
    time_gpu(lambda: calls.append(1), repeat=2, warmup=0)
    assert recorded == [0] * 4                    # default: the legacy default stream


@pytest.mark.gpu_sim
@pytest.mark.skipif(not SIM, reason="replays a graph under the CUDA simulator")
def test_time_graph_us_replays_one_graph_of_repeat_calls():
    """``repeat`` calls in one graph, one warm-up replay and ``replays`` timed ones (the
    simulator re-issues a graph's calls at each replay); µs per call from the markers."""
    from dycore.backend.gpu import gpu_backend
    from dycore.bench.timing import time_graph_us

    b = gpu_backend(solver_mode="device")
    calls = []
    before = b.counters.graph_replays
    us = time_graph_us(b, lambda: calls.append(1), repeat=3, replays=4)
    assert len(calls) == 3 * (1 + 4)
    assert b.counters.graph_replays - before == 1 + 4
    assert isinstance(us, float) and us >= 0.0
