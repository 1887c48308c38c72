"""GENERATED: do not edit (`python -m dycore.assembly.codegen` writes this file).

From the loop table dycore.assembly.loops.ASSEMBLY.

@cuda.jit kernel bodies (plain functions; compiled lazily by
dycore.backend.gpu_kernels.kernel_compiler): one thread per element, gathering into
cuda.local.array storage, calling the element function and scattering by the loop's
rules. The contract is dycore/assembly/loop_spec.py;
docs/architecture.md ("Element loops") explains the generated code.
"""
from numba import cuda, float64

from dycore.assembly.loop_spec import ATOMIC, ELEMENTS
from dycore.assembly.weak_forms import (
    divergence_element, lumped_mass_element, momentum_element, stabilisation_element,
    tracer_element,
)
from dycore.assembly.weak_forms import QUAD_N, QUAD_W

#: a CUDA device-function copy of dycore.assembly.csr_search.csr_find,
#: set by dycore.backend.gpu_kernels before the first compile
csr_find_device = None


def tracer_kernel(tets, coords, u_nl, c_old, src, sigma, c_ref, kxx, kyy, kzz, dt_theta, lookup,
                  indptr, indices, mode, want_mat, values, rhs, ele_mat, ele_rhs, detj):
    """tracer system (M + dt theta L) dc = -L c + int N (src + sigma c_ref)

    @cuda.jit body, one thread per element; loop 'tracer'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    X_e = cuda.local.array((4, 3), float64)
    n_e = cuda.local.array((11, 4), float64)
    weights_e = cuda.local.array((11,), float64)
    u_nl_e = cuda.local.array((4, 3), float64)
    c_old_e = cuda.local.array((4,), float64)
    src_e = cuda.local.array((4,), float64)
    sigma_e = cuda.local.array((4,), float64)
    c_ref_e = cuda.local.array((4,), float64)
    tensor_e = cuda.local.array((3, 3), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    gi_a_e = cuda.local.array((11,), float64)
    gi_b_e = cuda.local.array((11,), float64)
    vec_gi_e = cuda.local.array((11, 3), float64)
    m44_e = cuda.local.array((4, 4), float64)
    l44_e = cuda.local.array((4, 4), float64)
    mat_e = cuda.local.array((4, 4), float64)
    rhs_e = cuda.local.array((4,), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = QUAD_N[i0, i1]
    for i0 in range(11):
        weights_e[i0] = QUAD_W[i0]
    for i0 in range(3):
        for i1 in range(3):
            tensor_e[i0, i1] = 0.0
    tensor_e[0, 0] = kxx
    tensor_e[1, 1] = kyy
    tensor_e[2, 2] = kzz
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
                             tensor_e, dt_theta, dshape_e, detwei_e, gi_a_e, gi_b_e, vec_gi_e,
                             m44_e, l44_e, mat_e, rhs_e)
    if mode == ELEMENTS:
        for i0 in range(4):
            for i1 in range(4):
                ele_mat[e * 16 + i0 * 4 + i1] = mat_e[i0, i1]
        for i0 in range(4):
            ele_rhs[e * 4 + i0] = rhs_e[i0]
    else:
        for i in range(4):
            nd = tets[e, i]
            cuda.atomic.add(rhs, nd, rhs_e[i])
            if want_mat:
                for j in range(4):
                    if mode == ATOMIC:
                        k = lookup[e, i, j]
                    else:
                        k = csr_find_device(indptr, indices, nd, tets[e, j])
                    cuda.atomic.add(values, k, mat_e[i, j])


def momentum_kernel(tets, coords, u_nl, u_old, buoy, p, sigma, u_ref0, u_ref1, u_ref2, nuxx, nuyy,
                    nuzz, f_cor, dt_theta, lookup, mode, values, rhs, ele_mat, ele_rhs, detj):
    """momentum system in 3x3 blocks (BCSR) and its rhs

    @cuda.jit body, one thread per element; loop 'momentum'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    X_e = cuda.local.array((4, 3), float64)
    n_e = cuda.local.array((11, 4), float64)
    weights_e = cuda.local.array((11,), float64)
    u_nl_e = cuda.local.array((4, 3), float64)
    u_old_e = cuda.local.array((4, 3), float64)
    buoy_e = cuda.local.array((4,), float64)
    p_e = cuda.local.array((4,), float64)
    sigma_e = cuda.local.array((4,), float64)
    tensor_e = cuda.local.array((3, 3), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    gi_a_e = cuda.local.array((11,), float64)
    gi_b_e = cuda.local.array((11,), float64)
    vec_gi_e = cuda.local.array((11, 3), float64)
    m44_e = cuda.local.array((4, 4), float64)
    l44_e = cuda.local.array((4, 4), float64)
    d344_e = cuda.local.array((3, 4, 4), float64)
    mat_e = cuda.local.array((4, 4, 3, 3), float64)
    rhs_e = cuda.local.array((4, 3), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = QUAD_N[i0, i1]
    for i0 in range(11):
        weights_e[i0] = QUAD_W[i0]
    for i0 in range(3):
        for i1 in range(3):
            tensor_e[i0, i1] = 0.0
    tensor_e[0, 0] = nuxx
    tensor_e[1, 1] = nuyy
    tensor_e[2, 2] = nuzz
    for i in range(4):
        nd = tets[e, i]
        for i1 in range(3):
            X_e[i, i1] = coords[nd, i1]
            u_nl_e[i, i1] = u_nl[nd, i1]
            u_old_e[i, i1] = u_old[nd, i1]
        buoy_e[i] = buoy[nd]
        p_e[i] = p[nd]
        sigma_e[i] = sigma[nd]
    detj[e] = momentum_element(X_e, n_e, weights_e, u_nl_e, u_old_e, buoy_e, p_e, sigma_e, u_ref0,
                               u_ref1, u_ref2, tensor_e, f_cor, dt_theta, dshape_e, detwei_e,
                               gi_a_e, gi_b_e, vec_gi_e, m44_e, l44_e, d344_e, mat_e, rhs_e)
    if mode == ELEMENTS:
        for i0 in range(4):
            for i1 in range(4):
                for i2 in range(3):
                    for i3 in range(3):
                        ele_mat[e * 144 + i0 * 36 + i1 * 9 + i2 * 3 + i3] = mat_e[i0, i1, i2, i3]
        for i0 in range(4):
            for i1 in range(3):
                ele_rhs[e * 12 + i0 * 3 + i1] = rhs_e[i0, i1]
    else:
        for i in range(4):
            nd = tets[e, i]
            for i2 in range(3):
                cuda.atomic.add(rhs, nd * 3 + i2, rhs_e[i, i2])
            for j in range(4):
                k = lookup[e, i, j]
                for i2 in range(3):
                    for i3 in range(3):
                        cuda.atomic.add(values, k * 9 + i2 * 3 + i3, mat_e[i, j, i2, i3])


def divergence_kernel(tets, coords, ele_mat, detj):
    """volume part of the divergence matrix C (rows: pressure)

    @cuda.jit body, one thread per element; loop 'divergence'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    X_e = cuda.local.array((4, 3), float64)
    n_e = cuda.local.array((11, 4), float64)
    weights_e = cuda.local.array((11,), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    d344_e = cuda.local.array((3, 4, 4), float64)
    mat_e = cuda.local.array((4, 4, 3), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = QUAD_N[i0, i1]
    for i0 in range(11):
        weights_e[i0] = QUAD_W[i0]
    for i in range(4):
        nd = tets[e, i]
        for i1 in range(3):
            X_e[i, i1] = coords[nd, i1]
    detj[e] = divergence_element(X_e, n_e, weights_e, dshape_e, detwei_e, d344_e, mat_e)
    for i0 in range(4):
        for i1 in range(4):
            for i2 in range(3):
                ele_mat[e * 48 + i0 * 12 + i1 * 3 + i2] = mat_e[i0, i1, i2]


def stabilisation_kernel(tets, coords, ele_mat, status):
    """pressure stabilisation 1/2 int grad psi^T hbar grad psi

    @cuda.jit body, one thread per element; loop 'stabilisation'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    X_e = cuda.local.array((4, 3), float64)
    weights_e = cuda.local.array((11,), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    a6_e = cuda.local.array((6, 6), float64)
    b6_e = cuda.local.array((6,), float64)
    x6_e = cuda.local.array((6,), float64)
    metric_e = cuda.local.array((3, 3), float64)
    evals_e = cuda.local.array((3,), float64)
    evecs_e = cuda.local.array((3, 3), float64)
    hbar_e = cuda.local.array((3, 3), float64)
    mat_e = cuda.local.array((4, 4), float64)
    for i0 in range(11):
        weights_e[i0] = QUAD_W[i0]
    for i in range(4):
        nd = tets[e, i]
        for i1 in range(3):
            X_e[i, i1] = coords[nd, i1]
    status[e] = stabilisation_element(X_e, weights_e, dshape_e, detwei_e, a6_e, b6_e, x6_e,
                                      metric_e, evals_e, evecs_e, hbar_e, mat_e)
    for i0 in range(4):
        for i1 in range(4):
            ele_mat[e * 16 + i0 * 4 + i1] = mat_e[i0, i1]


def lumped_mass_kernel(tets, coords, ele_vec, detj):
    """lumped mass int N_i

    @cuda.jit body, one thread per element; loop 'lumped_mass'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    X_e = cuda.local.array((4, 3), float64)
    n_e = cuda.local.array((11, 4), float64)
    weights_e = cuda.local.array((11,), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    vec_e = cuda.local.array((4,), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = QUAD_N[i0, i1]
    for i0 in range(11):
        weights_e[i0] = QUAD_W[i0]
    for i in range(4):
        nd = tets[e, i]
        for i1 in range(3):
            X_e[i, i1] = coords[nd, i1]
    detj[e] = lumped_mass_element(X_e, n_e, weights_e, dshape_e, detwei_e, vec_e)
    for i0 in range(4):
        ele_vec[e * 4 + i0] = vec_e[i0]


#: loop name -> kernel body
KERNELS = {
    "tracer": tracer_kernel,
    "momentum": momentum_kernel,
    "divergence": divergence_kernel,
    "stabilisation": stabilisation_kernel,
    "lumped_mass": lumped_mass_kernel,
}
