"""Stage timers: every stage of a run is timed, and the table is part of the output (docs/equations.md §6).

The clock belongs to the backend: on the CPU a marker is ``time.perf_counter``; on the GPU it is
a CUDA event, so device work is timed on the device without a synchronize per stage (elapsed
times are read only when the table is built).
"""
from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

__all__ = ["WallMarker", "StageTimers", "add_seconds"]


class WallMarker:
    """Host clock marker: ``record()`` then ``elapsed_ms(later)``."""

    __slots__ = ("t",)

    def record(self) -> "WallMarker":
        self.t = time.perf_counter()
        return self

    def elapsed_ms(self, later: "WallMarker") -> float:
        return (later.t - self.t) * 1e3


@contextmanager
def add_seconds(seconds: dict, name: str):
    """Add the host wall time of the ``with`` body, in seconds, to ``seconds[name]`` (created
    at 0.0): the set-up's phases, which run before a backend clock exists and are timed once
    each (the run's stages use :class:`StageTimers`)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0


class StageTimers:
    """Accumulates named stage times.

    Parameters
    ----------
    marker_factory : callable returning an unrecorded marker with ``record()`` and
        ``elapsed_ms(later)`` (``WallMarker`` on the CPU, a CUDA-event marker on the GPU).
    hooks : sequence of objects with ``enter(name)`` and ``exit(name)``, optional
        Called around every timed stage, outermost first on entry and last on exit (NVTX
        ranges, DEBUG lines: :mod:`dycore.backend.stage_hooks`); default
        :func:`~dycore.backend.stage_hooks.default_hooks`, ``()`` unless asked for.
    """

    def __init__(self, marker_factory=WallMarker, hooks=None):
        if hooks is None:
            from dycore.backend.stage_hooks import default_hooks
            hooks = default_hooks()
        self.hooks = tuple(hooks)
        self._factory = marker_factory
        self._pending: list[tuple[str, object, object]] = []
        self.total_ms: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._paused = 0

    @contextmanager
    def paused(self):
        """Record nothing inside the block (e.g. while kernels are captured into a CUDA graph,
        where events would be captured too instead of timing anything)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    @contextmanager
    def __call__(self, name: str):
        if self._paused:
            yield
            return
        hooks = self.hooks
        if hooks:
            for hook in hooks:
                hook.enter(name)
        start = self._factory().record()
        try:
            yield
        finally:
            stop = self._factory().record()
            self._pending.append((name, start, stop))
            if len(self._pending) > 4096:
                self._resolve()
            if hooks:
                for hook in reversed(hooks):
                    hook.exit(name)

    def add(self, name: str, ms: float) -> None:
        """Record one call of stage ``name`` that took ``ms`` milliseconds, timed elsewhere
        (e.g. on the host before the backend's clock existed)."""
        self.total_ms[name] += ms
        self.calls[name] += 1
        for hook in self.hooks:
            added = getattr(hook, "added", None)
            if added is not None:
                added(name, ms)

    def reset(self) -> None:
        """Forget everything timed so far (e.g. after a warm-up step)."""
        self._resolve()
        self.total_ms.clear()
        self.calls.clear()

    def _resolve(self) -> None:
        for name, start, stop in self._pending:
            self.total_ms[name] += start.elapsed_ms(stop)
            self.calls[name] += 1
        self._pending.clear()

    def as_dict(self) -> dict[str, dict[str, float]]:
        """{stage: {"calls": n, "total_ms": t, "mean_ms": t/n}} in first-seen order."""
        self._resolve()
        return {k: {"calls": self.calls[k], "total_ms": v, "mean_ms": v / max(self.calls[k], 1)}
                for k, v in self.total_ms.items()}

    def table(self, title: str = "stage timers") -> str:
        """The timer table as aligned text, with each stage's share of the timed total."""
        rows = self.as_dict()
        grand = sum(r["total_ms"] for k, r in rows.items() if _shared(k))
        width = max([len(k) for k in rows] + [len("stage")])
        out = [title, f"{'stage':<{width}}  {'calls':>7}  {'total [s]':>10}  {'mean [ms]':>10}  {'share':>6}"]
        for k, r in rows.items():
            share = "" if not _shared(k) or grand == 0 else f"{100 * r['total_ms'] / grand:5.1f}%"
            out.append(f"{k:<{width}}  {r['calls']:>7d}  {r['total_ms'] / 1e3:>10.3f}  "
                       f"{r['mean_ms']:>10.3f}  {share:>6}")
        return "\n".join(out)


def _shared(stage: str) -> bool:
    """Whether a stage counts in the table's shares: not the step totals, not the run's
    wall-clock split (``run: ...``) and not work overlapped with the steps (a writer thread)."""
    return not stage.startswith(("step", "run:")) and "overlapped" not in stage
