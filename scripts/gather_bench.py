"""The snapshot gather of a decomposed run, timed: ``mpiexec -n K python3 scripts/gather_bench.py
--nodes N [--repeat R]``.

Each rank owns a random 1/K of N nodes (a shuffled split: the owned ids are scattered, as METIS
parts are) and 8 float64 fields (u, v, w, p, θ′, q_v, q_c, q_r). Timed on rank 0, barrier
before each, median of R: (a) ``pickle``: the objects gather of (ids, values) per field (what
``gather_to_root`` did before); (b) ``Gatherv``: ``gather_to_root`` per field (raw buffers);
(c) ``Gatherv, stacked``: one ``gather_to_root`` of the (n_owned, 8) block. Prints one line per
variant with the bytes rank 0 receives and the peak resident memory of rank 0.
"""
import argparse
import resource
import time

import numpy as np
from mpi4py import MPI

from dycore.parallel.halo import gather_to_root

ap = argparse.ArgumentParser()
ap.add_argument("--nodes", type=int, default=98441)
ap.add_argument("--repeat", type=int, default=5)
a = ap.parse_args()
comm = MPI.COMM_WORLD
n, k = a.nodes, comm.size
part = np.random.default_rng(7).permutation(n) % k
owned = np.flatnonzero(part == comm.rank)
fields = np.random.default_rng(comm.rank).standard_normal((owned.size, 8))


def pickled(values):
    parts = comm.gather((owned, values), root=0)
    if comm.rank:
        return None
    out = np.zeros((n,) + values.shape[1:])
    for ids, vals in parts:
        out[ids] = vals
    return out


variants = {
    "pickle, per field": lambda: [pickled(fields[:, j].copy()) for j in range(8)],
    "Gatherv, per field": lambda: [gather_to_root(comm, owned, fields[:, j], n) for j in range(8)],
    "Gatherv, stacked": lambda: gather_to_root(comm, owned, fields, n),
}
check = gather_to_root(comm, owned, fields, n)
for name, fn in variants.items():
    ts = []
    for _ in range(a.repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    if comm.rank == 0:
        got = np.column_stack(out) if isinstance(out, list) else out
        assert np.array_equal(got, check), name
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{k} ranks, {n} nodes, 8 fields ({8 * 8 * n / 1e6:.1f} MB): {name}: "
              f"{1e3 * np.median(ts):.1f} ms (min {1e3 * min(ts):.1f}); rank-0 peak RSS "
              f"{rss:.0f} MB", flush=True)
