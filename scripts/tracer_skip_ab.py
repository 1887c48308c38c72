"""A/B/A in one process (GPU): the step with the inactive tracers skipped, solved, skipped.

python3 scripts/tracer_skip_ab.py CONFIG [--steps N] [--mesh NX,NY,NZ]

One Simulation (device solvers, the configuration's assembly); for each phase 3 warm-up steps
(the Picard iterations are captured anew when the switch flips), then the median, min and max of
N steps on the host clock around ``step()`` (each step ends with a device→host read, so the
clock covers the GPU work). Prints the skipped tracers and a Markdown table.
"""
import argparse
import time

import numpy as np

import dycore
from dycore.bench.steps import time_steps
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--mesh", help="nx,ny,nz instead of the configuration's cells")
a = ap.parse_args()
over = {"backend.name": "gpu", "backend.solver_mode": "device"}
if a.mesh:
    over.update(zip(("mesh.nx", "mesh.ny", "mesh.nz"), map(int, a.mesh.split(","))))
cfg = dycore.load_config(a.config, **over)
t = time.perf_counter()
sim = Simulation(cfg)
print(f"set-up {time.perf_counter() - t:.2f} s; {sim.mesh.nele} tets; {sim.backend.describe()}")
rows = []
for label, skip in (("skipped", True), ("solved", False), ("skipped again", True)):
    sim.stepper.skip_inactive_tracers = skip
    sim.stepper.state_changed()
    time_steps(sim, 3)                                    # warm-up: capture anew
    ts, counts, _ = time_steps(sim, a.steps)
    rows.append((label, sorted(sim.stepper._inactive), np.median(ts), min(ts), max(ts),
                 counts[-1]))
    print(rows[-1], flush=True)
print("\n| inactive tracers | not solved | step median [min-max] ms | graph kernels per step |"
      "\n|---|---|---|---|")
for label, skipped, med, lo, hi, c in rows:
    print(f"| {label} | {', '.join(skipped) or '-'} | {med:.2f} [{lo:.2f}-{hi:.2f}] | "
          f"{c['graph_kernels']} |")
