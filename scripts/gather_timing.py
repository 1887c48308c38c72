"""What one snapshot's gather to rank 0 costs: ``gather_to_root`` of the 8 output fields.

    mpiexec -n K python3 scripts/gather_timing.py NNODES [--repeat 5]

Every rank owns NNODES / K node ids, ascending as a RankPartition's ``owned`` are, taken
from a random assignment of the nodes to the ranks (``--contiguous``: one run of ids per rank,
the cheapest scatter into node order; METIS parts of a renumbered mesh lie between the two),
and gathers an (n_owned, 8) float64 block — the u, v, w, p, θ′, q_v, q_c, q_r of
:meth:`dycore.parallel.simulation.DistributedSimulation.gather_fields`, one message per rank —
to rank 0, both ways in one process: :func:`dycore.parallel.halo.gather_to_root` (the owned
ids gathered and checked at every call) and a kept :class:`~dycore.parallel.halo.RootGather`
(ids once; what ``gather_fields`` does). Printed by rank 0 for each: the median and
the range of ``--repeat`` gathers [ms] (a barrier before each; rank 0's clock from the barrier
to the assembled array) and the bytes received. GPU ranks add a device→host copy of their owned
rows before it (not measured here).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("nnodes", type=int)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--contiguous", action="store_true")
    a = p.parse_args(argv)
    from mpi4py import MPI

    from dycore.parallel.halo import RootGather, gather_to_root
    comm = MPI.COMM_WORLD
    n, k, r = a.nnodes, comm.size, comm.rank
    if a.contiguous:
        owned = np.arange(r * n // k, (r + 1) * n // k, dtype=np.int64)
    else:
        owned = np.flatnonzero(np.random.default_rng(0).integers(0, k, n) == r)
    values = np.random.default_rng(10 + r).standard_normal((owned.size, 8))
    kept = RootGather(comm, owned, n)         # what DistributedSimulation keeps (ids once)
    ways = {"gather_to_root (ids every time)": lambda: gather_to_root(comm, owned, values, n),
            "RootGather (ids gathered once)": lambda: kept(values)}
    for name, gather in ways.items():
        times = []
        for _ in range(a.repeat + 1):                   # the first one warms the buffers up
            comm.Barrier()
            t0 = time.perf_counter()
            out = gather()
            times.append(time.perf_counter() - t0)
            if r == 0:
                assert np.array_equal(out[owned], values)
        if r == 0:
            t = 1e3 * np.asarray(times[1:])
            print(f"{k} ranks, {n:,} nodes{' (contiguous)' if a.contiguous else ''}, {name}: "
                  f"{np.median(t):.1f} ms [{t.min():.1f}-{t.max():.1f}], "
                  f"{64 * n * (k - 1) // k / 1e6:.0f} MB of values received by rank 0",
                  flush=True)

if __name__ == "__main__":
    main()
