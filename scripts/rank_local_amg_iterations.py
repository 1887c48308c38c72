"""Pressure CG iterations with the serial AMG V-cycle against the rank-local (block-Jacobi /
additive-Schwarz) V-cycle of K METIS parts, in one process (docs/architecture.md,
"Scaling out"). The block preconditioner applies each part's own hierarchy to its rows, as
dycore.parallel.krylov.LocalAMG does on rank r.

    PYTHONPATH=. python3 scripts/rank_local_amg_iterations.py [CONFIG] [K ...]
"""
import sys

import numpy as np
import scipy.sparse.linalg as spla


def main(config="configs/mountainwave3d_small.yaml", ks=(2, 4, 8)):
    import dycore
    from dycore.parallel.partition import metis_partition
    from dycore.solvers.linear import amg_hierarchy

    sim = dycore.Simulation(dycore.load_config(config))
    a = sim.ops.pressure_host
    n = a.shape[0]
    b = np.random.default_rng(0).standard_normal(n)
    b[sim.ops.pin] = 0.0

    def its(m):
        count = [0]
        spla.cg(a, b, rtol=1e-10, M=m, maxiter=5000,
                callback=lambda _: count.__setitem__(0, count[0] + 1))
        return count[0]

    print(f"{config}: {n} nodes, pressure nnz {a.nnz}, CG rtol 1e-10")
    print(f"serial AMG: {its(amg_hierarchy(a).aspreconditioner(cycle='V'))} iterations")
    d = a.diagonal()
    print(f"Jacobi: {its(spla.LinearOperator((n, n), matvec=lambda r: r.ravel() / d))} iterations")
    sp_ = sim.sparsity
    for k in ks:
        part = metis_partition(sp_.indptr, sp_.indices, k)
        blocks = []
        for r in range(k):
            rows = np.flatnonzero(part == r)
            blocks.append((rows, amg_hierarchy(a[rows][:, rows].tocsr()).aspreconditioner(cycle="V")))

        def apply(x, blocks=blocks):
            x = x.ravel()
            y = np.empty_like(x)
            for rows, m in blocks:
                y[rows] = m @ x[rows]
            return y
        m = spla.LinearOperator((n, n), matvec=apply)
        print(f"rank-local AMG, K = {k}: {its(m)} iterations")


if __name__ == "__main__":
    args = sys.argv[1:]
    cfg = args[0] if args and not args[0].isdigit() else "configs/mountainwave3d_small.yaml"
    ks = [int(v) for v in args if v.isdigit()] or (2, 4, 8)
    main(cfg, ks)
