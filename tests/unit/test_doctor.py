"""``dycore doctor`` (issue 23): runs on this CPU machine and says a GPU run cannot work (exit
status 3), reports the real versions, turns a failing probe into a line, and judges the driver,
MPI agreement and the kernel cache from what the probes find."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numba
import numpy
import pytest

from dycore import cli, doctor

REPO = Path(__file__).resolve().parents[2]


def _doctor(capsys, *args) -> tuple[int, str, str]:
    status = cli.main(["doctor", *args])
    out, err = capsys.readouterr()
    return status, out, err


def _row(out: str, name: str) -> str:
    match = re.search(rf"^{re.escape(name)} +(.*)$", out, re.M)
    assert match, name
    return match.group(1)


def test_cpu_machine_report_and_exit_status(capsys):
    status, out, err = _doctor(capsys)
    assert status == doctor.EXIT_NO_GPU == 3 and err == ""
    assert out.startswith("dycore doctor: paste this whole report into a bug report\n"
                          "exit status 3: no GPU run here\n")
    assert _row(out, "numpy") == numpy.__version__
    assert _row(out, "numba") == numba.__version__
    assert _row(out, "numba-cuda") == metadata.version("numba-cuda")
    assert _row(out, "python").startswith(".".join(map(str, sys.version_info[:3])))
    assert _row(out, "CPU run") == "can work"
    reason = ("NUMBA_ENABLE_CUDASIM=1: the CUDA simulator, not a GPU"    # tests/conftest.py
              if numba.config.ENABLE_CUDASIM else "numba-cuda finds no CUDA device")
    assert _row(out, "GPU run").startswith(f"cannot work: {reason}")
    assert _row(out, "numba cache").endswith("(writable)")
    assert Path(_row(out, "numba cache").split(" (")[0]).is_dir()
    assert _row(out, "mpi4py and mpiexec") == "agree (mpich)"     # the mpich wheel's pair
    # no cuDSS here: its NCCL layer is missing, and mpi4py runs MPICH besides
    assert _row(out, "NCCL communication layer").startswith("not installed")
    assert _row(out, "factorisation over GPU ranks").startswith(
        "replicated only: no cuDSS NCCL communication layer")
    assert "probe " not in out                                     # no probe failed here


def test_json_has_the_same_verdict(capsys):
    status, out, _ = _doctor(capsys, "--json")
    data = json.loads(out)
    assert status == 3 and data["facts"]["gpu_run"] is False
    names = {(line["section"], line["name"]) for line in data["lines"]}
    assert {("packages", "numpy"), ("gpu", "numba-cuda device"), ("mpi", "mpiexec"),
            ("kernel cache", "numba cache"), ("verdict", "GPU run"),
            ("cudss", "nvmath-python"), ("cudss", "library")} <= names
    cudss = {line["name"]: line["value"] for line in data["lines"] if line["section"] == "cudss"}
    assert cudss["library"] == "(no CuPy)"          # this machine: no GPU stack, no cuDSS


def test_a_failing_probe_is_a_line(capsys, monkeypatch):
    def broken(argv):
        raise OSError("mpiexec hangs")

    monkeypatch.setattr(doctor, "_run", broken)
    status, out, err = _doctor(capsys)
    assert status == 3 and "Traceback" not in out + err
    assert _row(out, "probe mpi") == "failed: OSError: mpiexec hangs  <-- problem"
    assert _row(out, "numpy") == numpy.__version__              # the other probes still ran


def test_mpi4py_and_mpiexec_of_different_implementations(capsys, monkeypatch):
    monkeypatch.setattr(doctor, "_run", lambda argv: "mpirun (Open MPI) 4.1.5\n")
    _, out, _ = _doctor(capsys)
    assert _row(out, "mpi4py and mpiexec").startswith(
        "differ (mpi4py: mpich, mpiexec: open mpi): an mpiexec run would start independent "
        "single-rank jobs")


def test_the_factorisation_over_gpu_ranks_needs_the_layer_and_open_mpi(capsys, monkeypatch):
    """With cuDSS's NCCL layer installed the row names the MPI mpi4py runs (MPICH here, which
    the layer cannot use); with Open MPI as well, the distributed factorisation is possible."""
    import dycore.solvers.direct as direct
    layer = "/site/nvidia/cu13/lib/libcudss_commlayer_nccl.so.0"
    monkeypatch.setattr(direct, "comm_layer", lambda: layer)
    _, out, _ = _doctor(capsys)
    assert _row(out, "NCCL communication layer") == layer
    assert _row(out, "factorisation over GPU ranks").startswith(
        "replicated only: mpi4py runs mpich, cuDSS's layer needs Open MPI")
    family = doctor._mpi_family
    monkeypatch.setattr(doctor, "_mpi_family",
                        lambda text: "open mpi" if "MPICH" in text else family(text))
    _, out, _ = _doctor(capsys)
    assert _row(out, "factorisation over GPU ranks") == ("distributed possible (cuDSS NCCL "
                                                          "layer, Open MPI)")


def test_unwritable_kernel_cache(capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(doctor.tempfile, "NamedTemporaryFile", refuse)
    _, out, _ = _doctor(capsys)
    assert "(NOT writable: every run compiles the kernels anew; set NUMBA_CACHE_DIR)" in out


@pytest.mark.parametrize("cuda, driver, ok, message", [
    (13, (575, 51), False, "CUDA 13 wheels need driver >= 580, the driver is 575.51"),
    (13, (580, 65), True, ""), (13, (590, 1), True, ""),
    (12, (525, 60), True, ""), (12, (520, 61), False,
                                "CUDA 12 wheels need driver >= 525.60, the driver is 520.61"),
    (None, (400, 0), True, ""), (13, None, True, "")])
def test_driver_rule(cuda, driver, ok, message):
    assert doctor.driver_supports(cuda, driver) == (ok, message)


def test_gpu_verdict():
    healthy = {"numba_cuda_device": True, "numba_cuda_why": "NVIDIA H100 80GB HBM3",
               "wheel_cuda_major": 13, "driver": (580, 95), "driver_cuda": (13, 0),
               "cupy": "13.6.0"}
    assert doctor.gpu_verdict(healthy) == (True, [])
    old = {**healthy, "driver": (570, 124), "driver_cuda": (12, 8)}
    ok, why = doctor.gpu_verdict(old)
    assert not ok and why == ["CUDA 13 wheels need driver >= 580, the driver is 570.124",
                              "the driver supports CUDA 12.8, the wheels are CUDA 13"]
    assert doctor.gpu_verdict({**healthy, "numba_cuda_why": "CUDA simulator"})[1] == [
        "NUMBA_ENABLE_CUDASIM=1: the CUDA simulator, not a GPU"]
    assert doctor.gpu_verdict({**healthy, "cupy": None})[1] == [
        "CuPy does not import (pip install -e \".[gpu]\")"]


def test_importing_doctor_loads_no_cuda():
    code = ("import sys, dycore.doctor; "
            "print(sorted(m for m in ('cupy', 'numba.cuda', 'mpi4py.MPI') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
