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
    from dycore import cases
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
    from dycore import cases

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


@pytest.mark.slow
def test_config_prints_resolved_yaml():
    proc = _dycore("config", "configs/mountainwave3d_small.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# dycore resolved configuration (source: configs/")
    data = yaml.safe_load(proc.stdout)
    assert data["mesh"]["nx"] == 20 and data["mesh"]["nz"] == 12
    assert data["solvers"]["pressure"]["restart"] == 30          # defaults filled in
    assert set(data) == {"case", "mesh", "physics", "time", "solvers", "backend", "output",
                         "stability"}


@pytest.mark.slow
def test_config_without_file_prints_defaults_and_reference():
    proc = _dycore("config")
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout)["mesh"]["nx"] == 48
    proc = _dycore("config", "--reference")
    assert proc.returncode == 0, proc.stderr
    assert "| `time.dt` | float (> 0) | `10.0` | s | time step |" in proc.stdout


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("args, code, message", [
    (("config", "absent.yaml"), 2, "absent.yaml: configuration file not found"),
    (("run", "absent.yaml", "--steps", "3"), 2, "absent.yaml: configuration file not found"),
    (("plot", "absent.nc"), 1, "absent.nc: cannot open output file"),
    (("config", "configs/mountainwave3d_small.yaml", "--reference"), 2,
     "give one of CONFIG, --reference, --schema"),
])
def test_errors_are_one_line(tmp_path, args, code, message):
    proc = _dycore(*args)
    assert proc.returncode == code
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("dycore: error: ") and message in line


@pytest.mark.slow
def test_usage_errors_exit_2():
    proc = _dycore("run", "configs/mountainwave3d_small.yaml", "--steps", "0")
    assert proc.returncode == 2 and "expected a positive integer" in proc.stderr
    proc = _dycore("frobnicate")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
    proc = _dycore("bench", "--block", "512")        # 512 x 168 registers cannot launch
    assert proc.returncode == 2 and "multiple of 32 from 32 to 256, got '512'" in proc.stderr


def _fake_run(monkeypatch, run_from_config):
    """``dycore run`` calls ``run_from_config`` instead of the real time loop."""
    fake = types.ModuleType("dycore.timestepping.simulation")
    fake.run_from_config = run_from_config
    monkeypatch.setitem(sys.modules, "dycore.timestepping.simulation", fake)
    import dycore.timestepping
    monkeypatch.setattr(dycore.timestepping, "simulation", fake, raising=False)
    _use_stub_case_if_needed(monkeypatch)


def test_run_passes_overrides_and_prints_summary(monkeypatch, capsys, tmp_path):
    calls = []

    def run_from_config(config, *, max_steps=None, overwrite=False):
        calls.append((config, max_steps))
        return types.SimpleNamespace(output_path=config.output_path, steps=7, t=70.0,
                                     wall_time=1.25, timers_table="stage  calls  total [s]")

    _fake_run(monkeypatch, run_from_config)

    out = tmp_path / "o.nc"
    code = cli.main(["run", str(SMALL), "--steps", "7", "--t-end", "600", "--output", str(out),
                     "--backend", "gpu", "--solver-mode", "device", "--no-progress",
                     "--assembly", "deterministic", "--strict", "--reduction", "exact"])
    assert code == 0
    (config, max_steps), = calls
    assert max_steps == 7
    assert config.time.t_end == 600.0 and config.mesh.nx == 20
    assert (config.backend.name, config.backend.solver_mode) == ("gpu", "device")
    assert (config.backend.assembly, config.backend.strict) == ("deterministic", True)
    assert config.backend.reduction == "exact"
    assert config.output.path == str(out) and config.output.progress is False
    printed = capsys.readouterr().out
    assert "stage  calls  total [s]" in printed
    assert f"output: {out}" in printed and "7 steps to t = 70 s" in printed


def test_no_setup_cache_turns_the_cache_off_for_the_run_only(monkeypatch, tmp_path):
    """``dycore run --no-setup-cache``: the set-up sees DYCORE_CACHE_DIR=off (no cache folder,
    on every MPI rank alike: each parses the flag); the variable is restored afterwards."""
    from dycore.io.setup_cache import cache_directory
    seen = []

    def run_from_config(config, *, max_steps=None, overwrite=False):
        seen.append(cache_directory())
        return types.SimpleNamespace(output_path=config.output_path, steps=1, t=10.0,
                                     wall_time=0.1, timers_table="")

    _fake_run(monkeypatch, run_from_config)
    monkeypatch.setenv("DYCORE_CACHE_DIR", str(tmp_path / "cache"))
    for flags in (["--no-setup-cache"], []):
        out = tmp_path / f"o{len(flags)}.nc"
        assert cli.main(["run", str(SMALL), "--steps", "1", "--output", str(out),
                         "--no-progress", *flags]) == 0
    assert seen == [None, tmp_path / "cache"]
    import os
    assert os.environ["DYCORE_CACHE_DIR"] == str(tmp_path / "cache")


