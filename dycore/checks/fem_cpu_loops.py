"""GENERATED: do not edit (`python -m dycore.assembly.codegen` writes this file).

From the loop table dycore.checks.loops.FEM_CHECKS.

CPU drivers: @njit(parallel=True) prange loops over chunks of CHUNK elements, each
gathering, calling the element function and writing element arrays (the deterministic
gather by nonzero is dycore.assembly.gather). The contract is dycore/assembly/loop_spec.py;
docs/architecture.md ("Element loops") explains the generated code.
"""
import numpy as np
from numba import njit, prange

from dycore.fem import (
    dshape_shape, dshape_tensor_dshape, eig3_closed_form, eig3_jacobi, ele_val_at_quad,
    ele_vector_at_quad, get_edge_lengths, shape_dshape, shape_rhs, shape_shape,
    shape_vector_dot_dshape, shape_vector_rhs, solve6, transform_to_physical,
)

CHUNK = 256  #: elements per prange iteration


@njit(parallel=True, cache=True)
def transform_to_physical_elements(X_all, weights, dshape_all, detwei_all, detj_all):
    """dshape, detwei and det J per element

    CPU driver, element arrays out; loop 'transform_to_physical'.
    """
    nele = X_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X_e = np.empty((4, 3))
        weights_e = np.empty((11,))
        for i0 in range(11):
            weights_e[i0] = weights[i0]
        dshape_e = np.empty((4, 3))
        detwei_e = np.empty((11,))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(4):
                for i1 in range(3):
                    X_e[i0, i1] = X_all[e, i0, i1]
            detj_all[e] = transform_to_physical(X_e, weights_e, dshape_e, detwei_e)
            for i0 in range(4):
                for i1 in range(3):
                    dshape_all[e, i0, i1] = dshape_e[i0, i1]
            for i0 in range(11):
                detwei_all[e, i0] = detwei_e[i0]


@njit(parallel=True, cache=True)
def ele_val_at_quad_elements(n, f_all, f_gi_all):
    """ele_val_at_quad

    CPU driver, element arrays out; loop 'ele_val_at_quad'.
    """
    nele = f_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n_e = np.empty((11, 4))
        for i0 in range(11):
            for i1 in range(4):
                n_e[i0, i1] = n[i0, i1]
        ele_val_e = np.empty((4,))
        out_e = np.empty((11,))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(4):
                ele_val_e[i0] = f_all[e, i0]
            ele_val_at_quad(n_e, ele_val_e, out_e)
            for i0 in range(11):
                f_gi_all[e, i0] = out_e[i0]


