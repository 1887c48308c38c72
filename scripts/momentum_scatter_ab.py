"""A/B/A in one process (GPU): the atomic momentum assembly scattering the declared 5 of 9
entries of each 3x3 block (the production kernel, 80 matrix atomics per element) against all
9 entries (144), as :mod:`dycore.bench.scatter_ab` describes.

python3 scripts/momentum_scatter_ab.py CONFIG [--mesh NX,NY,NZ] [--repeat N] [--block B]
                                              [--out FILE.json]

Builds the configuration's mesh (or NX,NY,NZ cells) and its sparsity, then times, per phase
(declared, all entries, declared again), the kernel alone and the whole assembler call (fill +
kernel) with CUDA events on the backend's stream, median [min-max] of N; checks the assembled
values against the deterministic assembly. Prints a Markdown table and writes the JSON.
"""
import argparse
import json
import time

import dycore
from dycore import cases
from dycore.assembly.sparsity import build_sparsity
from dycore.bench.scatter_ab import scatter_ab

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--mesh", help="nx,ny,nz instead of the configuration's cells")
ap.add_argument("--repeat", type=int, default=50)
ap.add_argument("--block", type=int, default=128)
ap.add_argument("--out", default="momentum_scatter_ab.json")
a = ap.parse_args()
over = {}
if a.mesh:
    over.update(zip(("mesh.nx", "mesh.ny", "mesh.nz"), map(int, a.mesh.split(","))))
cfg = dycore.load_config(a.config, **over)
t = time.perf_counter()
mesh = cases.build_config_mesh(cfg)
sp = build_sparsity(mesh.tets, mesh.nnodes)
print(f"mesh {mesh.nele} tets, {mesh.nnodes} nodes, {sp.nnz} nonzeros "
      f"({time.perf_counter() - t:.1f} s)", flush=True)
res = scatter_ab(mesh, sp, repeat=a.repeat, block=a.block)
res["config"], res["date_utc"] = a.config, time.strftime("%Y-%m-%d %H:%M", time.gmtime())
print(f"{res['device']}; block {a.block}; kernel resources {res['kernel_resources']}")
print(f"\n| variant | atomics / element | kernel ms median [min-max] of {a.repeat} | "
      "GB/s of atomics | fill + kernel ms | max rel diff vs det. | undeclared != 0 |"
      "\n|---|---|---|---|---|---|---|")
for r in res["runs"]:
    k, c = r["kernel"], r["call"]
    print(f"| {r['variant']} | {res['atomics_per_element'][r['variant']]} | "
          f"{k['median_ms']:.3f} [{k['min_ms']:.3f}-{k['max_ms']:.3f}] | "
          f"{r['kernel_atomic_gb_s']:.0f} | {c['median_ms']:.3f} | "
          f"{r['max_rel_diff_vs_deterministic']:.1e} | {r['undeclared_nonzero']} |")
with open(a.out, "w", encoding="utf-8") as f:
    json.dump(res, f, indent=1)
print(f"wrote {a.out}")
