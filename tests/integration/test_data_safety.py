"""Issue 25: no run, command or input may destroy or silently lose a user's files.

Defects 2-7 beyond the error corpus (tests/unit/test_error_corpus.py has one row per message):
checksums on every variable, a damaged restart file giving way to its checkpoint bit for bit,
outputs that are inputs through a symbolic link, NaN records never exported, YAML merge keys,
and errors printed by MPI rank 0 alone. Defect 1 (runs racing) is tests/integration/
test_output_lock.py.
"""
from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import yaml

from dycore import cli
from dycore.config import load_config
from dycore.io.integrity import find_damage
from dycore.io.netcdf import FIELDS, SnapshotWriter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_error_corpus import damage_chunk  # noqa: E402  (one way of damaging a chunk)

BASE = {"mesh": {"nx": 2, "ny": 2, "nz": 2}, "time": {"dt": 10.0, "t_end": 30.0},
        "output": {"path": "out.nc", "output_interval": 10.0, "progress": False,
                   "checkpoint_interval": 10.0}}


def _run(capsys, *argv) -> tuple[int, str]:
    capsys.readouterr()
    status = cli.main([str(a) for a in argv])
    return status, capsys.readouterr().err


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(BASE))
    return tmp_path


# ------------------------------------------------------------------------ checksums (3)
def test_every_variable_the_writers_create_has_a_checksum(tmp_path):
    mesh = types.SimpleNamespace(coords=np.random.default_rng(0).random((5, 3)),
                                 tets=np.array([[0, 1, 2, 3], [1, 2, 3, 4]]))
    with SnapshotWriter(tmp_path / "a.nc", mesh, config_yaml="a: 1", version="0") as writer:
        writer.write_snapshot(0.0, {n: np.zeros(5) for n in FIELDS}, step=0)
        writer.write_diagnostics(1, 10.0, {"max_abs_w": 0.5, "picard_change": [1.0, 0.1],
                                           "extra_diagnostic": 2.0})
        writer.write_timers({"step": {"calls": 1, "total_ms": 2.0}}, "table")
    with netCDF4.Dataset(tmp_path / "a.nc") as ds:
        variables = [(name, var) for name, var in ds.variables.items()]
        variables += [(f"timers/{n}", v) for n, v in ds.groups["timers"].variables.items()]
        unchecked = [name for name, var in variables if not var.filters()["fletcher32"]]
    assert len(variables) > 25
    assert unchecked == ["mesh"]            # the scalar topology variable holds no data


def test_damage_is_named_by_variable_and_record(tmp_path, folder, capsys):
    assert _run(capsys, "run", "run.yaml")[0] == 0
    with netCDF4.Dataset("out.nc") as ds:
        assert find_damage(ds) == []
    damage_chunk(folder / "out.nc", "theta_prime", 2)
    damage_chunk(folder / "out.nc", "u", 3)
    with netCDF4.Dataset("out.nc") as ds:
        assert find_damage(ds) == ["variable u, record 3 (t = 30 s)",
                                   "variable theta_prime, record 2 (t = 20 s)"]


def test_a_damaged_restart_file_gives_way_to_its_checkpoint_bit_for_bit(folder, capsys):
    """out.nc (t = 0-30 s) with w at t = 10 s damaged: --restart takes the checkpoint (t = 30 s)
    with a notice naming the damage, and the new file equals a run never stopped."""
    assert _run(capsys, "run", "run.yaml", "--t-end", "50", "--output", "ref.nc")[0] == 0
    assert _run(capsys, "run", "run.yaml")[0] == 0
    damage_chunk(folder / "out.nc", "w", 1)
    status, err = _run(capsys, "run", "run.yaml", "--restart", "out.nc", "--t-end", "50",
                       "--output", "new.nc")
    assert status == 0, err
    assert ("notice: out.nc: damaged data (checksum mismatch or undecodable chunk) in variable "
            "w, record 1 (t = 10 s); cannot restart from it; restarting from its checkpoint "
            "out.checkpoint.nc (t = 30 s, step 3)") in err
    with netCDF4.Dataset("new.nc") as new, netCDF4.Dataset("ref.nc") as ref:
        assert new["time"][:].tolist() == [30.0, 40.0, 50.0]
        for name in FIELDS:
            assert np.array_equal(new[name][:], ref[name][3:]), name


