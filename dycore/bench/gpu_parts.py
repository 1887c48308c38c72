"""The GPU machine's parts of ``dycore bench`` (what ``scripts/gpu_check.py`` asks for by name).

operators   every assembly operator (:func:`dycore.checks.operators.operator_calls`: a new
            operator is in this table without an edit here): GPU atomic and deterministic (CUDA
            events), ``@njit`` on all cores and on 1 core, speedups, the largest CPU-vs-GPU
            difference of each output; registers / local bytes of the element kernels and the
            tracer and momentum kernels at 32..256 threads per block
modes       the cost of the bitwise modes: every operator and the step in atomic /
            deterministic assembly, each with and without strict FP (fma=0, no LTO)
device      the device-solver step: what each step issues (launches, graph replays and their
            kernels, host syncs, CuPy allocations), the fields after the same steps against the
            host-solver path, then the per-solve-graph layout whose stage table splits the step
solver_ab   the device step and its pressure solve with fused / separate finishes and grouped /
            one-thread rows, in one process
pressure_profile  microseconds per piece of a pressure CG iteration and per no-op kernel

Each is a function of the running :class:`dycore.bench.runner._Bench` (its options, ``say``,
``table`` and ``res``). GPU parts are skipped, with a line saying so, where no GPU is used; the
parts that need the device solvers (CuPy) are skipped under the simulator.
"""
from __future__ import annotations

import statistics
import time

from dycore.bench.report import fmt_num, fmt_time, format_table
from dycore.bench.steps import numba_threads, run_variant, time_steps
from dycore.bench.timing import kernel_resources, time_cpu, time_gpu

__all__ = ["GPU_PARTS", "run_gpu_part"]

#: the device-solver backend of the parts below
_DEVICE = {"name": "gpu", "solver_mode": "device", "assembly": "atomic"}


def _assemblers(bench, mesh, sp, host, **options):
    """{assembly mode: (backend, assembler, inputs on the backend)} for atomic and
    deterministic assembly (GPU backend ``options`` added)."""
    from dycore.backend.gpu import gpu_backend
    from dycore.backend.timers import StageTimers
    from dycore.checks.operators import inputs_on
    out, block = {}, options.pop("block", bench.block)
    for mode in ("atomic", "deterministic"):
        b = gpu_backend(assembly=mode, block=block, **options)
        out[mode] = (b, b.assembler(mesh, sp, StageTimers(b.marker)), inputs_on(b, host))
    return out


def _calls(asm, d) -> dict:
    """:func:`operator_calls` plus each tracer's rhs-only variant, label -> call."""
    from dycore.checks.operators import operator_calls
    calls = {k: c for k, (_, c) in operator_calls(asm, d).items()}
    for k, (loop, c) in operator_calls(asm, d, want_matrix=False).items():
        if loop == "tracer":
            calls[f"{k} (rhs only)"] = c
    return calls


