"""A/B in one process (GPU): variants of the device pressure solve on one mesh and set-up.

python3 scripts/pressure_ab.py CONFIG [--steps N] [--assembly atomic|deterministic] [--set V ...]
Variants (--set picks some by name): row-group sums in shared memory vs warp shuffles, general vs
lean CSR kernels, float64 vs float32 AMG levels, Chebyshev sweeps, the largest row group, and the
direct solve (``solvers.pressure.method: direct``: cuDSS, factorised once). For
each: median step (host clock around step(), graphs on) over N steps after 3 warm-up steps, the
pressure solve alone (per-stage timers, whole-iteration capture off, 5 steps), iterations per
step, and the fields after the steps against the first variant's (bitwise, else the largest
difference relative to the field's maximum; meaningful with deterministic assembly).
"""
import argparse
import time

import numpy as np

import dycore
from dycore.bench.steps import time_steps
from dycore.solvers.device import DeviceSystems
from dycore.solvers.krylov import DeviceLinalg
from dycore.timestepping.simulation import Simulation

#: name: (shuffle, lean, precision, smoother sweeps, max row group, method)
VARIANTS = {
    "before": (False, False, "float64", 2, None, "cg"),
    "shuffle+lean f64": (True, True, "float64", 2, None, "cg"),
    "shuffle+lean f32": (True, True, "float32", 2, None, "cg"),
    "f32 group<=4": (True, True, "float32", 2, 4, "cg"),
    "f32 sweeps 1": (True, True, "float32", 1, None, "cg"),
    "f32 sweeps 3": (True, True, "float32", 3, None, "cg"),
    "direct": (True, True, "float32", 2, None, "direct"),
}
ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--assembly", default="deterministic")
ap.add_argument("--set", nargs="+", default=list(VARIANTS))
a = ap.parse_args()
cfg = dycore.load_config(a.config, **{"backend.name": "gpu", "backend.solver_mode": "device",
                                      "backend.assembly": a.assembly})
rows, ref = [], None
for label in a.set:
    shuffle, lean, precision, sweeps, group, method = VARIANTS[label]
    DeviceLinalg.SHUFFLE, DeviceLinalg.LEAN, DeviceLinalg.DEFAULT_MAX_GROUP = shuffle, lean, group
    c = cfg.model_copy(update={"solvers": cfg.solvers.model_copy(update={
        "pressure": cfg.solvers.pressure.model_copy(update={"precision": precision,
                                                             "method": method})})})
    t = time.perf_counter()
    sim = Simulation(c)
    if sweeps != 2:
        sim.systems = DeviceSystems(sim.backend, sim.sparsity, sim.ops, c.solvers, sim.timers,
                                    sweeps=sweeps, setup_cache=sim.setup_cache)
        sim.stepper.sys = sim.systems
    build = time.perf_counter() - t
    time_steps(sim, 3)                              # warm-up
    ts = time_steps(sim, a.steps)[0]
    fields = sim.host_fields()
    same = "ref" if ref is None else all(np.array_equal(fields[k], ref[k]) for k in fields)
    if same is False:
        same = "max rel diff %.1e" % max(np.abs(fields[k] - ref[k]).max()
                                         / max(np.abs(ref[k]).max(), 1e-300) for k in fields)
    segs = [len(g.segments) for g in sim.stepper.graphs._graphs.values()]
    ref = ref or fields
    its = sim.stepper.step(sim.state).iterations
    sim.stepper.graphs.enabled = False
    sim.timers.reset()
    for _ in range(5):
        sim.step()
    p = sim.timers.as_dict()["solve pressure"]["mean_ms"]
    rows.append((label, np.median(ts), min(ts), max(ts), p, its["pressure"] // 2, same))
    print(f"{label}: build {build:.2f} s, step median {np.median(ts):.2f} ms "
          f"[{min(ts):.2f}-{max(ts):.2f}], pressure solve {p:.2f} ms, iterations {its}, "
          f"fields bitwise = first: {same}, graph segments per iteration {segs}", flush=True)
    del sim
print("\n| variant | step median [min-max] ms | pressure solve ms | CG its per solve | fields = first |")
print("|---|---|---|---|---|")
for label, med, lo, hi, p, its, same in rows:
    print(f"| {label} | {med:.2f} [{lo:.2f}-{hi:.2f}] | {p:.2f} | {its} | {same} |")
