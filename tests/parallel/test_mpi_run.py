"""``mpiexec -n K python -m dycore run CONFIG``: one netCDF file, gathered on rank 0, the same
bits on 1, 2 and 4 ranks, the same variables as a serial run's file and fields that agree
with it to the solver tolerance; a configuration error is reported once."""
import subprocess
import sys

import numpy as np
import pytest
from test_mpi import ROOT, launch

RANKS = (1, 2, 4)
CONFIG = """\
case: {name: mountainwave3d}
mesh: {nx: 4, ny: 4, nz: 3}
time: {dt: 10.0, t_end: 30.0}
solvers:
  pressure: {method: cg, preconditioner: PRESSURE_PC, rtol: 1.0e-10, max_iterations: 2000}
  momentum: {method: bicgstab, preconditioner: block_jacobi}
  tracer: {method: bicgstab, preconditioner: jacobi}
output: {path: out.nc, output_interval: 20.0, progress: false}
"""


def _config(tmp_path, pc="amg"):
    path = tmp_path / f"case_{pc}.yaml"
    path.write_text(CONFIG.replace("PRESSURE_PC", pc))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    cfg = _config(tmp)
    out = {}
    for k in RANKS:
        nc = tmp / f"ranks{k}.nc"
        proc = launch(k, "-m", "dycore", "run", str(cfg), "--output", str(nc), timeout=300)
        assert proc.returncode == 0, f"mpiexec -n {k} failed:\n{proc.stdout}\n{proc.stderr}"
        assert proc.stdout.count(f"on {k} MPI ranks") == 1         # the summary, once
        assert proc.stderr.count("halo exchanges per step") == 1   # the log, rank 0 only
        out[k] = nc
    serial = tmp / "serial.nc"
    proc = subprocess.run([sys.executable, "-m", "dycore", "run", str(cfg), "--output",
                           str(serial)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=launch_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    out["serial"] = serial
    return out


def launch_env():
    import os
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _read(path):
    import netCDF4
    with netCDF4.Dataset(path) as ds:
        return {name: np.asarray(v[:]) for name, v in ds.variables.items()}


def test_gathered_files_are_bitwise_equal_on_1_2_4_ranks(files):
    one = _read(files[1])
    assert one["time"].tolist() == [0.0, 20.0, 30.0]
    for k in RANKS[1:]:
        other = _read(files[k])
        assert set(other) == set(one)
        for name, value in one.items():
            assert np.array_equal(other[name], value), (k, name)


def test_the_file_has_the_serial_layout_and_agrees_with_the_serial_run(files):
    one, ser = _read(files[1]), _read(files["serial"])
    assert set(one) == set(ser)
    for name in ("x", "y", "z", "cell_nodes", "time"):
        assert np.array_equal(one[name], ser[name])
    for name in ("u", "w", "p", "theta_prime"):
        err = np.max(np.abs(one[name] - ser[name])) / np.max(np.abs(ser[name]))
        assert err < 1e-8, (name, err)


def test_a_configuration_error_is_reported_once_by_rank_0(tmp_path):
    cfg = _config(tmp_path, pc="ilu")
    proc = launch(2, "-m", "dycore", "run", str(cfg), "--output", str(tmp_path / "x.nc"),
                  timeout=120)
    assert proc.returncode == 2
    msg = "solvers.pressure.preconditioner: 'ilu' is not available on MPI ranks"
    assert proc.stderr.count(msg) == 1, proc.stderr
    assert not (tmp_path / "x.nc").exists()


def test_restart_on_4_ranks_continues_a_2_rank_file_bitwise(files, tmp_path):
    """--restart FILE@20 into a new file on another rank count: the snapshot at t = 30 s is
    the uninterrupted run's, bit for bit; appending to the restart file is refused."""
    cfg = _config(tmp_path)
    new = tmp_path / "restarted.nc"
    proc = launch(4, "-m", "dycore", "run", str(cfg), "--restart", f"{files[2]}@20",
                  "--output", str(new), timeout=300)
    assert proc.returncode == 0, proc.stderr
    one, again = _read(files[2]), _read(new)
    assert again["time"].tolist() == [20.0, 30.0]
    for name in ("u", "v", "w", "p", "theta_prime", "q_v", "q_c", "q_r"):
        assert np.array_equal(again[name][-1], one[name][-1]), name
    proc = launch(2, "-m", "dycore", "run", str(cfg), "--restart", f"{files[2]}@20",
                  "--output", str(files[2]), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("appending to the restart file is not available in MPI") == 1


def test_a_bad_configuration_file_and_a_locked_output_are_reported_once(tmp_path):
    """Issue 25: an error every rank meets while reading the file is printed by rank 0 alone,
    and a run whose output another process holds is refused on every rank, once, naming it."""
    import os

    from dycore.io.safety import OutputLock

    bad = tmp_path / "bad.yaml"
    bad.write_text("time: {dt: -1}\n")
    proc = launch(2, "-m", "dycore", "run", str(bad), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("bad.yaml: time.dt: expected greater than 0 (got -1)") == 1, \
        proc.stderr
    out = tmp_path / "x.nc"
    holder = OutputLock(out).acquire()
    try:
        proc = launch(2, "-m", "dycore", "run", str(_config(tmp_path)), "--output", str(out),
                      timeout=120)
    finally:
        holder.release()
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count(f"x.nc: output file is being written by another dycore run "
                             f"(process {os.getpid()} on ") == 1, proc.stderr
    assert not out.exists()


# The child: ``dycore run`` on K ranks whose rank-0 snapshot write fails at the 2nd snapshot
# (on rank 0's writer thread). argv: config, output.
FAILING_WRITE = """
import sys
from dycore import cli
from dycore.errors import OutputError
from dycore.io.netcdf import SnapshotWriter

real = SnapshotWriter.write_snapshot

def write_snapshot(self, t, fields, step=None):
    if self.n_snapshots == 1:
        raise OutputError(f"{self.path}: disk full (injected)")
    return real(self, t, fields, step)

SnapshotWriter.write_snapshot = write_snapshot
sys.exit(cli.main(["run", sys.argv[1], "--output", sys.argv[2]]))
"""


def test_a_write_failing_on_rank_0s_writer_thread_stops_every_rank_once(tmp_path):
    """Rank 0 writes on its writer thread while the ranks step on: a write that fails there
    is raised by rank 0's next write or the final drain, and every rank stops (MPI_Abort),
    the message printed once; the snapshot written before it stays readable."""
    out = tmp_path / "x.nc"
    proc = launch(2, "-c", FAILING_WRITE, str(_config(tmp_path)), str(out), timeout=180)
    assert proc.returncode != 0, proc.stderr
    assert proc.stderr.count("disk full (injected)") == 1, proc.stderr
    assert proc.stderr.count("rank 0 of 2: OutputError") == 1, proc.stderr
    kept = _read(out)
    assert kept["time"][0] == 0.0 and np.isfinite(kept["w"][0]).all()


def test_a_restart_file_only_rank_0_reads_and_its_error_once(tmp_path):
    """Rank 0 alone reads ``--restart`` (the others get its verdict, then their local values):
    a file that is no dycore output stops every rank with one message."""
    junk = tmp_path / "junk.nc"
    junk.write_bytes(b"not a netCDF file")
    proc = launch(2, "-m", "dycore", "run", str(_config(tmp_path)), "--restart", str(junk),
                  "--output", str(tmp_path / "x.nc"), timeout=120)
    assert proc.returncode == 1, proc.stderr                   # OutputError
    assert proc.stderr.count("junk.nc: cannot open restart file") == 1, proc.stderr
    assert not (tmp_path / "x.nc").exists()
