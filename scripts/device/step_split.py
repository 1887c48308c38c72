"""Where a device step's time goes, stage by stage (GPU): whole-iteration capture off, so the
stage timers (CUDA events) split the step; each solve still replays its own graph.

python3 scripts/device/step_split.py CONFIG [--steps N]  — N steps after 3 warm-up steps; prints
the stage table (mean per call) and the step's median with the iteration graphs on, for scale.
"""
import argparse

import numpy as np

import dycore
from dycore.bench.steps import time_steps
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--steps", type=int, default=10)
a = ap.parse_args()
cfg = dycore.load_config(a.config, **{"backend.name": "gpu", "backend.solver_mode": "device"})
sim = Simulation(cfg)
time_steps(sim, 3)                                  # warm-up
ts = time_steps(sim, a.steps)[0]
print(f"graphs on: step median {np.median(ts):.2f} ms [{min(ts):.2f}-{max(ts):.2f}]")
sim.stepper.graphs.enabled = False
sim.step()
sim.timers.reset()
for _ in range(a.steps):
    sim.step()
rows = sorted(sim.timers.as_dict().items(), key=lambda kv: -kv[1]["mean_ms"] * kv[1]["calls"])
print(f"graphs off, {a.steps} steps: stage, calls per step, mean ms per call, ms per step")
for name, r in rows:
    print(f"  {name:40s} {r['calls'] / a.steps:5.1f} {r['mean_ms']:8.3f} "
          f"{r['mean_ms'] * r['calls'] / a.steps:8.3f}")
