"""Time the first-order pattern build (dycore.assembly.sparsity.build_sparsity) against its
NumPy definition (tests/unit/test_sparsity.py: np.unique of the (row, column) keys, stable
argsorts) on a configuration's mesh, in one process, and check that every array is equal.

    python3 scripts/sparsity_ab.py CONFIG [NX NY NZ] [--repeat 3]

Prints the mesh size, the best of ``--repeat`` wall times of each (after one untimed call of
the @njit version: its compile or cache load) and the speed-up.
"""
import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit")]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("cells", type=int, nargs="*", help="NX NY NZ (default: the config's)")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    import numpy as np

    import dycore
    from cases import build_config_mesh, load_case
    from dycore.assembly.sparsity import build_sparsity
    from test_sparsity import FIELDS, numpy_sparsity
    over = {"mesh": dict(zip(("nx", "ny", "nz"), args.cells))} if args.cells else {}
    cfg = dycore.load_config(args.config, **over)
    mesh = build_config_mesh(cfg, load_case(cfg.case.name), cfg.case.build_parameters())
    build_sparsity(mesh.tets[:1], mesh.nnodes)            # compile / load the @njit passes
    best = {}
    for name, fn in (("numpy definition", numpy_sparsity), ("build_sparsity", build_sparsity)):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = fn(mesh.tets, mesh.nnodes)
            times.append(time.perf_counter() - t0)
        best[name] = (min(times), out)
    ref, got = best["numpy definition"][1], best["build_sparsity"][1]
    equal = all(np.array_equal(getattr(got, f), ref[f]) for f in FIELDS)
    print(f"{mesh.tets.shape[0]:,} tets, {mesh.nnodes:,} nodes, {got.nnz:,} nonzeros")
    for name, (t, _) in best.items():
        print(f"  {name:18s} {t:8.3f} s (best of {args.repeat})")
    print(f"  speed-up {best['numpy definition'][0] / best['build_sparsity'][0]:.1f}x; "
          f"every array equal: {equal}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
