"""Where a graph-replayed device step's GPU time goes, kernel by kernel (GPU, PyTorch's CUPTI).

python3 scripts/device/kernel_profile.py CONFIG [--steps N] [--top K] [--set key=value ...]

Builds the Simulation of CONFIG on the GPU with device solvers (the run's defaults otherwise),
takes 3 warm-up steps (so that every Picard iteration is a replayed CUDA graph), then records N
steps with ``torch.profiler`` (CUPTI's activity records see every kernel of the process: numba's,
CuPy's, cuDSS's, also inside graphs). Prints, per step: the host wall time, the GPU busy time
(the union of the kernels' and copies' intervals) and the idle rest, then the kernels grouped by
name — calls per step, mean µs per call, µs per step — largest first — and the idle gaps of
the GPU (≥ ``--gap`` µs) by the activities before and after them. Kernel names are numba's
mangled names shortened to the Python function's name.
"""
import argparse
import re
import time

import numpy as np

import dycore
from dycore.bench.steps import time_steps
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--steps", type=int, default=5)
ap.add_argument("--top", type=int, default=40)
ap.add_argument("--gap", type=float, default=5.0, help="idle gaps to list [µs]")
ap.add_argument("--set", nargs="*", default=[], help="config overrides key=value")
a = ap.parse_args()

over = {"backend.name": "gpu", "backend.solver_mode": "device"}
for kv in a.set:
    k, v = kv.split("=", 1)
    over[k] = v
cfg = dycore.load_config(a.config, **over)
sim = Simulation(cfg)
time_steps(sim, 3)                                    # warm-up: JIT, budgets, graph capture
ts = time_steps(sim, 10)[0]
print(f"{a.config}: step median {np.median(ts):.3f} ms [{min(ts):.3f}-{max(ts):.3f}] "
      f"(host clock, 10 steps, graphs on)")

try:
    import torch
    from torch.profiler import ProfilerActivity, profile
except Exception as exc:                              # noqa: BLE001
    raise SystemExit(f"kernel_profile: PyTorch's profiler is not importable: {exc}")

from numba import cuda  # noqa: E402

torch.cuda.init()
cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    t0 = time.perf_counter()
    for _ in range(a.steps):
        sim.step()
    cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3 / a.steps

def short(name: str) -> str:
    """A demangled kernel name shortened: ``dycore::backend::solver_kernels::build_solver_kernels
    ::<locals>::spmv[abi:..](...)`` → ``solver_kernels.spmv``; C++ templates cut at ``<``."""
    head = re.split(r"\[abi|\(|<", name, maxsplit=1)[0]
    parts = [q for q in head.replace("void ", "").split("::")
             if q and not q.startswith("_3clocals") and q != "<locals>"]
    return ".".join(parts[-2:]) if parts else name[:60]


events = [e for e in prof.events() if getattr(e, "device_type", None) is not None
          and str(e.device_type).endswith("CUDA")]
spans = []
by_name: dict = {}
for e in events:
    start, end = e.time_range.start, e.time_range.end
    spans.append((start, end, short(e.name)))
    key = short(e.name)
    t, n = by_name.get(key, (0.0, 0))
    by_name[key] = (t + (end - start), n + 1)
spans.sort()
busy, cur_s, cur_e, last = 0.0, None, None, None
gaps: dict = {}
for s, e, key in spans:
    if cur_e is None or s > cur_e:
        if cur_e is not None:
            busy += cur_e - cur_s
            if s - cur_e >= a.gap:
                t, n = gaps.get((last, key), (0.0, 0))
                gaps[(last, key)] = (t + s - cur_e, n + 1)
        cur_s, cur_e, last = s, e, key
    elif e > cur_e:
        cur_e, last = e, key
if cur_e is not None:
    busy += cur_e - cur_s
span = (spans[-1][1] - spans[0][0]) if spans else 0.0
total = sum(t for t, _ in by_name.values())
print(f"profiled {a.steps} steps: host wall {wall:.3f} ms/step (profiler on); GPU span "
      f"{span / 1e3 / a.steps:.3f} ms/step, busy (union) {busy / 1e3 / a.steps:.3f} ms/step, "
      f"kernel time summed {total / 1e3 / a.steps:.3f} ms/step, {len(events) / a.steps:.0f} "
      f"device activities per step")
print(f"{'kernel':58s} {'calls/step':>10s} {'µs/call':>9s} {'µs/step':>9s} {'%':>6s}")
for key, (t, n) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:a.top]:
    print(f"{key[:58]:58s} {n / a.steps:10.1f} {t / n:9.2f} {t / a.steps:9.1f} "
          f"{100 * t / total:6.1f}")
idle = sum(t for t, _ in gaps.values())
print(f"idle gaps >= {a.gap:g} µs: {idle / a.steps:.1f} µs per step; by (before -> after):")
for (before, after), (t, n) in sorted(gaps.items(), key=lambda kv: -kv[1][0])[:20]:
    print(f"  {str(before)[:40]:40s} -> {str(after)[:40]:40s} {n / a.steps:5.1f}/step "
          f"{t / n:8.1f} µs each {t / a.steps:8.1f} µs/step")
