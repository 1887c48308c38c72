"""``@cuda.jit`` launchers: one thread per element, calling the same element functions as the CPU.

Each kernel gathers (``ele_val``) into ``cuda.local.array`` storage, calls the one-source element
function of :mod:`dycore.assembly.element_kernels`, then either

- ``mode == ATOMIC``: adds into CSR/BCSR ``values`` through the element→nonzero ``lookup`` table
  and into the right-hand side through the connectivity, with float64 ``cuda.atomic.add``; or
- ``mode == ELEMENTS``: writes the element matrix/vector to global memory, for the deterministic
  gather (:func:`gather_blocks`, one thread per nonzero, fixed order — the CPU's order).

Kernels are compiled lazily by :func:`get_kernels` (never at import: compiling needs a GPU) with
``cuda.jit(fn, lto=False)``; in strict mode NVVM is also told ``fma=0`` (see ``strict_fp``).
Arrays of values are passed flattened (1-D) so one atomic index addresses any block layout.
"""
from __future__ import annotations

from dycore.backend import _numpy_compat  # noqa: F401  (before the first kernel compile)
from numba import config as numba_config
from numba import cuda, float64

from dycore.assembly.element_kernels import (
    NGI, QUAD_N, QUAD_W, divergence_element, lumped_mass_element, momentum_element,
    stabilisation_element, tracer_element,
)

__all__ = ["ATOMIC", "ELEMENTS", "SEARCH", "get_kernels", "get_solver_kernels",
           "kernel_compiler", "BLOCK"]

ATOMIC = 0
ELEMENTS = 1
SEARCH = 2  #: atomic adds at the position found by binary search (tracer kernel; benchmarks)
BLOCK = 128  #: threads per block for element kernels (tests pass smaller ones)


def _tracer(tets, coords, u_nl, c_old, src, sigma, c_ref, kxx, kyy, kzz, dt_theta, lookup,
            indptr, indices, mode, want_matrix, values, rhs, ele_mat, ele_rhs, detj):
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
    detj[e] = tracer_element(X, n, w, un, co, sr, sg, cr, tensor, dt_theta, dshape, detwei,
                             gi_a, gi_b, vec_gi, m44, l44, mat, rv)
    if mode == ELEMENTS:
        for i in range(4):
            ele_rhs[e * 4 + i] = rv[i]
            for j in range(4):
                ele_mat[e * 16 + i * 4 + j] = mat[i, j]
    else:
        for i in range(4):
            row = tets[e, i]
            cuda.atomic.add(rhs, row, rv[i])
            if want_matrix:
                for j in range(4):
                    if mode == ATOMIC:
                        k = lookup[e, i, j]
                    else:
                        k = _csr_find_device(indptr, indices, row, tets[e, j])
                    cuda.atomic.add(values, k, mat[i, j])


def _momentum(tets, coords, u_nl, u_old, buoy, p, sigma, u_ref0, u_ref1, u_ref2, nuxx, nuyy,
              nuzz, f_cor, dt_theta, lookup, mode, values, rhs, ele_mat, ele_rhs, detj):
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
    uo = cuda.local.array((4, 3), float64)
    bu = cuda.local.array(4, float64)
    pe = cuda.local.array(4, float64)
    sg = cuda.local.array(4, float64)
    tensor = cuda.local.array((3, 3), float64)
    for a in range(3):
        for b in range(3):
            tensor[a, b] = 0.0
    tensor[0, 0] = nuxx
    tensor[1, 1] = nuyy
    tensor[2, 2] = nuzz
    dshape = cuda.local.array((4, 3), float64)
    detwei = cuda.local.array(NGI, float64)
    gi_a = cuda.local.array(NGI, float64)
    gi_b = cuda.local.array(NGI, float64)
    vec_gi = cuda.local.array((NGI, 3), float64)
    m44 = cuda.local.array((4, 4), float64)
    l44 = cuda.local.array((4, 4), float64)
    d344 = cuda.local.array((3, 4, 4), float64)
    mat = cuda.local.array((4, 4, 3, 3), float64)
    rv = cuda.local.array((4, 3), float64)
    for i in range(4):
        nd = tets[e, i]
        for d in range(3):
            X[i, d] = coords[nd, d]
            un[i, d] = u_nl[nd, d]
            uo[i, d] = u_old[nd, d]
        bu[i] = buoy[nd]
        pe[i] = p[nd]
        sg[i] = sigma[nd]
    detj[e] = momentum_element(X, n, w, un, uo, bu, pe, sg, u_ref0, u_ref1, u_ref2, tensor,
                               f_cor, dt_theta, dshape, detwei, gi_a, gi_b, vec_gi, m44, l44,
                               d344, mat, rv)
    if mode == ATOMIC:
        for i in range(4):
            nd = tets[e, i]
            for a in range(3):
                cuda.atomic.add(rhs, nd * 3 + a, rv[i, a])
            for j in range(4):
                k = lookup[e, i, j] * 9
                for a in range(3):
                    for b in range(3):
                        cuda.atomic.add(values, k + a * 3 + b, mat[i, j, a, b])
    else:
        for i in range(4):
            for a in range(3):
                ele_rhs[(e * 4 + i) * 3 + a] = rv[i, a]
            for j in range(4):
                k = (e * 16 + i * 4 + j) * 9
                for a in range(3):
                    for b in range(3):
                        ele_mat[k + a * 3 + b] = mat[i, j, a, b]


