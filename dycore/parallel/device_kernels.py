"""Device kernels of GPU ranks: halo pack / unpack and the exact (order-free) dot product.

=================  ===========================================================================
pack_rows          buf[i·bs + c] = x[idx[i]·bs + c]       (owned values a neighbour holds)
unpack_rows        x[idx[i]·bs + c] = buf[i·bs + c]       (ghost slots filled from a neighbour)
exact_dot_parts    parts += the exact integer representation of Σ x_i·y_i
                   (:func:`dycore.parallel.reduce.exact_parts`, the same integers)
exact_round        out[i] = the float64 nearest to the exact sum of parts i (ties to even):
                   :func:`dycore.parallel.reduce.parts_to_float` on the device
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

``exact_round`` does that last rounding on the device, so a reduction needs no host copy. One
block per dot product: its threads find the span of non-zero buckets with coalesced loads (a few
dozen of the 2,098 for products of similar magnitudes; one thread walking every bucket made
thousands of dependent global loads, of the order of a millisecond per call by estimate, not
measured), then its thread 0 rounds that span: the exact total T = Σ_b (hi_b·2^26 + lo_b)·2^b
(the value is T·2^−1126) is accumulated in 72 signed base-2^32 digits (each bucket's integers added in 16-bit
pieces, so no digit can overflow), the carries are propagated, a negative total is negated,
and the top 53 bits — fewer for a subnormal result, whose last bit is 2^−1074 — are rounded to
nearest, ties to even, from the next bit and a sticky bit; ``math.ldexp`` scales the integer
exactly (∞ past the float64 range). Integer operations only, up to the final exact scaling.
"""
from __future__ import annotations

import math

from numba import cuda, int64

from dycore.backend import _cudasim_compat  # noqa: F401  (the simulator's shared arrays)
from dycore.parallel.reduce import _EMIN, _NB

__all__ = ["NPARTS", "EXACT_BLOCK", "ROUND_BLOCK", "get_rank_kernels"]

#: int64 entries of one dot product's parts: per-exponent high and low sums, NaN / +inf / −inf
NPARTS = 2 * _NB + 3
#: threads per block of ``exact_dot_parts`` (its shared buckets are 33.6 kB per block)
EXACT_BLOCK = 256
#: threads per block of ``exact_round`` (they scan the 2·2,098 buckets for the non-zero span)
ROUND_BLOCK = 128

_CACHE: dict = {}


