"""Device kernels of GPU ranks: halo pack / unpack and the exact (order-free) dot product.

=================  ===========================================================================
pack_rows          buf[i·bs + c] = x[idx[i]·bs + c]       (owned values a neighbour holds)
unpack_rows        x[idx[i]·bs + c] = buf[i·bs + c]       (ghost slots filled from a neighbour)
exact_dot_parts    parts += the exact integer representation of Σ x_i·y_i
                   (:func:`dycore.parallel.reduce.exact_parts`, the same integers)
=================  ===========================================================================

``exact_dot_parts`` splits each rounded product p = f·2^e (``math.frexp``, f·2^53 an integer
below 2^53) into a high and a low 26/27-bit integer half and adds them, as int64, into the bucket
of its exponent: first in the block's shared memory, then the block's non-zero buckets into
``parts`` with global atomics. Integer addition is associative, so the result is the same
integers whatever the thread, block or launch order — and the same as the NumPy
``exact_parts`` of the whole vector (Shewchuk 1997; the algorithm of ``math.fsum``). Parts of
several ranks add (NCCL int64 sum) to the parts of the global vector; every rank then turns them
into the correctly rounded float64 (:func:`dycore.parallel.reduce.parts_to_float`). No
floating-point rounding happens in the kernel (the product is the rounded x·y, the split is
exact), so the strict and fast builds give the same integers.
"""
from __future__ import annotations

import math

from numba import cuda, int64

from dycore.parallel.reduce import _EMIN, _NB

__all__ = ["NPARTS", "get_rank_kernels"]

#: int64 entries of one dot product's parts: per-exponent high and low sums, NaN / +inf / −inf
NPARTS = 2 * _NB + 3
#: threads per block of ``exact_dot_parts`` (its shared buckets are 33.6 kB per block)
EXACT_BLOCK = 256

_CACHE: dict = {}


def _build(jit) -> dict:
    nb, emin, nparts = _NB, _EMIN, NPARTS
    mant, split = 2.0 ** 53, 2.0 ** 26

    def pack_rows(x, idx, bs, buf):
        q = cuda.grid(1)
        if q < idx.shape[0] * bs:
            i = q // bs
            buf[q] = x[idx[i] * bs + q - i * bs]

    def unpack_rows(x, idx, bs, buf):
        q = cuda.grid(1)
        if q < idx.shape[0] * bs:
            i = q // bs
            x[idx[i] * bs + q - i * bs] = buf[q]

    def exact_dot_parts(x, y, n, parts):
        """parts[:NPARTS] += exact parts of Σ_{i<n} x[i]·y[i] (grid-stride over i)."""
        sh = cuda.shared.array(nparts, int64)
        t = cuda.threadIdx.x
        for j in range(t, nparts, cuda.blockDim.x):
            sh[j] = 0
        cuda.syncthreads()
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            p = x[i] * y[i]
            if p != p:
                cuda.atomic.add(sh, 2 * nb, 1)
            elif p == math.inf:
                cuda.atomic.add(sh, 2 * nb + 1, 1)
            elif p == -math.inf:
                cuda.atomic.add(sh, 2 * nb + 2, 1)
            elif p != 0.0:
                f, e = math.frexp(p)
                m = f * mant                       # an integer, |m| < 2^53
                hi = math.trunc(m / split)         # |hi| < 2^27
                lo = m - hi * split                # |lo| < 2^26, exact
                b = e - emin
                cuda.atomic.add(sh, b, int64(hi))
                cuda.atomic.add(sh, nb + b, int64(lo))
        cuda.syncthreads()
        for j in range(t, nparts, cuda.blockDim.x):
            if sh[j] != 0:
                cuda.atomic.add(parts, j, sh[j])

    return {name: jit(fn) for name, fn in (("pack_rows", pack_rows),
                                           ("unpack_rows", unpack_rows),
                                           ("exact_dot_parts", exact_dot_parts))}


def get_rank_kernels(strict: bool = False) -> dict:
    """The GPU-rank kernels (name -> compiled kernel), built on first use through the one
    compile path :func:`dycore.backend.gpu_kernels.kernel_compiler`."""
    if strict not in _CACHE:
        from dycore.backend.gpu_kernels import kernel_compiler
        _CACHE[strict] = _build(kernel_compiler(strict))
    return _CACHE[strict]
