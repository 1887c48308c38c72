"""CPU launchers: gather → element function → element arrays, then the gather-by-nonzero sum.

Thin ``@njit(parallel=True)`` loops around :mod:`dycore.assembly.element_kernels`. Elements are
processed in chunks (one chunk per ``prange`` iteration) so each thread allocates its scratch
once. Assembly into CSR/BCSR ``values`` is the deterministic gather of docs/equations.md §6: nonzero k sums
its element contributions in element order from 0.0 — the same bits as a serial scatter loop,
independent of the thread count.
"""
import numpy as np
from numba import njit, prange

from dycore.assembly.element_kernels import (
    NGI, QUAD_N, QUAD_W, divergence_element, lumped_mass_element, momentum_element,
    stabilisation_element, tracer_element,
)

__all__ = [
    "tracer_elements", "momentum_elements", "divergence_elements", "stabilisation_elements",
    "lumped_mass_elements", "gather_blocks", "CHUNK",
]

CHUNK = 256  #: elements per prange iteration


@njit(cache=True)
def _quadrature_copy():
    return QUAD_N.copy(), QUAD_W.copy()


@njit(parallel=True, cache=True)
def tracer_elements(tets, coords, u_nl, c_old, src, sigma, c_ref, kxx, kyy, kzz, dt_theta,
                    ele_mat, ele_rhs, detj):
    """Element tracer systems for all elements.

    Parameters
    ----------
    tets : (nele,4) int32; coords : (nnodes,3) float64 [m]
    u_nl : (nnodes,3) [m/s]; c_old, src, sigma, c_ref : (nnodes,) float64
    kxx, kyy, kzz : diffusivity tensor diagonal [m²/s]; dt_theta : Δt·θ [s]
    ele_mat : (nele,4,4) out; ele_rhs : (nele,4) out; detj : (nele,) out
    """
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n, w = _quadrature_copy()
        X = np.empty((4, 3)); un = np.empty((4, 3)); co = np.empty(4); sr = np.empty(4)
        sg = np.empty(4); cr = np.empty(4); tensor = np.zeros((3, 3))
        tensor[0, 0] = kxx; tensor[1, 1] = kyy; tensor[2, 2] = kzz
        dshape = np.empty((4, 3)); detwei = np.empty(NGI); gi_a = np.empty(NGI)
        gi_b = np.empty(NGI); vec_gi = np.empty((NGI, 3)); m44 = np.empty((4, 4))
        l44 = np.empty((4, 4)); mat = np.empty((4, 4)); rhs = np.empty(4)
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                nd = tets[e, i]
                for d in range(3):
                    X[i, d] = coords[nd, d]
                    un[i, d] = u_nl[nd, d]
                co[i] = c_old[nd]; sr[i] = src[nd]; sg[i] = sigma[nd]; cr[i] = c_ref[nd]
            detj[e] = tracer_element(X, n, w, un, co, sr, sg, cr, tensor, dt_theta, dshape,
                                     detwei, gi_a, gi_b, vec_gi, m44, l44, mat, rhs)
            for i in range(4):
                ele_rhs[e, i] = rhs[i]
                for j in range(4):
                    ele_mat[e, i, j] = mat[i, j]