def operators(bench, mesh, sp) -> None:
    """Part ``operators`` (see the module docstring)."""
    from dycore.backend.cpu import CPUBackend
    from dycore.backend.timers import StageTimers
    from dycore.checks.common import compare_arrays
    from dycore.checks.operators import random_inputs
    host = random_inputs(mesh.nnodes)
    cpu = _calls(CPUBackend().assembler(mesh, sp, StageTimers()), host)
    gpus = _assemblers(bench, mesh, sp, host, solver_mode="host") if bench.gpu else {}
    out, rows = {}, []
    for label, call in cpu.items():
        ref = [a.copy() for a in call() if a is not None]
        row = {}
        if bench.cpu:
            row["cpu_all_cores"] = time_cpu(call, max(3, bench.repeat // 4))
            with numba_threads(1):
                row["cpu_1_core"] = time_cpu(call, 3)
        for mode, (b, asm, d) in gpus.items():
            f = _calls(asm, d)[label]
            row[f"gpu_{mode}"] = time_gpu(f, bench.repeat, stream=b.nb_stream)
            got = [b.to_host(a) for a in f() if a is not None]
            row[f"max_rel_diff_{mode}"] = max(compare_arrays(r, g)["max_rel"]
                                              for r, g in zip(ref, got))
        if gpus and bench.cpu:
            row["speedup_vs_1_core"] = (row["cpu_1_core"]["median_ms"]
                                        / row["gpu_atomic"]["median_ms"])
        out[label] = row
        rows.append([label] + [fmt_time(row.get(k)) for k in
                               ("gpu_atomic", "gpu_deterministic", "cpu_1_core", "cpu_all_cores")]
                    + [fmt_num(row.get("speedup_vs_1_core"), ".0f", "x"),
                       fmt_num(row.get("max_rel_diff_atomic"), ".1e"),
                       fmt_num(row.get("max_rel_diff_deterministic"), ".1e")])
    bench.res["operators"] = out
    bench.table("operators", format_table(
        f"every assembly operator, {mesh.nele} tetrahedra: ms median [min-max] of "
        f"{bench.repeat}; max |GPU - CPU| / max |CPU| of its outputs",
        ["operator", "GPU atomic", "GPU det.", "CPU 1 core", "CPU all cores", "GPU/1c",
         "diff atomic", "diff det."], rows))
    if gpus and not bench.sim:
        _resources_and_block_sweep(bench, mesh, sp, host, gpus["atomic"][0])


def _resources_and_block_sweep(bench, mesh, sp, host, backend) -> None:
    """Registers / local bytes per thread of each element kernel, and the atomic tracer and
    momentum assembly at 32..256 threads per block (512 x 168 registers exceed a block's 64K)."""
    res = {name: kernel_resources(k) for name, k in backend.kernels.loops.items()}
    res["gather_blocks"] = kernel_resources(backend.kernels.gather_blocks)
    for name, r in res.items():
        bench.say(f"kernel {name:14s} resources: {r}")
    sweep = {}
    for block in (32, 64, 128, 256):
        b, asm, d = _assemblers(bench, mesh, sp, host, solver_mode="host", block=block)["atomic"]
        calls = _calls(asm, d)
        sweep[block] = {k: time_gpu(calls[k], bench.repeat, stream=b.nb_stream)
                        for k in ("tracer t", "momentum")}
        bench.say(f"block {block:3d}: " + "  ".join(f"{k} {v['median_ms']:.3f} ms"
                                                    for k, v in sweep[block].items()))
    bench.res["kernel_resources"], bench.res["block_sweep"] = res, sweep


def modes(bench, mesh, sp) -> None:
    """Part ``modes``: every operator and the step per assembly mode, with and without strict
    FP (the step with device solvers where CuPy is there, else host solvers)."""
    from dycore.checks.operators import random_inputs
    host = random_inputs(mesh.nnodes)
    solver = "device" if bench.device_solver else "host"
    out, rows = {}, []
    for strict in (False, True):
        for assembly, (b, asm, d) in _assemblers(bench, mesh, sp, host, strict=strict,
                                                 solver_mode="host").items():
            label = f"{assembly}{' + strict' if strict else ''}"
            row = {k: time_gpu(f, bench.repeat, stream=b.nb_stream)
                   for k, f in _calls(asm, d).items()}
            r = run_variant(bench.make_config, f"step, {solver} solvers, {label}",
                            {"name": "gpu", "solver_mode": solver, "assembly": assembly,
                             "strict": strict}, 0, bench.steps)
            row["step"] = r["step"]
            out[label] = row
            rows.append([label] + [fmt_time(v) for v in row.values()])
    bench.res["modes"] = out
    first = next(iter(out.values()))
    bench.table("modes", format_table(
        f"the bitwise modes: ms median [min-max] of {bench.repeat} per operator, of "
        f"{bench.steps} steps ({solver} solvers)", ["mode"] + list(first), rows))


def device(bench) -> None:
    """Part ``device``: the device-solver step (counted), its fields against the host-solver
    path after the same steps, and the per-solve-graph layout's stage table."""
    from dycore.checks.common import compare_arrays
    from dycore.timestepping.simulation import build_simulation
    n = bench.steps
    sims = {mode: build_simulation(bench.make_config(dict(_DEVICE, solver_mode=mode)))
            for mode in ("device", "host")}
    sim = sims["device"]
    time_steps(sim, 2)                               # compile, then capture the graphs
    sim.timers.reset()
    times, counts, _ = time_steps(sim, n)
    med = {k: statistics.median(c[k] for c in counts) for k in counts[0]}
    bench.say(f"device step: median {statistics.median(times):.2f} ms [{min(times):.2f}-"
              f"{max(times):.2f}] over {n} steps after 2 warm-up; per step (median): "
              + ", ".join(f"{k} {v:g}" for k, v in med.items()))
    bench.say(sim.timers.table("device-solver step: stage timers (CUDA events)"))
    res = bench.res["device"] = {"ms": times, "per_step": med, "table": sim.timers.table()}
    time_steps(sims["host"], n + 2)
    fd, fh = sim.host_fields(), sims["host"].host_fields()
    res["vs_host"] = {f: compare_arrays(fh[f], fd[f]) for f in fd}
    bench.say(f"device vs host solvers after {n + 2} steps (max|diff|/max|host|): "
              + "  ".join(f"{f} {v['max_rel']:.2e}" for f, v in res["vs_host"].items()))
    sim.stepper.graphs.enabled = False               # each solve its own graph: stage times
    time_steps(sim, 2)
    sim.timers.reset()
    times, _, _ = time_steps(sim, n)
    bench.say(f"device step with per-solve graphs (profiling layout): "
              f"{statistics.mean(times):.2f} ms mean over {n}")
    bench.say(sim.timers.table("per-solve graphs: stage timers (CUDA events around each stage)"))
    res["per_stage_table"] = sim.timers.table()


def _cg_config(bench):
    """The device configuration with the pressure solved by CG: the parts that measure the
    CG's kernels must not get the direct solve that ``method: auto`` may pick."""
    cfg = bench.make_config(_DEVICE)
    cfg.solvers.pressure.method = "cg"
    return cfg


def solver_ab(bench) -> None:
    """Part ``solver_ab``: the device step and its pressure solve with the finishes fused
    (default) or separate, rows summed by thread groups (default) or one thread per row. Step:
    host clock around step(), median of --steps after 2 warm-up steps; pressure: CUDA events
    around each solve (per-solve-graph layout), mean over --steps steps."""
    from dycore.solvers.krylov import DeviceLinalg
    from dycore.timestepping.simulation import build_simulation
    out = {}
    for label, fuse, group in (("fused finish, grouped rows", True, None),
                               ("separate finish, grouped rows", False, None),
                               ("fused finish, one thread per row", True, 1)):
        DeviceLinalg.FUSE, DeviceLinalg.DEFAULT_MAX_GROUP = fuse, group
        try:
            sim = build_simulation(_cg_config(bench))
        finally:
            DeviceLinalg.FUSE, DeviceLinalg.DEFAULT_MAX_GROUP = True, None
        time_steps(sim, 2)
        times, counts, _ = time_steps(sim, bench.steps)
        sim.stepper.graphs.enabled = False
        time_steps(sim, 1)
        sim.timers.reset()
        time_steps(sim, bench.steps)
        p_ms = sim.timers.as_dict()["solve pressure"]["mean_ms"]
        out[label] = {"step_ms": statistics.median(times), "min": min(times), "max": max(times),
                      "graph_kernels": statistics.median(c["graph_kernels"] for c in counts),
                      "pressure_ms": p_ms}
        bench.say(f"A/B {label}: step {out[label]['step_ms']:.2f} ms [{min(times):.2f}-"
                  f"{max(times):.2f}], {out[label]['graph_kernels']:g} graph kernels per step, "
                  f"pressure solve {p_ms:.2f} ms")
        del sim
    bench.res["solver_ab"] = out


def pressure_profile(bench) -> None:
    """Part ``pressure_profile``: each piece of a pressure CG iteration (fine-level SpMV, with
    dot partials and fused finish, the vector update, one whole V-cycle, one smoothing step per
    level) captured 20 times in a CUDA graph and replayed; CUDA events on the backend's stream,
    median of 10 replays after 3, divided by 20. The same V-cycle with the solve marked
    finished gives the cost of a no-op kernel (what a replayed budget past convergence costs)."""
    from numba import cuda

    from dycore.backend import solver_kernels as K
    from dycore.timestepping.simulation import build_simulation
    sim = build_simulation(_cg_config(bench))
    time_steps(sim, 2)
    b, la, pcg = sim.backend, sim.systems.la, sim.systems.pcg
    m = pcg.m
    running_arr, done_arr = b.xp.zeros(K.NCTL), b.xp.zeros(K.NCTL)
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
                           a.sliced, 0,
                           lev["bufs"][0], lev["b"], lev["dinv"], lev["d"], lev["bufs"][1],
                           0.5, 0.5, 0, 0, la.no_partial, -1, 0, ctl, la.ticket)))
    out = {}
    for label, piece in pieces + [("no-op V-cycle (solve finished)", pieces[3][1])]:
        us, nk = timed(piece, done if label.startswith("no-op") else running)
        out[label] = {"us": us, "kernels": nk, "us_per_kernel": us / max(nk, 1)}
        bench.say(f"pressure profile: {label}: {us:.1f} us ({nk} kernel{'s' if nk > 1 else ''}, "
                  f"{us / max(nk, 1):.2f} us each)")
    bench.res["pressure_profile"] = out


#: part name -> (function, needs the mesh, needs the device solvers (CuPy))
GPU_PARTS = {"operators": (operators, True, False), "modes": (modes, True, False),
             "device": (device, False, True), "solver_ab": (solver_ab, False, True),
             "pressure_profile": (pressure_profile, False, True)}


def run_gpu_part(bench, name: str, mesh, sp) -> None:
    """Run GPU part ``name`` (``operators`` also without a GPU: its CPU columns), or say why
    it is skipped."""
    fn, needs_mesh, needs_device = GPU_PARTS[name]
    why = ("no GPU in use" if not bench.gpu and name != "operators" else
           "device solvers need CuPy (not under the simulator)"
           if needs_device and not bench.device_solver else None)
    if why:
        bench.say(f"bench part {name}: skipped ({why})")
        bench.res[name] = {"skipped": why}
        return
    t0 = time.perf_counter()
    fn(bench, mesh, sp) if needs_mesh else fn(bench)
    bench.say(f"bench part {name}: {time.perf_counter() - t0:.1f} s")
