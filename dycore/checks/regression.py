"""The regression run: a fixed number of CPU steps of a configuration, summarised for
:func:`dycore.diagnostics.regression.compare`."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dycore.diagnostics.regression import ITERATION_KEYS, REFERENCE_STEPS, field_quantities

__all__ = ["REFERENCE_CONFIG", "run_case"]

#: the configuration the test suite's reference (tests/regression/reference.json) was made with
REFERENCE_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "mountainwave3d_small.yaml"


def run_case(config_path=REFERENCE_CONFIG, steps: int = REFERENCE_STEPS):
    """Run ``steps`` CPU steps of ``config_path``; return (quantities, fields, ml).

    Returns
    -------
    quantities : dict name -> float or int (:func:`field_quantities` plus ``diag.<name>``:
        ``max_abs_w`` [m/s], ``kinetic_energy`` [m⁵/s²], ``max_abs_div_u`` [1/s] after the last
        step, solver iteration totals over all steps)
    fields : dict name -> (n,) host array after the last step
    ml : (n,) lumped mass [m³]

    Raises
    ------
    ConfigError for a bad configuration file (named in the message).
    """
    from dycore.config import load_config
    from dycore.timestepping.simulation import build_simulation

    cfg = load_config(config_path, {"backend": {"name": "cpu"}, "output": {"progress": False}})
    sim = build_simulation(cfg)
    totals = dict.fromkeys(ITERATION_KEYS, 0)

    def count(sim, diag):
        for k in ITERATION_KEYS:
            totals[k] += int(diag.get(k, 0))

    sim.run(steps=steps, callbacks=[count], stability=False)
    diag = sim.last_diagnostics
    fields = sim.host_fields()
    ml = np.asarray(sim.backend.to_host(sim.ops.ml), dtype=np.float64)
    q = field_quantities(fields, ml)
    for k in ("max_abs_w", "kinetic_energy", "max_abs_div_u"):
        q[f"diag.{k}"] = float(diag[k])
    for k, v in totals.items():
        q[f"diag.{k}"] = int(v)
    return q, fields, ml
