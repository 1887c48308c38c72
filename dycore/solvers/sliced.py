"""Sliced ELL storage of a CSR matrix for the row kernels: the same sums, read coalesced.

The row kernels (:mod:`dycore.backend.solver_kernels`) give a CSR row ``g`` threads: thread
``v = i·g + lane`` adds entries lane, lane+g, lane+2g, ... of row i, then the row's lanes meet
in a fixed tree. In CSR the 32 threads of a warp then read 32/g separate stretches of g
entries each. Sliced ELL (SELL-32; Kreutzer et al., SIAM J. Sci. Comput. 36(5), C401, 2014)
stores the entries that thread v adds as its own column of a slice of 32 threads, so that the
warp reads its j-th entries as 32 consecutive values (one 128-byte line for float32 values):

    slice s holds threads v = 32·s ... 32·s + 31, ``ptr[s + 1] − ptr[s]`` = 32·L_s entries,
    entry j of thread v at ptr[s] + 32·j + (v − 32·s),  j < L_s = the slice's longest thread

Thread v adds the same entries in the same order as in CSR, so with the same ``g`` and the same
tree the row sums are the same bits. A thread shorter than its slice adds zeros (value 0.0 at
its row's first column): a row sum starts from +0.0, so adding ±0.0 changes nothing for finite
x. On an H200 the 4.42 M-tet pressure matrix (762,129 rows of 63 entries, float32 values)
took 126 µs a product with g = 4 in this layout against 145 µs in CSR, the paper mesh's
(98,441 rows) 21.0 against 24.1 µs (docs/performance.md).
"""
from __future__ import annotations

import numpy as np
from numba import njit

# threads of one slice: a warp (a row's ``g`` threads never straddle one, as g divides 32);
# the kernels' constant, so that the layout and its reader cannot disagree
from dycore.backend.solver_kernels import SLICE

__all__ = ["SLICE", "sliced_ell"]


def sliced_ell(indptr, indices, data, g: int):
    """SELL-32 of a CSR matrix for rows summed by ``g`` threads each.

    Parameters
    ----------
    indptr : (nrow + 1,) integer array; indices : (nnz,) integer array; data : (nnz,) float
        array — a CSR matrix (host arrays)
    g : threads a row, a power of two ≤ 32

    Returns
    -------
    ptr : (nslice + 1,) int32 — slice s's entries are ptr[s] ≤ k < ptr[s + 1], a multiple of 32
    cols : (ptr[-1],) int32; vals : (ptr[-1],) data.dtype — the entries, padding with 0.0 at
        the row's first column (column 0 for an empty row or a thread past the last row)
    nslice = ⌈nrow·g / 32⌉.

    Raises
    ------
    ValueError : g not a power of two in [1, 32]; the layout would need 2³¹ entries or more
    """
    if g < 1 or g & (g - 1) or g > SLICE:
        raise ValueError(f"sliced_ell: g {g}: expected a power of two <= {SLICE}")
    indptr = np.asarray(indptr, np.int64)
    nrow = indptr.size - 1
    lengths = np.diff(indptr)
    nthread = nrow * g
    nslice = -(-nthread // SLICE)
    # entries of thread (i, lane): ⌈(len_i − lane) / g⌉ (0 when lane ≥ len_i)
    per = np.zeros(nslice * SLICE, np.int64)
    lanes = np.arange(g)
    per[:nthread] = np.maximum(0, -(-(lengths[:, None] - lanes[None, :]) // g)).reshape(-1)
    width = per.reshape(nslice, SLICE).max(axis=1) if nslice else per[:0]
    ptr = np.zeros(nslice + 1, np.int64)
    np.cumsum(width * SLICE, out=ptr[1:])
    if ptr[-1] >= 2**31:
        raise ValueError(f"sliced_ell: {ptr[-1]} entries do not fit int32 offsets")
    cols = np.zeros(ptr[-1], np.int32)
    vals = np.zeros(ptr[-1], np.asarray(data).dtype)
    _fill(indptr, np.asarray(indices), np.asarray(data), g, ptr, cols, vals)
    return ptr.astype(np.int32), cols, vals


@njit(cache=True)
def _fill(indptr, indices, data, g, ptr, cols, vals):
    """Thread v = i·g + lane's entries (lane, lane + g, ... of row i) down its slice column,
    then padding at the row's first column (``cols`` / ``vals`` come zeroed: threads past the
    last row keep column 0). One pass over the entries: the paper mesh's fine level (6.0 M
    entries) in 0.11 s on the 2-core development machine, where NumPy index arithmetic took
    0.76 s."""
    nrow = indptr.size - 1
    for i in range(nrow):
        a = indptr[i]
        b = indptr[i + 1]
        first = indices[a] if b > a else 0
        for lane in range(g):
            v = i * g + lane
            s = v // SLICE
            at = ptr[s] + (v - s * SLICE)
            stop = ptr[s + 1]
            k = a + lane
            while k < b:
                cols[at] = indices[k]
                vals[at] = data[k]
                at += SLICE
                k += g
            while at < stop:
                cols[at] = first
                at += SLICE