def _build(jit, runs: bool = True, parallel_round: bool = True) -> dict:
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
        """parts[:NPARTS] += exact parts of Σ_{i<n} x[i]·y[i]. With ``runs``, block k takes
        the k-th contiguous chunk of i and its threads stride through it by the block size,
        each thread summing the halves of its consecutive products of one exponent in
        registers and adding such a run to the shared buckets when the exponent changes;
        without, a grid-stride loop adds every product's halves to the shared buckets."""
        sh = cuda.shared.array(nparts, int64)
        t = cuda.threadIdx.x
        for j in range(t, nparts, cuda.blockDim.x):
            sh[j] = 0
        cuda.syncthreads()
        if runs:
            chunk = (n + cuda.gridDim.x - 1) // cuda.gridDim.x
            first = cuda.blockIdx.x * chunk + t
            stop = min(n, cuda.blockIdx.x * chunk + chunk)
            step = cuda.blockDim.x
        else:
            first, stop, step = cuda.grid(1), n, cuda.gridsize(1)
        cur = -1                                   # the bucket of the run held in registers
        run_hi = int64(0)
        run_lo = int64(0)
        for i in range(first, stop, step):
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
                if not runs:
                    cuda.atomic.add(sh, b, int64(hi))
                    cuda.atomic.add(sh, nb + b, int64(lo))
                    continue
                if b != cur:                       # (a run of < 2^36 products cannot overflow)
                    if cur >= 0:
                        cuda.atomic.add(sh, cur, run_hi)
                        cuda.atomic.add(sh, nb + cur, run_lo)
                    cur = b
                    run_hi = int64(0)
                    run_lo = int64(0)
                run_hi += int64(hi)
                run_lo += int64(lo)
        if cur >= 0:
            cuda.atomic.add(sh, cur, run_hi)
            cuda.atomic.add(sh, nb + cur, run_lo)
        cuda.syncthreads()
        for j in range(t, nparts, cuda.blockDim.x):
            if sh[j] != 0:
                cuda.atomic.add(parts, j, sh[j])

    ndig, bias = 72, 53 - emin               # digits of 32 bits; the value is T·2^−bias

    def exact_round(parts, ndots, out):
        """out[i] = the float64 nearest to the exact sum of parts[i·NPARTS:(i+1)·NPARTS]: block
        i (any block size) finds the span of non-zero buckets and adds them into base-2^32
        digits (with ``parallel_round`` every thread some buckets, else thread 0 alone); its
        thread 0 propagates the carries and rounds."""
        i = cuda.blockIdx.x
        if i >= ndots:
            return
        base = i * nparts
        span = cuda.shared.array(2, int64)        # first and last non-zero bucket
        acc = cuda.shared.array(72, int64)        # the total's signed base-2^32 digits
        t = cuda.threadIdx.x
        if t == 0:
            span[0] = nb
            span[1] = -1
        for d in range(t, ndig, cuda.blockDim.x):
            acc[d] = 0
        cuda.syncthreads()
        first, last = int64(nb), int64(-1)
        for j in range(t, 2 * nb, cuda.blockDim.x):     # coalesced, every thread
            if parts[base + j] != 0:
                b = j - nb if j >= nb else j
                first = min(first, b)
                last = max(last, b)
        if last >= 0:
            cuda.atomic.min(span, 0, first)
            cuda.atomic.max(span, 1, last)
        cuda.syncthreads()
        nan, pinf, ninf = parts[base + 2 * nb], parts[base + 2 * nb + 1], parts[base + 2 * nb + 2]
        if nan != 0 or pinf != 0 or ninf != 0:       # (every thread returns alike)
            if t == 0:
                if nan != 0 or (pinf != 0 and ninf != 0):
                    out[i] = math.nan
                else:
                    out[i] = math.inf if pinf != 0 else -math.inf
            return
        first, width = span[0], 2 * (span[1] - span[0] + 1)
        if parallel_round or t == 0:
            step = cuda.blockDim.x if parallel_round else 1
            for j in range(t if parallel_round else 0, width, step):
                half = j & 1
                b = first + (j >> 1)              # the zero buckets outside add nothing
                v = parts[base + half * nb + b]
                sgn = int64(1)
                if v < 0:
                    sgn = int64(-1)
                    v = -v
                pos = b + 26 * (1 - half)                 # hi·2^(b+26), lo·2^b
                while v > 0:                      # 16-bit pieces: no digit can overflow
                    piece = v & 0xFFFF
                    v >>= 16
                    d = pos >> 5
                    val = piece << (pos & 31)             # < 2^47
                    cuda.atomic.add(acc, d, sgn * (val & 0xFFFFFFFF))
                    cuda.atomic.add(acc, d + 1, sgn * (val >> 32))
                    pos += 16
        cuda.syncthreads()
        if t != 0:
            return
        sign = 1.0
        for rounds in range(2):                       # carries; again after a negation
            for d in range(ndig - 1):
                c = acc[d] >> 32
                acc[d] -= c << 32
                acc[d + 1] += c
            if acc[ndig - 1] >= 0:
                break
            sign = -1.0
            for d in range(ndig):
                acc[d] = -acc[d]
        top = ndig - 1
        while top >= 0 and acc[top] == 0:
            top -= 1
        if top < 0:
            out[i] = 0.0
            return
        nbits = 32 * top
        t = acc[top]
        while t > 0:
            nbits += 1
            t >>= 1
        drop = nbits - 53
        if drop < 53 - 1:                              # subnormal: the last bit is 2^−1074
            drop = 52
        q = int64(0)
        for j in range(nbits - 1, drop - 1, -1):      # T >> drop (≤ 53 bits)
            q = (q << 1) | ((acc[j >> 5] >> (j & 31)) & 1)
        rnd = (acc[(drop - 1) >> 5] >> ((drop - 1) & 31)) & 1
        sticky = (acc[(drop - 1) >> 5] & ((int64(1) << ((drop - 1) & 31)) - 1)) != 0
        for d in range((drop - 1) >> 5):
            if acc[d] != 0:
                sticky = True
        if rnd != 0 and (sticky or (q & 1) != 0):
            q += 1
        k = drop - bias                               # value q·2^k, q < 2^53 (or = 2^53)
        if k > 1024 - 53 or (k == 1024 - 53 and q == (int64(1) << 53)):
            out[i] = sign * math.inf                  # at or past 2^1024
        else:
            out[i] = sign * math.ldexp(float(q), k)

    return {name: jit(fn) for name, fn in (("pack_rows", pack_rows),
                                           ("unpack_rows", unpack_rows),
                                           ("exact_dot_parts", exact_dot_parts),
                                           ("exact_round", exact_round))}


def get_rank_kernels(strict: bool = False, runs: bool = True,
                     parallel_round: bool = True) -> dict:
    """The GPU-rank kernels (name -> compiled kernel), built on first use through the one
    compile path :func:`dycore.backend.gpu_kernels.kernel_compiler`. ``runs`` and
    ``parallel_round`` (A/B switches, the same integers and bits either way:
    ``scripts/device/exact_dot_timing.py``) choose how ``exact_dot_parts`` adds into its
    shared buckets and whether every thread of ``exact_round`` adds buckets into the digits."""
    key = (strict, bool(runs), bool(parallel_round))
    if key not in _CACHE:
        from dycore.backend.gpu_kernels import kernel_compiler
        _CACHE[key] = _build(kernel_compiler(strict), *key[1:])
    return _CACHE[key]
