"""Where a run's wall time goes: set-up, steps, output on the critical path, total.

``dycore run`` prints the split at the end and stores it in the stage-timer table of the output
file (rows ``run: ...``); ``dycore bench --parts run`` reports the same split as JSON. Host clock
(``time.perf_counter``); a step ends with a device→host read, so step times include the GPU work.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

__all__ = ["RunSplit"]


class RunSplit:
    """Wall-clock split of one run.

    Parameters
    ----------
    t0 : float
        ``time.perf_counter()`` when the run (the command) started.
    """

    def __init__(self, t0: float):
        self.t0 = t0
        self.setup_s = 0.0
        self.steps_s = 0.0
        self.output_s = 0.0
        self.first_step_s = None

    def setup_done(self) -> None:
        """Mark the end of the set-up (everything before the first step)."""
        self.setup_s = time.perf_counter() - self.t0

    @contextmanager
    def steps(self):
        """Time one step (the first one separately: it compiles or loads the kernels)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t
            if self.first_step_s is None:
                self.first_step_s = dt
            self.steps_s += dt

    @contextmanager
    def output(self):
        """Time output work on the critical path (host copies, hand-over, waiting for writes)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.output_s += time.perf_counter() - t

    def as_dict(self, steps: int) -> dict:
        """{setup_s, first_step_s, steps_s, step_ms (mean of the steps after the first),
        output_s, other_s, total_s, steps} [s / ms]; total is up to this call."""
        total = time.perf_counter() - self.t0
        first = self.first_step_s or 0.0
        rest = (self.steps_s - first) / (steps - 1) if steps > 1 else 0.0
        return {"steps": int(steps), "setup_s": self.setup_s, "first_step_s": first,
                "steps_s": self.steps_s, "step_ms": 1e3 * rest, "output_s": self.output_s,
                "other_s": total - self.setup_s - self.steps_s - self.output_s,
                "total_s": total}

    def add_to(self, timers) -> None:
        """Add the split as rows ``run: ...`` of a StageTimers table [ms]."""
        d = self.as_dict(0)
        for name in ("setup", "steps", "output", "total"):
            timers.add(f"run: {name}", 1e3 * d[f"{name}_s"])

    def summary(self, steps: int) -> str:
        """One line: set-up, steps (first step, mean of the others), output, total [s]."""
        d = self.as_dict(steps)
        return (f"wall time {d['total_s']:.2f} s: set-up {d['setup_s']:.2f} s, {steps} steps "
                f"{d['steps_s']:.2f} s (first {d['first_step_s']:.2f} s, then "
                f"{d['step_ms']:.2f} ms/step), output {d['output_s']:.2f} s "
                f"({100 * d['output_s'] / max(d['total_s'], 1e-12):.1f} %)")
