"""A/B/A in one process (GPU): the moisture tracers on a second stream beside the momentum
predictor (the default), then issued in order on the main stream, then on the side stream again.

python3 scripts/branch_ab.py CONFIG [--steps N] [--json F]

One Simulation (device solvers, the configuration's assembly and pressure method); for each
phase 3 warm-up steps (the Picard iterations are captured anew when the branch changes), then
the median, min and max of N steps on the host clock around ``step()`` (each step ends with a
device→host read, so the clock covers the GPU work); after the last phase the fields are
compared with a second Simulation stepped the same number of steps in order (max|diff| /
max|in order|; atomic assembly is not reproducible bit for bit, so expect round-off).
"""
import argparse
import json
import time

import numpy as np

import dycore
from dycore.backend.streams import InlineBranch
from dycore.bench.steps import time_steps
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--json")
a = ap.parse_args()
cfg = dycore.load_config(a.config, **{"backend.name": "gpu", "backend.solver_mode": "device"})
t = time.perf_counter()
sim = Simulation(cfg)
print(f"set-up {time.perf_counter() - t:.2f} s; {sim.mesh.nele} tets; {sim.backend.describe()}; "
      f"pressure {sim.systems.pressure_method}", flush=True)
side = sim.stepper.branch
rows = []
for label, branch in (("side stream", side), ("in order", InlineBranch()),
                      ("side stream again", side)):
    sim.stepper.branch = branch
    sim.stepper.state_changed()
    time_steps(sim, 3)                                    # warm-up: capture anew
    ts, counts, _ = time_steps(sim, a.steps)
    rows.append({"phase": label, "median_ms": float(np.median(ts)), "min_ms": float(min(ts)),
                 "max_ms": float(max(ts)), "graph_kernels": counts[-1]["graph_kernels"]})
    print(rows[-1], flush=True)
nsteps = 3 * (3 + a.steps)
ref = Simulation(cfg)
ref.stepper.branch = InlineBranch()
for _ in range(nsteps):
    ref.step()
fa, fb = sim.host_fields(), ref.host_fields()
diff = {k: float(np.abs(fa[k] - fb[k]).max() / max(np.abs(fb[k]).max(), 1e-300)) for k in fa}
print(f"fields after {nsteps} steps, branch phases against in order: "
      + ", ".join(f"{k} {v:.1e}" for k, v in diff.items()))
print("\n| moisture tracers | step median [min-max] ms | kernels per step (graphs) |"
      "\n|---|---|---|")
for r in rows:
    print(f"| {r['phase']} | {r['median_ms']:.2f} [{r['min_ms']:.2f}-{r['max_ms']:.2f}] | "
          f"{r['graph_kernels']} |")
if a.json:
    with open(a.json, "w") as f:
        json.dump({"rows": rows, "field_diff": diff, "steps": nsteps}, f, indent=1)
