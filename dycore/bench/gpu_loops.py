"""GENERATED: do not edit (`python -m dycore.assembly.codegen` writes this file).

From the loop table dycore.bench.loops.BENCH.

@cuda.jit kernel bodies (plain functions; compiled lazily by
dycore.backend.gpu_kernels.kernel_compiler): one thread per element, gathering into
cuda.local.array storage, calling the element function and scattering by the loop's
rules. The contract is dycore/assembly/loop_spec.py;
docs/architecture.md ("Element loops") explains the generated code.
"""
from numba import cuda, float64

from dycore.fem import (
    dshape_tensor_dshape, get_edge_lengths, shape_dshape, shape_shape, transform_to_physical,
)
from dycore.fem import EIG_JACOBI


def ele_val_scalar_kernel(tets, scalar, ev_scalar):
    """ev_scalar[e, i] = scalar[tets[e, i]]

    @cuda.jit body, one thread per element; loop 'ele_val_scalar'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    for i in range(4):
        ev_scalar[e, i] = scalar[tets[e, i]]


def ele_val_vector_kernel(tets, vector, ev_vector):
    """ev_vector[e, i] = vector[tets[e, i]]

    @cuda.jit body, one thread per element; loop 'ele_val_vector'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    for i in range(4):
        nd = tets[e, i]
        for i1 in range(3):
            ev_vector[e, i, i1] = vector[nd, i1]


def ele_val_tensor_kernel(tets, tensor_nodal, ev_tensor):
    """ev_tensor[e, i] = tensor_nodal[tets[e, i]]

    @cuda.jit body, one thread per element; loop 'ele_val_tensor'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    for i in range(4):
        nd = tets[e, i]
        for i1 in range(3):
            for i2 in range(3):
                ev_tensor[e, i, i1, i2] = tensor_nodal[nd, i1, i2]


def transform_to_physical_kernel(tets, coords, weights, dshape, detwei):
    """dshape and detwei of every element

    @cuda.jit body, one thread per element; loop 'transform_to_physical'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    X_e = cuda.local.array((4, 3), float64)
    weights_e = cuda.local.array((11,), float64)
    dshape_e = cuda.local.array((4, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    for i0 in range(11):
        weights_e[i0] = weights[i0]
    for i in range(4):
        nd = tets[e, i]
        for i1 in range(3):
            X_e[i, i1] = coords[nd, i1]
    transform_to_physical(X_e, weights_e, dshape_e, detwei_e)
    for i0 in range(4):
        for i1 in range(3):
            dshape[e, i0, i1] = dshape_e[i0, i1]
    for i0 in range(11):
        detwei[e, i0] = detwei_e[i0]


def dshape_tensor_dshape_kernel(dshape, tensor_ele, detwei, out44):
    """int grad N_i . T_e grad N_j

    @cuda.jit body, one thread per element; loop 'dshape_tensor_dshape'.
    """
    e = cuda.grid(1)
    if e >= dshape.shape[0]:
        return
    dshape_e = cuda.local.array((4, 3), float64)
    tensor_e = cuda.local.array((3, 3), float64)
    detwei_e = cuda.local.array((11,), float64)
    out_e = cuda.local.array((4, 4), float64)
    for i0 in range(4):
        for i1 in range(3):
            dshape_e[i0, i1] = dshape[e, i0, i1]
    for i0 in range(3):
        for i1 in range(3):
            tensor_e[i0, i1] = tensor_ele[e, i0, i1]
    for i0 in range(11):
        detwei_e[i0] = detwei[e, i0]
    dshape_tensor_dshape(dshape_e, tensor_e, detwei_e, out_e)
    for i0 in range(4):
        for i1 in range(4):
            out44[e, i0, i1] = out_e[i0, i1]


def shape_shape_kernel(n, detwei, out44):
    """int N_i N_j

    @cuda.jit body, one thread per element; loop 'shape_shape'.
    """
    e = cuda.grid(1)
    if e >= detwei.shape[0]:
        return
    n_e = cuda.local.array((11, 4), float64)
    detwei_e = cuda.local.array((11,), float64)
    out_e = cuda.local.array((4, 4), float64)
    for i0 in range(11):
        for i1 in range(4):
            n_e[i0, i1] = n[i0, i1]
    for i0 in range(11):
        detwei_e[i0] = detwei[e, i0]
    shape_shape(n_e, detwei_e, out_e)
    for i0 in range(4):
        for i1 in range(4):
            out44[e, i0, i1] = out_e[i0, i1]


def shape_dshape_kernel(n, dshape, detwei, out344):
    """int N_i dN_j/dx_d

    @cuda.jit body, one thread per element; loop 'shape_dshape'.
    """
    e = cuda.grid(1)
    if e >= dshape.shape[0]:
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
            dshape_e[i0, i1] = dshape[e, i0, i1]
    for i0 in range(11):
        detwei_e[i0] = detwei[e, i0]
    shape_dshape(n_e, dshape_e, detwei_e, out_e)
    for i0 in range(3):
        for i1 in range(4):
            for i2 in range(4):
                out344[e, i0, i1, i2] = out_e[i0, i1, i2]


def get_edge_lengths_kernel(tets, coords, hbar):
    """element length tensor hbar (Jacobi)

    @cuda.jit body, one thread per element; loop 'get_edge_lengths'.
    """
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    X_e = cuda.local.array((4, 3), float64)
    a6_e = cuda.local.array((6, 6), float64)
    b6_e = cuda.local.array((6,), float64)
    x6_e = cuda.local.array((6,), float64)
    metric_e = cuda.local.array((3, 3), float64)
    evals_e = cuda.local.array((3,), float64)
    evecs_e = cuda.local.array((3, 3), float64)
    hbar_e = cuda.local.array((3, 3), float64)
    for i in range(4):
        nd = tets[e, i]
        for i1 in range(3):
            X_e[i, i1] = coords[nd, i1]
    get_edge_lengths(X_e, a6_e, b6_e, x6_e, metric_e, evals_e, evecs_e, hbar_e, EIG_JACOBI)
    for i0 in range(3):
        for i1 in range(3):
            hbar[e, i0, i1] = hbar_e[i0, i1]


#: loop name -> kernel body
KERNELS = {
    "ele_val_scalar": ele_val_scalar_kernel,
    "ele_val_vector": ele_val_vector_kernel,
    "ele_val_tensor": ele_val_tensor_kernel,
    "transform_to_physical": transform_to_physical_kernel,
    "dshape_tensor_dshape": dshape_tensor_dshape_kernel,
    "shape_shape": shape_shape_kernel,
    "shape_dshape": shape_dshape_kernel,
    "get_edge_lengths": get_edge_lengths_kernel,
}