# --------------------------------------------------------------- outputs that are inputs (2)
def test_a_run_never_writes_over_its_config_through_a_link(folder, capsys):
    os.symlink("run.yaml", folder / "link.nc")
    text = (folder / "run.yaml").read_text()
    status, err = _run(capsys, "run", "run.yaml", "--output", "link.nc", "--overwrite")
    assert status == 1
    assert err == ("dycore: error: link.nc: output.path (--output) is the configuration file "
                   "(= run.yaml); writing it would destroy the input: choose another file "
                   "name\n")
    assert (folder / "run.yaml").read_text() == text
    assert sorted(p.name for p in folder.iterdir()) == ["link.nc", "run.yaml"]   # no lock left


def test_verify_json_over_a_hard_link_of_its_input_is_refused(folder, capsys):
    assert _run(capsys, "run", "run.yaml")[0] == 0
    os.link(folder / "out.nc", folder / "out.json")
    before = (folder / "out.nc").read_bytes()
    status, err = _run(capsys, "verify", "out.nc", "--json", "out.json", "--overwrite")
    assert status == 1 and "out.json: --json is FILE (the output file read) (= out.nc)" in err
    assert (folder / "out.nc").read_bytes() == before


# ----------------------------------------------------------------------- NaN results (5)
def test_export_never_writes_a_nan_time(folder, capsys):
    """A file whose last records a restart blanked (NaN time) exports only its snapshots."""
    assert _run(capsys, "run", "run.yaml")[0] == 0
    with netCDF4.Dataset("out.nc", "a") as ds:      # as SnapshotWriter.append leaves them
        ds["time"][2:] = np.nan
        for name in FIELDS:
            ds[name][2:, :] = np.nan
    assert _run(capsys, "export", "out.nc", "--xdmf")[0] == 0
    times = re.findall(r'<Time Value="([^"]*)"', (folder / "out.xdmf").read_text())
    assert times == ["0.0", "10.0"]


