"""A/B/A/B in one process (GPU): Picard iteration k+1 issued before iteration k's change is read
(``PicardStepper.speculate``, the default with device solvers) against issued after the read.

python3 scripts/speculate_ab.py CONFIG [--steps N]

One Simulation (device solvers, the configuration's assembly and pressure method); for each
phase 3 warm-up steps, then the median [min–max] of N steps on the host clock around
``step()`` (each step ends with a device→host read, so the clock covers the GPU work).
"""
import argparse

import numpy as np

import dycore
from dycore.bench.steps import time_steps
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--steps", type=int, default=30)
a = ap.parse_args()
cfg = dycore.load_config(a.config, **{"backend.name": "gpu", "backend.solver_mode": "device"})
sim = Simulation(cfg)
print(f"{sim.mesh.nele} tets; {sim.backend.describe()}; pressure {sim.systems.pressure_method}")
print("| Picard iteration k+1 | step median [min-max] ms |\n|---|---|")
for label, on in (("before the read (now)", True), ("after the read", False),
                  ("before the read", True), ("after the read", False)):
    sim.stepper.speculate = on
    time_steps(sim, 3)
    ts = time_steps(sim, a.steps)[0]
    print(f"| {label} | {np.median(ts):.2f} [{min(ts):.2f}-{max(ts):.2f}] |", flush=True)
