"""What a cheaper rank-local AMG hierarchy would cost in pressure CG iterations: an A/B of
PyAMG's options on K parts of the pressure matrix (the runs' partition, or ``--partition
metis``: METIS on the node graph), in one process on the host.

For each variant every part's smoothed-aggregation hierarchy is built (PyAMG; the time is the
sum over the parts and the slowest part, the rank that everyone waits for), then the pressure
CG (SciPy, rtol 1e-10, a seeded random right-hand side) is preconditioned by the block
V-cycle of the GPU ranks (each part's own hierarchy on its rows, Chebyshev smoothing of degree
2 as ``dycore.solvers.amg.HostHierarchy``; SciPy's matrix products, not the device's summation
order). ``evolution(k=1)/energy(diagonal,maxiter=2)`` is what ranks build
(dycore.solvers.amg.RANK_LOCAL_AMG; ``evolution(k=1)/energy(diagonal)`` was until the evening
of 2026-11-29, ``evolution/energy`` before that day).

    PYTHONPATH=. python3 scripts/rank_amg_setup_ab.py CONFIG [--mesh NX NY NZ] [--parts K ...]
        [--partition auto|metis] [--variants NAME ...]
"""
import argparse
import time

import numpy as np
import scipy.sparse.linalg as spla

#: (name, strength, smooth): PyAMG smoothed_aggregation_solver options; smooth "classical":
#: PyAMG's Ruge-Stuben solver instead (strength: its strength argument)
VARIANTS = (("evolution/energy", "evolution", "energy"),
            ("evolution/jacobi", "evolution", "jacobi"),
            ("symmetric(0.0)/energy", ("symmetric", {"theta": 0.0}), "energy"),
            ("symmetric(0.0)/jacobi", ("symmetric", {"theta": 0.0}), "jacobi"),
            ("symmetric(0.1)/jacobi", ("symmetric", {"theta": 0.1}), "jacobi"),
            ("evolution(k=1)/energy", ("evolution", {"k": 1}), "energy"),
            ("evolution/energy(maxiter=2)", "evolution", ("energy", {"maxiter": 2})),
            ("evolution/energy(diagonal)", "evolution", ("energy", {"weighting": "diagonal"})),
            ("evolution(k=1)/energy(diagonal)", ("evolution", {"k": 1}),
             ("energy", {"weighting": "diagonal"})),
            ("evolution(k=1)/energy(diagonal,maxiter=2)", ("evolution", {"k": 1}),
             ("energy", {"weighting": "diagonal", "maxiter": 2})),
            ("evolution(k=1)/jacobi", ("evolution", {"k": 1}), "jacobi"),
            ("symmetric(0.0)/energy(diagonal)", ("symmetric", {"theta": 0.0}),
             ("energy", {"weighting": "diagonal"})),
            ("symmetric(0.25)/energy(diagonal)", ("symmetric", {"theta": 0.25}),
             ("energy", {"weighting": "diagonal"})),
            ("classical(0.25)/RS", ("classical", {"theta": 0.25}), "classical"))


def _levels(a, strength, smooth):
    """HostHierarchy's per-level arrays for a PyAMG hierarchy built with these options."""
    import pyamg

    from dycore.solvers.amg import _dinv_spectral_radius, smoother_coefficients
    state = np.random.get_state()
    np.random.seed(0)
    try:
        if smooth == "classical":
            ml = pyamg.ruge_stuben_solver(a.tocsr(), strength=strength, max_coarse=500)
        else:
            ml = pyamg.smoothed_aggregation_solver(a.tocsr(), symmetry="symmetric",
                                                   strength=strength, smooth=smooth,
                                                   max_coarse=500)
    finally:
        np.random.set_state(state)
    levels = []
    for lev in ml.levels[:-1]:
        A = lev.A.tocsr()
        rho = _dinv_spectral_radius(A)
        levels.append((A, lev.P.tocsr(), lev.R.tocsr(), 1.0 / A.diagonal(),
                       smoother_coefficients("chebyshev", 2, rho)))
    return levels, np.linalg.pinv(ml.levels[-1].A.toarray()), len(ml.levels)


