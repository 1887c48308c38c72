"""Prognostic state: velocity, pressure, θ' and the moisture tracers at the mesh nodes."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["State", "TRACERS", "OUTPUT_FIELDS"]

#: moisture tracers, passive in this mini-app (no microphysics), [kg/kg]
TRACERS = ("q_v", "q_c", "q_r")
#: node fields written to the output, in file order
OUTPUT_FIELDS = ("u", "v", "w", "p", "theta_prime", "q_v", "q_c", "q_r")


@dataclass
class State:
    """Node fields on the backend (NumPy or CuPy arrays).

    Attributes
    ----------
    u : (n,3) velocity [m/s]; p : (n,) kinematic perturbation pressure [m²/s²]
    theta_prime : (n,) potential-temperature perturbation [K]
    q : dict name -> (n,) moisture tracers [kg/kg]
    t : float — model time [s]

    The stepper writes new values into these arrays in place; rebind them only before the
    first step (CUDA graphs captured by the stepper read them where they are).
    """

    u: object
    p: object
    theta_prime: object
    q: dict
    t: float = 0.0

    @classmethod
    def from_fields(cls, fields: dict, to_device, t: float = 0.0) -> "State":
        """A State from host fields — ``u`` (n,3), ``p``, ``theta_prime`` and every tracer
        (n,), as a case's ``initial_state`` gives them — each as float64 through
        ``to_device`` (the backend's; ``np.asarray`` for host arrays)."""
        import numpy as np

        def put(name):
            return to_device(np.asarray(fields[name], float))
        return cls(u=put("u"), p=put("p"), theta_prime=put("theta_prime"),
                   q={k: put(k) for k in TRACERS}, t=t)

    def host_fields(self, to_host) -> dict:
        """{name: (n,) host array} for every output field."""
        u = to_host(self.u)
        out = {"u": u[:, 0].copy(), "v": u[:, 1].copy(), "w": u[:, 2].copy(),
               "p": to_host(self.p), "theta_prime": to_host(self.theta_prime)}
        out.update({k: to_host(v) for k, v in self.q.items()})
        return out
