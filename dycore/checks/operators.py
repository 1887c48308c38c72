"""Every assembly operator with its inputs, in one place, for the checks that compare or time them
(``dycore validate``, ``dycore bench --parts operators``, ``scripts/gpu_check.py``).

:func:`operator_calls` returns one call per operator of the assembler, each tagged with its
element loop of :data:`dycore.assembly.loops.ASSEMBLY`; ``tests/unit/test_check_operators.py``
asserts that every loop of that table is called, so an operator added to the table cannot be
silently missing from validation. :func:`operator_outputs` runs them all and names the outputs.
Inputs come from :func:`random_inputs` (random nodal fields) or :func:`state_inputs` (a
simulation's state plus a smooth perturbation).
"""
from __future__ import annotations

import numpy as np

from dycore.checks.common import random_fields

__all__ = ["operator_calls", "operator_outputs", "random_inputs", "state_inputs",
           "inputs_on", "OPERATOR_LOOPS"]

#: label prefix of each operator -> its loop in ASSEMBLY
OPERATOR_LOOPS = {"tracer": "tracer", "momentum": "momentum", "divergence C": "divergence",
                  "stabilisation K_p": "stabilisation", "lumped mass": "lumped_mass"}


def random_inputs(nnodes: int, seed: int = 0) -> dict:
    """Inputs of every operator on random nodal fields (host arrays; :func:`random_fields`).

    Returns
    -------
    dict: ``u_nl``, ``u_old`` (n,3) [m/s], ``buoy``, ``p``, ``sigma`` (n,), ``u_ref`` (3,)
    [m/s], ``nu`` (3,) [m²/s], ``f_cor`` [1/s], ``dt_theta`` [s], and ``tracers``:
    {name: {``c_old``, ``src``, ``c_ref`` (n,), ``kdiag`` (3,) [m²/s]}} (one tracer, "t").
    """
    f = random_fields(nnodes, seed)
    return {"u_nl": f["u_nl"], "u_old": f["u_old"], "buoy": f["buoy"], "p": f["p"],
            "sigma": f["sigma"], "u_ref": (10.0, 0.0, 0.0), "nu": (5.0, 5.0, 1.0),
            "f_cor": 1e-4, "dt_theta": 5.0,
            "tracers": {"t": {"c_old": f["c_old"], "src": f["src"], "c_ref": f["c_ref"],
                              "kdiag": (5.0, 5.0, 1.0)}}}


def state_inputs(sim) -> dict:
    """Inputs of every operator from a Simulation's state and coefficients (backend arrays).

    The state is perturbed smoothly first: at rest-in-balance the momentum right-hand side is
    a sum of cancelling terms (on the paper mesh max |rhs| = 4e-8 from terms of order 1e5), so
    a difference relative to it would measure cancellation, not the kernels. The perturbation
    s(x, y, z) = sin(2πx̂) cos(2πŷ) sin(πẑ) on the unit-scaled box adds (1, 0.5, 0.2)·s m/s to
    u, 0.1·s K to θ' and 100·s m²/s² to p. Tracers: θ' (source −w dθ̄/dz) and q_v.
    Keys as :func:`random_inputs`.
    """
    xyz = sim.mesh.coords
    lo, hi = xyz.min(axis=0), xyz.max(axis=0)
    xh, yh, zh = ((xyz - lo) / np.where(hi > lo, hi - lo, 1.0)).T
    s = np.sin(2 * np.pi * xh) * np.cos(2 * np.pi * yh) * np.sin(np.pi * zh)
    b, st, c, tc = sim.backend, sim.state, sim.coeffs, sim.config.time
    u = b.to_device(b.to_host(st.u) + s[:, None] * np.array([1.0, 0.5, 0.2]))
    th = b.to_device(b.to_host(st.theta_prime) + 0.1 * s)
    p = b.to_device(b.to_host(st.p) + 100.0 * s)
    return {"u_nl": u, "u_old": st.u, "buoy": c.g_over_theta_bar * th, "p": p,
            "sigma": c.sigma, "u_ref": c.u_ref, "nu": c.nu, "f_cor": c.f_cor,
            "dt_theta": tc.dt * tc.theta,
            "tracers": {
                "theta_prime": {"c_old": th, "src": -u[:, 2] * c.dtheta_bar_dz,
                                "c_ref": c.zeros, "kdiag": c.kappa},
                "q_v": {"c_old": st.q["q_v"], "src": c.zeros, "c_ref": c.q_ref["q_v"],
                        "kdiag": c.kappa_q}}}


def inputs_on(backend, inputs: dict) -> dict:
    """``inputs`` with every host array copied to ``backend`` (scalars and tuples as they are)."""
    def dev(v):
        return backend.to_device(v) if isinstance(v, np.ndarray) else v
    out = {k: dev(v) for k, v in inputs.items() if k != "tracers"}
    out["tracers"] = {n: {k: dev(v) for k, v in t.items()} for n, t in inputs["tracers"].items()}
    return out


def operator_calls(asm, d: dict, want_matrix: bool = True) -> dict:
    """Every operator of the assembler ``asm`` on the inputs ``d`` (:func:`random_inputs` /
    :func:`state_inputs`, arrays of ``asm``'s backend).

    Returns
    -------
    dict: label -> (loop name in ASSEMBLY, call with no arguments returning the operator's
    outputs as a tuple, ``None`` for an output not asked for). Labels: ``tracer NAME`` per
    tracer of ``d["tracers"]``, ``momentum``, ``divergence C``, ``stabilisation K_p``,
    ``lumped mass``. ``want_matrix`` False: the tracers' rhs only. The tracers are assembled
    into buffers of their own (``check NAME``): a simulation's step buffers are not touched.
    """
    calls = {}
    for name, t in d["tracers"].items():
        calls[f"tracer {name}"] = ("tracer", lambda name=name, t=t: asm.tracer(
            f"check {name}", d["u_nl"], t["c_old"], t["src"], d["sigma"], t["c_ref"], t["kdiag"],
            d["dt_theta"], want_matrix=want_matrix))
    calls["momentum"] = ("momentum", lambda: asm.momentum(
        d["u_nl"], d["u_old"], d["buoy"], d["p"], d["sigma"], d["u_ref"], d["nu"], d["f_cor"],
        d["dt_theta"]))
    calls["divergence C"] = ("divergence", asm.divergence)
    calls["stabilisation K_p"] = ("stabilisation", lambda: asm.stabilisation()[:1])
    calls["lumped mass"] = ("lumped_mass", lambda: (asm.lumped_mass(),))
    return calls


#: names of each operator's outputs, in the order its call returns them
_OUTPUT_NAMES = {"tracer": ("matrix", "rhs"), "momentum": ("matrix", "rhs"),
                 "divergence": ("", "det J"), "stabilisation": ("",), "lumped_mass": ("",)}


def operator_outputs(asm, d: dict) -> dict:
    """Run every :func:`operator_calls` once; {output name: host copy}, e.g. ``tracer q_v
    matrix``, ``momentum rhs``, ``divergence C``, ``det J``, ``lumped mass``."""
    to_host = asm.b.to_host
    out = {}
    for label, (loop, call) in operator_calls(asm, d).items():
        for suffix, a in zip(_OUTPUT_NAMES[loop], call()):
            if a is not None:
                name = suffix if suffix.startswith("det") else f"{label} {suffix}".strip()
                out[name] = np.array(to_host(a), copy=True)
    asm.b.synchronize()
    return out
