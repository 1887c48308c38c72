"""Fused vector kernels of the Picard step: combinations, boundary rows, step reductions.

Each kernel writes into an array allocated once per mesh, so a device step allocates nothing,
and each reproduces the NumPy expression it replaces operation by operation (same operands, same
order), so a strict (fma=0) build gives the CPU's bits:

=======================  ==================================================================
axpby                    out = a·x + b·y   (b = 0: out = a·x;  ``div``: out = a·x + y/b)
x_plus_yz                out = x + y·z
multiply                 out = x·y
advection_source         src = −(θ·w + (1 − θ)·wⁿ)·dθ̄/dz        (w: column 2 of (n,3) fields)
dirichlet_rows           rows of Dirichlet nodes: zero blocks, identity diagonal, zero rhs
nnf_rotate_blocks        R_row·A·R_colᵀ on the blocks touching rotated (ground/lid/wall) nodes,
                         normal rows (1, or 2 on edges) reduced to their diagonal entry
                         (:mod:`dycore.assembly.no_normal_flow`)
nnf_rotate_rhs           R·rhs at rotated nodes, normal entries a_nn·(−(n·uⁿ)/Δt)
nnf_unrotate             x ← Rᵀx at rotated nodes
nnf_remove_normal        x ← x − n(n·x) at rotated nodes, for each of its normals
scatter_fill             a[idx] = value
max_abs_diff             block maxima of |x − y| (then :func:`finish_max`)
step_scalars             block partials of max|w|, ½Σ M_L|u|², max|div/M_L|, #non-finite
=======================  ==================================================================
"""
from __future__ import annotations

import math

from numba import cuda, float64

from dycore.assembly import no_normal_flow as nnf
from dycore.backend import _cudasim_compat  # noqa: F401  (the simulator's shared arrays)

__all__ = ["build_vector_kernels", "NSTEP_SCALARS"]

#: columns of :func:`step_scalars` partials: max|w|, kinetic energy, max|div|, non-finite count
NSTEP_SCALARS = 4


