"""A/B in one process (GPU): row-group sums in shared memory vs warp shuffles, general vs lean CSR
SpMV in the AMG cycle. Same mesh, same set-up (from the set-up cache after the first build).

python3 scripts/pressure_ab.py CONFIG [--steps N]
For each variant: median step (host clock around step(), graphs on) over N steps after 3
warm-up steps, and the pressure solve alone (CUDA events around each solve's own graph replay,
per-stage timers with whole-iteration capture off), plus the fields after the steps compared
bitwise with the first variant's.
"""
import argparse
import time

import numpy as np

import dycore
from dycore.solvers.krylov import DeviceLinalg
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--assembly", default="deterministic")
a = ap.parse_args()
cfg = dycore.load_config(a.config, **{"backend.name": "gpu", "backend.solver_mode": "device",
                                      "backend.assembly": a.assembly})
VARIANTS = [("shared groups, general spmv, float64 AMG", False, False, "float64"),
            ("shuffle groups, lean csr spmv, float64 AMG", True, True, "float64"),
            ("shuffle groups, lean csr spmv, float32 AMG", True, True, "float32")]
rows, ref = [], None
for label, shuffle, lean, precision in VARIANTS:
    DeviceLinalg.SHUFFLE, DeviceLinalg.LEAN = shuffle, lean
    t = time.perf_counter()
    sim = Simulation(cfg.model_copy(update={"solvers": cfg.solvers.model_copy(update={
        "pressure": cfg.solvers.pressure.model_copy(update={"precision": precision})})}))
    build = time.perf_counter() - t
    for _ in range(3):
        sim.step()
    ts = []
    for _ in range(a.steps):
        t = time.perf_counter()
        sim.step()
        ts.append(1e3 * (time.perf_counter() - t))
    fields = sim.host_fields()
    same = "ref" if ref is None else all(np.array_equal(fields[k], ref[k]) for k in fields)
    ref = ref or fields
    sim.stepper.capture_iterations = False
    sim.timers.reset()
    for _ in range(5):
        sim.step()
    tab = sim.timers.as_dict()
    p = tab["solve pressure"]["mean_ms"]
    rows.append((label, build, np.median(ts), min(ts), max(ts), p, same))
    its = sim.stepper.step(sim.state).iterations
    print(f"{label}: build {build:.2f} s, step median {np.median(ts):.2f} ms [{min(ts):.2f}-{max(ts):.2f}],"
          f" pressure solve {p:.2f} ms, fields bitwise = first: {same}; iterations per step {its}", flush=True)
    if label == VARIANTS[-1][0]:
        print(sim.timers.table("stage timers, whole-iteration capture off (5 steps)"))
    del sim
print("\n| variant | step median [min-max] ms | pressure solve ms | fields = first |")
print("|---|---|---|---|")
for label, b, med, lo, hi, p, same in rows:
    print(f"| {label} | {med:.2f} [{lo:.2f}-{hi:.2f}] | {p:.2f} | {same} |")
