"""GENERATED: do not edit (`python -m dycore.assembly.codegen` writes this file).

From the loop table dycore.bench.loops.BENCH.

CPU drivers: @njit(parallel=True) prange loops over chunks of CHUNK elements, each
gathering, calling the element function and writing element arrays (the deterministic
gather by nonzero is dycore.assembly.gather). The contract is dycore/assembly/loop_spec.py;
docs/architecture.md ("Element loops") explains the generated code.
"""
import numpy as np
from numba import njit, prange

from dycore.fem import (
    dshape_tensor_dshape, get_edge_lengths, shape_dshape, shape_shape, transform_to_physical,
)
from dycore.fem import EIG_JACOBI

CHUNK = 256  #: elements per prange iteration


@njit(parallel=True, cache=True)
def ele_val_scalar_elements(tets, scalar, ev_scalar):
    """ev_scalar[e, i] = scalar[tets[e, i]]

    CPU driver, element arrays out; loop 'ele_val_scalar'.
    """
    nele = tets.shape[0]
    for e in prange(nele):
        for i in range(4):
            ev_scalar[e, i] = scalar[tets[e, i]]


@njit(parallel=True, cache=True)
def ele_val_vector_elements(tets, vector, ev_vector):
    """ev_vector[e, i] = vector[tets[e, i]]

    CPU driver, element arrays out; loop 'ele_val_vector'.
    """
    nele = tets.shape[0]
    for e in prange(nele):
        for i in range(4):
            nd = tets[e, i]
            for i1 in range(3):
                ev_vector[e, i, i1] = vector[nd, i1]


@njit(parallel=True, cache=True)
def ele_val_tensor_elements(tets, tensor_nodal, ev_tensor):
    """ev_tensor[e, i] = tensor_nodal[tets[e, i]]

    CPU driver, element arrays out; loop 'ele_val_tensor'.
    """
    nele = tets.shape[0]
    for e in prange(nele):
        for i in range(4):
            nd = tets[e, i]
            for i1 in range(3):
                for i2 in range(3):
                    ev_tensor[e, i, i1, i2] = tensor_nodal[nd, i1, i2]


@njit(parallel=True, cache=True)
def transform_to_physical_elements(tets, coords, weights, dshape, detwei):
    """dshape and detwei of every element

    CPU driver, element arrays out; loop 'transform_to_physical'.
    """
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X_e = np.empty((4, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                nd = tets[e, i]
                for i1 in range(3):
                    X_e[i, i1] = coords[nd, i1]
            transform_to_physical(X_e, weights, dshape[e], detwei[e])


@njit(parallel=True, cache=True)
def dshape_tensor_dshape_elements(dshape, tensor_ele, detwei, out44):
    """int grad N_i . T_e grad N_j

    CPU driver, element arrays out; loop 'dshape_tensor_dshape'.
    """
    nele = dshape.shape[0]
    for e in prange(nele):
        dshape_tensor_dshape(dshape[e], tensor_ele[e], detwei[e], out44[e])


@njit(parallel=True, cache=True)
def shape_shape_elements(n, detwei, out44):
    """int N_i N_j

    CPU driver, element arrays out; loop 'shape_shape'.
    """
    nele = detwei.shape[0]
    for e in prange(nele):
        shape_shape(n, detwei[e], out44[e])


@njit(parallel=True, cache=True)
def shape_dshape_elements(n, dshape, detwei, out344):
    """int N_i dN_j/dx_d

    CPU driver, element arrays out; loop 'shape_dshape'.
    """
    nele = dshape.shape[0]
    for e in prange(nele):
        shape_dshape(n, dshape[e], detwei[e], out344[e])


@njit(parallel=True, cache=True)
def get_edge_lengths_elements(tets, coords, hbar):
    """element length tensor hbar (Jacobi)

    CPU driver, element arrays out; loop 'get_edge_lengths'.
    """
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X_e = np.empty((4, 3))
        a6_e = np.empty((6, 6))
        b6_e = np.empty((6,))
        x6_e = np.empty((6,))
        metric_e = np.empty((3, 3))
        evals_e = np.empty((3,))
        evecs_e = np.empty((3, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                nd = tets[e, i]
                for i1 in range(3):
                    X_e[i, i1] = coords[nd, i1]
            get_edge_lengths(X_e, a6_e, b6_e, x6_e, metric_e, evals_e, evecs_e, hbar[e],
                             EIG_JACOBI)


#: loop name -> CPU driver
DRIVERS = {
    "ele_val_scalar": ele_val_scalar_elements,
    "ele_val_vector": ele_val_vector_elements,
    "ele_val_tensor": ele_val_tensor_elements,
    "transform_to_physical": transform_to_physical_elements,
    "dshape_tensor_dshape": dshape_tensor_dshape_elements,
    "shape_shape": shape_shape_elements,
    "shape_dshape": shape_dshape_elements,
    "get_edge_lengths": get_edge_lengths_elements,
}
