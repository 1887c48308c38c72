"""The command-line conventions of issue 23: -v/--verbose (a DEBUG line for every stage),
-q/--quiet, --log-file, --set KEY.PATH=VALUE (validated like the file), ``dycore config
--schema`` (the shipped configurations pass it, bad ones do not) and no GPU-setting notice for
a shipped configuration that spells out a default."""
from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import netCDF4
import pytest
import yaml

from dycore import cli

REPO = Path(__file__).resolve().parents[2]
TINY = ("mesh: {nx: 2, ny: 2, nz: 2}\ntime: {dt: 10.0, t_end: 20.0}\n"
        "output: {path: out.nc, output_interval: 10.0, progress: false}\n")


@pytest.fixture()
def tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(TINY)
    return tmp_path / "run.yaml"


def test_run_help_shows_the_new_flags():
    proc = subprocess.run([sys.executable, "-m", "dycore", "run", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for flag in ("-v, --verbose", "-q, --quiet", "--log-file PATH", "--set KEY.PATH=VALUE",
                 "--nvtx"):
        assert flag in proc.stdout, flag


def test_verbose_logs_every_timed_stage(tiny, capsys):
    assert cli.main(["-v", "run", str(tiny)]) == 0
    err = capsys.readouterr().err
    with netCDF4.Dataset(tiny.parent / "out.nc") as ds:
        stages = [str(name) for name in ds["timers/stage_name"][:]]
    assert len(stages) >= 15
    elsewhere = 0
    for stage in stages:                      # every row of the timer table, once each
        timed = err.count(f"dycore: debug: stage {stage}: first call begins\n")
        if timed:
            assert timed == 1, stage
            assert err.count(f"dycore: debug: stage {stage}: first call done\n") == 1, stage
        else:                                 # a row added to the table (timed elsewhere)
            assert len(re.findall(rf"dycore: debug: stage {re.escape(stage)}: [0-9.]+ ms "
                                  r"\(timed elsewhere\)\n", err)) == 1, stage
            elsewhere += 1
    assert elsewhere < len(stages) / 2
    steps = re.findall(r"dycore: debug: step to t = (\d+) s: (\d) Picard", err)
    assert steps == [("10", "2"), ("20", "2")]
    assert f"dycore: debug: configuration: {tiny}\n" in err


@pytest.mark.slow
def test_default_has_no_debug_lines_and_quiet_only_the_result(tiny, capsys):
    assert cli.main(["run", str(tiny)]) == 0
    out, err = capsys.readouterr()
    assert "debug:" not in err and "dycore: backend: cpu" in err
    assert "stage timers" in out
    assert cli.main(["run", str(tiny), "-q", "--overwrite"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "stage timers" not in out
    assert out.splitlines() == [out.splitlines()[0], "output: out.nc"]
    assert out.startswith("2 steps to t = 20 s")


def test_log_file_gets_debug_lines_and_errors_appended(tiny, capsys):
    log = tiny.parent / "logs" / "dycore.log"
    assert cli.main(["run", str(tiny), "-q", "--log-file", str(log)]) == 0
    assert capsys.readouterr().err == ""                     # -q: stderr stays quiet
    first = log.read_text().splitlines()
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    assert all(re.match(stamp + r" (DEBUG|INFO|WARNING|ERROR) ", line) for line in first)
    assert any(line.endswith(" DEBUG stage solve pressure: first call begins") for line in first)
    assert any(" INFO backend: cpu" in line for line in first)
    assert cli.main(["run", str(tiny), "--log-file", str(log)]) == 1    # out.nc exists
    err = capsys.readouterr().err
    assert err.count("dycore: error: ") == 1                 # once on stderr, not twice
    second = log.read_text().splitlines()
    assert second[:len(first)] == first                      # appended
    assert re.match(stamp + r" ERROR error: out.nc: .*--overwrite", second[-1])
    assert not any(isinstance(h, cli._LogFileHandler)      # closed at the end of main
                   for h in logging.getLogger("dycore").handlers)


@pytest.mark.slow
def test_set_overrides_like_the_file(tiny, capsys):
    assert cli.main(["run", str(tiny), "--set", "time.t_end=30", "--set", "mesh.nx=3",
                     "--set", "output.formats=[netcdf]"]) == 0
    capsys.readouterr()
    with netCDF4.Dataset(tiny.parent / "out.nc") as ds:
        stored = yaml.safe_load(ds.config)
        assert ds["time"][:].tolist() == [0.0, 10.0, 20.0, 30.0]
        assert len(ds.dimensions["cells"]) == 3 * 2 * 2 * 6
    (tiny.parent / "same.yaml").write_text(TINY.replace("nx: 2", "nx: 3")
                                           .replace("t_end: 20.0", "t_end: 30.0"))
    assert cli.main(["config", "same.yaml"]) == 0
    from_file = yaml.safe_load(capsys.readouterr().out)
    from_file["output"]["path"] = stored["output"]["path"]
    assert stored == from_file
    assert cli.main(["config", "run.yaml", "--set", "time.dt=5", "--set",
                     "mesh={nx: 7}"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["time"]["dt"] == 5.0 and printed["mesh"]["nx"] == 7


@pytest.mark.parametrize("item, key, value", [
    ("time.dt=5", "time.dt", 5), ("mesh.file=null", "mesh.file", None),
    ("output.formats=[netcdf, xdmf]", "output.formats", ["netcdf", "xdmf"]),
    ("output.path=a=b.nc", "output.path", "a=b.nc"), ("backend.strict=true", "backend.strict",
                                                      True)])
def test_set_values_are_yaml(item, key, value):
    assert cli._set_item(item) == (key, value)


def test_schema_is_the_shipped_file_and_checks_configs(tmp_path, capsys):
    import jsonschema

    assert cli.main(["config", "--schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == json.loads((REPO / "docs" / "config-schema.json").read_text()), \
        "docs/config-schema.json is stale: run `make docs`"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted((REPO / "configs").glob("*.yaml")):
        text = path.read_text()
        assert list(validator.iter_errors(yaml.safe_load(text))) == [], path
        # the first line points editors (the YAML language server) at the schema
        first = text.splitlines()[0]
        assert first == "# yaml-language-server: $schema=../docs/config-schema.json", path
        assert (path.parent / first.split("=", 1)[1]).resolve() == (
            REPO / "docs" / "config-schema.json")
    for bad, where in (({"mesh": {"nxx": 4}}, "nxx"), ({"time": {"dt": -1}}, "dt"),
                       ({"backend": {"name": "tpu"}}, "tpu"), ({"timee": {}}, "timee"),
                       ({"output": {"progress": "maybe"}}, "maybe")):
        errors = list(validator.iter_errors(bad))
        assert len(errors) == 1 and where in errors[0].message + str(errors[0].path), bad
    assert schema["$defs"]["TimeConfig"]["properties"]["dt"]["unit"] == "s"


def test_shipped_small_config_gets_no_gpu_setting_notice(caplog):
    from dycore.config import load_config
    from dycore.preflight import check_backend_settings

    config = load_config(REPO / "configs" / "mountainwave3d_small.yaml")
    assert "assembly" in config.backend.model_fields_set        # the file spells it out
    with caplog.at_level(logging.INFO, logger="dycore"):
        check_backend_settings(config)
    assert "GPU setting" not in caplog.text
    config = load_config(REPO / "configs" / "mountainwave3d_small.yaml",
                         {"backend": {"assembly": "deterministic"}})
    with caplog.at_level(logging.INFO, logger="dycore"):
        check_backend_settings(config)
    assert "backend.assembly = deterministic: GPU setting(s), ignored" in caplog.text


def test_logging_state_is_restored_after_each_call(tiny, capsys):
    logger = logging.getLogger("dycore")
    assert cli.main(["-q", "--log-file", "x.log", "config", "--schema"]) == 0
    assert logger.level == logging.INFO
    assert [h.level for h in logger.handlers if isinstance(h, cli._StderrHandler)] == [
        logging.INFO]
    assert not any(isinstance(h, cli._LogFileHandler) for h in logger.handlers)
