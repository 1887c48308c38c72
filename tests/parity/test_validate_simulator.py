"""``dycore validate`` under the CUDA simulator on a tiny mesh (4 x 4 x 3 cells), 2 steps.

Deterministic assembly must give 0 differing kernel entries and 0.0 field differences (the
simulator has no FMA) and exit status 0; atomic assembly differs by round-off only (<= 1e-10
relative). A deliberately failed check must give exit status 1.
"""
import json
import os

import numpy as np
import pytest
import yaml

from dycore.cli import main
from dycore.physics.state import OUTPUT_FIELDS

HERE = os.path.dirname(__file__)
SMALL = os.path.join(HERE, "..", "..", "configs", "mountainwave3d_small.yaml")
TINY_MESH = {"nx": 4, "ny": 4, "nz": 3, "dx_min": 8000.0, "dz_min": 2000.0}
ONE_PICARD = {"nonlinear_iterations": 1}          # halves the simulator time of a step


def _tiny_yaml(tmp_path, **backend):
    with open(SMALL, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    data["mesh"].update(TINY_MESH)
    data["time"].update(ONE_PICARD)
    data["backend"] = {"name": "cpu", **backend}          # assembly/strict unset unless given
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_validate_deterministic_bitwise_cli(tmp_path, capsys):
    cfg = _tiny_yaml(tmp_path)
    out = tmp_path / "v"
    assert main(["validate", str(cfg), "--steps", "2", "--output-dir", str(out),
                 "--repeat-gpu"]) == 0
    assert "PASSED" in capsys.readouterr().out
    rep = json.loads((out / "validate_report.json").read_text())
    assert rep["passed"] and rep["assembly"] == "deterministic" and rep["strict"] is True
    assert rep["tolerance"] == 0.0 and rep["steps"] == 2
    assert any("backend.strict not set" in n for n in rep["notes"]), rep["notes"]   # not silent
    assert any("backend.assembly not set" in n for n in rep["notes"]), rep["notes"]
    assert len(rep["kernels"]) == 10
    for name, s in rep["kernels"].items():
        assert s["n_differ"] == 0 and s["max_abs"] == 0.0 and s["max_ulp"] == 0, name
    assert [r["step"] for r in rep["fields"]] == [0, 2]
    for rec in rep["fields"]:
        assert all(rec["max_abs"][f] == 0.0 for f in OUTPUT_FIELDS), rec
    assert rep["repeat_hashes"] == rep["gpu_hashes"]
    assert rep["final"]["w"]["cpu_max"] > 1e-3                       # something happened
    for kind in ("text", "json", "netcdf", "png"):
        assert os.path.getsize(rep["files"][kind]) > 0, kind


def test_validate_atomic_roundoff(tmp_path):
    from dycore.config import load_config
    from dycore.checks.validate import validate

    cfg = load_config(SMALL, {"mesh": TINY_MESH, "time": ONE_PICARD,
                              "output": {"progress": False}})
    res = validate(cfg, steps=2, output_dir=tmp_path / "a", assembly="atomic", strict=False)
    assert res.passed and res.tolerance == 1e-10
    assert not [n for n in res.notes if "not set" in n]         # both chosen by the caller
    for s in res.kernels.values():
        assert s["max_rel"] <= 1e-10
    for rec in res.fields:
        assert all(v <= 1e-10 for v in rec["max_rel"].values()), rec


def test_compare_arrays_counts_ulps_and_fails_on_difference():
    from dycore.checks.validate import _exceeds, compare_arrays

    a = np.array([1.0, -2.0, 0.0, 3.0])
    b = a.copy()
    b[0] = np.nextafter(1.0, 2.0)
    b[1] = np.nextafter(np.nextafter(-2.0, 0.0), 0.0)
    b[2] = -0.0                                           # equal as numbers
    s = compare_arrays(a, b)
    assert s["n_differ"] == 2 and s["max_ulp"] == 2 and s["max_abs"] > 0
    assert _exceeds(s, 0.0) and not _exceeds(s, 1e-10)
    assert compare_arrays([-1e-300], [1e-300])["max_ulp"] > 0
    nan = compare_arrays([1.0], [np.nan])
    assert nan["n_differ"] == 1 and _exceeds(nan, 1.0)
    with pytest.raises(ValueError):
        compare_arrays([1.0], [1.0, 2.0])


def test_gpu_mode_defaults_name_what_validate_chooses(tmp_path):
    from dycore.config import load_config
    from dycore.checks.validate import gpu_mode, gpu_mode_defaults

    unset = load_config(_tiny_yaml(tmp_path))
    assert gpu_mode(unset) == ("deterministic", True)
    assert len(gpu_mode_defaults(unset)) == 2
    assert gpu_mode_defaults(unset, assembly="atomic", strict=False) == []
    given = load_config(_tiny_yaml(tmp_path, strict=False))
    assert gpu_mode(given) == ("deterministic", False)
    assert [n.split(":")[0] for n in gpu_mode_defaults(given)] == ["backend.assembly not set"]
