"""``dycore run --restart FILE[@TIME]`` (issue 12): bitwise continuation on the CPU, a killed run's
file restarts, and every refusal (configuration, mesh, time, output path) is a one-line error.

A 4 x 4 x 3 mesh, dt = 10 s (as tests/integration/test_small_run.py), 6 steps, a snapshot every
step: 6 steps in one run must equal 3 steps + restart + 3 steps to the last bit.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import netCDF4
import numpy as np
import pytest

from dycore import cli
from dycore.io.netcdf import FIELDS
from dycore.io.restart import checkpoint_path

ROOT = Path(__file__).resolve().parents[2]
STEP_VARIABLES = ("step", "diag_time", "max_abs_w", "kinetic_energy", "max_abs_div_u",
                  "picard_iterations", "picard_change")


def _config(folder: Path, out: Path, *, name: str = "run.yaml", dt: float = 10.0,
            nx: int = 4, interval: float = 10.0, checkpoint: float = 0.0) -> Path:
    path = folder / name
    path.write_text(f"mesh: {{nx: {nx}, ny: 4, nz: 3}}\n"
                    f"time: {{dt: {dt}, t_end: 60.0}}\n"
                    f"output: {{path: '{out}', output_interval: {interval}, progress: false, "
                    f"checkpoint_interval: {checkpoint}}}\n")
    return path


def _run(capsys, *args) -> tuple[int, str]:
    status = cli.main(["run", *map(str, args)])
    err = capsys.readouterr().err
    return status, err


def _read(path: Path) -> dict:
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        out = {name: np.array(ds[name][:]) for name in ("time", "snapshot_step", *FIELDS)}
        out.update({name: np.array(ds[name][:]) for name in STEP_VARIABLES})
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted run of 6 steps (7 snapshots, t = 0 ... 60 s)."""
    folder = tmp_path_factory.mktemp("reference")
    out = folder / "one.nc"
    config = _config(folder, out)
    assert cli.main(["run", str(config)]) == 0
    data = _read(out)
    assert data["time"].tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    assert data["snapshot_step"].tolist() == [0, 1, 2, 3, 4, 5, 6]
    return data


def _assert_same(got: dict, want: dict, snapshots=slice(None)) -> None:
    for name in ("time", "snapshot_step", *FIELDS):
        assert np.array_equal(got[name], want[name][snapshots]), name


@pytest.fixture()
def three_steps(tmp_path, capsys):
    """A run stopped after 3 steps (--steps 3) whose config writes to FILE."""
    out = tmp_path / "split.nc"
    config = _config(tmp_path, out)
    status, err = _run(capsys, config, "--steps", "3")
    assert status == 0, err
    return config, out


def test_restart_appends_and_is_bitwise(reference, three_steps, capsys):
    config, out = three_steps
    status, err = _run(capsys, config, "--restart", out)
    assert status == 0, err
    assert f"restart from {out} at t = 30 s (step 3); appending to {out}" in err
    got = _read(out)
    _assert_same(got, reference)
    for name in STEP_VARIABLES:          # the per-step record continues too, bit for bit
        assert np.array_equal(got[name], reference[name], equal_nan=name == "picard_change"), name
    with netCDF4.Dataset(out) as ds:
        assert "continued by dycore" in ds.history and "t_end: 60.0" in ds.config


def test_restart_at_time_into_a_new_file(reference, tmp_path, capsys):
    """FILE@TIME picks the nearest snapshot within dt / 2; --output NEW starts a new file with the
    restart snapshot as its first record (step numbers continue)."""
    full = tmp_path / "full.nc"
    config = _config(tmp_path, full)
    assert _run(capsys, config)[0] == 0
    new = tmp_path / "new.nc"
    status, err = _run(capsys, config, "--restart", f"{full}@29.99", "--output", new)
    assert status == 0, err
    got = _read(new)
    _assert_same(got, reference, slice(3, None))
    assert got["step"].tolist() == [4, 5, 6]
    assert _read(full)["time"].tolist() == reference["time"].tolist()   # source untouched


