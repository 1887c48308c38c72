"""Regression: 10 CPU steps of configs/mountainwave3d_small.yaml against reference.json.

Tolerances are stored per quantity in the JSON (dycore.diagnostics.regression explains them).
The second test proves the check can fail: a field perturbed beyond its tolerance is reported.
Rewrite the reference with ``scripts/update_reference`` after a deliberate change of results.
"""
import copy
from pathlib import Path

import numpy as np
import pytest

from dycore.checks import REFERENCE_CONFIG, run_case
from dycore.diagnostics import regression as reg
from dycore.errors import ConfigError

REFERENCE = Path(__file__).with_name("reference.json")


@pytest.fixture(scope="module")
def fresh():
    ref = reg.load_reference(REFERENCE)
    q, fields, ml = run_case(REFERENCE_CONFIG, ref["steps"])
    return ref, q, fields, ml


def test_small_case_matches_reference(fresh):
    ref, q, _, _ = fresh
    rep = reg.compare(q, ref)
    assert rep.ok, "\n".join(rep.failures) + "\n" + rep.table()


def test_perturbed_field_is_reported(fresh):
    ref, _, fields, ml = fresh
    bad = dict(fields)
    w = fields["w"].copy()
    k = int(np.argmax(w))
    spec = ref["quantities"]["w.max"]
    w[k] += 10.0 * (spec["atol"] + spec["rtol"] * abs(spec["value"]))   # beyond its tolerance
    bad["w"] = w
    q = reg.field_quantities(bad, ml)
    q.update({key: v["value"] for key, v in ref["quantities"].items() if key.startswith("diag.")})
    rep = reg.compare(q, ref)
    assert not rep.ok
    assert any(f.startswith("w.max:") for f in rep.failures), rep.failures
    assert all(f.startswith("w.") for f in rep.failures), rep.failures


def test_iteration_and_missing_quantities_are_reported(fresh):
    ref, q, _, _ = fresh
    q2 = dict(q)
    q2["diag.solver_iterations_pressure"] += reg.ITERATIONS_ATOL + 1
    del q2["u.l2"]
    q2["diag.max_abs_w"] = float("nan")
    failures = reg.compare(q2, ref).failures
    assert any(f.startswith("diag.solver_iterations_pressure") for f in failures)
    assert any(f.startswith("u.l2: in the reference") for f in failures)
    assert any(f.startswith("diag.max_abs_w") for f in failures)
    within = dict(q)
    within["diag.solver_iterations_pressure"] += reg.ITERATIONS_ATOL
    assert reg.compare(within, copy.deepcopy(ref)).ok


def test_bad_reference_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.json: no such file"):
        reg.load_reference(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json: not JSON"):
        reg.load_reference(bad)
    bad.write_text('{"steps": 10}')
    with pytest.raises(ConfigError, match="bad.json: no 'quantities'"):
        reg.load_reference(bad)


def test_regression_comparison_does_not_import_the_time_loop():
    """diagnostics sits below the time loop: no import may run back up the layers."""
    import ast

    src = Path(reg.__file__).read_text(encoding="utf-8")
    imported = [n.module for n in ast.walk(ast.parse(src))
                if isinstance(n, ast.ImportFrom) and n.module]
    assert not [m for m in imported if m.startswith(("dycore.timestepping", "dycore.checks",
                                                    "dycore.config", "dycore.cli"))]
