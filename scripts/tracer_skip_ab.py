"""A/B/A in one process (GPU): the step with the inactive tracers skipped, solved, skipped.

python3 scripts/tracer_skip_ab.py CONFIG [--steps N]

One Simulation (device solvers, the configuration's assembly); for each phase 3 warm-up steps
(the Picard iterations are captured anew when the switch flips), then the median, min and max of
N steps on the host clock around ``step()`` (each step ends with a device→host read, so the
clock covers the GPU work). Prints the skipped tracers and a Markdown table.
"""
import argparse
import time

import numpy as np

import dycore
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--steps", type=int, default=30)
a = ap.parse_args()
cfg = dycore.load_config(a.config, **{"backend.name": "gpu", "backend.solver_mode": "device"})
t = time.perf_counter()
sim = Simulation(cfg)
print(f"set-up {time.perf_counter() - t:.2f} s; {sim.mesh.nele} tets; {sim.backend.describe()}")
rows = []
for label, skip in (("skipped", True), ("solved", False), ("skipped again", True)):
    sim.stepper.skip_inactive_tracers = skip
    sim.stepper.state_changed()
    for _ in range(3):
        sim.step()
    ts = []
    for _ in range(a.steps):
        t = time.perf_counter()
        sim.step()
        ts.append(1e3 * (time.perf_counter() - t))
    rows.append((label, sorted(sim.stepper._inactive), np.median(ts), min(ts), max(ts)))
    print(rows[-1], flush=True)
print("\n| inactive tracers | not solved | step median [min-max] ms |\n|---|---|---|")
for label, skipped, med, lo, hi in rows:
    print(f"| {label} | {', '.join(skipped) or '-'} | {med:.2f} [{lo:.2f}-{hi:.2f}] |")
