"""The Python API (README.md, "Python API"): load_config with overrides, Simulation.run with
callbacks, open_output as an xarray Dataset; the README's example is run as written."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dycore
from dycore.errors import ConfigError, OutputError

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "configs" / "mountainwave3d_small.yaml"
TINY = {"mesh": {"nx": 4, "ny": 4, "nz": 3}}


def _readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the Python API section has exactly one python block"
    return blocks[0]


def _cli_run(tmp_path: Path, out: Path, *, dt=10.0, t_end=30.0, interval=10.0) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(f"mesh: {{nx: 4, ny: 4, nz: 3}}\ntime: {{dt: {dt}, t_end: {t_end}}}\n"
                      f"output: {{output_interval: {interval}, progress: false}}\n")
    proc = subprocess.run([sys.executable, "-m", "dycore", "run", str(config), "--output",
                           str(out), "--overwrite", "--no-progress"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_import_dycore_stays_light():
    code = ("import sys, dycore; heavy = [m for m in sys.modules if m.split('.')[0] in "
            "('numba', 'cupy', 'netCDF4', 'xarray', 'pydantic')]; print(heavy); "
            "assert not heavy; assert callable(dycore.load_config)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {"load_config", "Simulation", "open_output"} <= set(dycore.__all__)


def test_load_config_overrides_sections_and_dotted_keys():
    cfg = dycore.load_config(SMALL, mesh={"nx": 4, "ny": 5}, **{"time.dt": 5.0, "mesh.nz": 3})
    assert (cfg.mesh.nx, cfg.mesh.ny, cfg.mesh.nz) == (4, 5, 3)
    assert cfg.time.dt == 5.0
    assert cfg.mesh.dx_min == 500.0                  # untouched keys keep the file's value
    with pytest.raises(ConfigError, match="mesh.nx is given twice"):
        dycore.load_config(SMALL, mesh={"nx": 4}, **{"mesh.nx": 6})
    with pytest.raises(ConfigError, match="mesh.nxx"):
        dycore.load_config(SMALL, mesh={"nxx": 4})


@pytest.mark.slow
def test_run_steps_callbacks_once_per_step():
    cfg = dycore.load_config(SMALL, **TINY, **{"time.dt": 10.0})
    sim = dycore.Simulation(cfg)
    calls = []
    taken = sim.run(steps=3, callbacks=[lambda s, d: calls.append((s, dict(d)))])
    assert taken == 3
    assert sim.state.t == pytest.approx(3 * 10.0)
    assert len(calls) == 3
    assert all(s is sim for s, _ in calls)
    assert [d["step"] for _, d in calls] == [1, 2, 3]
    assert [d["t"] for _, d in calls] == pytest.approx([10.0, 20.0, 30.0])
    for _, d in calls:
        assert math.isfinite(d["max_abs_w"]) and d["max_abs_w"] > 0
    # until= continues from the current time: 30 s -> 50 s is two more steps
    assert sim.run(until=50.0) == 2
    assert sim.state.t == pytest.approx(50.0)
    assert sim.run(until=20.0) == 0                   # already past: nothing to do
    with pytest.raises(ValueError, match="not both"):
        sim.run(until=60.0, steps=1)


def test_callback_returning_true_stops_the_run():
    sim = dycore.Simulation(dycore.load_config(SMALL, **TINY))
    seen, other = [], []
    taken = sim.run(steps=10, callbacks=[lambda s, d: seen.append(d["step"]) or d["step"] == 2,
                                         lambda s, d: other.append(d["step"])])
    assert taken == 2 and seen == [1, 2] and other == [1, 2]
    assert sim.state.t == pytest.approx(2 * sim.config.time.dt)


@pytest.mark.slow
def test_open_output_of_a_cli_run(tmp_path):
    pytest.importorskip("xarray")
    out = tmp_path / "tiny.nc"
    _cli_run(tmp_path, out)
    with dycore.open_output(out, decode_times=False) as ds:
        assert ds.sizes["time"] == 4 and ds.sizes["nodes"] == 5 * 5 * 4
        assert ds.sizes["cells"] == 4 * 4 * 3 * 6 and ds.sizes["step"] == 3
        np.testing.assert_allclose(ds["time"].values, [0.0, 10.0, 20.0, 30.0])
        assert ds["w"].dims == ("time", "nodes")
        assert np.isfinite(ds["w"].values).all() and abs(ds["w"].isel(time=-1)).max() > 0
    with dycore.open_output(out) as ds:               # default: CF-decoded dates
        assert (ds["time"].values - np.datetime64("2000-01-01T00:00:00")
                == np.array([0, 10, 20, 30], dtype="timedelta64[s]")).all()


def test_open_output_errors(tmp_path):
    with pytest.raises(OutputError, match="not found"):
        dycore.open_output(tmp_path / "missing.nc")


def test_open_output_names_xarray_when_missing(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "xarray", None)    # import xarray -> ImportError
    with pytest.raises(OutputError, match="xarray"):
        dycore.open_output(tmp_path / "any.nc")


@pytest.mark.slow
def test_readme_example_runs(tmp_path, monkeypatch):
    pytest.importorskip("xarray")
    (tmp_path / "configs").mkdir()
    shutil.copy(SMALL, tmp_path / "configs")
    _cli_run(tmp_path, tmp_path / "output" / "mountainwave3d_small.nc")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_readme_example(), "README.md (Python API)", "exec"), namespace)  # noqa: S102
    sim, history, taken = namespace["sim"], namespace["history"], namespace["taken"]
    assert (sim.config.mesh.nx, sim.config.mesh.ny, sim.config.mesh.nz) == (4, 4, 3)
    assert taken == 3 and sim.state.t == pytest.approx(3 * 10.0)
    assert [h[0] for h in history] == [1, 2, 3]
    assert all(math.isfinite(h[2]) and 0 < h[2] < 5.0 for h in history)
    w_end = namespace["w_end"]
    assert w_end.shape == (100,) and float(abs(w_end).max()) > 0
