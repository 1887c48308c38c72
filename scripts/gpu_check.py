#!/usr/bin/env python3
"""The one GPU-machine script: CPU-vs-GPU equality and timings of every kernel and of the step.

Run on the H200 (see scripts/gpu_check.sh, which prepares the offline environment first):

    python3 scripts/gpu_check.py [--config configs/mountainwave3d.yaml] [--parts kernels,steps,compare]

Parts
-----
kernels : every assembly kernel (tracer, momentum, C, K_p, lumped mass) on the configured mesh:
          GPU atomic and deterministic (CUDA events, warm-up excluded, median and min–max of N),
          the @njit path on 1 core and on all cores (perf_counter, median of N), and the largest
          CPU-vs-GPU difference of each assembled matrix / rhs.
steps   : per-step time of the whole Picard step: GPU + device solvers, GPU + host solvers,
          CPU all cores (and one CPU step on 1 core), with the stage tables.
compare : N steps on the CPU and on the GPU in host-solver mode from the same initial state;
          the largest |Δ| of w and θ' (and every field) after N steps.
modes   : the cost of deterministic assembly and strict FP: every assembly kernel and the
          device-solver step in the four combinations.
solver_ab : the device step and pressure solve with fused / separate finishes and grouped /
          one-thread rows, in one process.
pressure_profile : microseconds per piece of a pressure CG iteration and per no-op kernel.
libm    : strict mode (fma=0) per operation (acos, cos, sqrt, mul+add) and for both eig3
          solvers, GPU against CPU: differing entries and ulp distance.
restart : bitwise restart on the GPU (deterministic assembly + strict FP, device and host
          solvers): --restart-steps N steps in one `dycore run`, against N/2 steps + a restart
          from the output file + N/2, and against a restart from the checkpoint written at N/2;
          every field of the last snapshot and every per-step diagnostic compared bit for bit.

Everything printed is also written to $OUT (or ./gpu_out) as gpu_check.json and gpu_check.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dycore.backend._numpy_compat  # noqa: E402,F401  (before the first kernel compile)
from dycore.checks.common import compare_arrays, random_fields, with_backend  # noqa: E402
from dycore.bench.timing import copy_bandwidth, stats, time_cpu, time_gpu  # noqa: E402,F401
from numba import cuda  # noqa: E402

LOG: list[str] = []
LOG_FILE: Path | None = None   #: $OUT/gpu_check.txt, appended line by line (a time-out keeps it)


def say(msg: str = "") -> None:
    print(msg, flush=True)
    LOG.append(msg)
    if LOG_FILE is not None:
        with LOG_FILE.open("a") as f:
            f.write(msg + "\n")


def machine_info() -> dict:
    from numba import cuda
    import numba
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "cpu_cores": os.cpu_count()}
    try:
        import cupy
        info["cupy"] = cupy.__version__
    except ImportError:
        pass
    dev = cuda.get_current_device()
    name = getattr(dev, "name", "CUDA simulator")
    name = name.decode() if isinstance(name, bytes) else str(name)
    info["gpu"] = name
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as exc:  # noqa: BLE001
        info["nvidia_smi"] = f"unavailable: {exc}"
    return info


def part_kernels(cfg, repeat: int, results: dict) -> None:
    import numba
    from numba import cuda
    from dycore.assembly.sparsity import build_sparsity
    from dycore.backend.cpu import CPUBackend
    from dycore.backend.gpu import GPUBackend
    from dycore.backend.timers import StageTimers
    from dycore import cases

    mesh = cases.build_config_mesh(cfg)
    sp_ = build_sparsity(mesh.tets, mesh.nnodes)
    say(f"mesh: {mesh.nnodes} nodes, {mesh.nele} tetrahedra, {sp_.nnz} nonzeros")
    results["mesh"] = {"nodes": mesh.nnodes, "tets": mesh.nele, "nnz": sp_.nnz}
    cpu = CPUBackend()
    nthreads = numba.get_num_threads()
    ca = cpu.assembler(mesh, sp_, StageTimers())
    gb = {mode: GPUBackend(assembly=mode) for mode in ("atomic", "deterministic")}
    ga = {mode: b.assembler(mesh, sp_, StageTimers()) for mode, b in gb.items()}
    host = random_fields(mesh.nnodes)
    dev = {k: gb["atomic"].to_device(v) for k, v in host.items()}

    def ops(asm, d):
        return {
            "tracer matrix+rhs": lambda: asm.tracer("t", d["u_nl"], d["c_old"], d["src"],
                                                   d["sigma"], d["c_ref"], (5.0, 5.0, 1.0), 5.0),
            "tracer rhs only": lambda: asm.tracer("t", d["u_nl"], d["c_old"], d["src"],
                                                 d["sigma"], d["c_ref"], (5.0, 5.0, 1.0), 5.0,
                                                 want_matrix=False),
            "momentum (BCSR) matrix+rhs": lambda: asm.momentum(
                d["u_nl"], d["u_old"], d["buoy"], d["p"], d["sigma"], (10.0, 0.0, 0.0),
                (5.0, 5.0, 1.0), 1e-4, 5.0),
            "divergence C": lambda: asm.divergence(),
            "stabilisation K_p (get_edge_lengths)": lambda: asm.stabilisation(),
            "lumped mass": lambda: asm.lumped_mass(),
        }

    table = {}
    for name in ops(ca, host):
        row = {}
        ref = ops(ca, host)[name]()
        ref = [np.array(r, copy=True) for r in ref if r is not None]
        row["cpu_all_cores"] = time_cpu(ops(ca, host)[name], max(3, repeat // 4))
        numba.set_num_threads(1)
        row["cpu_1_core"] = time_cpu(ops(ca, host)[name], 3)
        numba.set_num_threads(nthreads)
        for mode, asm in ga.items():
            f = ops(asm, dev)[name]
            row[f"gpu_{mode}"] = time_gpu(f, repeat)
            got = [gb[mode].to_host(r) for r in f() if r is not None]
            cuda.synchronize()
            row[f"diff_{mode}"] = [compare_arrays(r, g) for r, g in zip(ref, got)]
        row["speedup_vs_1_core"] = row["cpu_1_core"]["median_ms"] / row["gpu_atomic"]["median_ms"]
        row["speedup_vs_all_cores"] = (row["cpu_all_cores"]["median_ms"]
                                       / row["gpu_atomic"]["median_ms"])
        table[name] = row
        say(f"{name:38s} GPU atomic {row['gpu_atomic']['median_ms']:8.3f} ms "
            f"[{row['gpu_atomic']['min_ms']:.3f}-{row['gpu_atomic']['max_ms']:.3f}]  "
            f"det {row['gpu_deterministic']['median_ms']:8.3f} ms  "
            f"CPU 1c {row['cpu_1_core']['median_ms']:9.2f} ms  "
            f"{nthreads}c {row['cpu_all_cores']['median_ms']:8.2f} ms  "
            f"x{row['speedup_vs_1_core']:.0f} / x{row['speedup_vs_all_cores']:.1f}  "
            f"maxdiff atomic {max(d['max_rel'] for d in row['diff_atomic']):.2e} "
            f"det {max(d['max_rel'] for d in row['diff_deterministic']):.2e}")
    results["kernels"] = table
    results["cpu_threads"] = nthreads
    _kernel_resources_and_block_sweep(gb["atomic"], ops, dev, mesh, sp_, repeat, results)


def _kernel_resources_and_block_sweep(backend, ops, dev, mesh, sp_, repeat, results) -> None:
    """Registers / local bytes per thread of each production kernel, and the atomic tracer and
    momentum assembly at 32..512 threads per block: the evidence for what limits them."""
    from dycore.backend.gpu import GPUBackend
    from dycore.bench.timing import kernel_resources
    from dycore.backend.timers import StageTimers
    res = {}
    for name in ("tracer", "momentum", "divergence", "stabilisation", "lumped_mass",
                 "gather_blocks"):
        res[name] = kernel_resources(getattr(backend.kernels, name))
        say(f"kernel {name:14s} resources: {res[name]}")
    results["kernel_resources"] = res
    sweep = {}
    for block in (32, 64, 128, 256):        # 512 x 168 registers > 64K per block: no launch
        b = GPUBackend(assembly="atomic", block=block)
        o = ops(b.assembler(mesh, sp_, StageTimers()), dev)
        sweep[block] = {k: time_gpu(o[k], repeat) for k in
                        ("tracer matrix+rhs", "momentum (BCSR) matrix+rhs")}
        say(f"block {block:3d}: " + "  ".join(f"{k} {v['median_ms']:.3f} ms"
                                               for k, v in sweep[block].items()))
    results["block_sweep"] = sweep


def part_modes(cfg, repeat: int, nsteps: int, results: dict) -> None:
    """The cost of the bitwise modes: every assembly kernel and the device-solver step in
    atomic / deterministic assembly, each with and without strict FP (fma=0, no LTO)."""
    from dycore import cases
    from dycore.assembly.sparsity import build_sparsity
    from dycore.backend.gpu import GPUBackend
    from dycore.backend.timers import StageTimers
    mesh = cases.build_config_mesh(cfg)
    sp_ = build_sparsity(mesh.tets, mesh.nnodes)
    n = mesh.nnodes
    out = {}
    for assembly in ("atomic", "deterministic"):
        for strict in (False, True):
            label = f"{assembly}{' + strict' if strict else ''}"
            b = GPUBackend(assembly=assembly, strict=strict)
            asm = b.assembler(mesh, sp_, StageTimers())
            d = {k: b.to_device(v) for k, v in random_fields(n).items()}
            calls = {
                "tracer": lambda: asm.tracer("t", d["u_nl"], d["c_old"], d["src"], d["sigma"],
                                             d["c_ref"], (5.0, 5.0, 1.0), 5.0),
                "momentum": lambda: asm.momentum(d["u_nl"], d["u_old"], d["buoy"], d["p"],
                                                 d["sigma"], (10.0, 0.0, 0.0), (5.0, 5.0, 1.0),
                                                 1e-4, 5.0),
                "divergence C": asm.divergence, "K_p": asm.stabilisation,
                "lumped mass": asm.lumped_mass}
            row = {k: time_gpu(f, repeat) for k, f in calls.items()}
            mode = "host" if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" else "device"
            st = _run_steps(cfg, nsteps, {"name": "gpu", "solver_mode": mode,
                                             "assembly": assembly, "strict": strict},
                               f"step, {mode} solvers, {label}")
            row["step"] = st["step"]
            out[label] = row
            say(f"{label:26s} " + "  ".join(f"{k} {v['median_ms']:.3f}" for k, v in row.items())
                + "  [ms, median]")
    results["modes"] = out


def _run_steps(cfg, nsteps: int, backend_over: dict, label: str) -> dict:
    """Build, warm up and time ``nsteps - 1`` steps of ``cfg`` with backend overrides
    (:func:`dycore.bench.steps.run_variant`, the one build/warm-up/time helper)."""
    from dycore.bench.steps import run_variant
    r = run_variant(lambda over: with_backend(cfg, **over), label, backend_over, 0,
                    max(1, nsteps - 1))
    st, d = r["step"], r["last_diagnostics"]
    say(f"{label:34s} build {r['build_s']:6.1f} s, step median {st['median_ms']:9.1f} ms "
        f"[{st['min_ms']:.1f}-{st['max_ms']:.1f}] over {st['n']} steps after warm-up; "
        f"max|w| {d['max_abs_w']:.4f} iters {d['solver_iterations_pressure']}/"
        f"{d['solver_iterations_momentum']}/{d['solver_iterations_tracer']}")
    return r


def part_steps(cfg, nsteps: int, results: dict) -> None:
    import numba
    out = {}
    variants = [("gpu + device solvers (atomic)", {"name": "gpu", "solver_mode": "device",
                                                   "assembly": "atomic"}),
                ("gpu + host solvers (atomic)", {"name": "gpu", "solver_mode": "host",
                                                 "assembly": "atomic"})]
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        variants = variants[1:]                      # the simulator has no CuPy
    for label, over in variants:
        out[label] = _run_steps(cfg, nsteps, over, label)
    nthreads = numba.get_num_threads()
    out[f"cpu {nthreads} cores"] = _run_steps(cfg, max(3, nsteps // 4), {"name": "cpu"},
                                                 f"cpu {nthreads} cores")
    numba.set_num_threads(1)
    out["cpu 1 core"] = _run_steps(cfg, 2, {"name": "cpu", "threads": 1}, "cpu 1 core")
    numba.set_num_threads(nthreads)
    for k, v in out.items():
        say(v["table"])
    results["steps"] = out


def part_device(cfg, nsteps: int, results: dict) -> None:
    """The device-solver step: wall time per step, what each step issues (kernel launches from
    Python, graph replays and the kernels they ran, host syncs, CuPy allocations, counted by the
    backend), iterations per solve, the stage table; then the fields after the same steps against
    the host-solver path (SciPy/PyAMG) from the same initial state, in this process."""
    from dycore.timestepping.simulation import build_simulation
    sims = {}
    for label, over in (("device", {"name": "gpu", "solver_mode": "device", "assembly": "atomic"}),
                        ("host", {"name": "gpu", "solver_mode": "host", "assembly": "atomic"})):
        c = with_backend(cfg, **over)
        t0 = time.perf_counter()
        sims[label] = build_simulation(c)
        say(f"{label}: build {time.perf_counter() - t0:.1f} s")
    sim = sims["device"]
    b = sim.backend
    t0 = time.perf_counter()
    for _ in range(2):
        d = sim.step()
    say(f"device: 2 warm-up steps {time.perf_counter() - t0:.1f} s "
        f"(iterations p/m/t {d['solver_iterations_pressure']}/"
        f"{d['solver_iterations_momentum']}/{d['solver_iterations_tracer']})")
    sim.timers.reset()
    rows = []
    for k in range(nsteps):
        c0 = b.counters.snapshot()
        t0 = time.perf_counter()
        d = sim.step()
        ms = (time.perf_counter() - t0) * 1e3
        c1 = b.counters.snapshot()
        row = {"ms": ms, **{f: c1[f] - c0[f] for f in c0},
               **{f"its_{s}": d[f"solver_iterations_{s}"] for s in ("pressure", "momentum",
                                                                     "tracer")}}
        rows.append(row)
    med = {f: statistics.median(r[f] for r in rows) for f in rows[0]}
    say(f"device step: median {med['ms']:.2f} ms [{min(r['ms'] for r in rows):.2f}-"
        f"{max(r['ms'] for r in rows):.2f}] over {nsteps} steps after 2 warm-up (host clock "
        f"around step() + synchronize)")
    say("per step (median): " + ", ".join(f"{k} {v:g}" for k, v in med.items() if k != "ms"))
    say(sim.timers.table("device-solver step: stage timers (CUDA events)"))
    results["device"] = {"rows": rows, "median": med, "table": sim.timers.table()}
    # the same number of steps on the host-solver path, then the fields side by side
    host = sims["host"]
    for _ in range(nsteps + 2):
        dh = host.step()
    fd, fh = sim.host_fields(), host.host_fields()
    diffs = {f: compare_arrays(fh[f], fd[f]) for f in fd}
    say(f"device vs host solvers after {nsteps + 2} steps (max|diff|/max|host|): " +
        "  ".join(f"{f} {v['max_rel']:.2e}" for f, v in diffs.items()))
    say(f"host iterations last step p/m/t {dh['solver_iterations_pressure']}/"
        f"{dh['solver_iterations_momentum']}/{dh['solver_iterations_tracer']}")
    results["device"]["vs_host"] = diffs
    # where the GPU time goes: the same steps with each solve replayed as its own graph and
    # the assembly launched from Python, so that the CUDA-event stage timers split the step
    sim.stepper.capture_iterations = False
    for _ in range(2):
        sim.step()
    sim.timers.reset()
    b.synchronize()
    t0 = time.perf_counter()
    for _ in range(nsteps):
        sim.step()
    b.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / nsteps
    say(f"device step with per-solve graphs (profiling layout): {ms:.2f} ms mean over {nsteps}")
    say(sim.timers.table("per-solve graphs: stage timers (CUDA events around each stage)"))
    results["device"]["per_stage_table"] = sim.timers.table()


def part_solver_ab(cfg, nsteps: int, results: dict) -> None:
    """A/B of the solver-kernel choices in this process: the device step and its pressure solve
    with the finishes fused (default) or launched separately, and with rows summed by thread
    groups (default) or one thread per row. Step: host clock around step() (which ends with a
    host read), median of ``nsteps`` after 2 warm-up steps; pressure: CUDA events around each
    solve's graph replay (per-solve-graph layout), mean over ``nsteps`` steps."""
    from dycore.solvers.krylov import DeviceLinalg
    from dycore.timestepping.simulation import build_simulation
    variants = (("fused finish, grouped rows", True, None),
                ("separate finish, grouped rows", False, None),
                ("fused finish, one thread per row", True, 1))
    out = {}
    c = with_backend(cfg, name="gpu", solver_mode="device", assembly="atomic")
    for label, fuse, group in variants:
        DeviceLinalg.FUSE, DeviceLinalg.DEFAULT_MAX_GROUP = fuse, group
        try:
            sim = build_simulation(c)
        finally:
            DeviceLinalg.FUSE, DeviceLinalg.DEFAULT_MAX_GROUP = True, None
        for _ in range(2):
            sim.step()
        times, kernels = [], []
        for _ in range(nsteps):
            k0 = sim.backend.counters.graph_kernels
            t0 = time.perf_counter()
            sim.step()
            times.append((time.perf_counter() - t0) * 1e3)
            kernels.append(sim.backend.counters.graph_kernels - k0)
        sim.stepper.capture_iterations = False
        sim.step()
        sim.timers.reset()
        for _ in range(nsteps):
            sim.step()
        p_ms = sim.timers.as_dict()["solve pressure"]["mean_ms"]
        out[label] = {"step_ms": statistics.median(times), "min": min(times), "max": max(times),
                      "graph_kernels": statistics.median(kernels), "pressure_ms": p_ms}
        say(f"A/B {label}: step {out[label]['step_ms']:.2f} ms [{min(times):.2f}-"
            f"{max(times):.2f}], {out[label]['graph_kernels']:g} graph kernels per step, "
            f"pressure solve {p_ms:.2f} ms")
        del sim
    results["solver_ab"] = out


