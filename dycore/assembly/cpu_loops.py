"""GENERATED: do not edit (`python -m dycore.assembly.codegen` writes this file).

From the loop table dycore.assembly.loops.ASSEMBLY.

CPU drivers: @njit(parallel=True) prange loops over chunks of CHUNK elements, each
gathering, calling the element function and writing element arrays (the deterministic
gather by nonzero is dycore.assembly.gather). The contract is dycore/assembly/loop_spec.py;
docs/architecture.md ("Element loops") explains the generated code.
"""
import numpy as np
from numba import njit, prange

from dycore.assembly.weak_forms import (
    divergence_element, lumped_mass_element, momentum_element, stabilisation_element,
    tracer_element,
)
from dycore.assembly.weak_forms import QUAD_N, QUAD_W

CHUNK = 256  #: elements per prange iteration


@njit(parallel=True, cache=True)
def tracer_elements(tets, coords, u_nl, c_old, src, sigma, c_ref, kxx, kyy, kzz, dt_theta, ele_mat,
                    ele_rhs, detj):
    """tracer system (M + dt theta L) dc = -L c + int N (src + sigma c_ref)

    CPU driver, element arrays out; loop 'tracer'.
    """
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X_e = np.empty((4, 3))
        n_e = QUAD_N.copy()
        weights_e = QUAD_W.copy()
        u_nl_e = np.empty((4, 3))
        c_old_e = np.empty((4,))
        src_e = np.empty((4,))
        sigma_e = np.empty((4,))
        c_ref_e = np.empty((4,))
        tensor_e = np.zeros((3, 3))
        tensor_e[0, 0] = kxx
        tensor_e[1, 1] = kyy
        tensor_e[2, 2] = kzz
        dshape_e = np.empty((4, 3))
        detwei_e = np.empty((11,))
        gi_a_e = np.empty((11,))
        gi_b_e = np.empty((11,))
        vec_gi_e = np.empty((11, 3))
        m44_e = np.empty((4, 4))
        l44_e = np.empty((4, 4))
        mat_e = np.empty((4, 4))
        rhs_e = np.empty((4,))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                nd = tets[e, i]
                for i1 in range(3):
                    X_e[i, i1] = coords[nd, i1]
                    u_nl_e[i, i1] = u_nl[nd, i1]
                c_old_e[i] = c_old[nd]
                src_e[i] = src[nd]
                sigma_e[i] = sigma[nd]
                c_ref_e[i] = c_ref[nd]
            detj[e] = tracer_element(X_e, n_e, weights_e, u_nl_e, c_old_e, src_e, sigma_e, c_ref_e,
                                     tensor_e, dt_theta, dshape_e, detwei_e, gi_a_e, gi_b_e,
                                     vec_gi_e, m44_e, l44_e, mat_e, rhs_e)
            for i0 in range(4):
                for i1 in range(4):
                    ele_mat[e, i0, i1] = mat_e[i0, i1]
            for i0 in range(4):
                ele_rhs[e, i0] = rhs_e[i0]


