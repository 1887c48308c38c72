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

__all__ = ["SLICE", "sliced_ell"]

#: threads of one slice: a warp (a row's ``g`` threads never straddle one, as g divides 32)
SLICE = 32


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
    rows = np.repeat(np.arange(nrow), lengths)
    pos_in_row = np.arange(indptr[-1]) - indptr[rows]
    thread = rows * g + pos_in_row % g
    at = ptr[thread // SLICE] + (pos_in_row // g) * SLICE + thread % SLICE
    first_col = np.zeros(nslice * SLICE, np.int64)     # padding: the row's first column
    if nrow:
        starts = np.where(lengths > 0, np.asarray(indices)[np.minimum(indptr[:-1],
                                                                     max(indptr[-1] - 1, 0))]
                          if indptr[-1] else 0, 0)
        first_col[:nthread] = np.repeat(starts, g)
    cols = np.repeat(first_col.reshape(nslice, SLICE), width, axis=0).reshape(-1) \
        if nslice else np.zeros(0, np.int64)
    cols = cols.astype(np.int32)
    cols[at] = indices
    vals = np.zeros(ptr[-1], np.asarray(data).dtype)
    vals[at] = data
    return ptr.astype(np.int32), cols, vals