def build_vector_kernels(jit, device_jit, rb: int) -> dict:
    """Compile the vector kernels with ``jit``; ``rb`` threads per block of the reductions.

    Returns
    -------
    dict name -> compiled kernel
    """
    RB = rb

    @device_jit
    def block_reduce(sh, col, t, is_max):
        """Tree sum (or max) of sh[col, :RB] into sh[col, 0]; every thread calls it."""
        s = RB // 2
        while s > 0:
            cuda.syncthreads()
            if t < s:
                if is_max:
                    if sh[col, t + s] > sh[col, t] or not (sh[col, t + s] == sh[col, t + s]):
                        sh[col, t] = sh[col, t + s]
                else:
                    sh[col, t] += sh[col, t + s]
            s //= 2
        cuda.syncthreads()

    def axpby(out, a, x, b, y, div):
        i = cuda.grid(1)
        if i < out.shape[0]:
            if div:
                out[i] = a * x[i] + y[i] / b
            elif b == 0.0:
                out[i] = a * x[i]
            else:
                out[i] = a * x[i] + b * y[i]

    def x_plus_yz(out, x, y, z):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = x[i] + y[i] * z[i]

    def multiply(out, x, y):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = x[i] * y[i]

    def advection_source(src, u_it, u_old, th, dtb):
        i = cuda.grid(1)
        if i < src.shape[0]:
            src[i] = -(th * u_it[3 * i + 2] + (1.0 - th) * u_old[3 * i + 2]) * dtb[i]

    def dirichlet_rows(values, row_start, row_end, nodes, diag_pos, bs, rhs):
        """One thread per Dirichlet node i (row i = nonzeros row_start..row_end): values of the
        row = 0, diagonal block = I, rhs = 0."""
        q = cuda.grid(1)
        if q >= nodes.shape[0]:
            return
        i = nodes[q]
        nb = bs * bs
        for k in range(row_start[q] * nb, row_end[q] * nb):
            values[k] = 0.0
        for a in range(bs):
            values[diag_pos[q] * nb + a * bs + a] = 1.0
            rhs[i * bs + a] = 0.0

    # the one-source arithmetic of dycore.assembly.no_normal_flow, as device functions (the
    # simulator hands kernel arguments only to device functions, not to @njit ones)
    rotate_block = device_jit(nnf.rotate_block.py_func)
    rotate_rhs_node = device_jit(nnf.rotate_rhs_node.py_func)
    unrotate_node = device_jit(nnf.unrotate_node.py_func)
    remove_normal_node = device_jit(nnf.remove_normal_node.py_func)

    def nnf_rotate_blocks(values, frames, fixed, pos, frow, fcol, diag):
        k = cuda.grid(1)
        if k < pos.shape[0]:
            rotate_block(values, pos[k], frames, fixed, frow[k], fcol[k], diag[k])

    def nnf_rotate_rhs(rhs, u_old, nodes, frames, fixed, dt, values, diag_pos):
        f = cuda.grid(1)
        if f < nodes.shape[0]:
            rotate_rhs_node(rhs, u_old, nodes[f], frames, f, dt, values, diag_pos[f], fixed[f])

    def nnf_unrotate(x, nodes, frames):
        f = cuda.grid(1)
        if f < nodes.shape[0]:
            unrotate_node(x, nodes[f], frames, f)

    def nnf_remove_normal(x, nodes, frames, fixed):
        f = cuda.grid(1)
        if f < nodes.shape[0]:
            remove_normal_node(x, nodes[f], frames, f, fixed[f])

    def scatter_fill(a, idx, value):
        q = cuda.grid(1)
        if q < idx.shape[0]:
            a[idx[q]] = value

    def max_abs_diff(x, y, partial):
        """partial[block, 0] = max |x − y| over the block (NaN wins)."""
        sh = cuda.shared.array((1, RB), float64)
        i = cuda.grid(1)
        t = cuda.threadIdx.x
        v = 0.0
        if i < x.shape[0]:
            v = abs(x[i] - y[i])
        sh[0, t] = v
        block_reduce(sh, 0, t, True)
        if t == 0:
            partial[cuda.blockIdx.x, 0] = sh[0, 0]

    def step_scalars(u, th, ml, div, partial):
        """Per block: max|w|, Σ M_L |u|², max |div/M_L|, number of non-finite u and θ'."""
        sh = cuda.shared.array((4, RB), float64)
        i = cuda.grid(1)
        t = cuda.threadIdx.x
        for c in range(4):
            sh[c, t] = 0.0
        if i < ml.shape[0]:
            u0 = u[3 * i]
            u1 = u[3 * i + 1]
            u2 = u[3 * i + 2]
            sh[0, t] = abs(u2)
            sh[1, t] = ml[i] * (u0 * u0 + u1 * u1 + u2 * u2)
            sh[2, t] = abs(div[i] / ml[i])
            bad = 0.0
            for v in (u0, u1, u2, th[i]):
                if not (v == v) or v == math.inf or v == -math.inf:
                    bad += 1.0
            sh[3, t] = bad
        block_reduce(sh, 0, t, True)
        block_reduce(sh, 1, t, False)
        block_reduce(sh, 2, t, True)
        block_reduce(sh, 3, t, False)
        if t == 0:
            for c in range(4):
                partial[cuda.blockIdx.x, c] = sh[c, 0]

    def finish_columns(partial, nparts, is_max, out, slot):
        """out[slot + c] = sum (or max, per is_max[c]) of partial[:nparts, c], fixed order."""
        sh = cuda.shared.array((4, RB), float64)
        t = cuda.threadIdx.x
        for c in range(partial.shape[1]):
            s = 0.0
            for q in range(t, nparts, RB):
                v = partial[q, c]
                if is_max[c]:
                    if v > s or not (v == v):
                        s = v
                else:
                    s += v
            sh[c, t] = s
            block_reduce(sh, c, t, is_max[c])
            if t == 0:
                out[slot + c] = sh[c, 0]

    names = ("axpby", "x_plus_yz", "multiply", "advection_source", "dirichlet_rows", "scatter_fill",
             "nnf_rotate_blocks", "nnf_rotate_rhs", "nnf_unrotate", "nnf_remove_normal",
             "max_abs_diff", "step_scalars", "finish_columns")
    local = locals()
    return {name: jit(local[name]) for name in names}
