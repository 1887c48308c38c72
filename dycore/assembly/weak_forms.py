"""The weak forms: local matrices and vectors of every operator (docs/equations.md §2–§4).

These are the ONE source of the assembly arithmetic. Each function takes element-local arrays
(gathered by a driver), calls the fem element functions, and fills local outputs. Each has one
loop in :data:`dycore.assembly.loops.ASSEMBLY`, from which the CPU drivers
(:mod:`dycore.assembly.cpu_loops_gen`) and the GPU kernels (:mod:`dycore.backend.gpu_loops_gen`) are
generated; neither holds arithmetic of its own beyond gather and scatter.

Notation (docs/equations.md §3): M consistent mass ∫NᵢNⱼ; M_L lumped mass (row sums of M); A advection
∫Nᵢ(u·∇Nⱼ); K diffusion ∫∇Nᵢ·T∇Nⱼ; S sponge ∫σNᵢNⱼ; L = A + K + S.

Scratch arrays are passed in so that nothing allocates (local-kernel contract). A :class:`Scratch`
is, per element: ``dshape`` (4,3), ``detwei`` (NGI,), ``gi_a``/``gi_b`` (NGI,), ``vec_gi`` (NGI,3),
``m44``/``l44`` (4,4), ``d344`` (3,4,4); ``tensor`` (3,3) holds the diffusivity tensor, filled by
the launcher. ``n`` (NGI,4) and ``weights`` (NGI,) are the quadrature's shape values and weights.
"""
import numpy as np

from dycore.fem._jit import element_function
from dycore.fem.integrals import (
    dshape_shape, dshape_tensor_dshape, ele_val_at_quad, ele_vector_at_quad, shape_shape, shape_vector_dot_dshape,
)
from dycore.fem.metric import get_edge_lengths
from dycore.fem.quadrature import get_quadrature
from dycore.fem.shape import shape_values
from dycore.fem.transform import transform_to_physical

__all__ = [
    "QUAD_N", "QUAD_W", "NGI", "transport_operator", "tracer_element", "momentum_element",
    "divergence_element", "stabilisation_element", "lumped_mass_element",
]

_QUAD = get_quadrature(4)
#: P1 shape values at the 11 Keast points, (NGI, 4) float64 — the physics uses degree 4 only.
QUAD_N = np.ascontiguousarray(shape_values(_QUAD.bary), dtype=np.float64)
#: Keast weights, (NGI,) float64, summing to 1/6.
QUAD_W = np.ascontiguousarray(_QUAD.weights, dtype=np.float64)
NGI = int(QUAD_W.shape[0])


@element_function
def transport_operator(n, dshape, detwei, u_nl, sigma, tensor, gi_a, vec_gi, m44, l44):
    """Fill ``l44`` with L = A(u_nl) + K(tensor) + S(σ) (docs/equations.md §3).

    Parameters
    ----------
    n : (NGI,4) shape values at the points; dshape : (4,3) [1/m]; detwei : (NGI,) [m³]
    u_nl : (4,3) advecting velocity at the nodes [m/s]
    sigma : (4,) sponge coefficient at the nodes [1/s]
    tensor : (3,3) diffusivity [m²/s], element-constant
    gi_a : (NGI,) scratch, on return σ·detwei at the points; vec_gi : (NGI,3) scratch
    m44 : (4,4) scratch; l44 : (4,4) output [m³/s]
    """
    ele_vector_at_quad(n, u_nl, vec_gi)
    shape_vector_dot_dshape(n, dshape, vec_gi, detwei, l44)
    dshape_tensor_dshape(dshape, tensor, detwei, m44)
    for i in range(4):
        for j in range(4):
            l44[i, j] += m44[i, j]
    ele_val_at_quad(n, sigma, gi_a)
    for g in range(gi_a.shape[0]):
        gi_a[g] = gi_a[g] * detwei[g]
    shape_shape(n, gi_a, m44)
    for i in range(4):
        for j in range(4):
            l44[i, j] += m44[i, j]


