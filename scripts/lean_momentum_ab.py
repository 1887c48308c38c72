"""A/B/A in one process (GPU): the momentum solves' products over lean blocks (the default,
:class:`dycore.solvers.krylov.LeanBlocks`) against every block read in full.

python3 scripts/lean_momentum_ab.py CONFIG [--steps N] [--repeat R] [--json F]

One Simulation (device solvers, the configuration's assembly and pressure method). For each
phase (lean, full, lean again): the switch (:meth:`DeviceSystems.set_lean_momentum`; the
iterations are captured afresh), 3 warm-up steps, then the median [min–max] of N steps on the
host clock around ``step()``. Then the momentum product alone on the last assembled matrix
(y = A x with the partials of w·y, as BiCGStab issues it): CUDA events around R launches, each
variant, median; with the bytes it must read and the device-to-device copy bandwidth measured in
the same process (a 1 GiB copy, read + write). Fields after all steps against a second
Simulation stepped with full blocks (atomic assembly sums in a different order every run:
expect round-off; deterministic assembly gives 0).
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
ap.add_argument("--repeat", type=int, default=50)
ap.add_argument("--json")
a = ap.parse_args()
cfg = dycore.load_config(a.config, **{"backend.name": "gpu", "backend.solver_mode": "device"})
t = time.perf_counter()
sim = Simulation(cfg)
print(f"set-up {time.perf_counter() - t:.2f} s; {sim.mesh.nele} tets; {sim.backend.describe()}; "
      f"pressure {sim.systems.pressure_method}", flush=True)
rows = []
for label, lean in (("lean", True), ("full", False), ("lean again", True)):
    sim.systems.set_lean_momentum(lean)
    sim.stepper.state_changed()
    time_steps(sim, 3)
    ts, counts, _ = time_steps(sim, a.steps)
    rows.append({"phase": label, "median_ms": float(np.median(ts)), "min_ms": float(min(ts)),
                 "max_ms": float(max(ts))})
    print(rows[-1], flush=True)

# the product alone, on the momentum matrix of the last step
import cupy  # noqa: E402

b, la = sim.backend, sim.systems.la
m = next(m for _, m in sim.systems._matrices.values() if m.bs == 3)
lb = m.lean_blocks
n = m.n
x = la.nb(cupy.random.default_rng(0).standard_normal(n))
w = la.nb(cupy.random.default_rng(1).standard_normal(n))
y = la.zeros(n)[1]
partial = la.zeros(la.nparts(m), 2)[1]
ctl = la.zeros(16)[1]


def timed(issue):
    for _ in range(3):
        issue()
    out = []
    for _ in range(a.repeat):
        e0 = b.marker().record()
        issue()
        e1 = b.marker().record()
        out.append(e0.elapsed_ms(e1) * 1e3)
    return float(np.median(out))


def product():
    la.spmv(m, x, y, w=w, partial=partial, ctl=ctl, op=-1)


lb.refresh(la, m)
t_lean = timed(product)
y_lean = cupy.asarray(y).copy()
m.lean_blocks = None
t_full = timed(product)
y_full = cupy.asarray(y).copy()
m.lean_blocks = lb
t_refresh = timed(lambda: lb.refresh(la, m))
nnzb, nrow = lb.nnzb, m.nrow
vec = 8 * 3 * nrow
bytes_full = nnzb * (72 + 4) + 4 * (nrow + 1) + 3 * vec        # values, columns, ptr; x, w, y
bytes_lean = nnzb * (8 * lb.ncomp + 4) + lb.nfull * 72 + 4 * (nrow + 1) + 3 * vec
src = cupy.empty(1 << 27)                                      # 1 GiB
dst = cupy.empty_like(src)
ev = []
for _ in range(10):
    e0 = b.marker().record()
    dst[...] = src
    e1 = b.marker().record()
    ev.append(e0.elapsed_ms(e1))
copy_gbs = 2 * src.nbytes / (np.median(ev) * 1e-3) / 1e9
kernel = {"nnzb": nnzb, "nfull": lb.nfull, "ncomp": lb.ncomp, "g": m.g,
          "lean_us": t_lean, "full_us": t_full, "refresh_us": t_refresh,
          "lean_MB": bytes_lean / 1e6, "full_MB": bytes_full / 1e6, "copy_GBs": copy_gbs,
          "lean_GBs": bytes_lean / t_lean / 1e3, "full_GBs": bytes_full / t_full / 1e3,
          "same_bits": bool(cupy.array_equal(y_lean, y_full))}
print("momentum product alone:", kernel, flush=True)

nsteps = 3 * (3 + a.steps)
ref = Simulation(cfg)
ref.systems.set_lean_momentum(False)
for _ in range(nsteps):
    ref.step()
fa, fb = sim.host_fields(), ref.host_fields()
diff = {k: float(np.abs(fa[k] - fb[k]).max() / max(np.abs(fb[k]).max(), 1e-300)) for k in fa}
print(f"fields after {nsteps} steps, A/B/A phases against full blocks throughout: "
      + ", ".join(f"{k} {v:.1e}" for k, v in diff.items()))
print("\n| momentum blocks | step median [min-max] ms |\n|---|---|")
for r in rows:
    print(f"| {r['phase']} | {r['median_ms']:.2f} [{r['min_ms']:.2f}-{r['max_ms']:.2f}] |")
if a.json:
    with open(a.json, "w") as f:
        json.dump({"rows": rows, "kernel": kernel, "field_diff": diff, "steps": nsteps}, f,
                  indent=1)