def _divergence(tets, coords, ele_mat, detj):
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
    dshape = cuda.local.array((4, 3), float64)
    detwei = cuda.local.array(NGI, float64)
    d344 = cuda.local.array((3, 4, 4), float64)
    mat = cuda.local.array((4, 4, 3), float64)
    for i in range(4):
        for d in range(3):
            X[i, d] = coords[tets[e, i], d]
    detj[e] = divergence_element(X, n, w, dshape, detwei, d344, mat)
    for i in range(4):
        for j in range(4):
            for d in range(3):
                ele_mat[(e * 16 + i * 4 + j) * 3 + d] = mat[i, j, d]


def _stabilisation(tets, coords, ele_mat, status):
    e = cuda.grid(1)
    if e >= tets.shape[0]:
        return
    w = cuda.local.array(NGI, float64)
    for g in range(NGI):
        w[g] = QUAD_W[g]
    X = cuda.local.array((4, 3), float64)
    dshape = cuda.local.array((4, 3), float64)
    detwei = cuda.local.array(NGI, float64)
    a6 = cuda.local.array((6, 6), float64)
    b6 = cuda.local.array(6, float64)
    x6 = cuda.local.array(6, float64)
    metric = cuda.local.array((3, 3), float64)
    evals = cuda.local.array(3, float64)
    evecs = cuda.local.array((3, 3), float64)
    hbar = cuda.local.array((3, 3), float64)
    mat = cuda.local.array((4, 4), float64)
    for i in range(4):
        for d in range(3):
            X[i, d] = coords[tets[e, i], d]
    status[e] = stabilisation_element(X, w, dshape, detwei, a6, b6, x6, metric, evals, evecs,
                                      hbar, mat)
    for i in range(4):
        for j in range(4):
            ele_mat[e * 16 + i * 4 + j] = mat[i, j]


def _lumped_mass(tets, coords, ele_vec, detj):
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
    dshape = cuda.local.array((4, 3), float64)
    detwei = cuda.local.array(NGI, float64)
    vec = cuda.local.array(4, float64)
    for i in range(4):
        for d in range(3):
            X[i, d] = coords[tets[e, i], d]
    detj[e] = lumped_mass_element(X, n, w, dshape, detwei, vec)
    for i in range(4):
        ele_vec[e * 4 + i] = vec[i]


def _gather_blocks(ptr, contrib, ele_blocks, bs, out):
    """out[k*bs + b] = Σ ele_blocks[contrib[q]*bs + b], q in ptr[k]:ptr[k+1] (element order)."""
    k = cuda.grid(1)
    if k >= ptr.shape[0] - 1:
        return
    for b in range(bs):
        s = 0.0
        for q in range(ptr[k], ptr[k + 1]):
            s += ele_blocks[contrib[q] * bs + b]
        out[k * bs + b] = s


def _fill(a, value):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] = value


#: :func:`csr_find` as a CUDA device function, made before the first kernel compile (the
#: simulator passes kernel arguments to device functions, not to ``@njit`` functions).
_csr_find_device = None


def kernel_compiler(strict: bool):
    """The one compile path of every dycore kernel: ``jit(fn) -> dispatcher``.

    Strict mode: NVVM fma=0 and no LTO (:func:`strict_compile`); the simulator: plain
    ``cuda.jit`` (it takes no lto option); otherwise ``cuda.jit(fn, lto=False)`` (the call form:
    the decorator form ignores lto in numba-cuda 0.30.4)."""
    if strict:
        from dycore.backend.strict_fp import strict_compile
        return strict_compile
    if numba_config.ENABLE_CUDASIM:
        return cuda.jit

    def jit(fn):
        return cuda.jit(fn, lto=False)
    return jit


class Kernels:
    """The compiled kernels of one floating-point mode (attributes named after the operators)."""

    def __init__(self, strict: bool):
        global _csr_find_device
        if _csr_find_device is None:
            from dycore.assembly.csr_search import csr_find
            _csr_find_device = cuda.jit(device=True)(csr_find.py_func)
        jit = kernel_compiler(strict)
        self.strict = strict
        self.tracer = jit(_tracer)
        self.momentum = jit(_momentum)
        self.divergence = jit(_divergence)
        self.stabilisation = jit(_stabilisation)
        self.lumped_mass = jit(_lumped_mass)
        self.gather_blocks = jit(_gather_blocks)
        self.fill = jit(_fill)


_CACHE: dict[bool, Kernels] = {}


def get_kernels(strict: bool = False) -> Kernels:
    """The kernels for the given floating-point mode, built on first use."""
    if strict not in _CACHE:
        _CACHE[strict] = Kernels(strict)
    return _CACHE[strict]


_SOLVER_CACHE: dict = {}


def get_solver_kernels(strict: bool = False, rb: int = 256):
    """The device solver kernels (:mod:`dycore.solvers.kernels`) for a floating-point mode and
    reduction block size, built on first use through :func:`kernel_compiler`."""
    key = (strict, rb)
    if key not in _SOLVER_CACHE:
        from dycore.solvers.kernels import build_solver_kernels
        _SOLVER_CACHE[key] = build_solver_kernels(kernel_compiler(strict),
                                                  cuda.jit(device=True), rb)
    return _SOLVER_CACHE[key]


def grid(nthreads: int, block: int = BLOCK) -> tuple[int, int]:
    """(blocks, threads) covering ``nthreads`` with ``block`` threads per block."""
    return (max(1, (nthreads + block - 1) // block), block)
