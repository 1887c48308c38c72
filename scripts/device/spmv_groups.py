"""The BiCGStab products of one step's matrices alone, by threads per row (GPU).

python3 scripts/device/spmv_groups.py CONFIG [--repeat R] [--groups 1 2 4 8]

Builds the Simulation (device solvers), takes 3 steps so that the momentum and tracer matrices
are assembled, then times y = A x with the block partials of w·y (what BiCGStab issues; the
tracer's as ``csr_spmv_dot``) for each group size g: R products captured in one CUDA graph,
CUDA events around its replay, median of 5 replays / R — so the figure is the kernel's time in a
graph, without Python's launch cost. Prints µs per product, the bytes it must read and write,
and their rate against the device-to-device copy bandwidth measured in the same process.
"""
import argparse

import cupy
import numpy as np

import dycore
from dycore.bench.timing import time_graph_us
from dycore.bench.steps import time_steps
from dycore.solvers.krylov import DeviceMatrix
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--repeat", type=int, default=50)
ap.add_argument("--groups", type=int, nargs="*", default=[1, 2, 4, 8])
a = ap.parse_args()
cfg = dycore.load_config(a.config, **{"backend.name": "gpu", "backend.solver_mode": "device"})
sim = Simulation(cfg)
time_steps(sim, 3)
b, la, sysm = sim.backend, sim.systems.la, sim.systems


def graph_time(issue) -> float:
    return time_graph_us(b, issue, a.repeat)


src = cupy.empty(1 << 27)
dst = cupy.empty_like(src)
ev = []
for _ in range(10):
    e0 = b.marker().record()
    dst[...] = src
    e1 = b.marker().record()
    ev.append(e0.elapsed_ms(e1))
copy = 2 * src.nbytes / (np.median(ev) * 1e-3) / 1e9
del src, dst
print(f"{a.config}: device-to-device copy {copy:.0f} GB/s (read + write, 1 GiB, median of 10)")
print(f"{'matrix':28s} {'g':>3s} {'µs':>8s} {'MB':>8s} {'GB/s':>7s} {'of copy':>8s}")
for (values, m0) in list(sysm._matrices.values()):
    for g in a.groups:
        m = DeviceMatrix(la, sysm._indptr, sysm._indices, values, m0.bs, g)
        m.lean_blocks = m0.lean_blocks
        n, nrow, nnzb = m.n, m.nrow, m0.indices.shape[0]
        x = la.nb(cupy.random.default_rng(0).standard_normal(n))
        w = la.nb(cupy.random.default_rng(1).standard_normal(n))
        y = la.zeros(n)[1]
        partial = la.zeros(la.nparts(m), 2)[1]
        ctl = la.zeros(16)[1]
        kinds = [("lean", m0.lean_blocks), ("full", None)] if m0.bs == 3 else [("csr", None)]
        for kind, lb in kinds:
            m.lean_blocks = lb
            us = graph_time(lambda: la.spmv(m, x, y, w=w, partial=partial, ctl=ctl, op=-1))
            if m.bs == 1:
                mb = (nnzb * 12 + 4 * (nrow + 1) + 3 * 8 * n) / 1e6
            elif lb is None:
                mb = (nnzb * 76 + 4 * (nrow + 1) + 3 * 8 * n) / 1e6
            else:
                mb = (nnzb * (8 * lb.ncomp + 4) + lb.nfull * 72 + 4 * (nrow + 1) + 3 * 8 * n) / 1e6
            rate = mb / us * 1e3
            print(f"{'momentum ' + kind if m.bs == 3 else 'tracer':28s} {g:3d} {us:8.2f} "
                  f"{mb:8.1f} {rate:7.0f} {rate / copy:8.2f}", flush=True)
