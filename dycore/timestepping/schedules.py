"""When a callback of the run loop fires: schedules of step numbers and model times.

A schedule is called with the :class:`~dycore.timestepping.loop.Step` just taken and says
whether its callback runs after it (:func:`~dycore.timestepping.loop.run_loop`)::

    IterationInterval(10)                 # steps 10, 20, 30, ... (step numbers since t = 0)
    TimeInterval(300.0)                   # the first step at or after t = 300, 600, ... s
    IterationInterval(10) | AtEnd()       # ... and the last step of the run

Step numbers count from t = 0 (a restarted run continues them), so a schedule fires at the
same steps whether a run is made in one piece or restarted.
"""
from __future__ import annotations

import math

__all__ = ["Schedule", "IterationInterval", "TimeInterval", "AtEnd", "EveryStep", "AnyOf",
           "snapshot_every"]


def snapshot_every(output_interval: float, dt: float) -> int:
    """Steps between two snapshots of ``dycore run``: ``round(output_interval / dt)``, at
    least 1 (the one place this cadence is computed).

    Parameters
    ----------
    output_interval : float
        ``output.output_interval`` [s].
    dt : float
        ``time.dt`` [s].

    Returns
    -------
    int >= 1

    Examples
    --------
    >>> snapshot_every(300.0, 10.0), snapshot_every(25.0, 10.0), snapshot_every(1.0, 10.0)
    (30, 2, 1)
    """
    return max(1, int(round(output_interval / dt)))


class Schedule:
    """Base of the schedules: ``schedule(step) -> bool``; ``a | b`` fires when either does."""

    def __call__(self, step) -> bool:      # pragma: no cover - abstract
        raise NotImplementedError

    def __or__(self, other: "Schedule") -> "AnyOf":
        return AnyOf(self, other)


class AnyOf(Schedule):
    """Fires when any of ``schedules`` fires."""

    def __init__(self, *schedules: Schedule):
        self.schedules = tuple(schedules)

    def __call__(self, step) -> bool:
        return any(s(step) for s in self.schedules)

    def __repr__(self) -> str:
        return " | ".join(repr(s) for s in self.schedules)


class IterationInterval(Schedule):
    """Fires after step numbers ``n, 2n, 3n, ...`` (counted from t = 0).

    Raises
    ------
    ValueError for ``n < 1``.
    """

    def __init__(self, n: int):
        if int(n) != n or n < 1:
            raise ValueError(f"IterationInterval: n must be a positive integer (got {n!r})")
        self.n = int(n)

    def __call__(self, step) -> bool:
        return step.k % self.n == 0

    def __repr__(self) -> str:
        return f"IterationInterval({self.n})"


class EveryStep(IterationInterval):
    """Fires after every step."""

    def __init__(self):
        super().__init__(1)

    def __repr__(self) -> str:
        return "EveryStep()"


class TimeInterval(Schedule):
    """Fires after the first step that reaches or passes each multiple of ``interval`` [s]
    (t = interval, 2 interval, ...): when ``time.dt`` divides ``interval`` exactly at those
    times, else at the step just after each (dt = 7 s, interval = 20 s: steps 3, 6, 9, 12 at
    t = 21, 42, 63, 84 s). A model time within a millionth of a step below a multiple counts as
    reaching it (round-off of the accumulated time).

    Raises
    ------
    ValueError for a non-finite or non-positive ``interval``.
    """

    def __init__(self, interval: float):
        interval = float(interval)
        if not (math.isfinite(interval) and interval > 0):
            raise ValueError(f"TimeInterval: interval must be a positive number of seconds "
                             f"(got {interval!r})")
        self.interval = interval

    def _count(self, t: float, dt: float) -> int:
        return math.floor(t / self.interval + 1e-6 * dt / self.interval)

    def __call__(self, step) -> bool:
        return self._count(step.t, step.dt) > self._count(step.t_prev, step.dt)

    def __repr__(self) -> str:
        return f"TimeInterval({self.interval:g})"


class AtEnd(Schedule):
    """Fires after the last step of the run (``steps=`` or ``until=`` of the run reached)."""

    def __call__(self, step) -> bool:
        return bool(step.last)

    def __repr__(self) -> str:
        return "AtEnd()"
