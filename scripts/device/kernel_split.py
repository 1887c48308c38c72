"""Where a GPU step's time goes: every kernel's start and end from CUPTI, split per step.

Record (each rank process runs the program under this wrapper; CUPTI's activity API through
the ``cupti-python`` wheel, which must match the CUDA major version; kernels inside CUDA
graphs are recorded node by node)::

    python3 scripts/gpu_ranks_check.py configs/mountainwave3d.yaml --mesh 96 96 80 \\
        --pressure amg --method cg --global-amg --reduction allreduce --ranks 2 --skip-one \\
        --steps 3 --warmup 2 \\
        --mpiexec-args "python3 scripts/device/kernel_split.py record --out /tmp/split-two"

writes ``/tmp/split-two-<rank>.npz`` (the rank from ``OMPI_COMM_WORLD_RANK`` / ``PMI_RANK``)
when the program exits. Report::

    python3 scripts/device/kernel_split.py report /tmp/split-two-0.npz [--segments 2] \
        [--by-launch]

The kernel timeline is cut where the GPU idles for more than ``--gap`` ms (a step ends with a
host read, and the host issues the next; 2 ms by default); for each of the last
``--segments`` pieces (a Picard iteration or a step) it prints the span, the GPU's busy time
(the union of kernel intervals), the busy time of NCCL's kernels and of ours, and the kernels
by total time (calls, ms, µs a call; numba's mangled names shortened to the Python function's
name; with ``--by-launch`` a kernel's launches are told apart by their thread count, e.g. the
V-cycle's levels: ``smooth[393984]``). The recording slows a step by about 5 % (133 against
127 ms, docs/performance.md).
"""
from __future__ import annotations

import argparse
import os
import re
import runpy
import sys

import numpy as np


def record(out: str, argv: list[str]) -> None:
    """Run ``argv`` (``[python, script, args...]`` as mpiexec passes it, or ``[script,
    args...]``) with CUPTI kernel activity on; save the kernels at exit."""
    from cupti import cupti
    starts, ends, ids, threads, names = [], [], [], [], {}

    def requested():
        return 8 * 1024 * 1024, 0

    def completed(activities):
        for a in activities:
            if a.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                starts.append(a.start)
                ends.append(a.end)
                ids.append(names.setdefault(a.name, len(names)))
                threads.append(getattr(a, "grid_x", 0) * getattr(a, "block_x", 0))

    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    cupti.activity_register_callbacks(requested, completed)
    if argv and os.path.basename(argv[0]).startswith("python"):
        argv = argv[1:]
    if not argv:
        sys.exit("kernel_split record: no program to run")
    sys.argv = list(argv)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    finally:
        cupti.activity_flush_all(1)
        rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
        np.savez(f"{out}-{rank}.npz", start=np.array(starts, np.int64),
                 end=np.array(ends, np.int64), kernel=np.array(ids, np.int32),
                 threads=np.array(threads, np.int64),
                 names=np.array(sorted(names, key=names.get), dtype=object))
        print(f"kernel_split: {len(starts)} kernels of rank {rank} in {out}-{rank}.npz",
              file=sys.stderr)


def short_name(mangled: str) -> str:
    """The Python function's name in numba's mangled kernel name (``…_3clocals_3e6smooth…``
    → ``smooth``); other names cut to 70 characters."""
    for marker in (r"_3clocals_3e(\d+)", r"gpu_loops_gen(\d+)"):
        m = re.search(marker, mangled)
        if m:
            return mangled[m.end():m.end() + int(m.group(1))]
    return mangled[:70]


def _union(start, end) -> float:
    """Total length of the union of intervals (start sorted)."""
    total, lo, hi = 0.0, None, None
    for s, e in zip(start, end):
        if hi is None or s > hi:
            if hi is not None:
                total += hi - lo
            lo, hi = s, e
        else:
            hi = max(hi, e)
    return total + (hi - lo if hi is not None else 0.0)


