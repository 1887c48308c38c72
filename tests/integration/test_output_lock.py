"""Issue 25, defect 1: runs racing on one output path. Exactly one run writes; every other one
exits non-zero before writing, naming the run that holds the file; 0 lost outputs.

Most trials race the lock-taking path itself (:func:`dycore.io.safety.output_lock`) in forked
processes released together by a barrier (50 trials of 4 processes); a few race whole
``dycore run`` processes (``dycore.cli.main`` in subprocesses that import everything first and
start on one signal), with and without ``output.checkpoint_interval``, each racer with its own
``physics.nu_h`` so the file tells who wrote it.
"""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import yaml

from dycore.errors import OutputError
from dycore.io.safety import OutputLock, lock_owner, lock_path, lock_taken_over, output_lock

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------- the lock, forked racers
def _racer(path: str, barrier, results, index: int, hold) -> None:
    """Take the lock of ``path`` after the barrier; the winner writes its index into ``path``
    once every loser has reported, a loser reports the message it got (and writes nothing)."""
    barrier.wait()
    try:
        with output_lock(path):
            results.put((index, "won", os.getpid()))
            hold.wait(30)                                 # the others try while it is held
            Path(path).write_text(f"written by racer {index}\n")
    except OutputError as exc:
        results.put((index, "refused", str(exc)))
        code = 1
    else:
        code = 0
    results.close()
    results.join_thread()                                 # flushed before the hard exit
    os._exit(code)


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl locks are POSIX")
def test_fifty_lock_races_one_writer_each(tmp_path):
    ctx = multiprocessing.get_context("fork")
    n_racers, trials = 4, 50
    out = tmp_path / "same.nc"
    for trial in range(trials):
        barrier, results, hold = ctx.Barrier(n_racers), ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=_racer, args=(str(out), barrier, results, i, hold))
                 for i in range(n_racers)]
        for p in procs:
            p.start()
        got = [results.get(timeout=60) for _ in range(n_racers)]   # all have tried
        hold.set()
        for p in procs:
            p.join(60)
        winners = [g for g in got if g[1] == "won"]
        losers = [g for g in got if g[1] == "refused"]
        assert len(winners) == 1 and len(losers) == n_racers - 1, (trial, got)
        index, _, pid = winners[0]
        codes = {i: p.exitcode for i, p in enumerate(procs)}
        assert codes[index] == 0 and all(c == 1 for i, c in codes.items() if i != index)
        for _, _, message in losers:          # each names the file and the process holding it
            assert message.startswith(f"{out}: output file is being written by another "
                                      f"dycore run (process {pid} on "), message
        assert out.read_text() == f"written by racer {index}\n"   # the winner's, complete
        assert not lock_path(out).exists()                        # released and removed


