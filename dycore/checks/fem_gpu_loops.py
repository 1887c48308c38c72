"""GENERATED: do not edit (`python -m dycore.assembly.codegen` writes this file).

From the loop table dycore.checks.loops.FEM_CHECKS.

@cuda.jit kernel bodies (plain functions; compiled lazily by
dycore.backend.gpu_kernels.kernel_compiler): one thread per element, gathering into
cuda.local.array storage, calling the element function and scattering by the loop's
rules. The contract is dycore/assembly/loop_spec.py;
docs/architecture.md ("Element loops") explains the generated code.
"""
from numba import cuda, float64

from dycore.fem import (
    dshape_shape, dshape_tensor_dshape, eig3_closed_form, eig3_jacobi, ele_val_at_quad,
    ele_vector_at_quad, get_edge_lengths, shape_dshape, shape_rhs, shape_shape,
    shape_vector_dot_dshape, shape_vector_rhs, solve6, transform_to_physical,
)


def transform_to_physical_kernel(X_all, weights, dshape_all, detwei_all, detj_all):
    """dshape, detwei and det J per element

    @cuda.jit body, one thread per element; loop 'transform_to_physical'.
    """
    e = cuda.grid(1)
    if e >= X_all.shape[0]:
        return
    X_e = cuda.local.array((4, 3), float64)
    weights_e = cuda.local.array((11,), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    for i0 in range(11):
        weights_e[i0] = weights[i0]
    for i0 in range(4):
        for i1 in range(3):
            X_e[i0, i1] = X_all[e, i0, i1]
    detj_all[e] = transform_to_physical(X_e, weights_e, dshape_e, detwei_e)
    for i0 in range(4):
        for i1 in range(3):
            dshape_all[e, i0, i1] = dshape_e[i0, i1]
    for i0 in range(11):
        detwei_all[e, i0] = detwei_e[i0]


def ele_val_at_quad_kernel(n, f_all, f_gi_all):
    """ele_val_at_quad

    @cuda.jit body, one thread per element; loop 'ele_val_at_quad'.
    """
    e = cuda.grid(1)
    if e >= f_all.shape[0]:
        return
    n_e = cuda.local.array((11, 4), float64)
    ele_val_e = cuda.local.array((4,), float64)
    out_e = cuda.local.array((11,), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = n[i0, i1]
    for i0 in range(4):
        ele_val_e[i0] = f_all[e, i0]
    ele_val_at_quad(n_e, ele_val_e, out_e)
    for i0 in range(11):
        f_gi_all[e, i0] = out_e[i0]


def ele_vector_at_quad_kernel(n, u_all, u_gi_all):
    """ele_vector_at_quad

    @cuda.jit body, one thread per element; loop 'ele_vector_at_quad'.
    """
    e = cuda.grid(1)
    if e >= u_all.shape[0]:
        return
    n_e = cuda.local.array((11, 4), float64)
    ele_val_e = cuda.local.array((4, 3), float64)
    out_e = cuda.local.array((11, 3), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = n[i0, i1]
    for i0 in range(4):
        for i1 in range(3):
            ele_val_e[i0, i1] = u_all[e, i0, i1]
    ele_vector_at_quad(n_e, ele_val_e, out_e)
    for i0 in range(11):
        for i1 in range(3):
            u_gi_all[e, i0, i1] = out_e[i0, i1]


def shape_shape_kernel(n, detwei_all, mass_all):
    """shape_shape

    @cuda.jit body, one thread per element; loop 'shape_shape'.
    """
    e = cuda.grid(1)
    if e >= detwei_all.shape[0]:
        return
    n_e = cuda.local.array((11, 4), float64)
    detwei_e = cuda.local.array((11,), float64)
    out_e = cuda.local.array((4, 4), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = n[i0, i1]
    for i0 in range(11):
        detwei_e[i0] = detwei_all[e, i0]
    shape_shape(n_e, detwei_e, out_e)
    for i0 in range(4):
        for i1 in range(4):
            mass_all[e, i0, i1] = out_e[i0, i1]


def shape_dshape_kernel(n, dshape_all, detwei_all, sd_all):
    """shape_dshape

    @cuda.jit body, one thread per element; loop 'shape_dshape'.
    """
    e = cuda.grid(1)
    if e >= dshape_all.shape[0]:
        return
    n_e = cuda.local.array((11, 4), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    out_e = cuda.local.array((3, 4, 4), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = n[i0, i1]
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


def dshape_shape_kernel(n, dshape_all, detwei_all, ds_all):
    """dshape_shape

    @cuda.jit body, one thread per element; loop 'dshape_shape'.
    """
    e = cuda.grid(1)
    if e >= dshape_all.shape[0]:
        return
    n_e = cuda.local.array((11, 4), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    out_e = cuda.local.array((3, 4, 4), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = n[i0, i1]
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


def dshape_tensor_dshape_kernel(dshape_all, tensor_all, detwei_all, k_all):
    """dshape_tensor_dshape

    @cuda.jit body, one thread per element; loop 'dshape_tensor_dshape'.
    """
    e = cuda.grid(1)
    if e >= dshape_all.shape[0]:
        return
    dshape_e = cuda.local.array((4, 3), float64)
    tensor_e = cuda.local.array((3, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    out_e = cuda.local.array((4, 4), float64)
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


def shape_vector_dot_dshape_kernel(n, dshape_all, u_gi_all, detwei_all, adv_all):
    """shape_vector_dot_dshape

    @cuda.jit body, one thread per element; loop 'shape_vector_dot_dshape'.
    """
    e = cuda.grid(1)
    if e >= dshape_all.shape[0]:
        return
    n_e = cuda.local.array((11, 4), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    u_gi_e = cuda.local.array((11, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    out_e = cuda.local.array((4, 4), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = n[i0, i1]
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


def shape_rhs_kernel(n, f_gi_all, detwei_all, rhs_all):
    """shape_rhs

    @cuda.jit body, one thread per element; loop 'shape_rhs'.
    """
    e = cuda.grid(1)
    if e >= f_gi_all.shape[0]:
        return
    n_e = cuda.local.array((11, 4), float64)
    f_gi_e = cuda.local.array((11,), float64)
    detwei_e = cuda.local.array((11,), float64)
    out_e = cuda.local.array((4,), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = n[i0, i1]
    for i0 in range(11):
        f_gi_e[i0] = f_gi_all[e, i0]
    for i0 in range(11):
        detwei_e[i0] = detwei_all[e, i0]
    shape_rhs(n_e, f_gi_e, detwei_e, out_e)
    for i0 in range(4):
        rhs_all[e, i0] = out_e[i0]


def shape_vector_rhs_kernel(n, u_gi_all, detwei_all, vrhs_all):
    """shape_vector_rhs

    @cuda.jit body, one thread per element; loop 'shape_vector_rhs'.
    """
    e = cuda.grid(1)
    if e >= u_gi_all.shape[0]:
        return
    n_e = cuda.local.array((11, 4), float64)
    v_gi_e = cuda.local.array((11, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    out_e = cuda.local.array((4, 3), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = n[i0, i1]
    for i0 in range(11):
        for i1 in range(3):
            v_gi_e[i0, i1] = u_gi_all[e, i0, i1]
    for i0 in range(11):
        detwei_e[i0] = detwei_all[e, i0]
    shape_vector_rhs(n_e, v_gi_e, detwei_e, out_e)
    for i0 in range(4):
        for i1 in range(3):
            vrhs_all[e, i0, i1] = out_e[i0, i1]


def solve6_kernel(a_all, b_all, x_all, status_all):
    """6x6 solve (a, b overwritten: copied in)

    @cuda.jit body, one thread per element; loop 'solve6'.
    """
    e = cuda.grid(1)
    if e >= a_all.shape[0]:
        return
    a_e = cuda.local.array((6, 6), float64)
    b_e = cuda.local.array((6,), float64)
    x_e = cuda.local.array((6,), float64)
    for i0 in range(6):
        for i1 in range(6):
            a_e[i0, i1] = a_all[e, i0, i1]
    for i0 in range(6):
        b_e[i0] = b_all[e, i0]
    status_all[e] = solve6(a_e, b_e, x_e)
    for i0 in range(6):
        x_all[e, i0] = x_e[i0]


def eig3_jacobi_kernel(A_all, evals_all, evecs_all, ret_all):
    """3x3 symmetric eigensolver, Jacobi

    @cuda.jit body, one thread per element; loop 'eig3_jacobi'.
    """
    e = cuda.grid(1)
    if e >= A_all.shape[0]:
        return
    a_e = cuda.local.array((3, 3), float64)
    evals_e = cuda.local.array((3,), float64)
    evecs_e = cuda.local.array((3, 3), float64)
    for i0 in range(3):
        for i1 in range(3):
            a_e[i0, i1] = A_all[e, i0, i1]
    ret_all[e] = eig3_jacobi(a_e, evals_e, evecs_e)
    for i0 in range(3):
        evals_all[e, i0] = evals_e[i0]
    for i0 in range(3):
        for i1 in range(3):
            evecs_all[e, i0, i1] = evecs_e[i0, i1]


def eig3_closed_form_kernel(A_all, evals_all, evecs_all, ret_all):
    """3x3 symmetric eigensolver, closed form

    @cuda.jit body, one thread per element; loop 'eig3_closed_form'.
    """
    e = cuda.grid(1)
    if e >= A_all.shape[0]:
        return
    a_e = cuda.local.array((3, 3), float64)
    evals_e = cuda.local.array((3,), float64)
    evecs_e = cuda.local.array((3, 3), float64)
    for i0 in range(3):
        for i1 in range(3):
            a_e[i0, i1] = A_all[e, i0, i1]
    ret_all[e] = eig3_closed_form(a_e, evals_e, evecs_e)
    for i0 in range(3):
        evals_all[e, i0] = evals_e[i0]
    for i0 in range(3):
        for i1 in range(3):
            evecs_all[e, i0, i1] = evecs_e[i0, i1]


def get_edge_lengths_kernel(X_all, method, metric_all, evals_all, evecs_all, hbar_all, status_all):
    """edge-length metric and length tensor

    @cuda.jit body, one thread per element; loop 'get_edge_lengths'.
    """
    e = cuda.grid(1)
    if e >= X_all.shape[0]:
        return
    X_e = cuda.local.array((4, 3), float64)
    a6_e = cuda.local.array((6, 6), float64)
    b6_e = cuda.local.array((6,), float64)
    x6_e = cuda.local.array((6,), float64)
    metric_e = cuda.local.array((3, 3), float64)
    evals_e = cuda.local.array((3,), float64)
    evecs_e = cuda.local.array((3, 3), float64)
    hbar_e = cuda.local.array((3, 3), float64)
    for i0 in range(4):
        for i1 in range(3):
            X_e[i0, i1] = X_all[e, i0, i1]
    status_all[e] = get_edge_lengths(X_e, a6_e, b6_e, x6_e, metric_e, evals_e, evecs_e, hbar_e,
                                     method)
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


#: loop name -> kernel body
KERNELS = {
    "transform_to_physical": transform_to_physical_kernel,
    "ele_val_at_quad": ele_val_at_quad_kernel,
    "ele_vector_at_quad": ele_vector_at_quad_kernel,
    "shape_shape": shape_shape_kernel,
    "shape_dshape": shape_dshape_kernel,
    "dshape_shape": dshape_shape_kernel,
    "dshape_tensor_dshape": dshape_tensor_dshape_kernel,
    "shape_vector_dot_dshape": shape_vector_dot_dshape_kernel,
    "shape_rhs": shape_rhs_kernel,
    "shape_vector_rhs": shape_vector_rhs_kernel,
    "solve6": solve6_kernel,
    "eig3_jacobi": eig3_jacobi_kernel,
    "eig3_closed_form": eig3_closed_form_kernel,
    "get_edge_lengths": get_edge_lengths_kernel,
}