@njit(parallel=True, cache=True)
def momentum_elements(tets, coords, u_nl, u_old, buoy, p, sigma, u_ref0, u_ref1, u_ref2, nuxx,
                      nuyy, nuzz, f_cor, dt_theta, ele_mat, ele_rhs, detj):
    """momentum system in 3x3 blocks (BCSR) and its rhs

    CPU driver, element arrays out; loop 'momentum'.
    """
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X_e = np.empty((4, 3))
        n_e = QUAD_N.copy()
        weights_e = QUAD_W.copy()
        u_nl_e = np.empty((4, 3))
        u_old_e = np.empty((4, 3))
        buoy_e = np.empty((4,))
        p_e = np.empty((4,))
        sigma_e = np.empty((4,))
        tensor_e = np.zeros((3, 3))
        tensor_e[0, 0] = nuxx
        tensor_e[1, 1] = nuyy
        tensor_e[2, 2] = nuzz
        dshape_e = np.empty((4, 3))
        detwei_e = np.empty((11,))
        gi_a_e = np.empty((11,))
        gi_b_e = np.empty((11,))
        vec_gi_e = np.empty((11, 3))
        m44_e = np.empty((4, 4))
        l44_e = np.empty((4, 4))
        d344_e = np.empty((3, 4, 4))
        mat_e = np.empty((4, 4, 3, 3))
        rhs_e = np.empty((4, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                nd = tets[e, i]
                for i1 in range(3):
                    X_e[i, i1] = coords[nd, i1]
                    u_nl_e[i, i1] = u_nl[nd, i1]
                    u_old_e[i, i1] = u_old[nd, i1]
                buoy_e[i] = buoy[nd]
                p_e[i] = p[nd]
                sigma_e[i] = sigma[nd]
            detj[e] = momentum_element(X_e, n_e, weights_e, u_nl_e, u_old_e, buoy_e, p_e, sigma_e,
                                       u_ref0, u_ref1, u_ref2, tensor_e, f_cor, dt_theta, dshape_e,
                                       detwei_e, gi_a_e, gi_b_e, vec_gi_e, m44_e, l44_e, d344_e,
                                       mat_e, rhs_e)
            for i0 in range(4):
                for i1 in range(4):
                    for i2 in range(3):
                        for i3 in range(3):
                            ele_mat[e, i0, i1, i2, i3] = mat_e[i0, i1, i2, i3]
            for i0 in range(4):
                for i1 in range(3):
                    ele_rhs[e, i0, i1] = rhs_e[i0, i1]


@njit(parallel=True, cache=True)
def divergence_elements(tets, coords, ele_mat, detj):
    """volume part of the divergence matrix C (rows: pressure)

    CPU driver, element arrays out; loop 'divergence'.
    """
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X_e = np.empty((4, 3))
        n_e = QUAD_N.copy()
        weights_e = QUAD_W.copy()
        dshape_e = np.empty((4, 3))
        detwei_e = np.empty((11,))
        d344_e = np.empty((3, 4, 4))
        mat_e = np.empty((4, 4, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                nd = tets[e, i]
                for i1 in range(3):
                    X_e[i, i1] = coords[nd, i1]
            detj[e] = divergence_element(X_e, n_e, weights_e, dshape_e, detwei_e, d344_e, mat_e)
            for i0 in range(4):
                for i1 in range(4):
                    for i2 in range(3):
                        ele_mat[e, i0, i1, i2] = mat_e[i0, i1, i2]


@njit(parallel=True, cache=True)
def stabilisation_elements(tets, coords, ele_mat, status):
    """pressure stabilisation 1/2 int grad psi^T hbar grad psi

    CPU driver, element arrays out; loop 'stabilisation'.
    """
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X_e = np.empty((4, 3))
        weights_e = QUAD_W.copy()
        dshape_e = np.empty((4, 3))
        detwei_e = np.empty((11,))
        a6_e = np.empty((6, 6))
        b6_e = np.empty((6,))
        x6_e = np.empty((6,))
        metric_e = np.empty((3, 3))
        evals_e = np.empty((3,))
        evecs_e = np.empty((3, 3))
        hbar_e = np.empty((3, 3))
        mat_e = np.empty((4, 4))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                nd = tets[e, i]
                for i1 in range(3):
                    X_e[i, i1] = coords[nd, i1]
            status[e] = stabilisation_element(X_e, weights_e, dshape_e, detwei_e, a6_e, b6_e, x6_e,
                                              metric_e, evals_e, evecs_e, hbar_e, mat_e)
            for i0 in range(4):
                for i1 in range(4):
                    ele_mat[e, i0, i1] = mat_e[i0, i1]


@njit(parallel=True, cache=True)
def lumped_mass_elements(tets, coords, ele_vec, detj):
    """lumped mass int N_i

    CPU driver, element arrays out; loop 'lumped_mass'.
    """
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X_e = np.empty((4, 3))
        n_e = QUAD_N.copy()
        weights_e = QUAD_W.copy()
        dshape_e = np.empty((4, 3))
        detwei_e = np.empty((11,))
        vec_e = np.empty((4,))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                nd = tets[e, i]
                for i1 in range(3):
                    X_e[i, i1] = coords[nd, i1]
            detj[e] = lumped_mass_element(X_e, n_e, weights_e, dshape_e, detwei_e, vec_e)
            for i0 in range(4):
                ele_vec[e, i0] = vec_e[i0]


#: loop name -> CPU driver
DRIVERS = {
    "tracer": tracer_elements,
    "momentum": momentum_elements,
    "divergence": divergence_elements,
    "stabilisation": stabilisation_elements,
    "lumped_mass": lumped_mass_elements,
}
