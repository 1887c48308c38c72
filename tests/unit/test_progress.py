"""Run progress (dycore.timestepping.progress): a bar on a terminal, log lines elsewhere."""
from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from dycore.timestepping.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _steps(progress: Progress, n: int) -> None:
    for k in range(1, n + 1):
        progress.update(10.0 * k, 0.5)
    progress.close()


def test_log_lines_when_not_a_terminal(caplog):
    caplog.set_level(logging.INFO, logger="dycore")
    stream = io.StringIO()
    _steps(Progress(25, "case", True, stream), 25)
    lines = [r.getMessage() for r in caplog.records]
    # every round(25 / 10) = 2 steps, and the last one
    assert len(lines) == 13
    assert lines[0].startswith("step 2/25 (8%), t = 20 s, max|w| = 0.5 m/s, ")
    assert "min left" in lines[0]
    assert lines[-1].startswith("step 25/25 (100%), t = 250 s") and "left" not in lines[-1]
    assert stream.getvalue() == ""                         # no bar, no carriage returns


def test_bar_on_a_terminal_and_nothing_when_disabled(caplog):
    caplog.set_level(logging.INFO, logger="dycore")
    tty = _Tty()
    _steps(Progress(5, "mountainwave3d", True, tty), 5)
    assert "mountainwave3d" in tty.getvalue() and "5/5" in tty.getvalue()
    assert not caplog.records
    quiet = io.StringIO()
    _steps(Progress(5, "case", False, quiet), 5)
    assert quiet.getvalue() == "" and not caplog.records


@pytest.mark.slow
def test_dycore_run_into_a_pipe_logs_plain_lines(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text("mesh: {nx: 4, ny: 4, nz: 3}\ntime: {dt: 10.0, t_end: 30.0}\n"
                      "output: {output_interval: 10.0, path: out.nc}\n")
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-m", "dycore", "run", str(config)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": root})
    assert proc.returncode == 0, proc.stderr
    steps = [line for line in proc.stderr.splitlines() if line.startswith("dycore: step ")]
    assert [line.split(",")[0] for line in steps] == [
        "dycore: step 1/3 (33%)", "dycore: step 2/3 (67%)", "dycore: step 3/3 (100%)"]
    assert "\r" not in proc.stderr