def test_run_reports_dycore_errors_with_status_1(monkeypatch, capsys, tmp_path):
    from dycore.errors import SolverDivergedError

    def run_from_config(config, *, max_steps=None, overwrite=False):
        raise SolverDivergedError("pressure: no convergence in 500 iterations")

    fake = types.ModuleType("dycore.timestepping.simulation")
    fake.run_from_config = run_from_config
    monkeypatch.setitem(sys.modules, "dycore.timestepping.simulation", fake)
    monkeypatch.setattr(cli, "_run_overrides", lambda args: {})
    import dycore.config
    config = types.SimpleNamespace(output=types.SimpleNamespace(formats=["netcdf"], sections=[]),
                                   output_path=tmp_path / "out.nc")     # locked while it runs
    monkeypatch.setattr(dycore.config, "load_config", lambda path, overrides=None: config)
    assert cli.main(["run", str(SMALL)]) == 1
    err = capsys.readouterr().err
    assert err == "dycore: error: pressure: no convergence in 500 iterations\n"


def test_parser_lists_the_subcommands():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices)[:4] == ["run", "plot", "export", "config"]
    assert "bench" in sub.choices          # dycore/bench (validate is added alongside)


def test_backend_auto_says_which_backend_it_chose(monkeypatch, capsys):
    """`--backend auto` logs its choice on stderr (here the CUDA simulator counts as usable)."""
    def run_from_config(config, *, max_steps=None, overwrite=False):
        from dycore.backend import select_backend
        select_backend(config.backend)
        return types.SimpleNamespace(output_path="o.nc", steps=1, t=10.0, wall_time=0.1,
                                     timers_table="")

    _fake_run(monkeypatch, run_from_config)
    monkeypatch.setattr("dycore.backend.gpu_usable", lambda: (False, "no CUDA device (test)"))
    assert cli.main(["run", str(SMALL), "--steps", "1", "--backend", "auto",
                     "--no-progress"]) == 0
    assert "dycore: backend auto -> cpu (no CUDA device (test))" in capsys.readouterr().err


# ------------------------------------------------- issue 12: early, clear errors of `run`
def _tiny(tmp_path: Path, extra: str = "", name: str = "tiny.yaml") -> Path:
    """A 2 x 2 x 2-cell, one-step configuration writing ``tmp_path/out.nc``."""
    path = tmp_path / name
    path.write_text("mesh: {nx: 2, ny: 2, nz: 2}\ntime: {dt: 10.0, t_end: 10.0}\n"
                    f"output: {{path: '{tmp_path / 'out.nc'}', progress: false}}\n" + extra)
    return path


def _no_build(monkeypatch, error=None) -> None:
    """Make building the simulation fail: with AssertionError (the checks must come first) or
    with ``error`` (to stop a run right after its checks)."""
    import dycore.timestepping.simulation as simulation

    def build_simulation(config, backend=None):
        raise error if error is not None else AssertionError("the mesh was built")

    monkeypatch.setattr(simulation, "build_simulation", build_simulation)


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("dycore: error: ")]
    return line


def test_run_refuses_an_existing_output_before_building(tmp_path, monkeypatch, capsys):
    config = _tiny(tmp_path)
    (tmp_path / "out.nc").write_text("a finished run")
    _no_build(monkeypatch)
    assert cli.main(["run", str(config)]) == 1
    line = _one_error_line(capsys)
    assert f"{tmp_path / 'out.nc'}: output file exists; pass --overwrite" in line
    assert (tmp_path / "out.nc").read_text() == "a finished run"


def test_run_overwrite_replaces_the_output(tmp_path, capsys):
    import netCDF4

    config = _tiny(tmp_path)
    (tmp_path / "out.nc").write_text("a finished run")
    assert cli.main(["run", str(config), "--overwrite"]) == 0, capsys.readouterr().err
    with netCDF4.Dataset(tmp_path / "out.nc") as ds:
        assert list(ds["time"][:]) == [0.0, 10.0]


@pytest.mark.parametrize("output, message", [
    ("{tmp}", "output.path (--output) is a directory; expected a file name"),
    ("{tmp}/tiny.yaml/out.nc", "cannot be created: {tmp}/tiny.yaml is a file, not a folder"),
    ("/proc/dycore-test/out.nc", "cannot be created: no file can be written in /proc"),
])
def test_run_checks_the_output_path_before_building(tmp_path, monkeypatch, capsys, output,
                                                    message):
    if output.startswith("/proc") and not Path("/proc").is_dir():
        pytest.skip("no /proc on this system")
    config = _tiny(tmp_path)
    _no_build(monkeypatch)
    assert cli.main(["run", str(config), "--output", output.format(tmp=tmp_path)]) == 1
    assert message.format(tmp=tmp_path) in _one_error_line(capsys)


@pytest.mark.slow
def test_t_end_must_be_finite():
    proc = _dycore("run", "configs/mountainwave3d_small.yaml", "--t-end", "inf")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "argument --t-end: expected a positive finite number, got 'inf'" in proc.stderr