@element_function
def tracer_element(X, n, weights, u_nl, c_old, src, sigma, c_ref, tensor, dt_theta,
                   dshape, detwei, gi_a, gi_b, vec_gi, m44, l44, mat, rhs):
    """Tracer system of one element: (M + ΔtθL) δc = −L cⁿ + ∫N(src + σ c_ref) (docs/equations.md §4.3).

    Parameters
    ----------
    X : (4,3) node coordinates [m]
    u_nl : (4,3) advecting velocity [m/s]; c_old : (4,) old tracer value [unit of c]
    src : (4,) nodal source [unit/s] (−w dθ̄/dz for θ'; 0 for moisture)
    sigma : (4,) sponge [1/s]; c_ref : (4,) sponge reference value [unit]
    tensor : (3,3) diffusivity [m²/s]; dt_theta : Δt·θ [s]
    mat : (4,4) output [m³]; rhs : (4,) output [unit·m³/s]

    Returns
    -------
    float : signed det J (the launcher's caller checks it is positive).
    """
    detj = transform_to_physical(X, weights, dshape, detwei)
    transport_operator(n, dshape, detwei, u_nl, sigma, tensor, gi_a, vec_gi, m44, l44)
    # rhs = ∫N (src + σ c_ref) − L cⁿ ; gi_a holds σ·detwei
    ele_val_at_quad(n, src, gi_b)
    for g in range(gi_b.shape[0]):
        cref_g = n[g, 0] * c_ref[0] + n[g, 1] * c_ref[1] + n[g, 2] * c_ref[2] + n[g, 3] * c_ref[3]
        gi_b[g] = gi_b[g] * detwei[g] + cref_g * gi_a[g]
    for i in range(4):
        s = 0.0
        for g in range(gi_b.shape[0]):
            s += n[g, i] * gi_b[g]
        for j in range(4):
            s -= l44[i, j] * c_old[j]
        rhs[i] = s
    shape_shape(n, detwei, m44)
    for i in range(4):
        for j in range(4):
            mat[i, j] = m44[i, j] + dt_theta * l44[i, j]
    return detj


@element_function
def momentum_element(X, n, weights, u_nl, u_old, buoy, p, sigma, u_ref0, u_ref1, u_ref2,
                     tensor, f_cor, dt_theta,
                     dshape, detwei, gi_a, gi_b, vec_gi, m44, l44, d344, mat, rhs):
    """Momentum system of one element in 3×3 blocks (docs/equations.md §2, §4.4).

    big_m = M_L + Δtθ(L ⊗ I₃ + f M ⊗ R), R = [[0,−1,0],[1,0,0],[0,0,0]] (f ẑ×u), and
    rhs = −(L ⊗ I₃ + f M ⊗ R) uⁿ + ∫N b ẑ + ∫N σ u_ref + Cᵀp, with (Cᵀp)ⱼ,d = −Σᵢ ∫∂_dNᵢ Nⱼ pᵢ
    (the element part of the transposed divergence matrix; the no-normal-flow boundary term is
    omitted, docs/equations.md §3).

    Parameters
    ----------
    u_nl, u_old : (4,3) [m/s]; buoy : (4,) buoyancy b [m/s²]; p : (4,) pressure [m²/s²]
    sigma : (4,) [1/s]; u_ref0..2 : sponge reference velocity [m/s]
    tensor : (3,3) viscosity [m²/s]; f_cor : Coriolis parameter [1/s]; dt_theta : Δt·θ [s]
    mat : (4,4,3,3) output [m³]; rhs : (4,3) output [m⁴/s²]

    Returns
    -------
    float : signed det J.
    """
    detj = transform_to_physical(X, weights, dshape, detwei)
    transport_operator(n, dshape, detwei, u_nl, sigma, tensor, gi_a, vec_gi, m44, l44)
    # gi_a = σ·detwei at the points; sponge source ∫Nᵢσ
    ele_val_at_quad(n, buoy, gi_b)
    for g in range(gi_b.shape[0]):
        gi_b[g] = gi_b[g] * detwei[g]
    dshape_shape(n, dshape, detwei, d344)
    shape_shape(n, detwei, m44)
    for i in range(4):
        sb = 0.0
        ss = 0.0
        for g in range(gi_a.shape[0]):
            sb += n[g, i] * gi_b[g]
            ss += n[g, i] * gi_a[g]
        r0 = ss * u_ref0
        r1 = ss * u_ref1
        r2 = ss * u_ref2 + sb
        for j in range(4):
            lij = l44[i, j]
            fm = f_cor * m44[i, j]
            r0 -= lij * u_old[j, 0] - fm * u_old[j, 1]
            r1 -= lij * u_old[j, 1] + fm * u_old[j, 0]
            r2 -= lij * u_old[j, 2]
            # Cᵀp: row i of the velocity equation, pressure node j
            r0 -= d344[0, j, i] * p[j]
            r1 -= d344[1, j, i] * p[j]
            r2 -= d344[2, j, i] * p[j]
        rhs[i, 0] = r0
        rhs[i, 1] = r1
        rhs[i, 2] = r2
    for i in range(4):
        ml = 0.0
        for j in range(4):
            ml += m44[i, j]
        for j in range(4):
            lij = dt_theta * l44[i, j]
            fm = dt_theta * f_cor * m44[i, j]
            for a in range(3):
                for b in range(3):
                    mat[i, j, a, b] = 0.0
            mat[i, j, 0, 0] = lij
            mat[i, j, 1, 1] = lij
            mat[i, j, 2, 2] = lij
            mat[i, j, 0, 1] = -fm
            mat[i, j, 1, 0] = fm
        mat[i, i, 0, 0] += ml
        mat[i, i, 1, 1] += ml
        mat[i, i, 2, 2] += ml
    return detj


