"""Where a device pressure solve's time goes (GPU): each piece captured as a CUDA graph and
replayed, CUDA events, median of 30 after 3 warm-ups; bytes moved at least, and GB/s.

python3 scripts/pcg_profile.py CONFIG
"""
import sys

import cupy as cp
import numpy as np

import dycore
from dycore.backend import solver_kernels as K
from dycore.timestepping.simulation import Simulation

cfg = dycore.load_config(sys.argv[1], **{"backend.name": "gpu", "backend.solver_mode": "device",
                                         "backend.assembly": "deterministic",
                                         "solvers.pressure.method": "cg"})
sim = Simulation(cfg)
b = sim.backend
pcg = sim.systems.pcg
la, A, vc = pcg.la, pcg.a, pcg.m
ctl = pcg.ctl
cp.asarray(ctl)[:] = 0.0           # running: every kernel does its work
rng = np.random.default_rng(0)
x = la.nb(b.to_device(rng.standard_normal(A.n)))
y = la.zeros(A.n)[1]


def timed(label, issue, nbytes=None, reps=30):
    g = b.capture(issue)
    for _ in range(3):
        g.replay()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(reps):
        cp.asarray(ctl)[K.DONE] = 0.0
        s.record(b.stream)
        g.replay()
        e.record(b.stream)
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    med = float(np.median(ts))
    bw = "" if nbytes is None else f"  {nbytes / 1e6:8.1f} MB  {nbytes / med / 1e6:7.0f} GB/s"
    print(f"{label:48s} {1e3 * med:9.1f} us [{1e3 * min(ts):.1f}-{1e3 * max(ts):.1f}]{bw}",
          flush=True)
    return med


def nnz(m):
    return int(m.indices.shape[0])


def mbytes(m, vec=2):
    return nnz(m) * 12 + (m.nrow + 1) * 4 + vec * 8 * m.nrow


print(f"fine level: n = {A.n}, nnz = {nnz(A)}, g = {A.g}; levels {sim.systems.amg_sizes}")
for lev_i, lev in enumerate(vc.levels):
    a = lev["A"]
    print(f"  level {lev_i}: n {a.nrow} nnz {nnz(a)} ({nnz(a) / a.nrow:.1f}/row) g {a.g}; "
          f"P nnz {nnz(lev['P'])}, R nnz {nnz(lev['R'])}")
z = cp.zeros(1)
timed("empty graph (1 no-op kernel)", lambda: la.launch(la.k.copy, 1, x, y))
timed("copy n (vector kernel)", lambda: la.launch(la.k.copy, A.n, x, y), 16 * A.n)
la.lean = False
timed("bsr_spmv general (A x)", lambda: la.spmv(A, x, y, ctl=ctl), mbytes(A))
la.lean = True
timed("csr_spmv lean (A x)", lambda: la.spmv(A, x, y, ctl=ctl), mbytes(A))
for g in (2, 4, 8, 16, 32):
    timed(f"csr_spmv lean g={g}", lambda g=g: la.launch(la.k.csr_spmv, A.nrow * g, A.indptr,
                                                          A.indices, A.data, g, 0, x,
                                                          la.empty_f,
                                                          y, 0, ctl), mbytes(A))
timed("bsr_spmv + dot (CG's A p)", lambda: la.spmv(A, x, y, w=x, partial=pcg.partial, ctl=ctl,
                                                  op=-1), mbytes(A, 3))
lev0 = vc.levels[0]
timed("V-cycle (whole)", lambda: vc.issue(x, pcg.partial, ctl, -1))
timed("V-cycle level-0 pre-smooth", lambda: vc._smooth(lev0, x, None, None, ctl))
timed("one CG iteration (whole)", pcg._iterate)
pcg.b_arr[:] = cp.asarray(rng.standard_normal(A.n))
cp.cuda.runtime.deviceSynchronize()
s, e = cp.cuda.Event(), cp.cuda.Event()
pcg.solve(check=True)
ts = []
for _ in range(10):
    s.record(b.stream)
    xs, its = pcg.solve(check=False)
    e.record(b.stream)
    e.synchronize()
    ts.append(cp.cuda.get_elapsed_time(s, e))
print(f"pressure solve (graph replay, unchecked): {np.median(ts):.2f} ms, "
      f"{int(cp.asarray(ctl)[K.ITS].get())} iterations")
