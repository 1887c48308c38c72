"""Whole-step benchmarks: per-stage breakdown per backend variant and mesh-size scaling.

A variant is a set of ``backend`` configuration overrides. Each run builds a Simulation, takes
one warm-up step (JIT compilation, AMG set-up), resets the stage timers, then times K steps.
"""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager

import numba
import numpy as np

from dycore.bench.timing import stats
from dycore.timestepping.callbacks import Callback

__all__ = ["numba_threads", "step_variants", "run_variant", "time_steps", "device_used_bytes"]


@contextmanager
def numba_threads(n: int | None):
    """Run the block with ``n`` numba threads (None or 0: unchanged), restoring them after."""
    old = numba.get_num_threads()
    if n:
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(old)


def step_variants(cpu: bool, gpu: bool, device_solver: bool) -> list[tuple[str, dict, int]]:
    """The (label, backend overrides, numba threads) of every available variant.

    Parameters
    ----------
    cpu, gpu : bool
        Whether the CPU / GPU variants are wanted and available.
    device_solver : bool
        Whether the GPU's device (CuPy) solvers are available (not under the simulator).
    """
    out = []
    if gpu and device_solver:
        out.append(("gpu + device solvers", {"name": "gpu", "solver_mode": "device",
                                             "assembly": "atomic"}, 0))
        out.append(("gpu + device solvers, no graphs", {"name": "gpu", "solver_mode": "device",
                                                        "assembly": "atomic", "graphs": False},
                    0))
    if gpu:
        out.append(("gpu + host solvers", {"name": "gpu", "solver_mode": "host",
                                           "assembly": "atomic"}, 0))
    if cpu:
        nthreads = numba.get_num_threads()
        out.append((f"cpu {nthreads} cores", {"name": "cpu", "threads": 0}, 0))
        out.append(("cpu 1 core", {"name": "cpu", "threads": 1}, 1))
    return out


def device_used_bytes() -> int | None:
    """Bytes held by CuPy's default memory pool, or None without CuPy (CPU, simulator)."""
    from numba import config as numba_config

    if numba_config.ENABLE_CUDASIM:
        return None
    try:
        import cupy
    except ImportError:
        return None
    return int(cupy.get_default_memory_pool().used_bytes())


def _scalar(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def _free_device() -> None:
    gc.collect()
    if device_used_bytes() is not None:
        import cupy
        cupy.get_default_memory_pool().free_all_blocks()


class _StepTimes(Callback):
    """Wall time [ms] of each step (the loop's clock around ``sim.step()`` alone, which ends
    with a device→host read) and what the backend's ``counters`` counted during it."""

    def __init__(self, counters):
        self.counters, self.times, self.counts = counters, [], []

    def initialize(self, sim, step):
        self._last = step.split.steps_s
        self._c0 = self.counters.snapshot()

    def __call__(self, sim, step):
        c1 = self.counters.snapshot()        # first: nothing counted after the step's end
        self.times.append((step.split.steps_s - self._last) * 1e3)
        self._last = step.split.steps_s
        self.counts.append({k: c1[k] - self._c0[k] for k in self._c0})
        self._c0 = self.counters.snapshot()


def time_steps(sim, steps: int) -> tuple[list, list, dict]:
    """Take ``steps`` steps of ``sim`` through its run loop, each timed by the loop's clock
    around ``sim.step()`` (which ends with a device→host read) and counted by the backend.

    Returns
    -------
    (times [ms] per step, what the backend counted per step (dict of counter deltas: launches,
    graph_replays, graph_kernels, syncs, allocations), the last step's diagnostics)
    """
    timing = _StepTimes(sim.backend.counters)
    sim.run(steps=steps, callbacks=[timing], stability=False)   # the one time loop
    return timing.times, timing.counts, (sim.last_diagnostics if steps else {})


def run_variant(make_config, label: str, backend: dict, threads: int, steps: int) -> dict:
    """Build, warm up and time ``steps`` steps of one variant.

    Parameters
    ----------
    make_config : callable
        ``make_config(backend_overrides) -> Config``.
    label : str
        Name of the variant (table title).
    backend : dict
        ``backend`` section overrides.
    threads : int
        numba threads for the run (0: unchanged); restored afterwards.
    steps : int
        Timed steps after the warm-up step (two warm-up steps with device solvers: the
        second captures the CUDA graphs).

    Returns
    -------
    dict
        ``label``, ``nele``, ``nnodes``, ``build_s``, ``warmup_s``, ``step`` (stats [ms]),
        ``stages`` (StageTimers.as_dict of the timed steps), ``table`` (StageTimers table),
        ``per_step`` (median per timed step of what the backend counted: Python-issued kernel
        launches, graph replays and the kernels they ran, host syncs, CuPy allocations),
        ``device_bytes`` (memory-pool growth over the build, GPU only) and ``last_diagnostics``.
    """
    from dycore.timestepping.simulation import build_simulation

    cfg = make_config(backend)
    with numba_threads(threads):
        _free_device()
        before = device_used_bytes()
        t0 = time.perf_counter()
        sim = build_simulation(cfg)
        sim.backend.synchronize()
        build_s = time.perf_counter() - t0
        after = device_used_bytes()
        t0 = time.perf_counter()
        sim.step()
        if getattr(sim.backend, "solver_mode", "host") == "device":
            sim.step()           # the first replay-ready step captures the CUDA graphs
        sim.backend.synchronize()
        warmup_s = time.perf_counter() - t0
        sim.timers.reset()
        times, counts, diag = time_steps(sim, steps)
        out = {"label": label, "backend": sim.backend.describe(), "nele": int(sim.mesh.nele),
               "nnodes": int(sim.mesh.nnodes), "build_s": build_s, "warmup_s": warmup_s,
               "step": stats(times), "stages": sim.timers.as_dict(),
               "per_step": {k: float(np.median([c[k] for c in counts])) for k in counts[0]}
               if counts else {},
               "table": sim.timers.table(f"{label}: stage timers over {steps} steps"),
               "device_bytes": None if before is None else after - before,
               "last_diagnostics": {k: _scalar(v) for k, v in diag.items()}}
    del sim
    _free_device()
    return out
