"""Per-step diagnostics: max |w|, kinetic energy, max |∇·u|, Picard change, solver iterations."""
from __future__ import annotations

__all__ = ["step_diagnostics"]


def step_diagnostics(state, ops, info, xp) -> dict:
    """Diagnostics of the state after a step.

    Returns
    -------
    dict with ``max_abs_w`` [m/s]; ``kinetic_energy`` ½∫|u|² [m⁵/s²] (lumped mass);
    ``max_abs_div_u`` max over nodes of |C u|/M_L [1/s] (the weak divergence the projection
    drives to zero, up to the KMK stabilisation); ``picard_change`` list [m/s];
    ``solver_iterations_<system>`` totals over the step.
    """
    u = state.u
    div = (ops.C @ u.ravel()) / ops.ml
    out = {
        "max_abs_w": float(xp.max(xp.abs(u[:, 2]))),
        "kinetic_energy": float(0.5 * xp.sum(ops.ml * xp.sum(u * u, axis=1))),
        "max_abs_div_u": float(xp.max(xp.abs(div))),
        "picard_change": list(info.picard_change),
    }
    for k, v in info.iterations.items():
        out[f"solver_iterations_{k}"] = int(v)
    return out
