"""Timing helpers shared by ``dycore bench`` and ``scripts/gpu_check.py`` (docs/equations.md §8).

GPU work is timed with CUDA events after warm-up calls (JIT compilation and first launch are
excluded); CPU work with ``time.perf_counter``. Every helper returns the median, the minimum and
the maximum of ``repeat`` timings in milliseconds (:func:`stats`). Under numba-cuda's simulator,
which has no events, :func:`time_gpu` falls back to the host clock around a synchronize.
"""
from __future__ import annotations

import functools
import statistics
import time

import numpy as np
from numba import njit, prange

__all__ = ["stats", "time_gpu", "time_graph_us", "time_cpu", "copy_bandwidth",
           "host_copy_bandwidth", "kernel_resources"]


def stats(ms: list[float]) -> dict:
    """Summary of a list of timings.

    Parameters
    ----------
    ms : list of float
        Timings [ms], at least one.

    Returns
    -------
    dict
        ``median_ms``, ``min_ms``, ``max_ms`` and ``n`` (the number of timings).
    """
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "n": len(ms)}


def time_gpu(fn, repeat: int, warmup: int = 2, stream=0) -> dict:
    """Time ``fn`` (which launches GPU work) with CUDA events.

    Parameters
    ----------
    fn : callable
        Launches the work; takes no arguments. Its return value is ignored.
    repeat : int
        Number of timed calls.
    warmup : int
        Untimed calls first (JIT compilation, first launch, memory-pool growth).
    stream : numba stream or 0
        The stream ``fn`` issues its work on; both events are recorded there. 0 (default) is
        the legacy default stream, right only for work launched there: a backend issues on its
        own non-blocking stream (``backend.nb_stream``), which events on the default stream do
        not wait for, so they would time the launches, not the kernels.

    Returns
    -------
    dict
        :func:`stats` of the ``repeat`` event-to-event times [ms].
    """
    from numba import config as numba_config
    from numba import cuda

    for _ in range(warmup):
        fn()
    cuda.synchronize()
    out = []
    for _ in range(repeat):
        if numba_config.ENABLE_CUDASIM:           # the simulator has no events
            t0 = time.perf_counter()
            fn()
            cuda.synchronize()
            out.append((time.perf_counter() - t0) * 1e3)
            continue
        a, b = cuda.event(timing=True), cuda.event(timing=True)
        a.record(stream)
        fn()
        b.record(stream)
        b.synchronize()
        out.append(cuda.event_elapsed_time(a, b))
    return stats(out)


def time_graph_us(backend, issue, repeat: int = 50, replays: int = 7) -> float:
    """µs per call of ``issue`` (which launches device kernels) as a CUDA graph runs it:
    ``repeat`` calls captured in one graph (``backend.capture``), one warm-up replay, CUDA
    events (``backend.marker``) around each of ``replays`` replays; the median replay over
    ``repeat`` — the kernels' time in a graph, without Python's launch cost. Under the
    simulator the markers are host clocks (a figure of no meaning, but the same path).

    backend : GPUBackend; issue : callable with no arguments; repeat, replays : int ≥ 1
    """
    g = backend.capture(lambda: [issue() for _ in range(repeat)])
    g.replay()
    out = []
    for _ in range(replays):
        e0 = backend.marker().record()
        g.replay()
        e1 = backend.marker().record()
        out.append(e0.elapsed_ms(e1) * 1e3 / repeat)
    return float(statistics.median(out))


def time_cpu(fn, repeat: int, warmup: int = 1) -> dict:
    """Time ``fn`` (synchronous host work) with ``time.perf_counter``.

    Parameters
    ----------
    fn : callable
        The work; takes no arguments.
    repeat : int
        Number of timed calls.
    warmup : int
        Untimed calls first (JIT compilation, caches).

    Returns
    -------
    dict
        :func:`stats` of the ``repeat`` wall times [ms].
    """
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return stats(out)


def _with_rate(t: dict, nbytes: int) -> dict:
    """Copy timings ``t`` plus ``GB_per_s`` (bytes read + written per second at the median
    time) and ``bytes`` (the array copied)."""
    t["GB_per_s"] = 2 * nbytes / (t["median_ms"] * 1e-3) / 1e9
    t["bytes"] = int(nbytes)
    return t


def copy_bandwidth(repeat: int = 20, nbytes: int = 1 << 31) -> dict:
    """Device-to-device copy bandwidth (bytes read + bytes written per second) of ``repeat``
    copies of an array of ``nbytes`` bytes (default 2 GiB).

    Returns :func:`stats` of the copy times [ms] plus ``GB_per_s`` = 2 * nbytes / median time
    / 1e9 and ``bytes``."""
    import cupy as cp

    a = cp.random.random(nbytes // 8)
    b = cp.empty_like(a)
    copy = functools.partial(b.__setitem__, slice(None), a)      # b[:] = a
    t = _with_rate(time_gpu(copy, repeat), a.nbytes)
    del a, b, copy
    cp.get_default_memory_pool().free_all_blocks()
    return t


@njit(parallel=True, cache=True)
def _parallel_copy(src, dst):
    for i in prange(src.shape[0]):
        dst[i] = src[i]


def host_copy_bandwidth(repeat: int = 10, nbytes: int = 1 << 27) -> dict:
    """Host memory copy bandwidth with the current numba thread count (an ``@njit`` prange
    copy): as :func:`copy_bandwidth` (default 128 MiB, well beyond the caches), plus
    ``threads`` (numba threads used)."""
    import numba

    a = np.random.default_rng(0).random(nbytes // 8)
    b = np.empty_like(a)
    t = _with_rate(time_cpu(lambda: _parallel_copy(a, b), repeat), a.nbytes)
    t["threads"] = numba.get_num_threads()
    return t


def kernel_resources(kernel) -> dict | None:
    """Registers and local (spill/stack) memory per thread of a compiled ``@cuda.jit`` kernel.

    The evidence for what limits an element kernel that is far from the copy bandwidth: local
    memory lives in DRAM/L2 like global memory, and many registers cap the resident warps.

    Parameters
    ----------
    kernel : numba-cuda Dispatcher, already launched at least once (compiled).

    Returns
    -------
    dict with ``registers_per_thread`` and ``local_bytes_per_thread`` (the maximum over the
    compiled specialisations), or None under the simulator or when numba-cuda cannot say.
    """
    try:
        regs = kernel.get_regs_per_thread()
        local = kernel.get_local_mem_per_thread()
    except Exception:  # noqa: BLE001 - the simulator's kernels have no such methods
        return None
    regs = max(regs.values()) if isinstance(regs, dict) else regs
    local = max(local.values()) if isinstance(local, dict) else local
    if regs is None:
        return None
    return {"registers_per_thread": int(regs), "local_bytes_per_thread": int(local)}
