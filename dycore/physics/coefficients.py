"""Physical coefficients of the Boussinesq system (docs/equations.md §2), as node arrays.

Momentum  ∂u/∂t + (u·∇)u + f ẑ×u = −∇p + b ẑ + ∇·(ν∇u) − σ(u − u_ref)
Continuity ∇·u = 0,   buoyancy b = g θ'/θ̄(z),   θ̄(z) = θ₀ exp(N²z/g)
Temperature ∂θ'/∂t + u·∇θ' = −w dθ̄/dz + ∇·(κ∇θ') − σθ'
Tracers   ∂q/∂t + u·∇q = ∇·(κ_q∇q) − σ(q − q_ref)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Coefficients", "build_coefficients"]


@dataclass
class Coefficients:
    """Everything the stages need besides the state (node arrays on the backend).

    Attributes
    ----------
    sigma : (n,) sponge [1/s]; dtheta_bar_dz : (n,) [K/m]
    q_ref : dict name -> (n,) tracer sponge/boundary reference [kg/kg]
    u_ref : (3,) float [m/s]; g_over_theta0 : g/θ₀ [m/(s² K)] (the surface value)
    g_over_theta_bar : (n,) g/θ̄(z) at the nodes [m/(s² K)]; the buoyancy is
        b = g_over_theta_bar·θ', so (g/θ̄) dθ̄/dz = N² at every node (docs/equations.md §2)
    nu, kappa, kappa_q : (3,) diagonal tensors [m²/s]; f_cor : [1/s]
    zeros : (n,) zero array (a source/reference that vanishes)
    """

    sigma: object
    dtheta_bar_dz: object
    q_ref: dict
    u_ref: tuple
    g_over_theta0: float
    g_over_theta_bar: object
    nu: tuple
    kappa: tuple
    kappa_q: tuple
    f_cor: float
    zeros: object


def build_coefficients(case, params, mesh, physics_cfg, backend) -> Coefficients:
    """Evaluate the case's sponge, background and reference state at the nodes.

    Parameters
    ----------
    case : the case module (``sponge``, ``theta_bar``, ``dtheta_bar_dz``, ``reference_state``)
    params : the case's Parameters; mesh : Mesh; physics_cfg : PhysicsConfig; backend
    """
    ref = case.reference_state(params, mesh.coords)
    u_ref = tuple(float(v) for v in np.asarray(ref["u"])[0])
    dev = backend.to_device
    return Coefficients(
        sigma=dev(np.asarray(case.sponge(params, mesh.coords), float)),
        dtheta_bar_dz=dev(np.asarray(case.dtheta_bar_dz(params, mesh.coords[:, 2]), float)),
        q_ref={k: dev(np.asarray(ref[k], float)) for k in ("q_v", "q_c", "q_r")},
        u_ref=u_ref,
        g_over_theta0=float(params.g / params.theta0),
        g_over_theta_bar=dev(params.g / np.asarray(case.theta_bar(params, mesh.coords[:, 2]),
                                                   float)),
        nu=(physics_cfg.nu_h, physics_cfg.nu_h, physics_cfg.nu_v),
        kappa=(physics_cfg.kappa_h, physics_cfg.kappa_h, physics_cfg.kappa_v),
        kappa_q=(physics_cfg.kappa_q_h, physics_cfg.kappa_q_h, physics_cfg.kappa_q_v),
        f_cor=float(physics_cfg.coriolis_f),
        zeros=dev(np.zeros(mesh.nnodes)),
    )
