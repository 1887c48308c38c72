"""The deterministic assembly on the CPU: sum element blocks by nonzero (or node) in element order.

Nonzero k sums its element contributions in element order from 0.0 (docs/equations.md §6): the
same bits as a serial scatter loop, independent of the thread count, and the order of the GPU's
``gather_blocks`` kernel (:mod:`dycore.backend.gpu_kernels`).
"""
from numba import njit, prange

__all__ = ["gather_blocks"]


@njit(parallel=True, cache=True)
def gather_blocks(ptr, contrib, ele_blocks, out):
    """Deterministic assembly: out[k, :] = Σ ele_blocks[contrib[p], :] for p in ptr[k]:ptr[k+1].

    Parameters
    ----------
    ptr : (ntarget+1,) int64; contrib : (nsource,) int64 — a contribution map from
        :class:`dycore.assembly.sparsity.Sparsity` (nonzeros or nodes)
    ele_blocks : (nsource, bs) float64 — element matrices/vectors flattened to blocks
    out : (ntarget, bs) float64 — CSR/BCSR ``values`` or a nodal vector, overwritten
    """
    bs = out.shape[1]
    for k in prange(out.shape[0]):
        for b in range(bs):
            s = 0.0
            for q in range(ptr[k], ptr[k + 1]):
                s += ele_blocks[contrib[q], b]
            out[k, b] = s
