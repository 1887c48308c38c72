"""Run progress: a tqdm bar on a terminal or in Jupyter (``tqdm.auto``), plain log lines
anywhere else.

A bar redrawn with carriage returns is unreadable in a log file, a CI log or a pipe, so when
the bar's stream (stderr) is not a terminal the run logs one line at about every tenth of the
run and at its last step instead (``dycore: step 30/300 (10%), t = 300 s, max|w| = 0.412 m/s,
1.93 s/step, about 8.7 min left``), through the ``dycore`` logger.
"""
from __future__ import annotations

import logging
import sys
import time

__all__ = ["Progress", "LINES"]

log = logging.getLogger("dycore")

#: log lines over a run when the stream is not a terminal (plus the last step)
LINES = 10


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython's ZMQ shell), where ``tqdm.auto`` shows a widget
    although stderr is not a terminal."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


class Progress:
    """Progress of ``total`` steps.

    Parameters
    ----------
    total : int
        Steps this run takes.
    desc : str
        Name shown with the bar (the case).
    enabled : bool
        False: nothing is shown (``output.progress: false``, ``--no-progress``).
    stream : text stream, optional
        Where the bar goes (default ``sys.stderr``); its ``isatty()`` chooses bar or lines.
    """

    def __init__(self, total: int, desc: str, enabled: bool, stream=None):
        self.total, self.done = int(total), 0
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(enabled and ((callable(isatty) and isatty()) or in_notebook()))
        self.lines = bool(enabled and not self.tty)
        self.every = max(1, round(self.total / LINES))
        self.start = time.perf_counter()
        self.bar = None
        if self.tty:
            from tqdm.auto import tqdm      # a widget in Jupyter, the text bar elsewhere

            self.bar = tqdm(total=self.total, unit="step", desc=desc, file=self.stream)

    def update(self, t: float, max_abs_w: float) -> None:
        """One step done, at model time ``t`` [s] with max|w| = ``max_abs_w`` [m/s]."""
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix(t=f"{t:.0f}s", w=f"{max_abs_w:.3f}")
            self.bar.update(1)
        elif self.lines and (self.done % self.every == 0 or self.done == self.total):
            per_step = (time.perf_counter() - self.start) / self.done
            left = (self.total - self.done) * per_step
            log.info("step %d/%d (%d%%), t = %g s, max|w| = %.3g m/s, %.3g s/step%s",
                     self.done, self.total, round(100 * self.done / max(self.total, 1)), t,
                     max_abs_w, per_step,
                     f", about {left / 60:.2g} min left" if self.done < self.total else "")

    def close(self) -> None:
        """Close the bar (nothing to do for log lines)."""
        if self.bar is not None:
            self.bar.close()