def split(path: str, gap_ms: float = 2.0, segments: int = 2,
          by_launch: bool = False) -> tuple[int, list[dict]]:
    """The last ``segments`` pieces of a recording (kernels separated by more than ``gap_ms``
    of GPU idle). Returns (number of pieces, [{"span_ms", "busy_ms", "nccl_ms", "ours_ms",
    "nccl_kernels", "our_kernels", "by_kernel": {name: (calls, total ms)}}, ...]); busy
    times are unions of kernel intervals (overlapping kernels count once). With
    ``by_launch`` a kernel's launches are told apart by their thread count (``name[threads]``:
    one AMG level's calls from another's), where the recording has it."""
    z = np.load(path, allow_pickle=True)
    order = np.argsort(z["start"], kind="stable")
    s, e = z["start"][order].astype(float), z["end"][order].astype(float)
    names = [short_name(str(z["names"][k])) for k in z["kernel"][order]]
    if by_launch and "threads" in z.files:
        names = [f"{x}[{t}]" for x, t in zip(names, z["threads"][order])]
    reach = np.maximum.accumulate(e)
    cuts = np.flatnonzero(s[1:] - reach[:-1] > gap_ms * 1e6) + 1
    bounds = np.concatenate([[0], cuts, [s.size]]).astype(int)
    pieces = list(zip(bounds[:-1], bounds[1:]))
    out = []
    for a, b in pieces[-segments:]:
        ss, ee, nn = s[a:b], e[a:b], names[a:b]
        nccl = np.array(["nccl" in x.lower() for x in nn])
        by: dict = {}
        for name, d in zip(nn, ee - ss):
            calls, total = by.get(name, (0, 0.0))
            by[name] = (calls + 1, total + d / 1e6)
        out.append({"span_ms": float(reach[b - 1] - ss[0]) / 1e6,
                    "busy_ms": _union(ss, ee) / 1e6,
                    "nccl_ms": _union(ss[nccl], ee[nccl]) / 1e6,
                    "ours_ms": _union(ss[~nccl], ee[~nccl]) / 1e6,
                    "nccl_kernels": int(nccl.sum()), "our_kernels": int((~nccl).sum()),
                    "by_kernel": by})
    return len(pieces), out


def report(path: str, gap_ms: float = 2.0, segments: int = 2, top: int = 18,
           by_launch: bool = False) -> None:
    """Print :func:`split` of one recording."""
    n, pieces = split(path, gap_ms, segments, by_launch)
    print(f"{path}: {n} pieces")
    for p in pieces:
        print(f"  piece: span {p['span_ms']:.2f} ms, busy {p['busy_ms']:.2f} ms, NCCL kernels "
              f"{p['nccl_ms']:.2f} ms ({p['nccl_kernels']}), ours {p['ours_ms']:.2f} ms "
              f"({p['our_kernels']})")
        for name, (calls, total) in sorted(p["by_kernel"].items(),
                                           key=lambda kv: -kv[1][1])[:top]:
            print(f"    {calls:6d} x {total:8.2f} ms {1e3 * total / calls:8.1f} us  {name}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run a program with CUPTI kernel activity on")
    rec.add_argument("--out", required=True, help="file prefix: <out>-<rank>.npz")
    rec.add_argument("program", nargs=argparse.REMAINDER)
    rep = sub.add_parser("report", help="split a recording into pieces and kernels")
    rep.add_argument("files", nargs="+")
    rep.add_argument("--gap", type=float, default=2.0, help="idle ms that ends a piece")
    rep.add_argument("--segments", type=int, default=2)
    rep.add_argument("--top", type=int, default=18)
    rep.add_argument("--by-launch", action="store_true",
                     help="tell a kernel's launches apart by their thread count")
    args = p.parse_args(argv)
    if args.command == "record":
        record(args.out, args.program)
    else:
        for f in args.files:
            report(f, args.gap, args.segments, args.top, args.by_launch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
