"""A/B in one process (GPU): the momentum solves' products over lean blocks (the default,
:class:`dycore.solvers.krylov.LeanBlocks`) and the tracer/momentum products' threads per row
(``DeviceSystems.tracer_group`` / ``momentum_group``) against what came before (every block
read in full; :func:`~dycore.solvers.krylov.group_size` threads per row for both).

python3 scripts/lean_momentum_ab.py CONFIG [--steps N] [--json F]

One Simulation (device solvers, the configuration's assembly and pressure method). For each
phase (now; before; lean blocks with the old threads per row; now again): the switch
(:meth:`DeviceSystems.set_products`; the iterations are captured afresh), 3 warm-up steps, then
the median [min–max] of N steps on the host clock around ``step()`` (the products alone:
``scripts/device/spmv_groups.py``). Fields after all steps against a second Simulation stepped
as before (atomic assembly sums in a different order every run: expect round-off).
"""
import argparse
import json
import time

import numpy as np

import dycore
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
from dycore.solvers.device import DeviceSystems  # noqa: E402
from dycore.solvers.krylov import group_size  # noqa: E402

g_old = group_size(sim.sparsity.indices.size / sim.sparsity.n)
now = dict(lean=True, tracer_group=DeviceSystems.tracer_group,
           momentum_group=DeviceSystems.momentum_group)
before = dict(lean=False, tracer_group=g_old, momentum_group=g_old)
rows = []
for label, setting in ((f"now (lean, g {now['tracer_group']}/{now['momentum_group']})", now),
                       (f"before (full blocks, g {g_old}/{g_old})", before),
                       (f"lean blocks, g {g_old}/{g_old}", dict(before, lean=True)),
                       ("now again", now)):
    sim.systems.set_products(**setting)
    sim.stepper.state_changed()
    time_steps(sim, 3)
    ts, counts, _ = time_steps(sim, a.steps)
    rows.append({"phase": label, "median_ms": float(np.median(ts)), "min_ms": float(min(ts)),
                 "max_ms": float(max(ts))})
    print(rows[-1], flush=True)

nsteps = 4 * (3 + a.steps)
ref = Simulation(cfg)
ref.systems.set_products(**before)
for _ in range(nsteps):
    ref.step()
fa, fb = sim.host_fields(), ref.host_fields()
diff = {k: float(np.abs(fa[k] - fb[k]).max() / max(np.abs(fb[k]).max(), 1e-300)) for k in fa}
print(f"fields after {nsteps} steps, the phases against 'before' throughout: "
      + ", ".join(f"{k} {v:.1e}" for k, v in diff.items()))
print("\n| products | step median [min-max] ms |\n|---|---|")
for r in rows:
    print(f"| {r['phase']} | {r['median_ms']:.2f} [{r['min_ms']:.2f}-{r['max_ms']:.2f}] |")
if a.json:
    with open(a.json, "w") as f:
        json.dump({"rows": rows, "field_diff": diff, "steps": nsteps}, f,
                  indent=1)
