"""Tracer-operator CSR matrix + right-hand-side assembly variants (the paper's Table 6).

- GPU atomic + lookup table: the production kernel of :mod:`dycore.backend.gpu_kernels`
  (mode ``ATOMIC``), the nonzero position of (tets[e,i], tets[e,j]) read from ``lookup``.
- GPU atomic + binary search: :func:`tracer_bsearch_kernel` below, the same gather and element
  function, the position found by :func:`csr_find` in the sorted CSR row instead.
- GPU deterministic: the production kernel in mode ``ELEMENTS`` + the gather by nonzero.
- CPU: the ``@njit(parallel=True)`` element loop + gather (:mod:`dycore.assembly.cpu`).
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float64, njit, prange

from dycore.assembly.element_kernels import NGI, QUAD_N, QUAD_W, tracer_element
from dycore.fem._jit import element_function

__all__ = ["csr_find", "lookup_by_search", "tracer_bsearch_kernel", "tracer_inputs"]


@element_function
def csr_find(indptr, indices, row, col):
    """Position of entry (row, col) in a CSR pattern whose rows have sorted column indices.

    Binary search in ``indices[indptr[row]:indptr[row+1]]``; a device function on the GPU and an
    ``@njit`` function on the CPU.

    Parameters
    ----------
    indptr : ndarray, (n+1,), int
    indices : ndarray, (nnz,), int, sorted within each row
    row, col : int

    Returns
    -------
    int
        The position k with ``indices[k] == col`` in row ``row``, or -1 when absent.
    """
    lo = indptr[row]
    hi = indptr[row + 1] - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        c = indices[mid]
        if c < col:
            lo = mid + 1
        elif c > col:
            hi = mid - 1
        else:
            return mid
    return -1


@njit(parallel=True, cache=True)
def lookup_by_search(indptr, indices, tets):
    """The (nele,4,4) lookup table rebuilt with :func:`csr_find` (a check of the search)."""
    nele = tets.shape[0]
    out = np.empty((nele, 4, 4), dtype=np.int64)
    for e in prange(nele):
        for i in range(4):
            for j in range(4):
                out[e, i, j] = csr_find(indptr, indices, tets[e, i], tets[e, j])
    return out


def _tracer_bsearch(tets, coords, u_nl, c_old, src, sigma, c_ref, kxx, kyy, kzz, dt_theta,
                    indptr, indices, want_matrix, values, rhs):
    """One thread per element: gather, :func:`tracer_element`, atomic add at csr_find(...)."""
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    n = cuda.local.array((NGI, 4), float64)
    w = cuda.local.array(NGI, float64)
    for g in range(NGI):
        w[g] = QUAD_W[g]
        for i in range(4):
            n[g, i] = QUAD_N[g, i]
    X = cuda.local.array((4, 3), float64)
    un = cuda.local.array((4, 3), float64)
    co = cuda.local.array(4, float64)
    sr = cuda.local.array(4, float64)
    sg = cuda.local.array(4, float64)
    cr = cuda.local.array(4, float64)
    tensor = cuda.local.array((3, 3), float64)
    for a in range(3):
        for b in range(3):
            tensor[a, b] = 0.0
    tensor[0, 0] = kxx
    tensor[1, 1] = kyy
    tensor[2, 2] = kzz
    dshape = cuda.local.array((4, 3), float64)
    detwei = cuda.local.array(NGI, float64)
    gi_a = cuda.local.array(NGI, float64)
    gi_b = cuda.local.array(NGI, float64)
    vec_gi = cuda.local.array((NGI, 3), float64)
    m44 = cuda.local.array((4, 4), float64)
    l44 = cuda.local.array((4, 4), float64)
    mat = cuda.local.array((4, 4), float64)
    rv = cuda.local.array(4, float64)
    for i in range(4):
        nd = tets[e, i]
        for d in range(3):
            X[i, d] = coords[nd, d]
            un[i, d] = u_nl[nd, d]
        co[i] = c_old[nd]
        sr[i] = src[nd]
        sg[i] = sigma[nd]
        cr[i] = c_ref[nd]
    tracer_element(X, n, w, un, co, sr, sg, cr, tensor, dt_theta, dshape, detwei, gi_a, gi_b,
                   vec_gi, m44, l44, mat, rv)
    for i in range(4):
        row = tets[e, i]
        cuda.atomic.add(rhs, row, rv[i])
        if want_matrix:
            for j in range(4):
                k = _csr_find_device(indptr, indices, row, tets[e, j])
                cuda.atomic.add(values, k, mat[i, j])


_KERNEL: list = []
#: ``csr_find`` as a CUDA device function; set by :func:`tracer_bsearch_kernel` before the first
#: compile (a ``cuda.jit`` object is never made at import; under the simulator the njit version
#: cannot take simulated device arrays, the device-function form can).
_csr_find_device = None


def tracer_bsearch_kernel():
    """The compiled binary-search tracer kernel (built on first use).

    Arguments: ``(tets, coords, u_nl, c_old, src, sigma, c_ref, kxx, kyy, kzz, dt_theta, indptr,
    indices, want_matrix, values, rhs)``; ``values`` (nnz,) and ``rhs`` (n,) must be zeroed first.
    """
    from numba import config as numba_config

    global _csr_find_device
    if not _KERNEL:
        _csr_find_device = cuda.jit(device=True)(csr_find.py_func)
        if numba_config.ENABLE_CUDASIM:
            _KERNEL.append(cuda.jit(_tracer_bsearch))
        else:
            _KERNEL.append(cuda.jit(_tracer_bsearch, lto=False))
    return _KERNEL[0]


def tracer_inputs(nnodes: int, seed: int = 0) -> dict:
    """Random nodal inputs of the tracer operator (as in scripts/gpu_check.py).

    Returns
    -------
    dict
        ``u_nl`` (n,3) [m/s], ``c_old``, ``src``, ``sigma`` (0..0.005 1/s), ``c_ref`` (n,), plus
        ``kdiag`` = (5, 5, 1) m^2/s and ``dt_theta`` = 5 s.
    """
    rng = np.random.default_rng(seed)
    return {"u_nl": 10.0 + rng.standard_normal((nnodes, 3)), "c_old": rng.standard_normal(nnodes),
            "src": rng.standard_normal(nnodes), "sigma": rng.uniform(0.0, 0.005, nnodes),
            "c_ref": rng.standard_normal(nnodes), "kdiag": (5.0, 5.0, 1.0), "dt_theta": 5.0}
