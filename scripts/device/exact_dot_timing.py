"""Where an exact dot product's time goes on one GPU: the parts kernel, the rounding, the memset.

    python3 scripts/device/exact_dot_timing.py [N ...] [--blocks 264,66,16] [--repeat 200]

For each length N (default: 98,441 and 1,000,000, the paper mesh's pressure rows and a larger
field), each block count of the parts kernel and each variant of the kernels (the A/B switches
of :func:`~dycore.parallel.device_kernels.get_rank_kernels`: ``runs`` — products of one
exponent summed in registers, each block on a contiguous chunk — and ``parallel_round`` —
every thread of the rounding block adding buckets; ``old`` is both off, the kernels before
2026-11-28), a :class:`~dycore.parallel.device_reduce.DeviceExactReducer` over one rank
(:class:`~dycore.parallel.nccl.SelfTransport`) reduces x·y (x, y smooth fields with a few
binades of spread, as a solver's vectors) ``--repeat`` times captured in one CUDA graph (the
solvers replay theirs from graphs; launched from Python the loop would time numba's launch
overhead, about 100 µs a kernel), CUDA events around each replay on the backend's stream,
median of 5 replays after 2 warm-up ones, every variant in this one process. Printed per call [µs]: the whole ``post_dots`` + ``finish_on_device``, the parts
kernel alone, the rounding kernel alone — and whether the value is ``math.fsum``'s.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


#: (name, runs, parallel_round)
VARIANTS = (("old", False, False), ("runs", True, False), ("par-round", False, True),
            ("both", True, True))


def _time(b, fn, repeat: int) -> float:
    """``repeat`` calls of ``fn`` captured as one CUDA graph (as the solvers run them: no host
    launch overhead), replayed after 2 warm-up replays; median over 5 replays of the time per
    call [µs], CUDA events on the backend's stream."""
    import cupy

    def loop():
        for _ in range(repeat):
            fn()
    g = b.capture(loop)
    for _ in range(2):
        g.replay()
    out = []
    for _ in range(5):
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record(b.stream)
        g.replay()
        e1.record(b.stream)
        e1.synchronize()
        out.append(1e3 * cupy.cuda.get_elapsed_time(e0, e1) / repeat)
    return float(np.median(out))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int, nargs="*", default=[98_441, 1_000_000])
    p.add_argument("--blocks", default="264,66")
    p.add_argument("--repeat", type=int, default=200)
    a = p.parse_args(argv)
    from dycore.backend.gpu import gpu_backend
    from dycore.parallel.device_kernels import NPARTS, ROUND_BLOCK, get_rank_kernels
    from dycore.parallel.device_reduce import DeviceExactReducer
    from dycore.parallel.nccl import SelfTransport
    b = gpu_backend(solver_mode="device")
    print(b.describe())
    for n in a.n:
        s = np.linspace(0.0, 6.0, n)
        xh, yh = 1.0 + 0.5 * np.sin(s) + 1e-3 * np.cos(7 * s), np.exp(np.sin(3 * s))
        x, y = b.to_device(xh), b.to_device(yh)
        want = math.fsum(xh * yh)
        for blocks, (name, runs, par) in ((bl, v) for bl in map(int, a.blocks.split(","))
                                          for v in VARIANTS):
            red = DeviceExactReducer(b, SelfTransport(), 1, blocks)
            k = red.k = get_rank_kernels(False, runs, par)

            def whole():
                red.post_dots((x, y))
                red.finish_on_device()

            def parts():
                b.launch(k["exact_dot_parts"], (blocks, red.threads), b.nb(x), b.nb(y), n,
                         b.nb(red.parts))

            def rounding():
                b.launch(k["exact_round"], (1, min(red.threads, ROUND_BLOCK)), b.nb(red.parts),
                         1, b.nb(red.values))
            t_whole = _time(b, whole, a.repeat)
            got = float(b.to_host(red.values)[0])
            t_parts = _time(b, parts, a.repeat)
            red.parts[...] = 0
            parts()
            t_round = _time(b, rounding, a.repeat)
            print(f"n {n:>9,}  blocks {blocks:4d} {name:9s}: whole {t_whole:8.2f} µs, parts kernel "
                  f"{t_parts:8.2f} µs, rounding {t_round:8.2f} µs  (value == fsum: "
                  f"{got == want}; {NPARTS} parts)", flush=True)


if __name__ == "__main__":
    main()