@njit(parallel=True, cache=True)
def ele_vector_at_quad_elements(n, u_all, u_gi_all):
    """ele_vector_at_quad

    CPU driver, element arrays out; loop 'ele_vector_at_quad'.
    """
    nele = u_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n_e = np.empty((11, 4))
        for i0 in range(11):
            for i1 in range(4):
                n_e[i0, i1] = n[i0, i1]
        ele_val_e = np.empty((4, 3))
        out_e = np.empty((11, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(4):
                for i1 in range(3):
                    ele_val_e[i0, i1] = u_all[e, i0, i1]
            ele_vector_at_quad(n_e, ele_val_e, out_e)
            for i0 in range(11):
                for i1 in range(3):
                    u_gi_all[e, i0, i1] = out_e[i0, i1]


@njit(parallel=True, cache=True)
def shape_shape_elements(n, detwei_all, mass_all):
    """shape_shape

    CPU driver, element arrays out; loop 'shape_shape'.
    """
    nele = detwei_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n_e = np.empty((11, 4))
        for i0 in range(11):
            for i1 in range(4):
                n_e[i0, i1] = n[i0, i1]
        detwei_e = np.empty((11,))
        out_e = np.empty((4, 4))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(11):
                detwei_e[i0] = detwei_all[e, i0]
            shape_shape(n_e, detwei_e, out_e)
            for i0 in range(4):
                for i1 in range(4):
                    mass_all[e, i0, i1] = out_e[i0, i1]


@njit(parallel=True, cache=True)
def shape_dshape_elements(n, dshape_all, detwei_all, sd_all):
    """shape_dshape

    CPU driver, element arrays out; loop 'shape_dshape'.
    """
    nele = dshape_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n_e = np.empty((11, 4))
        for i0 in range(11):
            for i1 in range(4):
                n_e[i0, i1] = n[i0, i1]
        dshape_e = np.empty((4, 3))
        detwei_e = np.empty((11,))
        out_e = np.empty((3, 4, 4))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(4):
                for i1 in range(3):
                    dshape_e[i0, i1] = dshape_all[e, i0, i1]
            for i0 in range(11):
                detwei_e[i0] = detwei_all[e, i0]
            shape_dshape(n_e, dshape_e, detwei_e, out_e)
            for i0 in range(3):
                for i1 in range(4):
                    for i2 in range(4):
                        sd_all[e, i0, i1, i2] = out_e[i0, i1, i2]


@njit(parallel=True, cache=True)
def dshape_shape_elements(n, dshape_all, detwei_all, ds_all):
    """dshape_shape

    CPU driver, element arrays out; loop 'dshape_shape'.
    """
    nele = dshape_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n_e = np.empty((11, 4))
        for i0 in range(11):
            for i1 in range(4):
                n_e[i0, i1] = n[i0, i1]
        dshape_e = np.empty((4, 3))
        detwei_e = np.empty((11,))
        out_e = np.empty((3, 4, 4))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(4):
                for i1 in range(3):
                    dshape_e[i0, i1] = dshape_all[e, i0, i1]
            for i0 in range(11):
                detwei_e[i0] = detwei_all[e, i0]
            dshape_shape(n_e, dshape_e, detwei_e, out_e)
            for i0 in range(3):
                for i1 in range(4):
                    for i2 in range(4):
                        ds_all[e, i0, i1, i2] = out_e[i0, i1, i2]


@njit(parallel=True, cache=True)
def dshape_tensor_dshape_elements(dshape_all, tensor_all, detwei_all, k_all):
    """dshape_tensor_dshape

    CPU driver, element arrays out; loop 'dshape_tensor_dshape'.
    """
    nele = dshape_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        dshape_e = np.empty((4, 3))
        tensor_e = np.empty((3, 3))
        detwei_e = np.empty((11,))
        out_e = np.empty((4, 4))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(4):
                for i1 in range(3):
                    dshape_e[i0, i1] = dshape_all[e, i0, i1]
            for i0 in range(3):
                for i1 in range(3):
                    tensor_e[i0, i1] = tensor_all[e, i0, i1]
            for i0 in range(11):
                detwei_e[i0] = detwei_all[e, i0]
            dshape_tensor_dshape(dshape_e, tensor_e, detwei_e, out_e)
            for i0 in range(4):
                for i1 in range(4):
                    k_all[e, i0, i1] = out_e[i0, i1]


@njit(parallel=True, cache=True)
def shape_vector_dot_dshape_elements(n, dshape_all, u_gi_all, detwei_all, adv_all):
    """shape_vector_dot_dshape

    CPU driver, element arrays out; loop 'shape_vector_dot_dshape'.
    """
    nele = dshape_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n_e = np.empty((11, 4))
        for i0 in range(11):
            for i1 in range(4):
                n_e[i0, i1] = n[i0, i1]
        dshape_e = np.empty((4, 3))
        u_gi_e = np.empty((11, 3))
        detwei_e = np.empty((11,))
        out_e = np.empty((4, 4))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(4):
                for i1 in range(3):
                    dshape_e[i0, i1] = dshape_all[e, i0, i1]
            for i0 in range(11):
                for i1 in range(3):
                    u_gi_e[i0, i1] = u_gi_all[e, i0, i1]
            for i0 in range(11):
                detwei_e[i0] = detwei_all[e, i0]
            shape_vector_dot_dshape(n_e, dshape_e, u_gi_e, detwei_e, out_e)
            for i0 in range(4):
                for i1 in range(4):
                    adv_all[e, i0, i1] = out_e[i0, i1]


@njit(parallel=True, cache=True)
def shape_rhs_elements(n, f_gi_all, detwei_all, rhs_all):
    """shape_rhs

    CPU driver, element arrays out; loop 'shape_rhs'.
    """
    nele = f_gi_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n_e = np.empty((11, 4))
        for i0 in range(11):
            for i1 in range(4):
                n_e[i0, i1] = n[i0, i1]
        f_gi_e = np.empty((11,))
        detwei_e = np.empty((11,))
        out_e = np.empty((4,))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(11):
                f_gi_e[i0] = f_gi_all[e, i0]
            for i0 in range(11):
                detwei_e[i0] = detwei_all[e, i0]
            shape_rhs(n_e, f_gi_e, detwei_e, out_e)
            for i0 in range(4):
                rhs_all[e, i0] = out_e[i0]


@njit(parallel=True, cache=True)
def shape_vector_rhs_elements(n, u_gi_all, detwei_all, vrhs_all):
    """shape_vector_rhs

    CPU driver, element arrays out; loop 'shape_vector_rhs'.
    """
    nele = u_gi_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n_e = np.empty((11, 4))
        for i0 in range(11):
            for i1 in range(4):
                n_e[i0, i1] = n[i0, i1]
        v_gi_e = np.empty((11, 3))
        detwei_e = np.empty((11,))
        out_e = np.empty((4, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(11):
                for i1 in range(3):
                    v_gi_e[i0, i1] = u_gi_all[e, i0, i1]
            for i0 in range(11):
                detwei_e[i0] = detwei_all[e, i0]
            shape_vector_rhs(n_e, v_gi_e, detwei_e, out_e)
            for i0 in range(4):
                for i1 in range(3):
                    vrhs_all[e, i0, i1] = out_e[i0, i1]


@njit(parallel=True, cache=True)
def solve6_elements(a_all, b_all, x_all, status_all):
    """6x6 solve (a, b overwritten: copied in)

    CPU driver, element arrays out; loop 'solve6'.
    """
    nele = a_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        a_e = np.empty((6, 6))
        b_e = np.empty((6,))
        x_e = np.empty((6,))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(6):
                for i1 in range(6):
                    a_e[i0, i1] = a_all[e, i0, i1]
            for i0 in range(6):
                b_e[i0] = b_all[e, i0]
            status_all[e] = solve6(a_e, b_e, x_e)
            for i0 in range(6):
                x_all[e, i0] = x_e[i0]


@njit(parallel=True, cache=True)
def eig3_jacobi_elements(A_all, evals_all, evecs_all, ret_all):
    """3x3 symmetric eigensolver, Jacobi

    CPU driver, element arrays out; loop 'eig3_jacobi'.
    """
    nele = A_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        a_e = np.empty((3, 3))
        evals_e = np.empty((3,))
        evecs_e = np.empty((3, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(3):
                for i1 in range(3):
                    a_e[i0, i1] = A_all[e, i0, i1]
            ret_all[e] = eig3_jacobi(a_e, evals_e, evecs_e)
            for i0 in range(3):
                evals_all[e, i0] = evals_e[i0]
            for i0 in range(3):
                for i1 in range(3):
                    evecs_all[e, i0, i1] = evecs_e[i0, i1]


@njit(parallel=True, cache=True)
def eig3_closed_form_elements(A_all, evals_all, evecs_all, ret_all):
    """3x3 symmetric eigensolver, closed form

    CPU driver, element arrays out; loop 'eig3_closed_form'.
    """
    nele = A_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        a_e = np.empty((3, 3))
        evals_e = np.empty((3,))
        evecs_e = np.empty((3, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(3):
                for i1 in range(3):
                    a_e[i0, i1] = A_all[e, i0, i1]
            ret_all[e] = eig3_closed_form(a_e, evals_e, evecs_e)
            for i0 in range(3):
                evals_all[e, i0] = evals_e[i0]
            for i0 in range(3):
                for i1 in range(3):
                    evecs_all[e, i0, i1] = evecs_e[i0, i1]


@njit(parallel=True, cache=True)
def get_edge_lengths_elements(X_all, method, metric_all, evals_all, evecs_all, hbar_all,
                              status_all):
    """edge-length metric and length tensor

    CPU driver, element arrays out; loop 'get_edge_lengths'.
    """
    nele = X_all.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X_e = np.empty((4, 3))
        a6_e = np.empty((6, 6))
        b6_e = np.empty((6,))
        x6_e = np.empty((6,))
        metric_e = np.empty((3, 3))
        evals_e = np.empty((3,))
        evecs_e = np.empty((3, 3))
        hbar_e = np.empty((3, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i0 in range(4):
                for i1 in range(3):
                    X_e[i0, i1] = X_all[e, i0, i1]
            status_all[e] = get_edge_lengths(X_e, a6_e, b6_e, x6_e, metric_e, evals_e, evecs_e,
                                             hbar_e, method)
            for i0 in range(3):
                for i1 in range(3):
                    metric_all[e, i0, i1] = metric_e[i0, i1]
            for i0 in range(3):
                evals_all[e, i0] = evals_e[i0]
            for i0 in range(3):
                for i1 in range(3):
                    evecs_all[e, i0, i1] = evecs_e[i0, i1]
            for i0 in range(3):
                for i1 in range(3):
                    hbar_all[e, i0, i1] = hbar_e[i0, i1]


#: loop name -> CPU driver
DRIVERS = {
    "transform_to_physical": transform_to_physical_elements,
    "ele_val_at_quad": ele_val_at_quad_elements,
    "ele_vector_at_quad": ele_vector_at_quad_elements,
    "shape_shape": shape_shape_elements,
    "shape_dshape": shape_dshape_elements,
    "dshape_shape": dshape_shape_elements,
    "dshape_tensor_dshape": dshape_tensor_dshape_elements,
    "shape_vector_dot_dshape": shape_vector_dot_dshape_elements,
    "shape_rhs": shape_rhs_elements,
    "shape_vector_rhs": shape_vector_rhs_elements,
    "solve6": solve6_elements,
    "eig3_jacobi": eig3_jacobi_elements,
    "eig3_closed_form": eig3_closed_form_elements,
    "get_edge_lengths": get_edge_lengths_elements,
}