def test_a_killed_owner_leaves_a_stale_lock_that_the_next_run_takes(tmp_path, caplog):
    """SIGKILL leaves the lock file; the OS dropped the lock, so the next run takes it over
    with a notice naming the dead process."""
    out = tmp_path / "out.nc"
    code = ("import os, sys\nfrom dycore.io.safety import OutputLock\n"
            f"OutputLock({str(out)!r}).acquire()\nprint('locked', flush=True)\n"
            "sys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.stdout.readline().strip() == "locked"
    with pytest.raises(OutputError, match=rf"process {child.pid} on "):
        with output_lock(out):
            pass
    child.kill()
    child.wait()
    assert lock_owner(out)["pid"] == child.pid                  # the stale file is still there
    with caplog.at_level("WARNING", logger="dycore"), output_lock(out) as lock:
        assert lock.held and lock_owner(out)["pid"] == os.getpid()
        assert lock_taken_over(out)["pid"] == child.pid          # the restart rewrites then
    assert lock_taken_over(out) is None                          # not held any more
    with output_lock(out):                                       # a free lock: nobody died
        assert lock_taken_over(out) is None
    assert f"stale lock of process {child.pid} on" in caplog.text
    assert "no longer running" in caplog.text
    assert not lock_path(out).exists()


def test_the_lock_is_released_when_the_run_raises(tmp_path):
    out = tmp_path / "out.nc"
    with pytest.raises(ZeroDivisionError):
        with output_lock(out):
            assert lock_path(out).exists()
            1 / 0
    assert not lock_path(out).exists()
    with output_lock(out), output_lock(tmp_path / "." / "out.nc") as inner:   # nested: shared
        assert inner.held


# ------------------------------------------------------------------- whole dycore runs
RACER = """\
import sys, time
from pathlib import Path
import dycore.cli, dycore.config, dycore.timestepping.simulation, dycore.io.restart  # noqa
import netCDF4, numba, pydantic, scipy.sparse  # noqa: everything imported before the start
go = Path(sys.argv[1])
Path(f"{go}.ready.{sys.argv[2]}").touch()              # imported: ready to start
while not go.exists():
    time.sleep(0.002)
sys.exit(dycore.cli.main(sys.argv[3:]))
"""


def _config(folder: Path, nu_h: float, checkpoint: float) -> Path:
    path = folder / f"run_{nu_h:g}.yaml"
    path.write_text(yaml.safe_dump({
        "mesh": {"nx": 4, "ny": 4, "nz": 3}, "physics": {"nu_h": nu_h},
        "time": {"dt": 10.0, "t_end": 30.0},
        "output": {"path": "same.nc", "output_interval": 10.0, "progress": False,
                   "checkpoint_interval": checkpoint}}))
    return path


def _nu_h(path: Path) -> float:
    with netCDF4.Dataset(path) as ds:
        return float(yaml.safe_load(ds.getncattr("config"))["physics"]["nu_h"])


@pytest.mark.parametrize("checkpoint", [0.0, 10.0], ids=["no-checkpoint", "checkpoint"])
def test_whole_runs_racing_on_one_output(tmp_path, checkpoint):
    """3 races of 3 ``dycore run ... --output same.nc --overwrite`` (a 4 x 4 x 3 mesh, 3 steps),
    the second and third over the file of the first: exactly one exits 0 and its file (and
    checkpoint) is complete and holds its configuration; the others exit 1 naming it."""
    racer = tmp_path / "racer.py"
    racer.write_text(RACER)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_NUM_THREADS": "1"}
    out = tmp_path / "same.nc"
    for race in range(3):
        go = tmp_path / f"go{race}"
        procs = {}
        for nu_h in (10.0, 5.0, 2.0):
            argv = ["run", str(_config(tmp_path, nu_h, checkpoint)), "--output", "same.nc",
                    "--overwrite"]
            procs[nu_h] = subprocess.Popen([sys.executable, str(racer), str(go), f"{nu_h:g}",
                                            *argv], cwd=tmp_path, env=env,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True)
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob(f"go{race}.ready.*"))) < len(procs):   # all imported
            assert time.monotonic() < deadline and all(p.poll() is None
                                                       for p in procs.values())
            time.sleep(0.01)
        go.touch()
        done = {nu_h: (p.wait(300), *p.communicate()) for nu_h, p in procs.items()}
        winners = [nu_h for nu_h, (code, _, _) in done.items() if code == 0]
        assert len(winners) == 1, {k: (c, e[-400:]) for k, (c, _, e) in done.items()}
        for nu_h, (code, stdout, err) in done.items():
            assert "Traceback" not in err
            if nu_h != winners[0]:
                assert code == 1 and "output: " not in stdout
                assert "same.nc: output file is being written by another dycore run" in err, err
        assert _nu_h(out) == winners[0]
        with netCDF4.Dataset(out) as ds:
            assert np.array_equal(ds["time"][:], [0.0, 10.0, 20.0, 30.0])
            assert np.isfinite(ds["w"][:]).all()
        ck = tmp_path / "same.checkpoint.nc"
        assert ck.exists() == (checkpoint > 0)
        if checkpoint:
            assert _nu_h(ck) == winners[0]
        assert sorted(p.name for p in tmp_path.glob("same*")) == sorted(
            ["same.nc"] + (["same.checkpoint.nc"] if checkpoint else []))   # no .part, .lock


def test_a_restart_does_not_read_a_file_another_run_is_writing(tmp_path, monkeypatch, capsys):
    """--restart a.nc --output b.nc while a run holds a.nc: refused before anything is read,
    naming that run (HDF5 gives no consistent view of a file being written)."""
    from dycore import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(
        {"mesh": {"nx": 2, "ny": 2, "nz": 2}, "time": {"dt": 10.0, "t_end": 30.0},
         "output": {"path": "a.nc", "progress": False}}))
    assert cli.main(["run", "run.yaml", "--steps", "1"]) == 0
    capsys.readouterr()
    holder = OutputLock(tmp_path / "a.nc").acquire()      # as another run would (own fd)
    try:
        status = cli.main(["run", "run.yaml", "--restart", "a.nc", "--output", "b.nc"])
    finally:
        holder.release()
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith(f"dycore: error: a.nc: restart file (--restart) is being written by "
                          f"another dycore run (process {os.getpid()} on "), err
    assert err.rstrip().endswith("restart from it when that run has ended")
    assert not (tmp_path / "b.nc").exists() and not lock_path(tmp_path / "b.nc").exists()
