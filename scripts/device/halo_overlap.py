"""What a halo exchange costs inside a CUDA graph on GPU ranks, and whether a product's interior
rows hide it (an A/B in one process per rank).

Run under ``mpiexec -n 2`` on a host with two GPUs (after ``scripts/gpu_env.sh`` and
``scripts/device/mpi_env.sh``)::

    mpiexec -n 2 python3 scripts/device/halo_overlap.py [--rows 381000] [--nnz 40]
        [--ghosts 15000] [--reps 50] [--transport nccl|peer]

Each rank builds a banded CSR matrix of ``rows`` owned rows with ``nnz`` entries a row, whose
last ``ghosts`` rows also read ``ghosts`` ghost columns (the two-rank cut of the 4.42 M-tet
pressure matrix has about this shape), and captures ``reps`` repetitions of each piece into one
CUDA graph: the product alone, the exchange alone (pack, NCCL send/recv, unpack; then without
the unpack, NCCL receiving into the ghost slots; then without the pack either), the exchange
then the product, the exchange posted on a second stream while the interior rows are summed
(:class:`~dycore.parallel.device_halo.DeviceHaloExchange` with ``overlap``; also with that
stream at the highest priority), the product in two launches without messages, an 8-byte NCCL
all-reduce and an all-gather of ``gather`` values a rank. ``--transport peer`` times the same
pieces over :class:`~dycore.parallel.peer.PeerTransport` (our kernels storing into the other
GPU's memory: the pack and unpack are fused into them, so the three exchange rows differ only
in gathering by index or not, and an exchange is one kernel). Timing: CUDA events around a replay after two warm-up replays, median of 7, per
repetition, the max over the ranks. Prints one JSON object on rank 0.
"""
from __future__ import annotations

import argparse
import json

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=381_000)
    p.add_argument("--nnz", type=int, default=40)
    p.add_argument("--ghosts", type=int, default=15_000)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--gather", type=int, default=13_600,
                   help="float64 values a rank all-gathers (the V-cycle's level held whole)")
    p.add_argument("--transport", default="nccl", choices=("nccl", "peer"))
    args = p.parse_args()

    import cupy
    from mpi4py import MPI

    from dycore.backend.gpu import gpu_backend
    from dycore.parallel.device_halo import DeviceHaloExchange
    from dycore.parallel.nccl import NcclTransport
    from dycore.parallel.overlap import split_rows
    from dycore.parallel.partition import HaloPlan
    from dycore.solvers.krylov import DeviceLinalg, DeviceMatrix

    comm = MPI.COMM_WORLD
    cupy.cuda.Device(comm.rank % cupy.cuda.runtime.getDeviceCount()).use()
    b = gpu_backend(solver_mode="device")
    if args.transport == "peer":
        from dycore.parallel.peer import PeerTransport
        t = PeerTransport.from_mpi(comm, b)
    else:
        t = NcclTransport.from_mpi(comm, b.stream)
    n, g, k = args.rows, args.ghosts, args.nnz
    peer = 1 - comm.rank
    rng = np.random.default_rng(comm.rank)
    # banded rows (columns within ±k of the row); the last g rows also read one ghost each
    offs = np.arange(-(k // 2), k - k // 2)
    cols = np.clip(np.arange(n)[:, None] + offs[None, :], 0, n - 1)
    cols[n - g:, -1] = n + np.arange(g)
    cols = np.sort(cols, axis=1)
    ptr = np.arange(0, n * k + 1, k, dtype=np.int32)
    vals = rng.standard_normal(n * k)
    la = DeviceLinalg(b, b.solver_block, max_group=1)
    a = DeviceMatrix(la, ptr, cols.ravel().astype(np.int32), vals, 1, 1)
    inner, outer = split_rows(a, n - g)
    plan = HaloPlan(1, n + g, (peer,), {peer: np.arange(n - g, n, dtype=np.int64)},
                    {peer: np.arange(n, n + g, dtype=np.int64)})
    x, y = b.to_device(rng.standard_normal(n + g)), b.zeros(n)
    ctl = b.zeros(16)
    nb = b.nb
    plain = DeviceHaloExchange(b, t, plan, 1, in_place=())      # pack, send/recv, unpack
    recv_only = DeviceHaloExchange(b, t, plan, 1, in_place=("recv",))   # no unpack
    in_place = DeviceHaloExchange(b, t, plan, 1, in_place=("send", "recv"))    # neither
    assert in_place.send_in_place and in_place.recv_in_place and recv_only.recv_in_place
    ovl = DeviceHaloExchange(b, t, plan, 1, overlap=True, in_place=())
    from dycore.backend.streams import SideStream
    ovl_hi = DeviceHaloExchange(b, t, plan, 1, in_place=())
    ovl_hi.branch = SideStream(b, priority=-100)   # (clamped to the highest)
    one = b.zeros(1)
    m = n - g

    def product():
        la.spmv(a, nb(x), nb(y), ctl=nb(ctl))

    def exchange(halo=plain):
        halo.begin(x)
        halo.end(x)

    def sequential():
        exchange()
        product()

    def overlapped(halo=ovl):
        halo.begin(x)
        la.spmv(inner, nb(x), nb(y[:m]), ctl=nb(ctl))
        halo.end(x)
        la.spmv(outer, nb(x), nb(y[m:]), ctl=nb(ctl))

    def split_only():
        la.spmv(inner, nb(x), nb(y[:m]), ctl=nb(ctl))
        la.spmv(outer, nb(x), nb(y[m:]), ctl=nb(ctl))

    def allreduce():
        t.allreduce(one, "sum")

    gsend = b.zeros(args.gather)
    grecv = b.zeros(args.gather * comm.size)

    def allgather():
        t.allgather(gsend, grecv)

    out = {"rows": n, "nnz_per_row": k, "ghosts": g, "reps": args.reps,
           "transport": type(t).__name__,
           "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    for name, piece in (("product", product), ("exchange", exchange),
                        ("exchange received in place (no unpack)", lambda: exchange(recv_only)),
                        ("exchange sent and received in place", lambda: exchange(in_place)),
                        ("exchange then product", sequential),
                        ("exchange beside the interior rows", overlapped),
                        ("the same, messages on a high-priority stream",
                         lambda: overlapped(ovl_hi)),
                        ("product in two launches (interior, boundary)", split_only),
                        ("all-reduce of 8 bytes", allreduce),
                        (f"all-gather of {args.gather} float64 a rank", allgather)):
        graph = b.capture(lambda piece=piece: [piece() for _ in range(args.reps)])
        times = []
        for i in range(9):
            comm.Barrier()
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
            e0.record(b.stream)
            graph.replay()
            e1.record(b.stream)
            e1.synchronize()
            if i >= 2:
                times.append(cupy.cuda.get_elapsed_time(e0, e1) * 1e3 / args.reps)
        us = comm.allreduce(float(np.median(times)), MPI.MAX)
        out[name] = {"us_per_rep": round(us, 2), "cuda_graph": graph.graph is not None}
    if args.transport == "peer":              # (no wait gave up; the mappings released)
        b.synchronize()
        comm.Barrier()
        t.close()
    if comm.rank == 0:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
