"""Time-to-solution probe (GPU machine): where a run's wall time goes, phase by phase.

python3 scripts/tts_probe.py CONFIG [--steps N] [--backend gpu] -- prints import, build (with the
stage timers), the first 3 steps one by one (JIT compile, capture), the median of N steps and one
snapshot's host copy + write.
"""
import sys
import time

t0 = time.perf_counter()
import argparse  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--backend", default="gpu")
ap.add_argument("--set", action="append", default=[])
a = ap.parse_args()

import numpy as np  # noqa: E402

import dycore  # noqa: E402
from dycore.timestepping.simulation import Simulation  # noqa: E402
t_imp = time.perf_counter() - t0
over = {"backend.name": a.backend}
if a.backend == "gpu":
    over["backend.solver_mode"] = "device"
for kv in a.set:
    k, v = kv.split("=", 1)
    import yaml
    over[k] = yaml.safe_load(v)
cfg = dycore.load_config(a.config, **over)
t1 = time.perf_counter()
sim = Simulation(cfg)
sim.backend.synchronize()
t_build = time.perf_counter() - t1
print(f"import {t_imp:.2f} s; build {t_build:.2f} s  ({sim.mesh.nele} tets)")
for name, row in sim.timers.as_dict().items():
    if row["total_ms"] > 50:
        print(f"   {name:45s} {row['total_ms'] / 1e3:8.2f} s")
for k in range(3):
    t = time.perf_counter()
    d = sim.step()
    print(f"step {k + 1}: {time.perf_counter() - t:.3f} s")
ts = []
for k in range(a.steps):
    t = time.perf_counter()
    sim.step()
    ts.append(time.perf_counter() - t)
ts = np.array(ts) * 1e3
print(f"steady step: median {np.median(ts):.2f} ms [{ts.min():.2f}-{ts.max():.2f}] of {len(ts)}")
t = time.perf_counter()
f = sim.host_fields()
print(f"host_fields {1e3 * (time.perf_counter() - t):.1f} ms")
print(sim.timers.table("timers"))