def part_pressure_profile(cfg, nsteps: int, results: dict) -> None:
    """Where a pressure CG iteration spends its time: each piece (fine-level SpMV, with dot
    partials and fused finish, the vector update, one whole V-cycle, one smoothing step per
    level) captured 20 times in a CUDA graph and replayed; CUDA events on the backend's stream,
    median of 10 replays after 3, divided by 20. The same V-cycle graph with the solve marked
    finished gives the cost of a no-op kernel (what a replayed budget past convergence costs)."""
    from dycore.backend import solver_kernels as K
    from dycore.timestepping.simulation import build_simulation
    c = with_backend(cfg, name="gpu", solver_mode="device", assembly="atomic")
    sim = build_simulation(c)
    for _ in range(2):
        sim.step()
    b, sysm = sim.backend, sim.systems
    la, pcg = sysm.la, sysm.pcg
    m = pcg.m
    xp = b.xp
    running_arr, done_arr = xp.zeros(K.NCTL), xp.zeros(K.NCTL)
    done_arr[K.DONE] = K.CONVERGED
    running, done = la.nb(running_arr), la.nb(done_arr)
    reps = 20

    def timed(piece, ctl):
        running_arr[...] = 0.0                  # every piece starts from a running solve
        done_arr[K.DONE] = K.CONVERGED
        g = b.capture(lambda: [piece(ctl) for _ in range(reps)])
        for _ in range(3):
            g.replay()
        times = []
        for _ in range(10):
            e0, e1 = cuda.event(), cuda.event()
            e0.record(b.nb_stream)
            g.replay()
            e1.record(b.nb_stream)
            e1.synchronize()
            times.append(e0.elapsed_time(e1) * 1e3 / reps)
        return statistics.median(times), g.kernels // reps

    pieces = [(f"fine SpMV, {pcg.a.nrow} rows, g={pcg.a.g}",
               lambda ctl: la.spmv(pcg.a, pcg.p, pcg.q, ctl=ctl)),
              ("fine SpMV + p·q partials + fused finish",
               lambda ctl: la.spmv(pcg.a, pcg.p, pcg.q, w=pcg.p, partial=pcg.partial, ctl=ctl,
                                   op=K.OP_STORE, slot=K.RR)),
              # partials only: a finish here would write ctl slot 0 (DONE) and stop the rest
              ("update_xr (x += a p, r -= a q, r·r partials)",
               lambda ctl: la.launch(la.k.update_xr, pcg.n, pcg.x, pcg.r, pcg.p, pcg.q, K.RR,
                                     la.empty_f, 0, pcg.partial, -1, ctl, la.ticket)),
              ("whole V-cycle", lambda ctl: m.issue(pcg.r, pcg.partial, ctl, -1))]
    for lev_i, lev in enumerate(getattr(m, "levels", [])):
        a = lev["A"]
        pieces.append((f"level {lev_i} smoothing step with SpMV ({a.nrow} rows, "
                       f"{int(a.indices.shape[0]) / a.nrow:.0f} nnz/row, g={a.g})",
                       lambda ctl, lev=lev, a=a: la.launch(
                           la.k.smooth, lev["n"] * a.g, a.indptr, a.indices, a.data, a.g,
                           lev["bufs"][0], lev["b"], lev["dinv"], lev["d"], lev["bufs"][1],
                           0.5, 0.5, 0, 0, la.no_partial, -1, 0, ctl, la.ticket)))
    out = {}
    for label, piece in pieces:
        us, nk = timed(piece, running)
        out[label] = {"us": us, "kernels": nk}
        say(f"pressure profile: {label}: {us:.1f} us ({nk} kernel{'s' if nk > 1 else ''})")
    us, nk = timed(pieces[3][1], done)
    out["no-op V-cycle"] = {"us": us, "kernels": nk}
    say(f"pressure profile: V-cycle with the solve finished (no-op kernels): {us:.1f} us for "
        f"{nk} kernels = {us / max(nk, 1):.2f} us per no-op kernel")
    results["pressure_profile"] = out


