"""GPU ranks' building blocks on K GPUs of one host: NCCL halo exchange and exact dot products.

    python3 scripts/nccl_ranks_check.py configs/mountainwave3d.yaml --ranks 2 [--json F]

The parent builds the configuration's mesh and first-order pattern, splits the nodes into K
slabs along x (equal node counts; the check needs no METIS) and makes each rank's partition;
K spawned processes (rank r on GPU r, ``NCCL_NVLS_ENABLE=0``) then each

1. fill the ghosts of depth-2 halos (scalars and 3-vectors) with :class:`DeviceHaloExchange`
   over :class:`NcclTransport` and check every ghost equals its owner's value (exact);
2. time one exchange (CUDA events around 50 exchanges after 5 warm-up, median of 5 runs), and
   the same exchange captured in a CUDA graph and replayed (checked again after the owned
   values change: does NCCL allow capture);
3. compute Σ x·y and Σ z·z of global random vectors with :class:`DeviceExactReducer`, rounded
   on the host and on the device, and check them against ``math.fsum`` of the whole vectors
   (bit for bit); time one exact dot rounded on the host (host clock, median of 50) and on the
   device (events), and one 8-byte NCCL all-reduce (events).

Prints one JSON object per rank, then a summary (max over ranks); exits 1 if a check fails.
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np
from rank_procs import collect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _partitions(config_path: str, k: int):
    import dycore
    from dycore import cases
    from dycore.assembly.sparsity import build_sparsity
    from dycore.parallel.partition import partition_mesh
    cfg = dycore.load_config(config_path)
    mesh = cases.build_config_mesh(cfg, cases.load_case(cfg.case.name),
                                   cfg.case.build_parameters())
    sp = build_sparsity(mesh.tets, mesh.nnodes)
    order = np.argsort(mesh.coords[:, 0], kind="stable")
    part = np.empty(mesh.nnodes, np.int64)
    part[order] = np.arange(mesh.nnodes) * k // mesh.nnodes        # slabs along x
    rps = partition_mesh(mesh.tets, mesh.nnodes, sp.indptr, sp.indices, part)
    return mesh.nnodes, int(mesh.tets.shape[0]), rps


def _events(stream, fn, inner=50, outer=5):
    import cupy as cp
    out = []
    for _ in range(outer):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record(stream)
        for _ in range(inner):
            fn()
        e.record(stream)
        e.synchronize()
        out.append(cp.cuda.get_elapsed_time(s, e) * 1e3 / inner)     # µs per call
    return float(np.median(out))


def _rank(rank, k, uid, rp, nnodes, queue):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import cupy as cp
    from numba import cuda
    cp.cuda.Device(rank).use()
    cuda.select_device(rank)
    from dycore.backend.gpu import gpu_backend
    from dycore.parallel.device_halo import DeviceHaloExchange
    from dycore.parallel.device_reduce import DeviceExactReducer
    from dycore.parallel.nccl import NcclTransport
    b = gpu_backend(solver_mode="device")
    t = NcclTransport(rank, k, uid, b.stream)
    out = {"rank": rank, "gpu": cuda.get_current_device().name.decode()
           if isinstance(cuda.get_current_device().name, bytes)
           else cuda.get_current_device().name, "owned": rp.n_owned, "ok": True}
    plan = rp.plan(2)
    l2g = rp.l2g[:plan.n_local]
    for block in (1, 3):
        glob = (np.arange(nnodes * block, dtype=np.float64) * 1.5 + 0.25)
        glob = glob.reshape((nnodes, block) if block > 1 else (nnodes,))
        x = np.full((plan.n_local,) + ((block,) if block > 1 else ()), np.nan)
        x[:rp.n_owned] = glob[rp.owned]
        xd = b.to_device(x)
        h = DeviceHaloExchange(b, t, plan, block)
        h.update(xd)
        ok = bool(np.array_equal(b.to_host(xd), glob[l2g]))
        us = _events(b.stream, lambda: h.update(xd))
        graph_ok, graph_us, why, captured = False, None, "", False
        try:
            g = b.capture(lambda: h.update(xd))
            captured = g.graph is not None             # False: capture failed, replays launch
            xd[:rp.n_owned] = b.to_device(glob[rp.owned] * 2.0)
            xd[rp.n_owned:] = np.nan
            g.replay()
            b.synchronize()
            graph_ok = bool(np.array_equal(b.to_host(xd), glob[l2g] * 2.0))
            graph_us = _events(b.stream, g.replay)
        except Exception as exc:                       # report, do not hide
            why = f"{type(exc).__name__}: {exc}"[:300]
        out[f"halo_block{block}"] = {
            "ok": ok, "values_sent": h.values_sent, "values_received": h.values_received,
            "bytes_sent": 8 * h.values_sent, "us_per_exchange": us,
            "graph_captured": captured, "graph_ok": graph_ok,
            "graph_us_per_exchange": graph_us, "graph_error": why}
        out["ok"] &= ok
    rng = np.random.default_rng(2026)
    xg = rng.standard_normal(nnodes) * 2.0 ** rng.integers(-40, 40, nnodes)
    yg = rng.standard_normal(nnodes)
    zg = rng.standard_normal(nnodes)
    red = DeviceExactReducer(b, t)
    xs, ys, zs = (b.to_device(v[rp.owned]) for v in (xg, yg, zg))
    got = red.dots((xs, ys), (zs, zs))
    want = [math.fsum(xg * yg), math.fsum(zg * zg)]
    out["exact_dots"] = {"ok": got == want, "got": got, "fsum": want}
    out["ok"] &= got == want
    ts = []
    for _ in range(50):
        t0 = time.perf_counter()
        red.dots((xs, ys))
        ts.append(1e6 * (time.perf_counter() - t0))
    out["exact_dot_us_host_clock"] = float(np.median(ts))
    red.post_dots((xs, ys), (zs, zs))                 # rounded on the device: same bits?
    dev = [float(v) for v in b.to_host(red.finish_on_device())]
    out["exact_dots"]["on_device"] = dev
    out["ok"] &= dev == want

    def exact_on_device():
        red.post_dots((xs, ys))
        red.finish_on_device()
    out["exact_dot_on_device_us"] = _events(b.stream, exact_on_device)
    one = b.zeros(1)
    out["allreduce_8B_us"] = _events(b.stream, lambda: t.allreduce(one, "sum"))
    queue.put(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    from cupy.cuda import nccl
    t0 = time.perf_counter()
    nnodes, nele, rps = _partitions(a.config, a.ranks)
    setup = time.perf_counter() - t0
    uid = nccl.get_unique_id()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, a.ranks, uid, rps[r], nnodes, queue))
             for r in range(a.ranks)]
    for p in procs:
        p.start()
    results, err = collect(procs, queue, len(procs), 300)
    if err is not None:
        print(json.dumps({"ok": False, "error": err}))
        return 1
    results.sort(key=lambda r: r["rank"])
    for r in results:
        print(json.dumps(r))
    summary = {"config": a.config, "ranks": a.ranks, "nodes": nnodes, "tets": nele,
               "partition_s": round(setup, 2), "nccl": nccl.get_version(),
               "ok": all(r["ok"] for r in results),
               "halo_us_max": {blk: max(r[f"halo_block{blk}"]["us_per_exchange"]
                                        for r in results) for blk in (1, 3)},
               "halo_graph_us_max": {blk: max((r[f"halo_block{blk}"]["graph_us_per_exchange"]
                                              or math.nan) for r in results) for blk in (1, 3)},
               "exact_dot_us_max": max(r["exact_dot_us_host_clock"] for r in results),
               "exact_dot_on_device_us_max": max(r["exact_dot_on_device_us"] for r in results),
               "allreduce_8B_us_max": max(r["allreduce_8B_us"] for r in results)}
    print(json.dumps(summary))
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "ranks": results}, indent=1))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
