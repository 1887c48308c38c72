"""Binary search of a CSR pattern: the reference paper's way to find where an element entry goes.

:func:`csr_find` is an element function (``@njit``, callable from CUDA kernels through
:data:`dycore.backend.gpu_kernels`' device-function copy). The production assembly uses the
precomputed element→nonzero lookup table instead; ``dycore bench`` times both.
"""
import numpy as np
from numba import njit, prange

from dycore.fem._jit import element_function

__all__ = ["csr_find", "lookup_by_search"]


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