def part_compare(cfg, nsteps: int, results: dict) -> None:
    """CPU and GPU (host-solver mode) stepped in lockstep from the same initial state.

    Both simulations live in this process (no CPU contention between two runs); the fields are
    compared every 5 steps and each comparison is printed at once, so a time-out keeps them.
    """
    from dycore.timestepping.simulation import build_simulation
    sims = {}
    for label, over in (("cpu", {"name": "cpu"}),
                        ("gpu", {"name": "gpu", "solver_mode": "host", "assembly": "atomic"})):
        c = with_backend(cfg, **over)
        sims[label] = build_simulation(c)
    say(f"compare: pressure rtol {cfg.solvers.pressure.rtol:g} (same on both sides)")
    t0 = time.perf_counter()
    rows = []
    for k in range(1, nsteps + 1):
        for s in sims.values():
            s.step()
        if k % 5 == 0 or k == nsteps:
            fc, fg = sims["cpu"].host_fields(), sims["gpu"].host_fields()
            diffs = {f: compare_arrays(fc[f], fg[f]) for f in fc}
            rows.append({"step": k, "t": sims["cpu"].state.t, "diffs": diffs})
            say(f"step {k:3d} t = {sims['cpu'].state.t:6.0f} s ({time.perf_counter() - t0:5.0f} s): "
                + "  ".join(f"{f} {d['max_abs']:.2e}" for f, d in diffs.items()))
            results["compare"] = {"rows": rows}


