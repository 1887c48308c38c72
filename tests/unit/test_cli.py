"""Command line: exit codes, one-line errors without tracebacks, config printing, run wiring."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from dycore import cli

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "configs" / "mountainwave3d_small.yaml"

# ``python -m dycore ARGS`` (runpy runs dycore/__main__.py), with a stand-in for the
# mountainwave3d case while the real one does not import yet (it is written elsewhere).
_BOOT = textwrap.dedent("""
    import runpy, sys, types
    import cases
    try:
        cases.load_case("mountainwave3d").Parameters
    except Exception:
        from pydantic import BaseModel, ConfigDict
        from dycore.errors import ConfigError

        class Parameters(BaseModel):
            model_config = ConfigDict(extra="forbid")
            h0: float = 400.0

        def load_case(name):
            if name != "mountainwave3d":
                raise ConfigError(f"unknown case {name!r}")
            return types.SimpleNamespace(Parameters=Parameters)

        cases.load_case = load_case
    sys.argv[0] = "dycore"
    runpy.run_module("dycore", run_name="__main__", alter_sys=True)
""")


def _dycore(*args, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BOOT, *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


class _StubParameters(BaseModel):
    model_config = ConfigDict(extra="forbid")
    h0: float = 400.0


def _use_stub_case_if_needed(monkeypatch) -> None:
    """Stand in for the mountainwave3d case (written elsewhere) while it does not import."""
    import cases

    try:
        cases.load_case("mountainwave3d").Parameters  # noqa: B018
    except Exception:  # noqa: BLE001
        monkeypatch.setattr(cases, "load_case",
                            lambda name: types.SimpleNamespace(Parameters=_StubParameters))


def test_module_entry_point_version():
    proc = subprocess.run([sys.executable, "-m", "dycore", "--version"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.startswith("dycore ")


def test_config_prints_resolved_yaml():
    proc = _dycore("config", "configs/mountainwave3d_small.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# dycore resolved configuration (source: configs/")
    data = yaml.safe_load(proc.stdout)
    assert data["mesh"]["nx"] == 20 and data["mesh"]["nz"] == 12
    assert data["solvers"]["pressure"]["restart"] == 30          # defaults filled in
    assert set(data) == {"case", "mesh", "physics", "time", "solvers", "backend", "output",
                         "stability"}


def test_config_without_file_prints_defaults_and_reference():
    proc = _dycore("config")
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout)["mesh"]["nx"] == 48
    proc = _dycore("config", "--reference")
    assert proc.returncode == 0, proc.stderr
    assert "| `time.dt` | float (> 0) | `10.0` | s | time step |" in proc.stdout


def test_bad_config_exits_2_with_one_line_per_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("mesh:\n  nx: 0\n  nxx: 3\ntime:\n  dt: -5.0\n")
    proc = _dycore("config", bad)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr
    assert [line.split(": ")[3] for line in lines] == ["mesh.nx", "mesh.nxx", "time.dt"]
    assert all(line.startswith(f"dycore: error: {bad}: ") for line in lines)


@pytest.mark.parametrize("args, code, message", [
    (("config", "absent.yaml"), 2, "absent.yaml: configuration file not found"),
    (("run", "absent.yaml", "--steps", "3"), 2, "absent.yaml: configuration file not found"),
    (("plot", "absent.nc"), 1, "absent.nc: cannot open output file"),
    (("config", "configs/mountainwave3d_small.yaml", "--reference"), 2,
     "give either CONFIG or --reference"),
])
def test_errors_are_one_line(tmp_path, args, code, message):
    proc = _dycore(*args)
    assert proc.returncode == code
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("dycore: error: ") and message in line


def test_usage_errors_exit_2():
    proc = _dycore("run", "configs/mountainwave3d_small.yaml", "--steps", "0")
    assert proc.returncode == 2 and "expected a positive integer" in proc.stderr
    proc = _dycore("frobnicate")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
    proc = _dycore("bench", "--block", "512")        # 512 x 168 registers cannot launch
    assert proc.returncode == 2 and "multiple of 32 from 32 to 256, got '512'" in proc.stderr


def test_run_passes_overrides_and_prints_summary(monkeypatch, capsys, tmp_path):
    calls = []

    def run_from_config(config, *, max_steps=None, overwrite=False):
        calls.append((config, max_steps))
        return types.SimpleNamespace(output_path=config.output_path, steps=7, t=70.0,
                                     wall_time=1.25, timers_table="stage  calls  total [s]")

    fake = types.ModuleType("dycore.timestepping.simulation")
    fake.run_from_config = run_from_config
    monkeypatch.setitem(sys.modules, "dycore.timestepping.simulation", fake)
    import dycore.timestepping
    monkeypatch.setattr(dycore.timestepping, "simulation", fake, raising=False)
    _use_stub_case_if_needed(monkeypatch)

    out = tmp_path / "o.nc"
    code = cli.main(["run", str(SMALL), "--steps", "7", "--t-end", "600", "--output", str(out),
                     "--backend", "gpu", "--solver-mode", "device", "--no-progress"])
    assert code == 0
    (config, max_steps), = calls
    assert max_steps == 7
    assert config.time.t_end == 600.0 and config.mesh.nx == 20
    assert (config.backend.name, config.backend.solver_mode) == ("gpu", "device")
    assert config.output.path == str(out) and config.output.progress is False
    printed = capsys.readouterr().out
    assert "stage  calls  total [s]" in printed
    assert f"output: {out}" in printed and "7 steps to t = 70 s" in printed


def test_run_reports_dycore_errors_with_status_1(monkeypatch, capsys):
    from dycore.errors import SolverDivergedError

    def run_from_config(config, *, max_steps=None, overwrite=False):
        raise SolverDivergedError("pressure: no convergence in 500 iterations")

    fake = types.ModuleType("dycore.timestepping.simulation")
    fake.run_from_config = run_from_config
    monkeypatch.setitem(sys.modules, "dycore.timestepping.simulation", fake)
    monkeypatch.setattr(cli, "_run_overrides", lambda args: {})
    import dycore.config
    monkeypatch.setattr(dycore.config, "load_config", lambda path, overrides=None: object())
    assert cli.main(["run", str(SMALL)]) == 1
    err = capsys.readouterr().err
    assert err == "dycore: error: pressure: no convergence in 500 iterations\n"


def test_parser_lists_the_subcommands():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices)[:3] == ["run", "plot", "config"]
    assert "bench" in sub.choices          # dycore/bench (validate is added alongside)


def test_backend_auto_says_which_backend_it_chose(monkeypatch, capsys):
    """`--backend auto` logs its choice on stderr (here the CUDA simulator counts as usable)."""
    def run_from_config(config, *, max_steps=None, overwrite=False):
        from dycore.backend import select_backend
        select_backend(config.backend)
        return types.SimpleNamespace(output_path="o.nc", steps=1, t=10.0, wall_time=0.1,
                                     timers_table="")

    fake = types.ModuleType("dycore.timestepping.simulation")
    fake.run_from_config = run_from_config
    monkeypatch.setitem(sys.modules, "dycore.timestepping.simulation", fake)
    import dycore.timestepping
    monkeypatch.setattr(dycore.timestepping, "simulation", fake, raising=False)
    _use_stub_case_if_needed(monkeypatch)
    monkeypatch.setattr("dycore.backend.gpu_usable", lambda: (False, "no CUDA device (test)"))
    assert cli.main(["run", str(SMALL), "--steps", "1", "--backend", "auto",
                     "--no-progress"]) == 0
    assert "dycore: backend auto -> cpu (no CUDA device (test))" in capsys.readouterr().err
