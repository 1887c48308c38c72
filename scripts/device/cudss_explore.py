"""Where the direct pressure solve's set-up and solve time go (GPU, cuDSS), on one mesh.

python3 scripts/device/cudss_explore.py CONFIG [--solves N]
For each variant (a reordering algorithm's name; "perm": the analysis given the permutation of
the first variant; KEY=VALUE[,KEY=VALUE]: cuDSS settings, e.g. SOLVE_ALG=GENERAL):
analysis and factorisation seconds, nonzeros in the factors, set-up residual, and the solve time
(CUDA events around N solves issued back to back, median of 5 rounds, per solve), with the
device CG of the same Simulation for comparison (its per-solve time from the stage timers).
"""
import argparse
import time

import numpy as np

import dycore
from dycore.solvers.direct import CudssDirect
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--solves", type=int, default=20)
ap.add_argument("--variants", nargs="+", default=["DEFAULT", "NESTED_DISSECTION", "AMD", "perm"])
a = ap.parse_args()
cfg = dycore.load_config(a.config, **{"backend.name": "gpu", "backend.solver_mode": "device",
                                      "solvers.pressure.method": "direct"})
t = time.perf_counter()
sim = Simulation(cfg)
print(f"Simulation built in {time.perf_counter() - t:.1f} s; n = {sim.sparsity.n}, "
      f"pressure nnz = {sim.ops.pressure_host.nnz}", flush=True)
b = sim.backend
bv, xv = sim.systems.b_arr, sim.systems.x_arr
rhs = b.to_device(np.random.default_rng(3).standard_normal(sim.sparsity.n))
first = None
for v in a.variants:
    if v == "perm":
        kw = {"perm": first.permutation()}
    elif "=" in v:
        kw = {"options": dict(item.split("=") for item in v.split(","))}
    else:
        kw = {"reordering": v}
    try:
        d = CudssDirect(b, sim.ops.pressure_host, bv, xv, **kw)
    except Exception as exc:  # noqa: BLE001 - report and go on
        print(f"{v}: failed: {type(exc).__name__}: {exc}", flush=True)
        continue
    first = first or d
    times = []
    for _ in range(5):
        bv[...] = rhs
        e0, e1 = b.xp.cuda.Event(), b.xp.cuda.Event()
        e0.record(b.stream)
        for _ in range(a.solves):
            d.solve()
        e1.record(b.stream)
        e1.synchronize()
        times.append(b.xp.cuda.get_elapsed_time(e0, e1) / a.solves)
    print(f"{v}: analysis {d.analysis_s:.2f} s, factorisation {d.setup_s - d.analysis_s:.2f} s, "
          f"fill {d.fill:,} ({d.fill / sim.ops.pressure_host.nnz:.1f}x), residual "
          f"{d.residual:.1e}, capturable {d.capturable}, solve {np.median(times):.3f} ms "
          f"[{min(times):.3f}-{max(times):.3f}]", flush=True)