def part_libm(results: dict) -> None:
    """Strict mode (no FMA) on the GPU against the CPU, per operation and for both eig3 solvers.

    +, *, / and sqrt are correctly rounded on both sides, so with FMA off they must agree bit
    for bit; acos and cos are not: CUDA's libdevice and the CPU's libm are different
    approximations (each within a few ulp), which no compiler option can reconcile."""
    from dycore.backend.gpu_kernels import kernel_compiler
    from dycore.checks import strict_cpu_loops_gen, strict_gpu_loops_gen
    rng = np.random.default_rng(0)
    small = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"      # the simulator is slow
    n = 1 << (10 if small else 20)
    x = rng.uniform(-1.0, 1.0, n)
    out, ref = np.zeros((n, 4)), np.zeros((n, 4))
    strict = kernel_compiler(True)
    strict(strict_gpu_loops_gen.KERNELS["libm_point"])[(n + 255) // 256, 256](x, out)
    strict_cpu_loops_gen.DRIVERS["libm_point"](x, ref)
    row = {name: compare_arrays(ref[:, j], out[:, j])
           for j, name in enumerate(("acos", "cos", "sqrt", "v*1.25 + 0.5*v"))}
    m = rng.standard_normal((1 << (8 if small else 16), 3, 3))
    a = np.einsum("kij,klj->kil", m, m) + 0.1 * np.eye(3)      # SPD, like the metric tensor
    kern = strict(strict_gpu_loops_gen.KERNELS["eig3_point"])
    for method, name in ((0, "eig3 jacobi"), (1, "eig3 closed form")):
        ev, vec = np.zeros((a.shape[0], 3)), np.zeros((a.shape[0], 3, 3))
        kern[(a.shape[0] + 127) // 128, 128](a, method, ev, vec)
        evr, vecr = np.zeros_like(ev), np.zeros_like(vec)
        strict_cpu_loops_gen.DRIVERS["eig3_point"](a, method, evr, vecr)
        row[name + " eigenvalues"] = compare_arrays(evr, ev)
        row[name + " eigenvectors"] = compare_arrays(vecr, vec)
    for name, r in row.items():
        say(f"strict GPU vs CPU {name:31s}: {r['n_differ']:8d} of {r['entries']} differ, "
            f"max ulp {r['max_ulp']}, max rel {r['max_rel']:.2e}")
    results["libm"] = row


def _restart_config(cfg, mode: str, nsteps: int, path: Path):
    """``cfg`` on the GPU in bitwise mode (deterministic assembly, strict FP, solver ``mode``),
    ``nsteps`` steps, a snapshot and a checkpoint every ``nsteps // 2`` steps, output ``path``."""
    from dycore.config import Config
    data = with_backend(cfg, name="gpu", solver_mode=mode, assembly="deterministic",
                        strict=True).model_dump()
    every = (nsteps // 2) * data["time"]["dt"]
    data["time"]["t_end"] = nsteps * data["time"]["dt"]
    data["output"].update(path=str(path), output_interval=every, checkpoint_interval=every,
                          formats=["netcdf"], progress=False)
    return Config.model_validate(data)


def _last_record(path: Path, after_step: int) -> dict:
    """The last snapshot's fields and time, and every per-step variable after ``after_step``,
    of an output file (numpy arrays, as stored)."""
    import netCDF4
    from dycore.io.netcdf import FIELDS
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        times = np.asarray(ds["time"][:])
        last = int(np.flatnonzero(np.isfinite(times))[-1])
        out = {"time": times[last:last + 1], "snapshot_step": np.asarray(ds["snapshot_step"][:])}
        out.update({name: np.asarray(ds[name][last]) for name in FIELDS})
        steps = np.asarray(ds["step"][:])
        rows = steps > after_step
        for name, var in ds.variables.items():
            if var.dimensions[:1] == ("step",):
                out[f"step:{name}"] = np.asarray(var[:])[rows]
    return out


def part_restart(cfg, nsteps: int, results: dict, folder: Path, modes=("device", "host")) -> None:
    """GPU bitwise restart (docs/output.md, "Restart"): for each solver mode, ``nsteps`` steps in
    one run; nsteps // 2 steps, then ``--restart`` from that output file (appending) to the end;
    and a restart from the checkpoint written at nsteps // 2 into a new file. Reports, per mode,
    whether the last snapshot (time, every field) and every per-step diagnostic after the restart
    are bitwise equal to the uninterrupted run, and the largest |difference| of each field."""
    import shutil
    from dycore.io.restart import checkpoint_path
    from dycore.timestepping.simulation import run_from_config
    half = nsteps // 2
    if half < 1:
        raise SystemExit(f"--restart-steps: expected at least 2, got {nsteps}")
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for mode in modes:
        one, split, again = (folder / f"restart_{mode}_{name}.nc"
                             for name in ("one", "split", "checkpoint"))
        t0 = time.perf_counter()
        run_from_config(_restart_config(cfg, mode, nsteps, one), overwrite=True)
        run_from_config(_restart_config(cfg, mode, nsteps, split), max_steps=half,
                        overwrite=True)
        saved = folder / f"restart_{mode}_saved.checkpoint.nc"
        shutil.copy(checkpoint_path(split), saved)
        run_from_config(_restart_config(cfg, mode, nsteps, split), restart=split)
        run_from_config(_restart_config(cfg, mode, nsteps, again), restart=saved,
                        overwrite=True)
        want = _last_record(one, half)
        row = {"steps": nsteps, "restart_at_step": half,
               "seconds": round(time.perf_counter() - t0, 1)}
        for label, path in (("output_file", split), ("checkpoint", again)):
            got = _last_record(path, half)
            differ = sorted(k for k in want if k != "snapshot_step" and not np.array_equal(
                got[k], want[k], equal_nan=got[k].dtype.kind == "f"))
            row[f"bitwise_from_{label}"] = not differ
            row[f"differing_from_{label}"] = differ
            row[f"max_abs_diff_from_{label}"] = {
                k: float(np.max(np.abs(got[k] - want[k]))) for k in want
                if not k.startswith("step:") and k != "snapshot_step"
                and got[k].shape == want[k].shape}
        row["bitwise"] = row["bitwise_from_output_file"] and row["bitwise_from_checkpoint"]
        out[mode] = row
        verdict = {label: "BITWISE EQUAL" if row[f"bitwise_from_{label}"] else
                   f"DIFFERENT in {', '.join(row[f'differing_from_{label}'])}"
                   for label in ("output_file", "checkpoint")}
        say(f"restart ({mode} solvers, deterministic + strict): {nsteps} steps in one run vs "
            f"{half} + restart + {nsteps - half}: from the output file "
            f"{verdict['output_file']}, from the checkpoint {verdict['checkpoint']} "
            f"({row['seconds']} s)")
    results["restart"] = out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/mountainwave3d.yaml")
    ap.add_argument("--parts", default="kernels,steps,compare")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--compare-steps", type=int, default=20)
    ap.add_argument("--restart-steps", type=int, default=20,
                    help="steps of the restart part (restart at half of them)")
    ap.add_argument("--restart-modes", default="device,host",
                    help="solver modes of the restart part")
    ap.add_argument("--mesh", default=None, help="override nx,ny,nz e.g. 24,24,20")
    ap.add_argument("--pressure-rtol", type=float, default=None,
                    help="override solvers.pressure.rtol (reported with the results)")
    args = ap.parse_args()
    from dycore.config import load_config
    over = {"output": {"progress": False}}
    if args.mesh:
        nx, ny, nz = (int(v) for v in args.mesh.split(","))
        over["mesh"] = {"nx": nx, "ny": ny, "nz": nz}
    if args.pressure_rtol is not None:
        over["solvers"] = {"pressure": {"rtol": args.pressure_rtol}}
    cfg = load_config(args.config, over)
    out = Path(os.environ.get("OUT", "gpu_out"))
    out.mkdir(parents=True, exist_ok=True)
    global LOG_FILE
    LOG_FILE = out / "gpu_check.txt"
    LOG_FILE.write_text("")
    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "config": args.config,
               "machine": machine_info()}
    say(json.dumps(results["machine"]))
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        results["copy_bandwidth"] = copy_bandwidth()
        say(f"device copy bandwidth: {results['copy_bandwidth']['GB_per_s']:.0f} GB/s (2 GiB D2D, "
            f"read+write, median of {results['copy_bandwidth']['n']})")
    run_part = {"kernels": lambda: part_kernels(cfg, args.repeat, results),
                "steps": lambda: part_steps(cfg, args.steps, results),
                "compare": lambda: part_compare(cfg, args.compare_steps, results),
                "libm": lambda: part_libm(results),
                "modes": lambda: part_modes(cfg, args.repeat, args.steps, results),
                "device": lambda: part_device(cfg, args.steps, results),
                "solver_ab": lambda: part_solver_ab(cfg, args.steps, results),
                "pressure_profile": lambda: part_pressure_profile(cfg, args.steps, results),
                "restart": lambda: part_restart(
                    cfg, args.restart_steps, results, out / "restart",
                    [m.strip() for m in args.restart_modes.split(",") if m.strip()])}
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in run_part]
    if unknown:
        ap.error(f"--parts: unknown {', '.join(unknown)} (choose from {', '.join(run_part)})")
    try:
        for part in parts:                           # in the order given
            run_part[part]()
    finally:
        for part in results.get("steps", {}).values():
            part.pop("stages", None)                 # the text tables carry the same numbers
        (out / "gpu_check.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
