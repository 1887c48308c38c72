"""Per-step diagnostics: max |w|, kinetic energy, max |∇·u|, Picard change, solver iterations."""
from __future__ import annotations

__all__ = ["step_diagnostics", "step_scalars", "SCALAR_NAMES"]

#: the scalars of :func:`step_scalars`, in order
SCALAR_NAMES = ("max_abs_w", "kinetic_energy", "max_abs_div_u")


def step_scalars(u, ops, xp) -> list:
    """The diagnostics of a velocity field as 0-d backend arrays (read by the caller at once).

    Parameters
    ----------
    u : (n,3) velocity [m/s]; ops : MeshOperators (C, ml); xp : the backend's array module

    Returns
    -------
    [max |w| [m/s], kinetic energy ½∫|u|² [m⁵/s²] (lumped mass), max over nodes of |C u|/M_L
    [1/s] (the weak divergence the projection drives to zero, up to the KMK stabilisation)]
    """
    div = (ops.C @ u.ravel()) / ops.ml
    return [xp.max(xp.abs(u[:, 2])), 0.5 * xp.sum(ops.ml * xp.sum(u * u, axis=1)),
            xp.max(xp.abs(div))]


def step_diagnostics(info) -> dict:
    """Diagnostics of a step from its StepInfo.

    Returns
    -------
    dict with the :data:`SCALAR_NAMES`, ``picard_change`` list [m/s] (one value per Picard
    iteration done), ``picard_iterations`` (its length, int) and ``solver_iterations_<system>``
    totals over the step.
    """
    out = dict(info.diagnostics)
    out["picard_change"] = list(info.picard_change)
    out["picard_iterations"] = len(out["picard_change"])
    for k, v in info.iterations.items():
        out[f"solver_iterations_{k}"] = int(v)
    return out