# ---------------------------------------------------------------------- valid input (6)
def test_yaml_merge_keys_are_read_as_yaml_1_1_says(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("mesh: {nx: 4, ny: 4, nz: 3}\n"
                    "solvers:\n"
                    "  momentum: &m {method: gmres, preconditioner: ilu, rtol: 1.0e-6}\n"
                    "  tracer: {<<: *m, preconditioner: jacobi}\n")
    tracer = load_config(path).solvers.tracer
    assert (tracer.method, tracer.preconditioner, tracer.rtol) == ("gmres", "jacobi", 1e-6)
    path.write_text("solvers:\n  momentum: &m {method: gmres}\n"
                    "  tracer: {<<: *m, rtol: 1.0e-6, rtol: 1.0e-7}\n")
    with pytest.raises(Exception, match="found duplicate key 'rtol'"):
        load_config(path)


# ------------------------------------------------------------------ MPI messages once (7)
def test_an_mpi_rank_other_than_0_prints_no_error(folder, capsys, monkeypatch):
    (folder / "run.yaml").write_text("time: {dt: -1}\n")
    monkeypatch.setenv("PMI_RANK", "1")
    status, err = _run(capsys, "run", "run.yaml")
    assert (status, err) == (2, "")
    monkeypatch.setenv("PMI_RANK", "0")
    status, err = _run(capsys, "run", "run.yaml")
    assert status == 2 and err.startswith("dycore: error: run.yaml: time.dt")


# ------------------------------------------------- never renamed over a file it did not make
def test_the_writer_never_renames_over_a_file_that_appeared_meanwhile(tmp_path, monkeypatch):
    """Between the writer's start (no out.nc) and its rename, another program makes out.nc:
    it is left as it is and the writer says so."""
    import dycore.io.netcdf as netcdf
    from dycore.errors import OutputError

    out = tmp_path / "out.nc"
    real_define = netcdf.SnapshotWriter._define

    def define(self, *args):
        real_define(self, *args)
        out.write_text("another program's file\n")      # appears before the rename

    monkeypatch.setattr(netcdf.SnapshotWriter, "_define", define)
    mesh = types.SimpleNamespace(coords=np.zeros((4, 3)) + np.eye(4, 3),
                                 tets=np.array([[0, 1, 2, 3]]))
    with pytest.raises(OutputError, match="a file appeared there while this run was starting"):
        SnapshotWriter(out, mesh, config_yaml="a: 1", version="0")
    assert out.read_text() == "another program's file\n"
    assert not out.with_name("out.nc.part").exists()
    monkeypatch.setattr(netcdf.SnapshotWriter, "_define", real_define)
    SnapshotWriter(out, mesh, config_yaml="a: 1", version="0").close()   # existed: replaced
    with netCDF4.Dataset(out) as ds:
        assert ds.getncattr("config") == "a: 1"


def test_validate_says_when_backend_threads_is_clamped(folder, capsys, monkeypatch):
    import numba

    import dycore.checks.validate
    from dycore.errors import DycoreError

    def stop(*args, **kwargs):
        raise DycoreError("stopped before the GPU")

    monkeypatch.setattr(dycore.checks.validate, "validate", stop)
    (folder / "run.yaml").write_text(yaml.safe_dump({**BASE, "backend": {"threads": 9999}}))
    status, err = _run(capsys, "validate", "run.yaml")
    cores = numba.config.NUMBA_NUM_THREADS
    assert status == 1
    assert err == (f"dycore: notice: backend.threads = 9999 is more than the {cores} threads "
                   f"numba can use on this machine; using {cores}\n"
                   "dycore: error: stopped before the GPU\n")


@pytest.mark.parametrize("argv", [("bench", "run.yaml", "--json", "run.yaml"),
                                  ("validate", "run.yaml", "--output-dir", ".")])
def test_bench_and_validate_never_write_over_their_config(folder, capsys, argv):
    config = folder / "run.yaml"
    if argv[0] == "validate":                  # a config that bears a report's name
        config = folder / "validate_report.txt"
        config.write_text(yaml.safe_dump(BASE))
        argv = ("validate", config.name, "--output-dir", ".")
    text = config.read_text()
    status, err = _run(capsys, *argv)
    assert status == 1
    assert "is CONFIG (the configuration file); writing it would destroy the input" in err
    assert config.read_text() == text


def test_a_failed_export_leaves_the_earlier_export_as_it_was(folder, capsys):
    """export --overwrite of a damaged file: the error names the input; the earlier pair is
    untouched (the new one is made in a folder of its own and moved in only when complete)."""
    assert _run(capsys, "run", "run.yaml")[0] == 0
    assert _run(capsys, "export", "out.nc", "--xdmf")[0] == 0
    before = {p: p.read_bytes() for p in [folder / "out.xdmf",
                                          *sorted((folder / "out_xdmf").iterdir())]}
    assert len(before) >= 3
    damage_chunk(folder / "out.nc", "q_r", 2)
    status, err = _run(capsys, "export", "out.nc", "--xdmf", "--overwrite")
    assert status == 1
    assert err == ("dycore: error: out.nc: cannot read q_r, record 2 (t = 20 s) of the output "
                   "file (NetCDF: HDF error)\n")
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in (folder / "out_xdmf").iterdir()) == sorted(
        p.name for p in before if p.parent.name == "out_xdmf")
    assert sorted(p.name for p in folder.iterdir()) == [
        "out.checkpoint.nc", "out.nc", "out.xdmf", "out_xdmf", "run.yaml"]