@element_function
def divergence_element(X, n, weights, dshape, detwei, d344, mat):
    """Volume part of the divergence matrix C: Cᵢⱼ,d = −∫∂_dNᵢ Nⱼ (docs/equations.md §3).

    Parameters
    ----------
    mat : (4,4,3) output [m²]: row i = pressure node, column j = velocity node, d = component.

    Returns
    -------
    float : signed det J.
    """
    detj = transform_to_physical(X, weights, dshape, detwei)
    dshape_shape(n, dshape, detwei, d344)
    for i in range(4):
        for j in range(4):
            for d in range(3):
                mat[i, j, d] = -d344[d, i, j]
    return detj


@element_function
def stabilisation_element(X, weights, dshape, detwei, a6, b6, x6, metric, evals, evecs,
                          hbar, mat):
    """Pressure-stabilisation element matrix K_e = ½∫∇ψᵀ h̄ ∇ψ (docs/equations.md §3, KMK).

    h̄ is the element length tensor from :func:`get_edge_lengths` (Jacobi eigensolver).

    Parameters
    ----------
    a6 (6,6), b6 (6,), x6 (6,), metric (3,3), evals (3,), evecs (3,3), hbar (3,3) : scratch
    mat : (4,4) output [m²]

    Returns
    -------
    int : 0 ok; 1 singular edge system; 2 non-positive det J.
    """
    detj = transform_to_physical(X, weights, dshape, detwei)
    status = get_edge_lengths(X, a6, b6, x6, metric, evals, evecs, hbar, 0)
    for a in range(3):
        for b in range(3):
            hbar[a, b] = 0.5 * hbar[a, b]
    dshape_tensor_dshape(dshape, hbar, detwei, mat)
    if not detj > 0.0:
        status = 2
    return status


@element_function
def lumped_mass_element(X, n, weights, dshape, detwei, vec):
    """Lumped mass of one element: vec[i] = ∫Nᵢ [m³] (row sums of the consistent mass).

    Returns
    -------
    float : signed det J.
    """
    detj = transform_to_physical(X, weights, dshape, detwei)
    for i in range(4):
        s = 0.0
        for g in range(detwei.shape[0]):
            s += n[g, i] * detwei[g]
        vec[i] = s
    return detj