def test_killed_run_file_restarts(reference, tmp_path, capsys):
    """A run killed (os._exit, no close) after its 3rd snapshot leaves a readable file that
    restarts to the uninterrupted result."""
    out = tmp_path / "killed.nc"
    config = _config(tmp_path, out)
    script = textwrap.dedent(f"""
        import os
        from dycore import cli
        from dycore.io.netcdf import SnapshotWriter
        write = SnapshotWriter.write_snapshot
        def write_then_die(self, *args, **kwargs):
            index = write(self, *args, **kwargs)
            if self.n_snapshots == 3:
                os._exit(9)
            return index
        SnapshotWriter.write_snapshot = write_then_die
        cli.main(["run", {str(config)!r}])
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 9, proc.stderr
    with netCDF4.Dataset(out) as ds:                         # readable as it was left
        assert ds["time"][:].tolist() == [0.0, 10.0, 20.0]
        assert np.array_equal(ds["w"][2], reference["w"][2])
        assert "timers" not in ds.groups
    status, err = _run(capsys, config, "--restart", out)
    assert status == 0, err
    assert "at t = 20 s (step 2)" in err
    _assert_same(_read(out), reference)


def test_refuses_a_different_time_step(three_steps, tmp_path, capsys):
    _, out = three_steps
    other = _config(tmp_path, out, name="dt5.yaml", dt=5.0)
    status, err = _run(capsys, other, "--restart", out)
    assert status == 2
    assert err.startswith(f"dycore: error: {out}: cannot restart: the configuration differs "
                          "from the file's (its config attribute) in time.dt (file: 10.0, ")
    assert "only time.t_end and output.* may differ" in err
    assert err.count("\n") == 1


def test_refuses_a_different_mesh_config(three_steps, tmp_path, capsys):
    _, out = three_steps
    other = _config(tmp_path, out, name="nx5.yaml", nx=5)
    status, err = _run(capsys, other, "--restart", out)
    assert status == 2 and "in mesh.nx (file: 4, " in err


def test_refuses_a_different_mesh(three_steps, tmp_path, capsys):
    """Same configuration, but the file's coordinates are not the mesh this code builds."""
    config, out = three_steps
    with netCDF4.Dataset(out, "a") as ds:
        ds["x"][0] = ds["x"][0] + 1.0
    status, err = _run(capsys, config, "--restart", out)
    assert status == 2
    assert "cannot restart: the mesh built from the configuration differs from the file's: " \
           "node coordinates differ (sha256 " in err and "max |difference| = 1 m" in err


def test_refuses_a_time_not_in_the_file(three_steps, capsys):
    config, out = three_steps
    status, err = _run(capsys, config, "--restart", f"{out}@1000")
    assert status == 2
    assert err == (f"dycore: error: --restart {out}@1000: no snapshot within time.dt / 2 = 5 s "
                   "of t = 1000 s; the file's snapshots: 0, 10, 20, 30 s\n")


def test_refuses_discarding_later_snapshots_and_other_output(three_steps, tmp_path, capsys):
    config, out = three_steps
    status, err = _run(capsys, config, "--restart", f"{out}@10")
    assert status == 1
    assert "would discard the file's 2 later snapshot(s); pass --overwrite" in err
    copy = tmp_path / "copy.nc"
    shutil.copy(out, copy)
    status, err = _run(capsys, config, "--restart", copy)
    assert status == 2
    assert f"output.path of {config} is {out}, not the restart file; pass --output {copy}" in err
    status, err = _run(capsys, config, "--restart", f"{out}@10", "--overwrite", "--steps", "1")
    assert status == 0, err
    data = _read(out)
    # the record after t = 20 s that the restart blanked is gone, not left as NaN (issue 25)
    assert data["time"].tolist() == [0.0, 10.0, 20.0]
    assert data["step"].tolist() == [1, 2]


def test_restart_arg_parsing():
    assert cli._restart_arg("a.nc") == (Path("a.nc"), None)
    assert cli._restart_arg("a.nc@30") == (Path("a.nc"), 30.0)
    assert cli._restart_arg("run@home.nc") == (Path("run@home.nc"), None)


def test_refuses_a_snapshot_at_t_end(tmp_path, capsys):
    out = tmp_path / "done.nc"
    config = _config(tmp_path, out)
    assert _run(capsys, config, "--steps", "6")[0] == 0
    status, err = _run(capsys, config, "--restart", out)
    assert status == 2
    assert f"--restart {out}: its snapshot at t = 60 s (step 6) is at or after time.t_end = " \
           "60 s; pass a later --t-end" in err


def test_incomplete_snapshot_and_not_an_output_file(three_steps, tmp_path, capsys):
    """A record with NaN values (a write cut short) is skipped by default, refused by @TIME."""
    config, out = three_steps
    with netCDF4.Dataset(out, "a") as ds:
        ds["q_r"][3, 0] = np.nan
    status, err = _run(capsys, config, "--restart", f"{out}@30")
    assert status == 1
    assert f"{out}: the snapshot at t = 30 s is incomplete (NaN values" in err
    status, err = _run(capsys, config, "--restart", out, "--overwrite", "--steps", "1")
    assert status == 0 and "at t = 20 s (step 2)" in err, err
    notes = tmp_path / "notes.txt"
    notes.write_text("not netCDF\n")
    status, err = _run(capsys, config, "--restart", notes, "--output", tmp_path / "x.nc")
    assert status == 1 and f"{notes}: cannot open restart file (" in err


# ------------------------------------------------------------------------------ checkpoints
def test_checkpoint_restart_is_bitwise(reference, tmp_path, capsys):
    """Checkpoints every 20 s, snapshots every 30 s: a run stopped after 5 steps has snapshots at
    0, 30 and 50 s (its end) and its checkpoint at 40 s (step 4, replaced atomically: no
    temporary file left). --restart CHECKPOINT --output NEW starts NEW with the checkpoint's
    state; with the snapshot at 50 s cut short (NaN, as a killed write leaves it), --restart FILE
    takes the later checkpoint and appends to FILE; both give the 6-step run's bits."""
    out = tmp_path / "ck.nc"
    config = _config(tmp_path, out, interval=30.0, checkpoint=20.0)
    status, err = _run(capsys, config, "--steps", "5")
    assert status == 0, err
    checkpoint = checkpoint_path(out)
    assert checkpoint == tmp_path / "ck.checkpoint.nc"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.checkpoint.nc", "ck.nc", "run.yaml"]
    saved = _read(checkpoint)
    assert saved["time"].tolist() == [40.0] and saved["snapshot_step"].tolist() == [4]
    for name in FIELDS:
        assert np.array_equal(saved[name][0], reference[name][4]), name
    with netCDF4.Dataset(checkpoint) as ds:
        assert ds.checkpoint_of == "ck.nc" and "checkpoint_interval: 20.0" in ds.config

    new = tmp_path / "new.nc"
    status, err = _run(capsys, config, "--restart", checkpoint, "--output", new)
    assert status == 0, err
    got = _read(new)
    assert got["time"].tolist() == [40.0, 60.0] and got["snapshot_step"].tolist() == [4, 6]
    for name in FIELDS:
        assert np.array_equal(got[name], reference[name][[4, 6]]), name
    assert checkpoint_path(new).exists()          # the new run checkpoints its own file

    with netCDF4.Dataset(out, "a") as ds:
        assert ds["time"][:].tolist() == [0.0, 30.0, 50.0]
        ds["w"][2, 5] = np.nan
    status, err = _run(capsys, config, "--restart", out, "--overwrite")
    assert status == 0, err
    assert (f"notice: restarting from the checkpoint {checkpoint} (t = 40 s, step 4), later than "
            f"the last complete snapshot of {out} (t = 30 s)") in err
    assert f"restart from {checkpoint} at t = 40 s (step 4); appending to {out}" in err
    got = _read(out)
    assert got["time"].tolist() == [0.0, 30.0, 60.0]
    for name in FIELDS:
        assert np.array_equal(got[name], reference[name][[0, 3, 6]]), name
    for name in STEP_VARIABLES:
        assert np.array_equal(got[name], reference[name], equal_nan=name == "picard_change"), name


def test_unreadable_output_falls_back_to_the_checkpoint(reference, tmp_path, capsys):
    """An output file HDF5 cannot open (a process killed while HDF5 wrote its metadata): the
    restart says so, takes the checkpoint, and needs --overwrite (or --output) to start the
    file anew, which then holds the uninterrupted run's bits from the checkpoint on."""
    out = tmp_path / "broken.nc"
    config = _config(tmp_path, out, checkpoint=20.0)
    assert _run(capsys, config, "--steps", "3")[0] == 0
    out.write_bytes(b"\0" * 64 + out.read_bytes()[64:])       # the superblock is gone
    status, err = _run(capsys, config, "--restart", out)
    assert status == 1
    assert f"notice: {out}: cannot open restart file (" in err
    assert f"restarting from its checkpoint {checkpoint_path(out)} (t = 20 s, step 2)" in err
    assert f"pass --overwrite to start {out} anew from the checkpoint" in err
    status, err = _run(capsys, config, "--restart", out, "--overwrite")
    assert status == 0, err
    got = _read(out)
    assert got["time"].tolist() == [20.0, 30.0, 40.0, 50.0, 60.0]
    _assert_same(got, reference, slice(2, None))


def test_checkpoint_refusals(tmp_path, capsys):
    """A checkpoint of an earlier run is not silently replaced; a checkpoint is not an output."""
    out = tmp_path / "c.nc"
    config = _config(tmp_path, out, checkpoint=10.0)
    assert _run(capsys, config, "--steps", "1")[0] == 0
    out.unlink()
    status, err = _run(capsys, config, "--steps", "1")
    assert status == 1
    assert err == (f"dycore: error: {checkpoint_path(out)}: checkpoint file exists (of an earlier "
                   f"run writing {out}); pass --overwrite to replace it, or --restart "
                   f"{checkpoint_path(out)} to continue from it\n")
    status, err = _run(capsys, config, "--restart", checkpoint_path(out), "--output",
                       checkpoint_path(out))
    assert status == 2
    assert f"{checkpoint_path(out)}: output.path (--output) is a checkpoint; the run's output " \
           f"is {out}" in err
