"""The pressure solve on K GPU ranks of one host: DeviceRankPCG over NCCL, against one GPU.

    python3 scripts/nccl_pcg_check.py configs/mountainwave3d.yaml --ranks 2 \
        [--precond jacobi|local_amg] [--reduction exact|sum] [--json F]

(``--precond jacobi,local_amg --reduction exact,sum`` runs every pair on one set-up.)

The parent builds the configuration's serial set-up on the CPU (mesh, first-order pattern, the
pinned pressure matrix CMC + KMK), partitions the nodes as the CPU ranks do (METIS on the
first-order node graph, :func:`dycore.parallel.partition.metis_partition`; without pymetis,
``--partition auto`` falls back to slabs along x of equal node counts and says so) and draws a
fixed right-hand side (standard normal, seed 2026). Then, one process per GPU at a time:

1. K rank processes (rank r on GPU r, ``NCCL_NVLS_ENABLE=0``, one NCCL communicator) each build
   :class:`~dycore.parallel.device_krylov.DeviceRankPCG` over the owned rows and time it twice
   on the same solver: **uncaptured** (``graphs`` off: every kernel and NCCL call issued from
   Python, the verdict read every ``--check-every`` iterations), then **captured** (``graphs``
   on: the first warm-up solve learns the iteration count, the ranks agree on the budget and
   capture it as CUDA graphs; later solves replay them with one host read). Each variant:
   ``--warmup`` solves (host clock, the first of the captured ones includes the capture), then
   ``--repeats`` timed solves (CUDA events on the backend's stream around each solve; the
   median). Each rank sends back its owned solution, iterations, host reads per solve, halo
   and all-reduce bytes per iteration, and whether the captured solution equals the
   uncaptured one in every bit;
2. one baseline process on GPU 0: the serial device solver of a one-GPU run
   (:class:`dycore.solvers.krylov.DevicePCG` over the whole matrix; Jacobi, or the global
   Chebyshev V-cycle for ``local_amg``, as ``solver_mode: device`` runs it, with its own
   captured graphs), timed the same way, and — for K > 1 — the same DeviceRankPCG on one rank
   (NCCL of size 1), uncaptured and captured.

Printed (and written to ``--json``, a list of runs): per rank, then a summary with iterations,
for each variant the ms per solve (max over ranks), µs per iteration, host reads per solve and
the first warm-up solve's ms (``captured``, ``uncaptured``; ``speedup_captured``), bytes per
iteration, the true relative residual ‖b − A x‖/‖b‖ of the K-rank captured solution (host,
float64), its max difference from the serial device solution and from the 1-rank captured
DeviceRankPCG solution (0 for ``exact`` + ``jacobi``: the iterates are the same bits on any
rank count, in fast mode too). ``--ranks 1`` runs step 1 on one GPU and step 2's serial
solver. Every rank sums a matrix row with the same number of threads (``--group``; 0: the
serial solver's choice for the whole matrix), so no operation depends on the partition. Exit
status 1 if a solve fails, the ranks (or the two variants) disagree on the iteration count, a
captured solve did not replay its graph or (on GPUs) the capture failed (``cuda_graph``), a
captured solution differs from the uncaptured one in any bit (K ranks and the 1-rank solver), the true residual is above 1000·rtol (a wrong
solution, not rounding: the stop test is on the recursive residual), or — exact + Jacobi on
K > 1 ranks — the solution differs from the 1-rank one in any bit.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np
from rank_procs import collect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _node_owners(mesh, spg, k: int, how: str):
    """(part, name): METIS as the CPU ranks (``metis``; ``auto`` when pymetis imports) or
    slabs along x of equal node counts (``slabs``, as scripts/nccl_ranks_check.py)."""
    from dycore.parallel.partition import metis_partition
    if how == "auto":
        try:
            import pymetis  # noqa: F401
            how = "metis"
        except ImportError:
            how = "slabs"
    if how == "metis" or k == 1:
        return metis_partition(spg.indptr, spg.indices, k), "metis"
    order = np.argsort(mesh.coords[:, 0], kind="stable")
    part = np.empty(mesh.nnodes, np.int64)
    part[order] = np.arange(mesh.nnodes) * k // mesh.nnodes
    return part, "slabs-x"


def _setup(config_path: str, k: int, how: str = "auto"):
    """(n, tets, pinned pressure CSR, rank partitions, owned rows per rank, rhs, config, for
    k > 1 the one-rank partition and owned rows, the partition's name) of the config."""
    import dycore
    from dycore.backend.cpu import CPUBackend
    from dycore.parallel.partition import partition_mesh
    from dycore.parallel.rank_ops import owned_rows
    from dycore.timestepping.simulation import Simulation
    cfg = dycore.load_config(config_path)
    sim = Simulation(cfg, backend=CPUBackend(threads=0))
    spg, mesh = sim.sparsity, sim.mesh
    a = sim.ops.pressure_host.tocsr()
    n = mesh.nnodes
    part, how = _node_owners(mesh, spg, k, how)
    rps = partition_mesh(mesh.tets, n, spg.indptr, spg.indices, part)
    rows = [owned_rows(rp, n, a, 1, 1) for rp in rps]
    one = None
    if k > 1:
        (rp1,) = partition_mesh(mesh.tets, n, spg.indptr, spg.indices, np.zeros(n, np.int32))
        one = (rp1, owned_rows(rp1, n, a, 1, 1))
    b = np.random.default_rng(2026).standard_normal(n)
    return n, int(mesh.tets.shape[0]), a, rps, rows, b, cfg, one, how


def _timed(stream, solve, warmup, repeats):
    """(iterations, median ms, all ms, warm-up ms) of ``solve()`` (CUDA events around each
    call; the warm-up calls on the host clock, to the end of their work)."""
    import cupy as cp
    its, warm = None, []
    for _ in range(warmup):
        t0 = time.perf_counter()
        its = solve()
        e = cp.cuda.Event()
        e.record(stream)
        e.synchronize()
        warm.append(round(1e3 * (time.perf_counter() - t0), 2))
    ms = []
    for _ in range(repeats):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record(stream)
        its = solve()
        e.record(stream)
        e.synchronize()
        ms.append(cp.cuda.get_elapsed_time(s, e))
    return its, float(np.median(ms)), [round(v, 4) for v in ms], warm


def _both(be, s, bd, opts):
    """Time one DeviceRankPCG issued from Python (``graphs`` off: checked every
    ``check_every`` iterations), then replaying its captured graphs (``graphs`` on: the first
    warm-up solve learns the budget and captures). Returns ({"uncaptured": ..., "captured":
    ..., "captured_bits_equal": bool}, the captured solution on the host)."""
    out, xs = {}, {}
    for name, graphs in (("uncaptured", False), ("captured", True)):
        s.graphs = graphs
        reads = []

        def solve():
            c0 = be.counters.syncs
            its = s.solve(bd)[1]
            reads.append(be.counters.syncs - c0)
            return its
        its, ms, all_ms, warm = _timed(be.stream, solve, opts["warmup"], opts["repeats"])
        out[name] = {"iterations": its, "ms_per_solve": ms, "ms_all": all_ms,
                     "ms_warmup": warm, "host_reads_per_solve": reads[-1],
                     "replayed": s.replayed}
        if graphs:
            out[name].update(s.graph_info())
        xs[name] = be.to_host(s.x)
    out["captured_bits_equal"] = bool(np.array_equal(xs["captured"], xs["uncaptured"]))
    return out, xs["captured"]


def _select(rank):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import cupy as cp
    from numba import cuda
    cp.cuda.Device(rank).use()
    cuda.select_device(rank)
    name = getattr(cuda.get_current_device(), "name", "CUDA simulator")
    return name.decode() if isinstance(name, bytes) else name


def _rank_solver(backend, transport, rp, rows, opts):
    from dycore.parallel.device_krylov import DeviceRankPCG
    return DeviceRankPCG(backend, transport, rp.plan(2), rows, reduction=opts["reduction"],
                         precond=opts["precond"], rtol=opts["rtol"], maxiter=opts["maxiter"],
                         group=opts["group"], check_every=opts["check_every"],
                         amg_dtype=np.float64 if opts["strict"] else np.float32, graphs=False)


def _rank(rank, k, uid, rp, rows, b_owned, opts, queue):
    try:
        gpu = _select(rank)
        from dycore.backend.gpu import gpu_backend
        from dycore.parallel.nccl import NcclTransport, close_after_graphs
        be = gpu_backend(solver_mode="device", strict=opts["strict"])
        t = NcclTransport(rank, k, uid, be.stream)
        t0 = time.perf_counter()
        s = _rank_solver(be, t, rp, rows, opts)
        setup_s = time.perf_counter() - t0
        bd = be.to_device(b_owned)
        timing, x = _both(be, s, bd, opts)
        queue.put(dict({"rank": rank, "gpu": gpu, "owned": rp.n_owned, "local": s.n_local,
                        "iterations": timing["captured"]["iterations"],
                        "setup_s": round(setup_s, 2),
                        "bytes_per_iteration": s.bytes_per_iteration(),
                        "amg_sizes": s.amg_sizes, "x": x, "ok": True}, **timing))
        be.synchronize()
        del s                                   # its graphs, then the communicator
        close_after_graphs(be, t)
    except Exception as exc:                                  # report, do not hide
        queue.put({"rank": rank, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})


def _baseline(a, b, rp1, rows1, opts, queue):
    """GPU 0: the serial device solver (and the 1-rank DeviceRankPCG when K > 1)."""
    try:
        from types import SimpleNamespace

        from dycore.backend import solver_kernels as K
        from dycore.backend.gpu import gpu_backend
        from dycore.solvers.amg import DeviceJacobi, DeviceVCycle, HostHierarchy
        from dycore.solvers.krylov import DeviceLinalg, DeviceMatrix, DevicePCG
        gpu = _select(0)
        be = gpu_backend(solver_mode="device", strict=opts["strict"])
        la = DeviceLinalg(be, be.solver_block)
        dm = DeviceMatrix.from_scipy(la, a)
        if opts["precond"] == "jacobi":
            m = DeviceJacobi(la, dm, 1.0 / a.diagonal())
        else:
            h = HostHierarchy(a, "chebyshev", 2)
            m = DeviceVCycle(la, h, np.float64 if opts["strict"] else np.float32)
        cfg = SimpleNamespace(rtol=opts["rtol"], atol=0.0, max_iterations=opts["maxiter"])
        pcg = DevicePCG(la, dm, m, cfg, be.xp.zeros(K.NCTL))
        pcg.b_arr[...] = be.to_device(b)

        its, ms, all_ms, _ = _timed(be.stream, lambda: pcg.solve()[1], opts["warmup"],
                                    opts["repeats"])
        out = {"gpu": gpu, "serial": {"solver": f"DevicePCG + {type(m).__name__}",
                                      "iterations": its, "ms_per_solve": ms, "ms_all": all_ms},
               "x_serial": be.to_host(pcg.x_arr), "ok": True}
        if rp1 is not None:
            from dycore.parallel.nccl import NcclTransport, close_after_graphs
            from cupy.cuda import nccl
            t = NcclTransport(0, 1, nccl.get_unique_id(), be.stream)
            s = _rank_solver(be, t, rp1, rows1, opts)
            bd = be.to_device(b)
            out["rank1"], out["x_rank1"] = _both(be, s, bd, opts)
            queue.put(out)
            be.synchronize()
            del s, pcg, m
            close_after_graphs(be, t)
        else:
            queue.put(out)
    except Exception as exc:
        queue.put({"ok": False, "error": f"baseline: {type(exc).__name__}: {exc}"[:500]})


def _variant(a, setup, precond, reduction, nccl):
    """Run one (preconditioner, reduction): K ranks, then the baseline; the summary dict and
    the per-rank results (or an error dict and None)."""
    n, nele, mat, rps, rows, b, cfg, one, group, setup_s, how = setup
    rp1, rows1 = one if one is not None else (None, None)
    opts = {"reduction": reduction, "precond": precond,
            "rtol": cfg.solvers.pressure.rtol if a.rtol is None else a.rtol,
            "maxiter": a.maxiter, "group": group, "check_every": a.check_every,
            "strict": a.strict, "warmup": a.warmup, "repeats": a.repeats}
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    uid = nccl.get_unique_id()
    procs = [ctx.Process(target=_rank, args=(r, a.ranks, uid, rps[r], rows[r], b[rps[r].owned],
                                             opts, queue)) for r in range(a.ranks)]
    for p in procs:
        p.start()
    results, err = collect(procs, queue, a.ranks, a.timeout)
    if err is None:
        bp = ctx.Process(target=_baseline, args=(mat, b, rp1, rows1, opts, queue))
        bp.start()
        base, err = collect([bp], queue, 1, a.timeout)
    head = {"precond": precond, "reduction": reduction, "ok": False}
    if err is not None:
        return dict(head, error=err), None
    base = base[0]
    bad = [r for r in results + [base] if not r["ok"]]
    if bad:
        return dict(head, errors=[r["error"] for r in bad]), None
    results.sort(key=lambda r: r["rank"])
    x = np.zeros(n)
    for rp, r in zip(rps, results):
        x[rp.owned] = r.pop("x")
    res = float(np.linalg.norm(b - mat @ x) / np.linalg.norm(b))
    xs = base.pop("x_serial")
    scale = float(np.abs(xs).max())
    its0 = results[0]["iterations"]

    def variant(name):
        ms = max(r[name]["ms_per_solve"] for r in results)
        return {"iterations": sorted({r[name]["iterations"] for r in results}),
                "ms_per_solve_max": ms, "us_per_iteration": 1e3 * ms / max(1, its0),
                "host_reads_per_solve": max(r[name]["host_reads_per_solve"] for r in results),
                "first_warmup_ms_max": max(r[name]["ms_warmup"][0] for r in results)}
    cap, unc = variant("captured"), variant("uncaptured")
    cap["budget"] = sorted({r["captured"]["budget"] for r in results})
    cap["cuda_graph"] = all(r["captured"]["cuda_graph"] for r in results)
    cap["graph_kernels"] = [r["captured"]["kernels"] for r in results]
    summary = {
        "config": a.config, "ranks": a.ranks, "nodes": n, "tets": nele, "partition": how,
        "owned": [r["owned"] for r in results], "precond": precond, "reduction": reduction, "rtol": opts["rtol"],
        "group": group, "strict": a.strict, "check_every": a.check_every,
        "setup_s": round(setup_s, 1), "nccl": nccl.get_version(),
        "gpus": sorted({r["gpu"] for r in results}),
        "iterations": its0,
        "captured": cap, "uncaptured": unc,
        "speedup_captured": unc["ms_per_solve_max"] / max(cap["ms_per_solve_max"], 1e-9),
        "captured_bits_equal_uncaptured": all(r["captured_bits_equal"] for r in results),
        "halo_bytes_per_iteration_max": max(r["bytes_per_iteration"]["halo"] for r in results),
        "halo_bytes_per_iteration_total": sum(r["bytes_per_iteration"]["halo"]
                                              for r in results),
        "allreduce_bytes_per_iteration": results[0]["bytes_per_iteration"]["allreduce"],
        "amg_sizes_rank0": results[0]["amg_sizes"],
        "residual": res,
        "serial_device": base["serial"],
        "max_abs_diff_vs_serial": float(np.abs(x - xs).max()),
        "max_rel_diff_vs_serial": float(np.abs(x - xs).max() / scale),
    }
    if "x_rank1" in base:
        x1 = base.pop("x_rank1")
        summary["rank1"] = base["rank1"]
        summary["max_abs_diff_vs_1rank"] = float(np.abs(x - x1).max())
        summary["entries_differing_from_1rank"] = int(np.count_nonzero(x != x1))
    its = {r[v]["iterations"] for r in results for v in ("captured", "uncaptured")}
    replayed = all(r["captured"]["replayed"] for r in results)
    summary["ok"] = bool(len(its) == 1 and res <= 1e3 * opts["rtol"] and replayed
                         and summary["captured_bits_equal_uncaptured"])
    on_gpu = "CUDA simulator" not in summary["gpus"]          # on GPUs: really a CUDA graph
    summary["ok"] &= cap["cuda_graph"] or not on_gpu
    if "rank1" in summary:
        r1 = summary["rank1"]
        summary["ok"] &= (r1["captured_bits_equal"] and r1["captured"]["replayed"]
                          and (r1["captured"]["cuda_graph"] or not on_gpu)
                          and r1["captured"]["iterations"] == r1["uncaptured"]["iterations"])
    if reduction == "exact" and precond == "jacobi" and a.ranks > 1:
        summary["ok"] &= summary["entries_differing_from_1rank"] == 0
    return summary, results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--precond", default="jacobi",
                    help="jacobi, local_amg, or a comma-separated list of them")
    ap.add_argument("--reduction", default="exact",
                    help="exact, sum, or a comma-separated list (every pair with --precond "
                         "runs, the set-up built once)")
    ap.add_argument("--partition", choices=("auto", "metis", "slabs"), default="auto",
                    help="auto: METIS as the CPU ranks when pymetis imports, else slabs along x")
    ap.add_argument("--rtol", type=float, default=None,
                    help="default: the config's solvers.pressure.rtol")
    ap.add_argument("--maxiter", type=int, default=20000)
    ap.add_argument("--group", type=int, default=0,
                    help="threads per matrix row (1: SciPy's order; 0: the serial solver's "
                         "choice for the whole matrix, the same on every rank)")
    ap.add_argument("--check-every", type=int, default=8)
    ap.add_argument("--strict", action="store_true", help="kernels without FMA contraction")
    ap.add_argument("--warmup", type=int, default=2,
                    help="solves before the timed ones, per variant (>= 1)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=420)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.warmup < 1:
        ap.error("--warmup must be at least 1 (the first captured solve learns and captures)")
    preconds, reductions = a.precond.split(","), a.reduction.split(",")
    for name, vals, ok in (("--precond", preconds, ("jacobi", "local_amg")),
                           ("--reduction", reductions, ("exact", "sum"))):
        if any(v not in ok for v in vals):
            ap.error(f"{name}: {','.join(vals)} (choose from {', '.join(ok)})")
    from cupy.cuda import nccl

    from dycore.solvers.krylov import group_size
    t0 = time.perf_counter()
    n, nele, mat, rps, rows, b, cfg, one, how = _setup(a.config, a.ranks, a.partition)
    group = a.group or group_size(mat.nnz / n)
    setup = (n, nele, mat, rps, rows, b, cfg, one, group, time.perf_counter() - t0, how)
    runs, ok = [], True
    for precond in preconds:
        for reduction in reductions:
            summary, results = _variant(a, setup, precond, reduction, nccl)
            for r in results or []:
                print(json.dumps(r))
            print(json.dumps(summary), flush=True)
            runs.append({"summary": summary, "ranks": results})
            ok &= summary["ok"]
            if a.json:                   # after every variant: a timeout keeps what ran
                Path(a.json).write_text(json.dumps(runs, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
