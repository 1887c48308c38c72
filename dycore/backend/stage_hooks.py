"""Observers of the stage timers: NVTX ranges for Nsight Systems, and DEBUG lines.

:class:`~dycore.backend.timers.StageTimers` calls ``enter(name)`` / ``exit(name)`` of each hook
around every stage it times, so a profile shows the step's structure under the stage timers' own
names (``step (total)`` > ``assemble.momentum`` > ...). Both hooks are off by default, and a
timer without hooks does no more work than before (one test of an empty tuple per stage):

- NVTX ranges when the environment variable :data:`NVTX_ENV` is set (``DYCORE_NVTX=1``, which
  ``dycore run --nvtx`` sets): ``cupy.cuda.nvtx`` (the ``gpu`` extra installs CuPy), else the
  ``nvtx`` package; neither importable (a CPU machine) is one notice and no ranges. NVTX ranges
  are host-side markers: they cost a few hundred nanoseconds each, and nothing on the device.
- DEBUG lines (``dycore -v``, or ``--log-file``): the first call of each stage (or its first
  record, for a stage timed elsewhere and added to the table), so the log shows every stage a
  run goes through once, not once per step.
"""
from __future__ import annotations

import logging
import os

__all__ = ["NVTX_ENV", "nvtx_requested", "NvtxRanges", "nvtx_ranges", "DebugStages",
           "default_hooks"]

log = logging.getLogger("dycore")

#: environment variable that turns the NVTX ranges on (any value but "", 0, false, no, off)
NVTX_ENV = "DYCORE_NVTX"

_notified = False


def nvtx_requested() -> bool:
    """Whether :data:`NVTX_ENV` asks for NVTX ranges."""
    return os.environ.get(NVTX_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


class NvtxRanges:
    """A stage hook that pushes an NVTX range on ``enter`` and pops it on ``exit``.

    Parameters
    ----------
    push : callable(str)
        Opens a range of that name on the calling thread (``cupy.cuda.nvtx.RangePush``).
    pop : callable()
        Closes the innermost range (``cupy.cuda.nvtx.RangePop``).
    source : str
        What provides them, for :meth:`describe`.
    """

    __slots__ = ("_push", "_pop", "source")

    def __init__(self, push, pop, source: str):
        self._push, self._pop, self.source = push, pop, source

    def enter(self, name: str) -> None:
        self._push(name)

    def exit(self, name: str) -> None:
        self._pop()

    def describe(self) -> str:
        return f"NVTX ranges ({self.source})"


def nvtx_ranges() -> NvtxRanges | None:
    """NVTX ranges from ``cupy.cuda.nvtx``, else from the ``nvtx`` package; None when neither
    imports (no CuPy, no CUDA libraries: every failure is caught, none propagates)."""
    try:
        from cupy.cuda import nvtx as cupy_nvtx

        return NvtxRanges(cupy_nvtx.RangePush, cupy_nvtx.RangePop, "cupy.cuda.nvtx")
    except Exception:            # noqa: BLE001 (ImportError, or CUDA libraries missing)
        pass
    try:
        import nvtx

        return NvtxRanges(nvtx.push_range, nvtx.pop_range, "nvtx package")
    except Exception:            # noqa: BLE001
        return None


class DebugStages:
    """A stage hook that logs, at DEBUG, the first call of each stage (its begin and end)."""

    __slots__ = ("_seen", "_open")

    def __init__(self):
        self._seen: set[str] = set()
        self._open: set[str] = set()

    def enter(self, name: str) -> None:
        if name not in self._seen:
            self._seen.add(name)
            self._open.add(name)
            log.debug("stage %s: first call begins", name)

    def exit(self, name: str) -> None:
        if name in self._open:
            self._open.discard(name)
            log.debug("stage %s: first call done", name)

    def added(self, name: str, ms: float) -> None:
        """A stage timed elsewhere (:meth:`StageTimers.add`): logged at its first record."""
        if name not in self._seen:
            self._seen.add(name)
            log.debug("stage %s: %.3f ms (timed elsewhere)", name, ms)


def default_hooks() -> tuple:
    """The hooks a new :class:`~dycore.backend.timers.StageTimers` gets: :class:`DebugStages`
    when the ``dycore`` logger passes DEBUG, :class:`NvtxRanges` when :func:`nvtx_requested`
    (one notice when no NVTX provider imports); ``()`` by default."""
    global _notified
    hooks = []
    if log.isEnabledFor(logging.DEBUG):
        hooks.append(DebugStages())
    if nvtx_requested():
        ranges = nvtx_ranges()
        if ranges is not None:
            hooks.append(ranges)
        elif not _notified:
            _notified = True
            log.warning("notice: %s is set but neither cupy.cuda.nvtx nor the nvtx package "
                        "imports here: no NVTX ranges", NVTX_ENV)
    return tuple(hooks)
