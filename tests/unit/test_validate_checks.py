"""`dycore validate --checks`: the strict-libm check under the simulator (no FMA there: every
operation equal bit for bit), the JSON it writes, and a clear error for an unknown check."""
import json
import os
from pathlib import Path

import pytest

from dycore import cli

SMALL = Path(__file__).resolve().parents[2] / "configs" / "mountainwave3d_small.yaml"


def test_unknown_check_is_named(capsys):
    assert cli.main(["validate", str(SMALL), "--checks", "fields,libn"]) == 2
    err = capsys.readouterr().err
    assert "--checks: unknown check 'libn' (choose from fields, libm, restart)" in err


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
                    reason="on a GPU acos and cos differ from the CPU's libm by design")
def test_libm_check_under_the_simulator(tmp_path, capsys):
    assert cli.main(["validate", str(SMALL), "--checks", "libm",
                     "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "validate --checks: libm: passed" in out
    res = json.loads((tmp_path / "validate_checks.json").read_text())["libm"]
    assert set(res) == {"acos", "cos", "sqrt", "v*1.25 + 0.5*v", "eig3 jacobi eigenvalues",
                        "eig3 jacobi eigenvectors", "eig3 closed form eigenvalues",
                        "eig3 closed form eigenvectors"}
    assert res["sqrt"]["entries"] == 1024 and res["eig3 jacobi eigenvectors"]["entries"] == 2304
    assert all(r["n_differ"] == 0 and r["max_ulp"] == 0 for r in res.values())
    assert not (tmp_path / "validate_report.json").exists()      # fields not asked for


def test_gpu_check_is_a_wrapper_over_bench_and_validate(tmp_path):
    """scripts/gpu_check.py only runs `dycore bench --parts` / `dycore validate --checks`
    (--dry-run prints the command lines) on a copy of the configuration with its overrides."""
    import subprocess
    import sys

    from dycore.config import load_config
    repo = SMALL.parents[1]
    proc = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--config", str(SMALL), "--mesh", "3,3,2",
         "--pressure-rtol", "1e-9", "--parts", "kernels,compare,restart,device", "--dry-run"],
        cwd=repo, env=dict(os.environ, OUT=str(tmp_path)), capture_output=True, text=True,
        timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cfg = tmp_path / "gpu_check_config.yaml"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("== ")]
    assert lines == [
        f"== kernels: -m dycore bench {cfg} --parts operators --paths gpu --repeat 20 --steps 10"
        f" --json {tmp_path}/bench_kernels.json",
        f"== compare: -m dycore validate {cfg} --checks fields --output-dir "
        f"{tmp_path}/validate_compare --steps 20",
        f"== restart: -m dycore validate {cfg} --checks restart --output-dir "
        f"{tmp_path}/validate_restart --restart-steps 20 --restart-modes device,host",
        f"== device: -m dycore bench {cfg} --parts device --paths gpu --repeat 20 --steps 10"
        f" --json {tmp_path}/bench_device.json"]
    c = load_config(cfg)
    assert (c.mesh.nx, c.mesh.ny, c.mesh.nz) == (3, 3, 2)
    assert c.solvers.pressure.rtol == 1e-9
    bad = subprocess.run([sys.executable, "scripts/gpu_check.py", "--parts", "kernel"],
                         cwd=repo, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--parts: unknown kernel" in bad.stderr