def test_t_end_shorter_than_dt_names_the_flag(tmp_path, monkeypatch, capsys):
    _no_build(monkeypatch)
    config = _tiny(tmp_path)
    assert cli.main(["run", str(config), "--t-end", "5"]) == 2
    assert _one_error_line(capsys) == (f"dycore: error: --t-end: expected at least time.dt = "
                                       f"10 s of {config} (got 5)")


def test_solver_mode_device_on_the_cpu_is_an_error(tmp_path, monkeypatch, capsys):
    _no_build(monkeypatch)
    assert cli.main(["run", str(_tiny(tmp_path)), "--solver-mode", "device"]) == 2
    line = _one_error_line(capsys)
    assert "backend.solver_mode: 'device'" in line and "backend.name is 'cpu'" in line
    assert "--backend gpu" in line


def test_mesh_too_large_for_memory_is_refused_with_the_estimate(tmp_path, monkeypatch, capsys):
    import dycore.preflight

    _no_build(monkeypatch)
    monkeypatch.setattr(dycore.preflight, "available_memory", lambda: 8_000_000_000)
    config = _tiny(tmp_path, name="huge.yaml")
    config.write_text(config.read_text().replace(
        "{nx: 2, ny: 2, nz: 2}", "{nx: 500, ny: 500, nz: 200, dx_min: 100, dz_min: 50}"))
    assert cli.main(["run", str(config)]) == 2
    line = _one_error_line(capsys)
    assert f"{config}: mesh.nx, mesh.ny, mesh.nz = 500 x 500 x 200: 300,000,000 tetrahedra " \
           "need about 1.1 TB of memory (estimate: 300.0 MB + 3,500 bytes per tetrahedron)" in line
    assert "but 8.0 GB is available on this machine" in line


def test_ignored_backend_settings_are_noticed(tmp_path, monkeypatch, capsys):
    from dycore.errors import DycoreError

    _no_build(monkeypatch, DycoreError("stopped after the checks"))
    config = _tiny(tmp_path, "backend: {threads: 9999, assembly: deterministic, strict: true}\n")
    assert cli.main(["run", str(config)]) == 1
    err = capsys.readouterr().err
    assert ("dycore: notice: backend.assembly = deterministic, backend.strict = true: GPU "
            "setting(s), ignored with backend.name = cpu") in err
    assert "dycore: notice: backend.threads = 9999 is more than the " in err
    assert err.rstrip().endswith("dycore: error: stopped after the checks")


@pytest.mark.slow
def test_empty_config_file_gets_a_notice(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    proc = _dycore("config", empty)
    assert proc.returncode == 0
    assert proc.stderr == (f"dycore: notice: {empty} is empty: every key takes its default (a "
                           "48 x 48 x 40 mesh, t_end = 3000 s; `dycore config` prints them all)\n")


def test_unstable_run_stops_with_status_1_and_keeps_the_output(tmp_path, capsys):
    """issue 12 (1): 4 x 4 x 3 cells with dt = 500 s blew up to |w| = 387 m/s and exited 0."""
    import netCDF4

    config = _tiny(tmp_path, name="blowup.yaml")
    config.write_text(config.read_text().replace("{nx: 2, ny: 2, nz: 2}", "{nx: 4, ny: 4, nz: 3}")
                      .replace("{dt: 10.0, t_end: 10.0}", "{dt: 500.0, t_end: 3000.0}"))
    assert cli.main(["run", str(config)]) == 1
    err = capsys.readouterr().err
    assert "dycore: warning: advective Courant number u0 * time.dt / dx = 10 m/s * 500 s / 250 m" \
           " = 20.00 > 1" in err
    # (with the strong no-normal-flow condition the flow over the mountain is forced harder:
    # max|u| trips at step 2 instead of step 5)
    assert (f"dycore: error: unstable run at step 2 (t = 1000 s): max|u| = 338.3 m/s exceeds "
            f"stability.max_speed_factor x inflow speed = 10 x 10 m/s = 100 m/s; stopped. "
            f"{tmp_path / 'out.nc'} keeps the snapshots up to t = 500 s") in err
    with netCDF4.Dataset(tmp_path / "out.nc") as ds:          # kept and readable
        assert list(ds["time"][:]) == [0.0, 500.0]
        # the failing step's diagnostics are kept too (measured max|w| 10.5 m/s at step 2,
        # three times the 3.5 m/s of a stable run of this case)
        assert len(ds["max_abs_w"][:]) == 2 and ds["max_abs_w"][-1] > 7.0


def test_speed_limit_is_configurable(tmp_path, capsys):
    """max|u| is checked on the snapshot fields: 10.08 m/s after one step over the mountain."""
    config = _tiny(tmp_path, "stability: {max_speed_factor: 1.005}\n")   # limit 10.05 m/s
    assert cli.main(["run", str(config)]) == 1
    line = _one_error_line(capsys)
    assert ("unstable run at step 1 (t = 10 s): max|u| = 10.08 m/s exceeds "
            "stability.max_speed_factor x inflow speed = 1.005 x 10 m/s = 10.05 m/s") in line
    assert "keeps the snapshots up to t = 0 s (Courant number 0.0033)" in line