@njit(parallel=True, cache=True)
def momentum_elements(tets, coords, u_nl, u_old, buoy, p, sigma, u_ref0, u_ref1, u_ref2,
                      nuxx, nuyy, nuzz, f_cor, dt_theta, ele_mat, ele_rhs, detj):
    """Element momentum systems for all elements.

    Parameters
    ----------
    u_nl, u_old : (nnodes,3) [m/s]; buoy : (nnodes,) [m/s²]; p : (nnodes,) [m²/s²]
    sigma : (nnodes,) [1/s]; u_ref0..2 [m/s]; nuxx, nuyy, nuzz [m²/s]; f_cor [1/s]
    ele_mat : (nele,4,4,3,3) out; ele_rhs : (nele,4,3) out; detj : (nele,) out
    """
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n, w = _quadrature_copy()
        X = np.empty((4, 3)); un = np.empty((4, 3)); uo = np.empty((4, 3)); bu = np.empty(4)
        pe = np.empty(4); sg = np.empty(4); tensor = np.zeros((3, 3))
        tensor[0, 0] = nuxx; tensor[1, 1] = nuyy; tensor[2, 2] = nuzz
        dshape = np.empty((4, 3)); detwei = np.empty(NGI); gi_a = np.empty(NGI)
        gi_b = np.empty(NGI); vec_gi = np.empty((NGI, 3)); m44 = np.empty((4, 4))
        l44 = np.empty((4, 4)); d344 = np.empty((3, 4, 4)); mat = np.empty((4, 4, 3, 3))
        rhs = np.empty((4, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                nd = tets[e, i]
                for d in range(3):
                    X[i, d] = coords[nd, d]
                    un[i, d] = u_nl[nd, d]
                    uo[i, d] = u_old[nd, d]
                bu[i] = buoy[nd]; pe[i] = p[nd]; sg[i] = sigma[nd]
            detj[e] = momentum_element(X, n, w, un, uo, bu, pe, sg, u_ref0, u_ref1, u_ref2,
                                       tensor, f_cor, dt_theta, dshape, detwei, gi_a, gi_b,
                                       vec_gi, m44, l44, d344, mat, rhs)
            for i in range(4):
                for a in range(3):
                    ele_rhs[e, i, a] = rhs[i, a]
                for j in range(4):
                    for a in range(3):
                        for b in range(3):
                            ele_mat[e, i, j, a, b] = mat[i, j, a, b]


@njit(parallel=True, cache=True)
def divergence_elements(tets, coords, ele_mat, detj):
    """Element divergence matrices, ele_mat (nele,4,4,3) out [m²]; detj (nele,) out."""
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n, w = _quadrature_copy()
        X = np.empty((4, 3)); dshape = np.empty((4, 3)); detwei = np.empty(NGI)
        d344 = np.empty((3, 4, 4)); mat = np.empty((4, 4, 3))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                for d in range(3):
                    X[i, d] = coords[tets[e, i], d]
            detj[e] = divergence_element(X, n, w, dshape, detwei, d344, mat)
            for i in range(4):
                for j in range(4):
                    for d in range(3):
                        ele_mat[e, i, j, d] = mat[i, j, d]


@njit(parallel=True, cache=True)
def stabilisation_elements(tets, coords, ele_mat, status):
    """Element pressure-stabilisation matrices ½∫∇ψᵀh̄∇ψ, ele_mat (nele,4,4) out; status out."""
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n, w = _quadrature_copy()
        X = np.empty((4, 3)); dshape = np.empty((4, 3)); detwei = np.empty(NGI)
        a6 = np.empty((6, 6)); b6 = np.empty(6); x6 = np.empty(6); metric = np.empty((3, 3))
        evals = np.empty(3); evecs = np.empty((3, 3)); hbar = np.empty((3, 3))
        mat = np.empty((4, 4))
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                for d in range(3):
                    X[i, d] = coords[tets[e, i], d]
            status[e] = stabilisation_element(X, w, dshape, detwei, a6, b6, x6, metric, evals,
                                              evecs, hbar, mat)
            for i in range(4):
                for j in range(4):
                    ele_mat[e, i, j] = mat[i, j]


@njit(parallel=True, cache=True)
def lumped_mass_elements(tets, coords, ele_vec, detj):
    """Element lumped masses ∫Nᵢ, ele_vec (nele,4) out [m³]; detj (nele,) out."""
    nele = tets.shape[0]
    for c in prange((nele + CHUNK - 1) // CHUNK):
        n, w = _quadrature_copy()
        X = np.empty((4, 3)); dshape = np.empty((4, 3)); detwei = np.empty(NGI)
        vec = np.empty(4)
        for e in range(c * CHUNK, min(nele, (c + 1) * CHUNK)):
            for i in range(4):
                for d in range(3):
                    X[i, d] = coords[tets[e, i], d]
            detj[e] = lumped_mass_element(X, n, w, dshape, detwei, vec)
            for i in range(4):
                ele_vec[e, i] = vec[i]


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
