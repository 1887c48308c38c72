"""Standalone element-kernel benchmarks (the paper's Tables 3–5), one thread per element.

Each benchmark kernel is a thin launcher around ONE :mod:`dycore.fem` element function (or, for
``ele_val_*``, the gather itself, which is what Fluidity's ``ele_val`` is): a CPU
``@njit(parallel=True)`` ``prange`` loop and a ``@cuda.jit`` kernel with the SAME argument list,
so the harness calls ``cpu(*args)`` or ``gpu[grid](*args)`` interchangeably. The CPU launchers
pass per-element rows (``dshape[e]``) to the element functions; the GPU kernels copy them into
``cuda.local.array`` storage and back (the production kernels' pattern, which the simulator also
needs). Neither launcher holds arithmetic of its own.

The minimum traffic of every kernel (:attr:`BenchKernel.min_bytes`) counts each input array read
once and each output array written once (int32 connectivity = 4 bytes, float64 = 8 bytes); the
formulas are written out per kernel below and equal the sum of ``nbytes`` of the arguments.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import cuda, float64, njit, prange

from dycore.assembly.weak_forms import NGI, QUAD_N, QUAD_W
from dycore.fem import (
    EIG_JACOBI, dshape_tensor_dshape, get_edge_lengths, shape_dshape, shape_shape,
    transform_to_physical,
)

__all__ = ["BenchKernel", "KERNELS", "kernel_names", "make_inputs", "kernel_args",
           "gpu_kernel", "CHUNK"]

CHUNK = 256  #: elements per prange iteration in launchers that allocate scratch


# ------------------------------------------------------------------------- CPU launchers
@njit(parallel=True, cache=True)
def cpu_ele_val_scalar(tets, field, out):
    """out[e, i] = field[tets[e, i]]: (nele,4) from a nodal scalar (n,)."""
    for e in prange(tets.shape[0]):
        for i in range(4):
            out[e, i] = field[tets[e, i]]


@njit(parallel=True, cache=True)
def cpu_ele_val_vector(tets, field, out):
    """out[e, i, :] = field[tets[e, i], :]: (nele,4,3) from a nodal vector (n,3)."""
    for e in prange(tets.shape[0]):
        for i in range(4):
            nd = tets[e, i]
            for a in range(3):
                out[e, i, a] = field[nd, a]


@njit(parallel=True, cache=True)
def cpu_ele_val_tensor(tets, field, out):
    """out[e, i, :, :] = field[tets[e, i], :, :]: (nele,4,3,3) from a nodal tensor (n,3,3)."""
    for e in prange(tets.shape[0]):
        for i in range(4):
            nd = tets[e, i]
            for a in range(3):
                for b in range(3):
                    out[e, i, a, b] = field[nd, a, b]


@njit(parallel=True, cache=True)
def cpu_transform_to_physical(tets, coords, weights, dshape, detwei):
    """dshape (nele,4,3) and detwei (nele,NGI) of every element (:func:`transform_to_physical`)."""
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X = np.empty((4, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                for d in range(3):
                    X[i, d] = coords[tets[e, i], d]
            transform_to_physical(X, weights, dshape[e], detwei[e])


@njit(parallel=True, cache=True)
def cpu_dshape_tensor_dshape(dshape, tensor, detwei, out):
    """out (nele,4,4) = int grad N_i . T_e grad N_j from precomputed dshape/detwei."""
    for e in prange(dshape.shape[0]):
        dshape_tensor_dshape(dshape[e], tensor[e], detwei[e], out[e])


@njit(parallel=True, cache=True)
def cpu_shape_shape(n, detwei, out):
    """out (nele,4,4) = int N_i N_j from precomputed detwei."""
    for e in prange(detwei.shape[0]):
        shape_shape(n, detwei[e], out[e])


@njit(parallel=True, cache=True)
def cpu_shape_dshape(n, dshape, detwei, out):
    """out (nele,3,4,4) = int N_i dN_j/dx_d from precomputed dshape/detwei."""
    for e in prange(detwei.shape[0]):
        shape_dshape(n, dshape[e], detwei[e], out[e])


@njit(parallel=True, cache=True)
def cpu_get_edge_lengths(tets, coords, hbar):
    """hbar (nele,3,3): the element length tensor (:func:`get_edge_lengths`, Jacobi)."""
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        X = np.empty((4, 3)); a6 = np.empty((6, 6)); b6 = np.empty(6); x6 = np.empty(6)
        metric = np.empty((3, 3)); evals = np.empty(3); evecs = np.empty((3, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                for d in range(3):
                    X[i, d] = coords[tets[e, i], d]
            get_edge_lengths(X, a6, b6, x6, metric, evals, evecs, hbar[e], EIG_JACOBI)


# ------------------------------------------------------------------- GPU kernels (Python)
def _gpu_ele_val_scalar(tets, field, out):
    e = cuda.grid(1)
    if e < tets.shape[0]:
        for i in range(4):
            out[e, i] = field[tets[e, i]]


def _gpu_ele_val_vector(tets, field, out):
    e = cuda.grid(1)
    if e < tets.shape[0]:
        for i in range(4):
            nd = tets[e, i]
            for a in range(3):
                out[e, i, a] = field[nd, a]


def _gpu_ele_val_tensor(tets, field, out):
    e = cuda.grid(1)
    if e < tets.shape[0]:
        for i in range(4):
            nd = tets[e, i]
            for a in range(3):
                for b in range(3):
                    out[e, i, a, b] = field[nd, a, b]


def _gpu_transform_to_physical(tets, coords, weights, dshape, detwei):
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    X = cuda.local.array((4, 3), float64)
    w = cuda.local.array(NGI, float64)
    ds = cuda.local.array((4, 3), float64)
    dw = cuda.local.array(NGI, float64)
    for g in range(NGI):
        w[g] = weights[g]
    for i in range(4):
        for d in range(3):
            X[i, d] = coords[tets[e, i], d]
    transform_to_physical(X, w, ds, dw)
    for i in range(4):
        for d in range(3):
            dshape[e, i, d] = ds[i, d]
    for g in range(NGI):
        detwei[e, g] = dw[g]


def _gpu_dshape_tensor_dshape(dshape, tensor, detwei, out):
    e = cuda.grid(1)
    if e >= dshape.shape[0]:
        return
    ds = cuda.local.array((4, 3), float64)
    t = cuda.local.array((3, 3), float64)
    dw = cuda.local.array(NGI, float64)
    o = cuda.local.array((4, 4), float64)
    for i in range(4):
        for d in range(3):
            ds[i, d] = dshape[e, i, d]
    for a in range(3):
        for b in range(3):
            t[a, b] = tensor[e, a, b]
    for g in range(NGI):
        dw[g] = detwei[e, g]
    dshape_tensor_dshape(ds, t, dw, o)
    for i in range(4):
        for j in range(4):
            out[e, i, j] = o[i, j]


def _gpu_shape_shape(n, detwei, out):
    e = cuda.grid(1)
    if e >= detwei.shape[0]:
        return
    nl = cuda.local.array((NGI, 4), float64)
    dw = cuda.local.array(NGI, float64)
    o = cuda.local.array((4, 4), float64)
    for g in range(NGI):
        dw[g] = detwei[e, g]
        for i in range(4):
            nl[g, i] = n[g, i]
    shape_shape(nl, dw, o)
    for i in range(4):
        for j in range(4):
            out[e, i, j] = o[i, j]


def _gpu_shape_dshape(n, dshape, detwei, out):
    e = cuda.grid(1)
    if e >= detwei.shape[0]:
        return
    nl = cuda.local.array((NGI, 4), float64)
    ds = cuda.local.array((4, 3), float64)
    dw = cuda.local.array(NGI, float64)
    o = cuda.local.array((3, 4, 4), float64)
    for g in range(NGI):
        dw[g] = detwei[e, g]
        for i in range(4):
            nl[g, i] = n[g, i]
    for i in range(4):
        for d in range(3):
            ds[i, d] = dshape[e, i, d]
    shape_dshape(nl, ds, dw, o)
    for d in range(3):
        for i in range(4):
            for j in range(4):
                out[e, d, i, j] = o[d, i, j]


def _gpu_get_edge_lengths(tets, coords, hbar):
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    X = cuda.local.array((4, 3), float64)
    a6 = cuda.local.array((6, 6), float64)
    b6 = cuda.local.array(6, float64)
    x6 = cuda.local.array(6, float64)
    metric = cuda.local.array((3, 3), float64)
    evals = cuda.local.array(3, float64)
    evecs = cuda.local.array((3, 3), float64)
    h = cuda.local.array((3, 3), float64)
    for i in range(4):
        for d in range(3):
            X[i, d] = coords[tets[e, i], d]
    get_edge_lengths(X, a6, b6, x6, metric, evals, evecs, h, EIG_JACOBI)
    for a in range(3):
        for b in range(3):
            hbar[e, a, b] = h[a, b]


# ------------------------------------------------------------------------- the registry
I4, F8 = 4, 8  #: bytes of an int32 index and of a float64 value


@dataclass(frozen=True)
class BenchKernel:
    """One benchmark kernel.

    Attributes
    ----------
    name : str
        Name as in the paper (Tables 3–5).
    inputs, outputs : tuple of str
        Keys of :func:`make_inputs`'s dictionary, in argument order (inputs first).
    cpu : callable
        The ``@njit(parallel=True)`` launcher, ``cpu(*inputs, *outputs)``.
    gpu_py : callable
        The kernel's Python function, compiled by :func:`gpu_kernel`.
    min_bytes : callable
        ``min_bytes(nele, nnodes)``: each input read once, each output written once [bytes].
    formula : str
        ``min_bytes`` in words, for the report.
    paper_ms : float
        The paper's A100 time (554,394 tetrahedra) [ms], for reference.
    threads : str
        ``"element"``: one GPU thread per element (the grid covers ``nele``).
    """

    name: str
    inputs: tuple
    outputs: tuple
    cpu: Callable
    gpu_py: Callable
    min_bytes: Callable[[int, int], int]
    formula: str
    paper_ms: float


KERNELS: tuple[BenchKernel, ...] = (
    BenchKernel("ele_val_scalar", ("tets", "scalar"), ("ev_scalar",),
                cpu_ele_val_scalar, _gpu_ele_val_scalar,
                lambda ne, nn: I4 * 4 * ne + F8 * nn + F8 * 4 * ne,
                "tets 16*nele + field 8*n + out 32*nele", 0.028),
    BenchKernel("ele_val_vector", ("tets", "vector"), ("ev_vector",),
                cpu_ele_val_vector, _gpu_ele_val_vector,
                lambda ne, nn: I4 * 4 * ne + F8 * 3 * nn + F8 * 12 * ne,
                "tets 16*nele + field 24*n + out 96*nele", 0.077),
    BenchKernel("ele_val_tensor", ("tets", "tensor_nodal"), ("ev_tensor",),
                cpu_ele_val_tensor, _gpu_ele_val_tensor,
                lambda ne, nn: I4 * 4 * ne + F8 * 9 * nn + F8 * 36 * ne,
                "tets 16*nele + field 72*n + out 288*nele", 0.198),
    BenchKernel("transform_to_physical", ("tets", "coords", "weights"), ("dshape", "detwei"),
                cpu_transform_to_physical, _gpu_transform_to_physical,
                lambda ne, nn: I4 * 4 * ne + F8 * 3 * nn + F8 * NGI
                + F8 * 12 * ne + F8 * NGI * ne,
                f"tets 16*nele + coords 24*n + weights 8*{NGI} + dshape 96*nele "
                f"+ detwei {8 * NGI}*nele", 3.96),
    BenchKernel("dshape_tensor_dshape", ("dshape", "tensor_ele", "detwei"), ("out44",),
                cpu_dshape_tensor_dshape, _gpu_dshape_tensor_dshape,
                lambda ne, nn: F8 * 12 * ne + F8 * 9 * ne + F8 * NGI * ne + F8 * 16 * ne,
                f"dshape 96*nele + tensor 72*nele + detwei {8 * NGI}*nele + out 128*nele",
                1.97),
    BenchKernel("shape_shape", ("n", "detwei"), ("out44",),
                cpu_shape_shape, _gpu_shape_shape,
                lambda ne, nn: F8 * 4 * NGI + F8 * NGI * ne + F8 * 16 * ne,
                f"n 8*{4 * NGI} + detwei {8 * NGI}*nele + out 128*nele", 1.01),
    BenchKernel("shape_dshape", ("n", "dshape", "detwei"), ("out344",),
                cpu_shape_dshape, _gpu_shape_dshape,
                lambda ne, nn: F8 * 4 * NGI + F8 * 12 * ne + F8 * NGI * ne + F8 * 48 * ne,
                f"n 8*{4 * NGI} + dshape 96*nele + detwei {8 * NGI}*nele + out 384*nele",
                1.37),
    BenchKernel("get_edge_lengths", ("tets", "coords"), ("hbar",),
                cpu_get_edge_lengths, _gpu_get_edge_lengths,
                lambda ne, nn: I4 * 4 * ne + F8 * 3 * nn + F8 * 9 * ne,
                "tets 16*nele + coords 24*n + hbar 72*nele", 7.48),
)


def kernel_names() -> list[str]:
    """Names of the benchmark kernels, in table order."""
    return [k.name for k in KERNELS]


def make_inputs(tets: np.ndarray, coords: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    """Host arrays for every benchmark kernel: mesh, random nodal fields, precomputed geometry.

    Parameters
    ----------
    tets : ndarray, (nele, 4), int
        Connectivity (converted to int32).
    coords : ndarray, (n, 3), float
        Node coordinates [m].
    seed : int
        Seed of the random fields.

    Returns
    -------
    dict of str to ndarray
        Inputs (``tets``, ``coords``, ``weights``, ``n``, ``scalar`` (n,), ``vector`` (n,3),
        ``tensor_nodal`` (n,3,3), ``tensor_ele`` (nele,3,3) symmetric positive definite,
        ``dshape``, ``detwei`` from the CPU ``transform_to_physical``) and zero-filled outputs
        (``ev_scalar``, ``ev_vector``, ``ev_tensor``, ``out44``, ``out344``, ``hbar``).
    """
    rng = np.random.default_rng(seed)
    tets = np.ascontiguousarray(tets, dtype=np.int32)
    coords = np.ascontiguousarray(coords, dtype=np.float64)
    nele, nn = tets.shape[0], coords.shape[0]
    a = rng.standard_normal((nele, 3, 3))
    d = {
        "tets": tets, "coords": coords,
        "weights": np.ascontiguousarray(QUAD_W, dtype=np.float64),
        "n": np.ascontiguousarray(QUAD_N, dtype=np.float64),
        "scalar": rng.standard_normal(nn),
        "vector": rng.standard_normal((nn, 3)),
        "tensor_nodal": rng.standard_normal((nn, 3, 3)),
        "tensor_ele": np.ascontiguousarray(a @ a.transpose(0, 2, 1) + 3.0 * np.eye(3)),
        "dshape": np.zeros((nele, 4, 3)), "detwei": np.zeros((nele, NGI)),
        "ev_scalar": np.zeros((nele, 4)), "ev_vector": np.zeros((nele, 4, 3)),
        "ev_tensor": np.zeros((nele, 4, 3, 3)), "out44": np.zeros((nele, 4, 4)),
        "out344": np.zeros((nele, 3, 4, 4)), "hbar": np.zeros((nele, 3, 3)),
    }
    cpu_transform_to_physical(tets, coords, d["weights"], d["dshape"], d["detwei"])
    return d


def kernel_args(kernel: BenchKernel, data: dict) -> tuple:
    """The argument tuple of ``kernel`` taken from ``data`` (inputs, then outputs)."""
    return tuple(data[k] for k in kernel.inputs + kernel.outputs)


_GPU_CACHE: dict[str, object] = {}


def gpu_kernel(kernel: BenchKernel):
    """The compiled ``@cuda.jit`` kernel of ``kernel`` (built on first use; needs CUDA or the
    simulator). Compiled like :mod:`dycore.backend.gpu_kernels` (``lto=False`` off-simulator)."""
    from numba import config as numba_config

    if kernel.name not in _GPU_CACHE:
        if numba_config.ENABLE_CUDASIM:
            _GPU_CACHE[kernel.name] = cuda.jit(kernel.gpu_py)
        else:
            _GPU_CACHE[kernel.name] = cuda.jit(kernel.gpu_py, lto=False)
    return _GPU_CACHE[kernel.name]
