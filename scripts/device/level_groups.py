"""Every AMG level's products by threads per row: which row group is fastest (GPU).

    python3 scripts/device/level_groups.py CONFIG [--mesh NX NY NZ] [--repeat R] \\
        [--min-level L] [--groups 1 2 4 8 16 32]

Builds the Simulation (device solvers) and the PyAMG hierarchy of its pressure matrix
(:class:`~dycore.solvers.amg.HostHierarchy`, as the serial device solver and the GPU ranks'
global V-cycle build it), then times y = A x (the lean ``csr_spmv`` kernel, float64) of each
level's A, R and P from level ``--min-level`` on, and of the coarsest pseudo-inverse, for each
row group g: R products captured in one CUDA graph, CUDA events around its replay, median of
7 replays / R (µs a product, without Python's launch cost). Prints each matrix's rows,
nonzeros, mean and longest row, the group :func:`~dycore.solvers.krylov.row_group` gives it,
and the µs for every g (docs/performance.md).
"""
import argparse
import time

import cupy
import numpy as np
import scipy.sparse as sp

import dycore
from dycore.bench.timing import time_graph_us
from dycore.solvers.amg import HostHierarchy
from dycore.solvers.krylov import DeviceMatrix, row_group
from dycore.timestepping.simulation import Simulation

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--mesh", type=int, nargs=3, metavar=("NX", "NY", "NZ"))
ap.add_argument("--repeat", type=int, default=50)
ap.add_argument("--min-level", type=int, default=0)
ap.add_argument("--groups", type=int, nargs="*", default=[1, 2, 4, 8, 16, 32])
a = ap.parse_args()
over = {"backend.name": "gpu", "backend.solver_mode": "device", "output.progress": False}
if a.mesh:
    over.update({"mesh.nx": a.mesh[0], "mesh.ny": a.mesh[1], "mesh.nz": a.mesh[2]})
t0 = time.perf_counter()
sim = Simulation(dycore.load_config(a.config, **over))
b, la = sim.backend, sim.systems.la
h = HostHierarchy(sim.ops.pressure_host, max_coarse=500)
print(f"{a.config}: built in {time.perf_counter() - t0:.1f} s; level sizes {h.sizes}", flush=True)


def graph_time(issue) -> float:
    return time_graph_us(b, issue, a.repeat)


mats = [(f"L{i} {name}", m) for i, (A, P, R, _, _) in enumerate(h.levels) if i >= a.min_level
        for name, m in (("A", A), ("R", R), ("P", P))]
mats.append(("coarse inv", sp.csr_matrix(h.coarse_inv)))
print(f"{'matrix':12s} {'rows':>7s} {'nnz':>9s} {'mean':>6s} {'max':>5s} {'rule':>5s} "
      + " ".join(f"{'g=%d' % g:>7s}" for g in a.groups))
for name, m in mats:
    m = m.tocsr()
    m.sort_indices()
    lengths = np.diff(m.indptr)
    x = la.nb(cupy.random.default_rng(0).standard_normal(m.shape[1]))
    y = la.zeros(m.shape[0])[1]
    ctl = la.zeros(16)[1]
    us = []
    for g in a.groups:
        dm = DeviceMatrix(la, m.indptr.astype(np.int32), m.indices.astype(np.int32),
                          m.data.astype(np.float64), 1, g)
        us.append(graph_time(lambda: la.spmv(dm, x, y, ctl=ctl)))
    print(f"{name:12s} {m.shape[0]:7d} {m.nnz:9d} {lengths.mean():6.1f} {lengths.max():5d} "
          f"{row_group(m.indptr, la.max_group):5d} " + " ".join(f"{u:7.2f}" for u in us),
          flush=True)