def _vcycle(levels, coarse_inv, b):
    def smooth(a, dinv, coef, b, x):
        d = None
        for c1, c2 in coef:
            r = b if x is None else b - a @ x
            d = c1 * (dinv * r) + (0.0 if d is None else c2 * d)
            x = d.copy() if x is None else x + d
        return x

    def cycle(k, b):
        if k == len(levels):
            return coarse_inv @ b
        a, p, r, dinv, coef = levels[k]
        x = smooth(a, dinv, coef, b, None)
        x = x + p @ cycle(k + 1, r @ (b - a @ x))
        return smooth(a, dinv, coef, b, x)
    return cycle(0, b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--mesh", type=int, nargs=3)
    ap.add_argument("--parts", type=int, nargs="+", default=[4])
    ap.add_argument("--partition", choices=("auto", "metis"), default="auto",
                    help="auto: the runs' partition (dycore.parallel.columns.mesh_partition: "
                         "the vertical columns where the mesh has them); metis: METIS on the "
                         "node graph")
    ap.add_argument("--variants", nargs="+", metavar="NAME",
                    help="only these (default: all): " + ", ".join(v[0] for v in VARIANTS))
    args = ap.parse_args()
    variants = [v for v in VARIANTS if not args.variants or v[0] in args.variants]
    if args.variants and len(variants) != len(args.variants):
        ap.error(f"--variants: unknown name among {args.variants}")
    import dycore
    from dycore.parallel.columns import mesh_partition
    from dycore.parallel.partition import metis_partition
    cfg = dycore.load_config(args.config)
    if args.mesh:
        cfg.mesh.nx, cfg.mesh.ny, cfg.mesh.nz = args.mesh
    sim = dycore.Simulation(cfg)
    a = sim.ops.pressure_host.tocsr()
    n = a.shape[0]
    b = np.random.default_rng(0).standard_normal(n)
    b[sim.ops.pin] = 0.0
    print(f"{args.config} {args.mesh or ''}: {n} pressure rows, {a.nnz} nonzeros; "
          f"CG rtol 1e-10")
    for k in args.parts:
        if args.partition == "metis":
            part = metis_partition(sim.sparsity.indptr, sim.sparsity.indices, k)
            how = "METIS on the node graph"
        else:
            part, how = mesh_partition(sim.mesh.coords, sim.sparsity.indptr,
                                       sim.sparsity.indices, k)
        rows = [np.flatnonzero(part == r) for r in range(k)]
        blocks = [a[r][:, r].tocsr() for r in rows]
        print(f"\nK = {k} parts ({', '.join(str(r.size) for r in rows)} rows; {how})")
        print(f"  {'strength/prolongation':24s} {'build sum s':>11s} {'slowest s':>9s} "
              f"{'levels':>6s} {'CG its':>6s}")
        for name, strength, smooth in variants:
            built, secs = [], []
            for blk in blocks:
                t0 = time.perf_counter()
                built.append(_levels(blk, strength, smooth))
                secs.append(time.perf_counter() - t0)

            def apply(x, built=built):
                x = np.ravel(x)
                y = np.empty_like(x)
                for r, (levels, cinv, _) in zip(rows, built):
                    y[r] = _vcycle(levels, cinv, x[r])
                return y
            count = [0]
            spla.cg(a, b, rtol=1e-10, maxiter=3000,
                    M=spla.LinearOperator((n, n), matvec=apply),
                    callback=lambda _: count.__setitem__(0, count[0] + 1))
            print(f"  {name:24s} {sum(secs):11.2f} {max(secs):9.2f} "
                  f"{max(lv for _, _, lv in built):6d} {count[0]:6d}", flush=True)


if __name__ == "__main__":
    main()
