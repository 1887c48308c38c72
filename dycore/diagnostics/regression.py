"""Regression comparison: scalar summaries of a run against a stored reference (JSON).

A fixed number of CPU steps of a case (the run itself is :func:`dycore.checks.run_case`; this
module only summarises and compares, so it imports nothing above the diagnostics layer) is
summarised by scalar quantities, each stored with its own tolerance in a reference file whose
path the caller gives (the test suite's is ``tests/regression/reference.json``):

- per field (u, v, w, p, theta_prime, q_v, q_c, q_r): ``l2`` = sqrt(Σ M_L,i f_i²) (lumped-mass
  weighted, [field unit · m^1.5]), ``min`` and ``max``; relative tolerance
  :data:`FIELD_RTOL` with an absolute floor ``FIELD_RTOL · max(|min|, |max|)`` of that field
  (so a minimum near 0 is not held to a zero tolerance);
- diagnostics after the last step: ``max_abs_w`` [m/s], ``kinetic_energy`` [m⁵/s²] (relative
  :data:`FIELD_RTOL`), ``max_abs_div_u`` [1/s] (relative :data:`DIV_RTOL`: a solver residual,
  more sensitive to round-off); solver iteration totals over all steps (absolute ±
  :data:`ITERATIONS_ATOL`).

A quantity passes when ``|new − ref| <= atol + rtol·|ref|``. :func:`compare` reports every
failure; ``scripts/update_reference`` rewrites the JSON (after a deliberate change of results).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dycore.errors import ConfigError
from dycore.physics.state import OUTPUT_FIELDS

__all__ = ["REFERENCE_STEPS", "ITERATION_KEYS", "field_quantities", "make_reference",
           "compare", "load_reference", "write_reference", "RegressionReport"]

REFERENCE_STEPS = 10
FIELD_RTOL = 1e-9
DIV_RTOL = 1e-7
ITERATIONS_ATOL = 2
ITERATION_KEYS = ("solver_iterations_pressure", "solver_iterations_momentum",
                  "solver_iterations_tracer")


def field_quantities(fields: dict, ml: np.ndarray) -> dict:
    """{"<field>.l2|min|max": float} for every output field.

    Parameters
    ----------
    fields : dict name -> (n,) float64 host array (:meth:`Simulation.host_fields`)
    ml : (n,) lumped mass [m³]
    """
    out = {}
    for f in OUTPUT_FIELDS:
        a = np.asarray(fields[f], dtype=np.float64)
        out[f"{f}.l2"] = float(math.sqrt(float(np.sum(ml * a * a))))
        out[f"{f}.min"] = float(a.min())
        out[f"{f}.max"] = float(a.max())
    return out


def make_reference(quantities: dict, *, config: str, steps: int, note: str = "") -> dict:
    """The reference document: every quantity with its value and tolerance (see module doc)."""
    ref = {}
    for key, value in quantities.items():
        name, _, kind = key.partition(".")
        if key.startswith("diag.solver_iterations"):
            ref[key] = {"value": int(value), "rtol": 0.0, "atol": ITERATIONS_ATOL}
        elif key == "diag.max_abs_div_u":
            ref[key] = {"value": value, "rtol": DIV_RTOL, "atol": 0.0}
        elif key.startswith("diag."):
            ref[key] = {"value": value, "rtol": FIELD_RTOL, "atol": 0.0}
        else:
            scale = max(abs(quantities[f"{name}.min"]), abs(quantities[f"{name}.max"]))
            ref[key] = {"value": value, "rtol": FIELD_RTOL, "atol": FIELD_RTOL * scale}
    return {"config": config, "steps": steps, "backend": "cpu", "note": note,
            "rule": "pass when |new - value| <= atol + rtol*|value|", "quantities": ref}


@dataclass
class RegressionReport:
    """Outcome of :func:`compare`: ``failures`` (one line each) and ``rows`` for a table."""

    failures: list = field(default_factory=list)
    rows: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def table(self) -> str:
        lines = [f"{'quantity':36s} {'reference':>22s} {'new':>22s} {'|diff|':>10s} "
                 f"{'allowed':>10s}  ok"]
        for key, ref, new, diff, allowed, ok in self.rows:
            lines.append(f"{key:36s} {ref!r:>22} {new!r:>22} {diff:10.3e} {allowed:10.3e}  "
                         f"{'yes' if ok else 'NO'}")
        return "\n".join(lines)


def compare(measured: dict, reference: dict) -> RegressionReport:
    """Compare measured quantities with a reference document.

    Parameters
    ----------
    measured : dict name -> number (:func:`run_case`'s first result)
    reference : dict from :func:`make_reference` / :func:`load_reference`

    Returns
    -------
    RegressionReport; a quantity missing on either side, a non-finite value or one outside
    ``atol + rtol·|value|`` is a failure.
    """
    rep = RegressionReport()
    quantities = reference["quantities"]
    for key in sorted(set(quantities) | set(measured)):
        if key not in quantities:
            rep.failures.append(f"{key}: measured but not in the reference")
            continue
        if key not in measured:
            rep.failures.append(f"{key}: in the reference but not measured")
            continue
        spec, new = quantities[key], measured[key]
        ref = spec["value"]
        allowed = spec["atol"] + spec["rtol"] * abs(ref)
        diff = abs(new - ref)
        ok = bool(math.isfinite(new) and diff <= allowed)
        rep.rows.append((key, ref, new, diff, allowed, ok))
        if not ok:
            rep.failures.append(f"{key}: {new!r} vs reference {ref!r} (|diff| {diff:.3e} > "
                                f"allowed {allowed:.3e})")
    return rep


def load_reference(path) -> dict:
    """Read the reference JSON at ``path``.

    Raises
    ------
    ConfigError naming the file when it is missing, not JSON, or has no ``quantities``.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"regression reference {path}: no such file "
                          "(write one with scripts/update_reference)") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"regression reference {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("quantities"), dict):
        raise ConfigError(f"regression reference {path}: no 'quantities' table")
    return doc


def write_reference(doc: dict, path) -> Path:
    """Write the reference JSON (floats with full precision, via ``repr``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path
