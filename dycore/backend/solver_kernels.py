"""Device sparse and Krylov kernels: SpMV (CSR and BCSR 3×3), fused vector updates, reductions.

These are what the device solvers are made of (CG + AMG V-cycle, BiCGStab). They take no library
handle (no cuSPARSE, no CuPy), so a whole solve can be captured in a CUDA graph, and every one of
them skips its work when the solve's control array says the solve is finished: a graph of K
iterations replayed past convergence costs a few microseconds per no-op kernel and leaves the
result of the converged iteration untouched.

Conventions
-----------
- A matrix is block-CSR with ``bs``×``bs`` blocks (``bs = 1``: CSR; ``bs = 3``: the momentum
  BCSR): ``indptr`` (nrow+1,) int32, ``indices`` (nnzb,) int32, ``data`` (nnzb·bs·bs,) float64,
  row-major within a block. Vectors are flat float64 arrays of length nrow·bs. A block row is
  summed by a group of ``g`` consecutive threads (``g`` a power of two ≤ 32, chosen per matrix
  from its nonzeros per row): lane j adds entries j, j+g, j+2g, ... in index order from 0.0, and
  the lanes' sums meet in a fixed tree (lane l += lane l+g/2, then l+g/4, ...). ``g = 1`` is
  SciPy's ``csr_matvec`` order. A long row summed by one thread is a chain of dependent loads
  (one memory latency per nonzero); a group shortens the chain g-fold and reads each row in
  coalesced segments. The scalar row kernels ``csr_spmv`` and ``smooth`` also read a matrix
  stored as sliced ELL (``sliced`` = 1; :mod:`dycore.solvers.sliced`): ``indptr`` is then the
  slices' pointers, and each thread adds the same entries in the same order (the same bits).
- ``ctl`` (NCTL,) float64 is the solve's control array (slots below). Every iteration kernel
  returns at once when ``ctl[DONE] != 0``.
- Dot products are deterministic two-pass reductions: each block writes its partial sums (fixed
  tree order in shared memory) to ``partial[block, col]``; the last block of the same kernel to
  finish (an atomic ticket) adds the partials in a fixed order and applies the solver's scalar
  recurrence (``op``) — the finish fused into the kernel that produced the partials, one launch
  instead of two. The separate ``finish`` kernel does the same sum (same bits). Same inputs, same
  launch shape → the same bits, run after run.

The kernel bodies are plain Python functions, compiled by :func:`build_solver_kernels` through
the project's one compile path (lto off; strict mode fma=0; the simulator without a GPU). Their
references in the tests are SciPy (SpMV, CG, BiCGStab), NumPy (reductions, 3×3 inverses) and
:func:`dycore.solvers.amg.vcycle_reference` (the V-cycle, bitwise).
"""
from __future__ import annotations

import math

from numba import config as numba_config
from numba import cuda, float64

from dycore.backend import _cudasim_compat  # noqa: F401  (the simulator's shared arrays)

__all__ = ["SLICE", "NCTL", "DONE", "ITS", "BB", "TOL2", "RR", "RZ", "ALPHA", "BETA", "RHO",
           "OMEGA", "RTOL2", "ATOL2", "MAXIT", "RUNNING", "CONVERGED", "LIMIT", "BREAKDOWN",
           "OP_INIT", "OP_CG_ALPHA", "OP_CHECK", "OP_CG_BETA", "OP_BI_ALPHA", "OP_BI_S",
           "OP_BI_OMEGA", "OP_BI_R", "OP_STORE", "build_solver_kernels", "SolverKernels"]

# -- control-array slots ---------------------------------------------------------------------
DONE, ITS, BB, TOL2, RR, RZ, PQ, ALPHA, BETA, RHO, OMEGA, RTOL2, ATOL2, MAXIT = range(14)
NCTL = 16
#: threads of one slice of a sliced-ELL matrix (:mod:`dycore.solvers.sliced`): a warp
SLICE = 32
#: values of ctl[DONE]
RUNNING, CONVERGED, LIMIT, BREAKDOWN = 0.0, 1.0, 2.0, 3.0

# -- scalar recurrences applied by _finish (thread 0) -------------------------------------------
OP_INIT = 0       #: v0 = b·b: ||b||², tolerance, its = 0, rr = rho = b·b; done if b is small
OP_CG_ALPHA = 1   #: v0 = p·Ap: alpha = rz / pAp
OP_CHECK = 2      #: v0 = r·r: its += 1; converged / limit / non-finite
OP_CG_BETA = 3    #: v0 = r·z: beta = rz_new / rz; rz = rz_new
OP_BI_ALPHA = 4   #: v0 = r̂·v: alpha = rho / r̂·v
OP_BI_S = 5       #: v0 = s·s: converged on the half step (x already has + alpha·p̂)
OP_BI_OMEGA = 6   #: v0 = t·s, v1 = t·t: omega = t·s / t·t
OP_BI_R = 7       #: v0 = r·r, v1 = r̂·r: its += 1; check; beta = (rho'/rho)(alpha/omega)
OP_STORE = 8      #: v0 -> ctl[slot] (diagnostics)
OP_CG_RZ0 = 9     #: v0 = r·z of the initial residual: rz = v0


def _scalar_op(ctl, op, v0, v1, slot):
    """The solver recurrences on the control array (one thread)."""
    if op == OP_INIT:
        ctl[BB] = v0
        tol2 = ctl[RTOL2] * v0
        if ctl[ATOL2] > tol2:
            tol2 = ctl[ATOL2]
        ctl[TOL2] = tol2
        ctl[ITS] = 0.0
        ctl[RR] = v0
        ctl[RHO] = v0
        ctl[ALPHA] = 1.0
        ctl[OMEGA] = 1.0
        ctl[BETA] = 0.0
        if v0 <= tol2:
            ctl[DONE] = CONVERGED
        elif not (v0 == v0) or v0 == math.inf:
            ctl[DONE] = BREAKDOWN
        else:
            ctl[DONE] = RUNNING
    elif op == OP_CG_ALPHA:
        ctl[PQ] = v0
        ctl[ALPHA] = ctl[RZ] / v0
    elif op == OP_CHECK or op == OP_BI_R:
        ctl[RR] = v0
        ctl[ITS] += 1.0
        if v0 <= ctl[TOL2]:
            ctl[DONE] = CONVERGED
        elif not (v0 == v0) or v0 == math.inf:
            ctl[DONE] = BREAKDOWN
        elif ctl[ITS] >= ctl[MAXIT]:
            ctl[DONE] = LIMIT
        if op == OP_BI_R and ctl[DONE] == RUNNING:
            if ctl[RHO] == 0.0 or ctl[OMEGA] == 0.0:
                ctl[DONE] = BREAKDOWN
            else:
                ctl[BETA] = (v1 / ctl[RHO]) * (ctl[ALPHA] / ctl[OMEGA])
                ctl[RHO] = v1
    elif op == OP_CG_BETA:
        ctl[BETA] = v0 / ctl[RZ]
        ctl[RZ] = v0
    elif op == OP_CG_RZ0:
        ctl[RZ] = v0
    elif op == OP_BI_ALPHA:
        if v0 == 0.0:
            ctl[DONE] = BREAKDOWN
        else:
            ctl[ALPHA] = ctl[RHO] / v0
    elif op == OP_BI_S:
        if v0 <= ctl[TOL2]:
            ctl[RR] = v0
            ctl[ITS] += 1.0
            ctl[DONE] = CONVERGED
    elif op == OP_BI_OMEGA:
        if v1 == 0.0:
            ctl[DONE] = BREAKDOWN
        else:
            ctl[OMEGA] = v0 / v1
    elif op == OP_STORE:
        ctl[slot] = v0


def build_solver_kernels(jit, device_jit, rb: int, shuffle: bool = True):
    """Compile the solver kernels with ``jit`` (a ``cuda.jit``-like callable).

    Parameters
    ----------
    jit : callable
        Kernel compiler of the project's compile path (see :mod:`dycore.backend.gpu_kernels`).
    device_jit : callable
        Device-function compiler (``cuda.jit(device=True)``).
    rb : int
        Threads per block of every reduction kernel (a power of two, ≤ 1024); fixed for a
        workspace, so the reduction order is too.
    shuffle : bool
        Sum a row's thread group with warp shuffles (False: in shared memory; the same tree,
        the same bits). Ignored under the simulator, which has no shuffles.

    Returns
    -------
    SolverKernels
    """
    if rb < 1 or rb & (rb - 1) or rb > 1024:
        raise ValueError(f"reduction block {rb}: expected a power of two <= 1024")
    RB = rb
    SHARED_GROUPS = bool(numba_config.ENABLE_CUDASIM) or not shuffle
    scalar_op = device_jit(_scalar_op)

    @device_jit
    def block_sum(sh, col, t):
        """Tree sum of sh[col, :RB] into sh[col, 0]; every thread of the block calls it."""
        s = RB // 2
        while s > 0:
            cuda.syncthreads()
            if t < s:
                sh[col, t] += sh[col, t + s]
            s //= 2
        cuda.syncthreads()

    @device_jit
    def sum_partials(sh, t, partial, nparts):
        """sh[c, 0] = the sum of partial[:nparts, c] for c < partial.shape[1] (else 0), in a
        fixed order: thread t adds rows t, t+RB, ... four per round, then the block tree.
        Every thread of the block calls it."""
        ncol = partial.shape[1]
        for c in range(2):
            s = 0.0
            if c < ncol:
                # four independent loads in flight per thread, then their sum: fixed order
                q = t
                while q + 3 * RB < nparts:
                    s += (partial[q, c] + partial[q + RB, c]) + (
                        partial[q + 2 * RB, c] + partial[q + 3 * RB, c])
                    q += 4 * RB
                while q < nparts:
                    s += partial[q, c]
                    q += RB
            sh[c, t] = s
        block_sum(sh, 0, t)
        block_sum(sh, 1, t)

    @device_jit
    def reduce_partials(sh, t, partial, a0, a1, ncol, op, slot, ctl, ticket):
        """Block sums of a0 (and a1 when ncol == 2) into partial[block, :ncol]; with
        ``op >= 0`` the finish is fused: the last block of the grid to store its sums (an
        atomic ticket after a memory fence) adds all gridDim.x rows in :func:`finish`'s fixed
        order, applies ``op`` to ctl and re-arms the ticket. Same bits as a separate finish.
        Every thread of the block calls it."""
        sh[0, t] = a0
        sh[1, t] = a1
        block_sum(sh, 0, t)
        if ncol == 2:
            block_sum(sh, 1, t)
        if t == 0:
            partial[cuda.blockIdx.x, 0] = sh[0, 0]
            if ncol == 2:
                partial[cuda.blockIdx.x, 1] = sh[1, 0]
        if op < 0:
            return
        if t == 0:
            cuda.threadfence()
            arrived = cuda.atomic.add(ticket, 0, 1)
            sh[0, 0] = 1.0 if arrived == cuda.gridDim.x - 1 else 0.0
        cuda.syncthreads()
        last = sh[0, 0] == 1.0
        cuda.syncthreads()
        if last:
            cuda.threadfence()
            sum_partials(sh, t, partial, cuda.gridDim.x)
            if t == 0:
                scalar_op(ctl, op, sh[0, 0], sh[1, 0], slot)
                ticket[0] = 0

    def group_sum_shared(sg, t, lane, g, s0, s1, s2):
        """Tree sum of s0..s2 over the ``g`` lanes of each thread group (fixed order: lane l
        adds lane l+g/2, then l+g/4, ...); lane 0 of a group returns the group's sums. Every
        thread of the block calls it (it synchronises the block)."""
        sg[0, t] = s0
        sg[1, t] = s1
        sg[2, t] = s2
        off = g // 2
        while off > 0:
            cuda.syncthreads()
            if lane < off:
                sg[0, t] += sg[0, t + off]
                sg[1, t] += sg[1, t + off]
                sg[2, t] += sg[2, t + off]
            off //= 2
        cuda.syncthreads()
        return sg[0, t], sg[1, t], sg[2, t]

    def group_sum_shuffle(sg, t, lane, g, s0, s1, s2):
        """:func:`group_sum_shared` with warp shuffles (no shared memory, no block barrier):
        ``shfl_down`` by ``off`` gives lane l the value of lane l+off, so lane l adds lane
        l+off exactly as in shared memory — the same tree, the same bits. A group never
        straddles a warp (g divides 32, blocks are whole warps); every lane of the warp calls
        it. ``sg`` and ``t`` are unused (same signature)."""
        off = g // 2
        while off > 0:
            s0 += cuda.shfl_down_sync(0xFFFFFFFF, s0, off)
            s1 += cuda.shfl_down_sync(0xFFFFFFFF, s1, off)
            s2 += cuda.shfl_down_sync(0xFFFFFFFF, s2, off)
            off //= 2
        return s0, s1, s2

    def lane_sum_shuffle(s, lane, g):
        """One value's :func:`group_sum_shuffle` (the scalar CSR kernels)."""
        off = g // 2
        while off > 0:
            s += cuda.shfl_down_sync(0xFFFFFFFF, s, off)
            off //= 2
        return s

    # the CUDA simulator has no warp shuffles: there the groups meet in shared memory, in the
    # same order (the simulator's results are the reference of the GPU's, bit for bit)
    if SHARED_GROUPS:
        group_sum = device_jit(group_sum_shared)

        @device_jit
        def lane_sum(s, lane, g):
            sg = cuda.shared.array((3, RB), float64)
            r, _, _ = group_sum(sg, cuda.threadIdx.x, lane, g, s, 0.0, 0.0)
            return r
    else:
        group_sum = device_jit(group_sum_shuffle)
        lane_sum = device_jit(lane_sum_shuffle)

    @device_jit
    def lane_part(indptr, indices, data, x, gi, i, lane, g, sliced):
        """Thread ``gi``'s part of row i (< nrow) of A x: entries lane, lane+g, ... of the row
        added in order from 0.0 — read from CSR, or with ``sliced`` from the sliced-ELL column
        of thread gi (``indptr`` the slice pointers; the same entries, the same order)."""
        s = 0.0
        if sliced:
            w = gi // SLICE
            k = indptr[w] + (gi - w * SLICE)
            end = indptr[w + 1]
            while k < end:
                s += data[k] * x[indices[k]]
                k += SLICE
        else:
            for k in range(indptr[i] + lane, indptr[i + 1], g):
                s += data[k] * x[indices[k]]
        return s

    @device_jit
    def csr_row(indptr, indices, data, x, gi, i, lane, g, sliced, nrow):
        """Row i of A x as :func:`bsr_spmv` sums it (bs = 1): lane ``lane`` of the row's ``g``
        adds entries lane, lane+g, ... from 0.0 (:func:`lane_part`), then the lanes meet in
        the fixed tree; lane 0 returns the row's value (rows past ``nrow`` give 0). Every lane
        of the warp calls it."""
        s = 0.0
        if i < nrow:
            s = lane_part(indptr, indices, data, x, gi, i, lane, g, sliced)
        if g > 1:
            s = lane_sum(s, lane, g)
        return s

    def csr_spmv(indptr, indices, data, g, sliced, x, b, y, mode, ctl):
        """y = A x (mode 0), y = b − A x (mode 1), y += A x (mode 2) for a scalar CSR matrix
        (``sliced`` 1: stored as sliced ELL, nrow = len(y)), each row summed by ``g`` lanes in
        :func:`bsr_spmv`'s order (same bits), without the dot products: a lean kernel (few
        registers, no shared memory on a GPU) for the AMG cycle's residuals, restrictions and
        prolongations. Launch nrow·g threads."""
        if ctl[DONE] != 0.0:
            return
        gi = cuda.grid(1)
        i = gi // g
        lane = gi - i * g
        nrow = y.shape[0] if sliced else indptr.shape[0] - 1
        s = csr_row(indptr, indices, data, x, gi, i, lane, g, sliced, nrow)
        if i < nrow and lane == 0:
            if mode == 1:
                s = b[i] - s
            elif mode == 2:
                s = y[i] + s
            y[i] = s

    @device_jit
    def block_mv(data, base, x, col, s0, s1, s2):
        """s0..s2 += the 3×3 block data[base:base + 9] (row-major) times x[col:col + 3], one
        product at a time in row order: the block product of :func:`bsr_spmv`."""
        x0 = x[col]
        x1 = x[col + 1]
        x2 = x[col + 2]
        s0 += data[base] * x0
        s0 += data[base + 1] * x1
        s0 += data[base + 2] * x2
        s1 += data[base + 3] * x0
        s1 += data[base + 4] * x1
        s1 += data[base + 5] * x2
        s2 += data[base + 6] * x0
        s2 += data[base + 7] * x1
        s2 += data[base + 8] * x2
        return s0, s1, s2

    @device_jit
    def block_row_end(sh, sg, t, i, lane, g, nrow, bs, s0, s1, s2, b, y, mode, w, ndot,
                      partial, op, slot, ctl, ticket):
        """The end of a block-row product (:func:`bsr_spmv`, :func:`bsr3_lean_spmv`): the
        row's ``g`` lanes meet (:func:`group_sum`), lane 0 of block row i < nrow stores its sums
        s0..s(bs−1) — y = s (mode 0), b − s (mode 1), y + s (mode 2) — and with ``ndot`` the
        block partials of w·y (and y·y) are reduced (:func:`reduce_partials`). Every thread of
        the block calls it."""
        acc = 0.0
        acc2 = 0.0
        if g > 1:
            s0, s1, s2 = group_sum(sg, t, lane, g, s0, s1, s2)
        if i < nrow and lane == 0:
            for a in range(bs):
                s = s0
                if a == 1:
                    s = s1
                elif a == 2:
                    s = s2
                r = i * bs + a
                if mode == 1:
                    s = b[r] - s
                elif mode == 2:
                    s = y[r] + s
                y[r] = s
                if ndot:
                    acc += w[r] * s
                    acc2 += s * s
        if ndot:
            reduce_partials(sh, t, partial, acc, acc2, ndot, op, slot, ctl, ticket)

    def bsr_spmv(indptr, indices, data, bs, g, x, b, y, mode, w, ndot, partial, op, slot, ctl,
                 ticket):
        """y = A x (mode 0), y = b − A x (mode 1), y += A x (mode 2) over block rows, each
        summed by ``g`` threads; with ``ndot`` 1 also the block partials of w·y, with 2 of w·y
        and y·y, finished with ``op`` (< 0: not finished) as :func:`reduce_partials` does
        (arguments not used may be 1-element dummies). Launch nrow·g threads."""
        sh = cuda.shared.array((2, RB), float64)
        sg = cuda.shared.array((3, RB), float64)
        if ctl[DONE] != 0.0:
            return
        gi = cuda.grid(1)
        t = cuda.threadIdx.x
        i = gi // g
        lane = gi - i * g
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        if i < indptr.shape[0] - 1:
            for k in range(indptr[i] + lane, indptr[i + 1], g):
                if bs == 1:
                    s0 += data[k] * x[indices[k]]
                else:
                    s0, s1, s2 = block_mv(data, k * 9, x, indices[k] * 3, s0, s1, s2)
        block_row_end(sh, sg, t, i, lane, g, indptr.shape[0] - 1, bs, s0, s1, s2, b, y, mode,
                      w, ndot, partial, op, slot, ctl, ticket)

    def bsr3_lean_spmv(indptr, cols, lean, ncomp, data, g, x, b, y, mode, w, ndot, partial,
                       op, slot, ctl, ticket):
        """:func:`bsr_spmv` (bs = 3, the same arguments otherwise) over a matrix whose blocks
        are [[l0, a01, 0], [a10, l1, 0], [0, 0, l2]] except a few stored in full — the momentum
        matrix: diagonal transport + mass, Coriolis in (0,1)/(1,0), full 3×3 blocks only where
        the no-normal-flow rotation wrote them. ``lean`` (ncomp·nnzb,) float64 holds the lean
        entries component-major (l0, l1, l2, then with ``ncomp`` 5 a01, a10; ncomp 3 when the
        Coriolis entries are zero), written by :func:`bsr3_lean_values`; ``cols[k]`` is block
        k's column, or −(column + 1) for a block read in full from ``data`` (nnzb·9).

        Each product of an entry left out is an exact zero (0·x for finite x), and a row sum
        started from +0.0 never becomes −0.0, so adding it changes nothing: for finite x this
        gives :func:`bsr_spmv`'s bits while reading 28 (or 44) bytes per block instead of 76.
        Launch nrow·g threads."""
        sh = cuda.shared.array((2, RB), float64)
        sg = cuda.shared.array((3, RB), float64)
        if ctl[DONE] != 0.0:
            return
        gi = cuda.grid(1)
        t = cuda.threadIdx.x
        i = gi // g
        lane = gi - i * g
        nnzb = cols.shape[0]
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        if i < indptr.shape[0] - 1:
            for k in range(indptr[i] + lane, indptr[i + 1], g):
                c = cols[k]
                if c < 0:
                    s0, s1, s2 = block_mv(data, k * 9, x, (-c - 1) * 3, s0, s1, s2)
                else:
                    x0 = x[3 * c]
                    x1 = x[3 * c + 1]
                    s0 += lean[k] * x0
                    if ncomp == 5:
                        s0 += lean[3 * nnzb + k] * x1
                        s1 += lean[4 * nnzb + k] * x0
                    s1 += lean[nnzb + k] * x1
                    s2 += lean[2 * nnzb + k] * x[3 * c + 2]
        block_row_end(sh, sg, t, i, lane, g, indptr.shape[0] - 1, 3, s0, s1, s2, b, y, mode,
                      w, ndot, partial, op, slot, ctl, ticket)

    def bsr3_lean_values(data, cols, lean, ncomp):
        """The lean entries of :func:`bsr3_lean_spmv` from the full 3×3 blocks ``data``:
        lean[c·nnzb + k] = block k's (0,0), (1,1), (2,2), then with ``ncomp`` 5 (0,1), (1,0);
        blocks read in full (cols[k] < 0) are left alone. Runs whatever ctl says (a solve's
        start). Launch nnzb threads."""
        k = cuda.grid(1)
        nnzb = cols.shape[0]
        if k < nnzb and cols[k] >= 0:
            o = 9 * k
            lean[k] = data[o]
            lean[nnzb + k] = data[o + 4]
            lean[2 * nnzb + k] = data[o + 8]
            if ncomp == 5:
                lean[3 * nnzb + k] = data[o + 1]
                lean[4 * nnzb + k] = data[o + 3]

    def csr_spmv_dot(indptr, indices, data, g, x, y, w, ndot, partial, op, slot, ctl, ticket):
        """y = A x for a scalar CSR matrix and the block partials of w·y (``ndot`` 1; with 2
        also of y·y), finished with ``op`` (< 0: not): :func:`bsr_spmv` with bs = 1, mode 0 —
        the same bits — as a lean kernel (CG's A p; BiCGStab's A p̂ and A ŝ). Launch nrow·g
        threads."""
        sh = cuda.shared.array((2, RB), float64)
        if ctl[DONE] != 0.0:
            return
        gi = cuda.grid(1)
        t = cuda.threadIdx.x
        i = gi // g
        lane = gi - i * g
        acc = 0.0
        acc2 = 0.0
        nrow = indptr.shape[0] - 1
        s = csr_row(indptr, indices, data, x, gi, i, lane, g, 0, nrow)
        if i < nrow and lane == 0:
            y[i] = s
            acc = w[i] * s
            acc2 = s * s
        reduce_partials(sh, t, partial, acc, acc2, ndot, op, slot, ctl, ticket)

    def smooth(indptr, indices, data, g, sliced, r0, x, b, dinv, d, x_new, c1, c2, first, ndot,
               partial, op, slot, ctl, ticket):
        """One polynomial (Chebyshev / damped-Jacobi) smoothing step on rows r0 ≤ i < n of a
        CSR level (n = len(indptr) − 1; ``sliced`` 1: a sliced-ELL level, n = len(b), r0 = 0),
        each row summed by ``g`` threads (launch (n − r0)·g threads; ``first`` needs no row
        sum: g = 1):
        d = c1·D⁻¹(b − A x) + c2·d; x_new = x + d (``first``: x = 0, d = c1·D⁻¹b, x_new = d).
        Every vector is indexed by the row itself, so a level's rows can be smoothed in two
        launches — [0, m) with indptr[:m + 1] and r0 = 0, then [m, n) with r0 = m — with the
        bits of one (the GPU ranks' interior and boundary rows, :mod:`dycore.parallel.overlap`).
        With ``ndot`` also the block partial of b·x_new, finished with ``op`` (< 0: not)."""
        sh = cuda.shared.array((2, RB), float64)
        sg = cuda.shared.array((3, RB), float64)
        if ctl[DONE] != 0.0:
            return
        gi = cuda.grid(1)
        t = cuda.threadIdx.x
        i = gi // g
        lane = gi - i * g
        i += r0
        n = b.shape[0] if sliced else indptr.shape[0] - 1
        acc = 0.0
        s = 0.0
        if not first and i < n:
            s = lane_part(indptr, indices, data, x, gi, i, lane, g, sliced)
        if g > 1:
            s, _, _ = group_sum(sg, t, lane, g, s, 0.0, 0.0)
        if i < n and lane == 0:
            if first:
                di = c1 * (dinv[i] * b[i])
                xn = di
            else:
                di = c1 * (dinv[i] * (b[i] - s)) + c2 * d[i]
                xn = x[i] + di
            d[i] = di
            x_new[i] = xn
            acc = b[i] * xn
        if ndot:
            reduce_partials(sh, t, partial, acc, 0.0, 1, op, slot, ctl, ticket)

    def finish(partial, nparts, op, slot, ctl):
        """Sum partial[:nparts, :2] in a fixed order (one block) and apply ``op`` to ctl."""
        sh = cuda.shared.array((2, RB), float64)
        if op != OP_INIT and op != OP_STORE and ctl[DONE] != 0.0:
            return
        t = cuda.threadIdx.x
        sum_partials(sh, t, partial, nparts)
        if t == 0:
            scalar_op(ctl, op, sh[0, 0], sh[1, 0], slot)

    def init_residual(b, x, r, rhat, with_rhat, partial, op, ctl, ticket):
        """Start of a solve (ignores ctl[DONE]): x = 0, r = b, r̂ = b (``with_rhat``), partial
        b·b, finished with ``op``."""
        sh = cuda.shared.array((2, RB), float64)
        i = cuda.grid(1)
        t = cuda.threadIdx.x
        acc = 0.0
        if i < b.shape[0]:
            v = b[i]
            x[i] = 0.0
            r[i] = v
            if with_rhat:
                rhat[i] = v
            acc = v * v
        reduce_partials(sh, t, partial, acc, 0.0, 1, op, 0, ctl, ticket)

    def update_xr(x, r, p, q, coef, rhat, with_rhat, partial, op, ctl, ticket):
        """x += c p; r −= c q with c = ctl[coef] (CG: alpha, p, Ap; BiCGStab: omega, ŝ, t);
        partials r·r and, ``with_rhat``, r̂·r, finished with ``op``."""
        sh = cuda.shared.array((2, RB), float64)
        if ctl[DONE] != 0.0:
            return
        i = cuda.grid(1)
        t = cuda.threadIdx.x
        c = ctl[coef]
        a0 = 0.0
        a1 = 0.0
        if i < x.shape[0]:
            x[i] += c * p[i]
            ri = r[i] - c * q[i]
            r[i] = ri
            a0 = ri * ri
            if with_rhat:
                a1 = rhat[i] * ri
        reduce_partials(sh, t, partial, a0, a1, 2, op, 0, ctl, ticket)

    def cg_update_p(p, z, first, ctl):
        """p = z (first) or p = z + beta p."""
        if ctl[DONE] != 0.0:
            return
        i = cuda.grid(1)
        if i < p.shape[0]:
            if first:
                p[i] = z[i]
            else:
                p[i] = z[i] + ctl[BETA] * p[i]

    def block_apply(minv, bs, src, dst, i):
        for a in range(bs):
            s = 0.0
            for c in range(bs):
                s += minv[(i * bs + a) * bs + c] * src[i * bs + c]
            dst[i * bs + a] = s

    block_apply_d = device_jit(block_apply)

    def bi_update_p(r, p, v, minv, bs, phat, ctl):
        """p = r (first iteration) or p = r + beta (p − omega v); p̂ = M⁻¹ p (pointwise M)."""
        if ctl[DONE] != 0.0:
            return
        i = cuda.grid(1)
        if i < phat.shape[0] // bs:
            first = ctl[ITS] == 0.0
            beta = ctl[BETA]
            omega = ctl[OMEGA]
            for a in range(bs):
                k = i * bs + a
                if first:
                    p[k] = r[k]
                else:
                    p[k] = r[k] + beta * (p[k] - omega * v[k])
            block_apply_d(minv, bs, p, phat, i)

    def bi_update_s(r, v, x, phat, minv, bs, shat, partial, op, ctl, ticket):
        """s = r − alpha v (in r); x += alpha p̂; ŝ = M⁻¹ s; partial s·s, finished with
        ``op``."""
        sh = cuda.shared.array((2, RB), float64)
        if ctl[DONE] != 0.0:
            return
        i = cuda.grid(1)
        t = cuda.threadIdx.x
        alpha = ctl[ALPHA]
        acc = 0.0
        if i < shat.shape[0] // bs:
            for a in range(bs):
                k = i * bs + a
                s = r[k] - alpha * v[k]
                r[k] = s
                x[k] += alpha * phat[k]
                acc += s * s
            block_apply_d(minv, bs, r, shat, i)
        reduce_partials(sh, t, partial, acc, 0.0, 1, op, 0, ctl, ticket)

    def bi_dots_ts(tv, s, partial, op, ctl, ticket):
        """partials t·s and t·t, finished with ``op``."""
        sh = cuda.shared.array((2, RB), float64)
        if ctl[DONE] != 0.0:
            return
        i = cuda.grid(1)
        t = cuda.threadIdx.x
        a0 = 0.0
        a1 = 0.0
        if i < tv.shape[0]:
            a0 = tv[i] * s[i]
            a1 = tv[i] * tv[i]
        reduce_partials(sh, t, partial, a0, a1, 2, op, 0, ctl, ticket)

    def block_inverse(values, diag_pos, bs, kind, minv):
        """minv[i] = inverse of the diagonal block i (kind 2), of its diagonal (kind 1), or the
        identity (kind 0); values is the flat (nnzb·bs·bs,) matrix."""
        i = cuda.grid(1)
        if i >= diag_pos.shape[0]:
            return
        base = diag_pos[i] * bs * bs
        o = i * bs * bs
        for a in range(bs * bs):
            minv[o + a] = 0.0
        if kind == 0:
            for a in range(bs):
                minv[o + a * bs + a] = 1.0
        elif kind == 1 or bs == 1:
            for a in range(bs):
                minv[o + a * bs + a] = 1.0 / values[base + a * bs + a]
        else:
            m00 = values[base]
            m01 = values[base + 1]
            m02 = values[base + 2]
            m10 = values[base + 3]
            m11 = values[base + 4]
            m12 = values[base + 5]
            m20 = values[base + 6]
            m21 = values[base + 7]
            m22 = values[base + 8]
            c00 = m11 * m22 - m12 * m21
            c01 = m12 * m20 - m10 * m22
            c02 = m10 * m21 - m11 * m20
            det = m00 * c00 + m01 * c01 + m02 * c02
            inv = 1.0 / det
            minv[o] = c00 * inv
            minv[o + 1] = (m02 * m21 - m01 * m22) * inv
            minv[o + 2] = (m01 * m12 - m02 * m11) * inv
            minv[o + 3] = c01 * inv
            minv[o + 4] = (m00 * m22 - m02 * m20) * inv
            minv[o + 5] = (m02 * m10 - m00 * m12) * inv
            minv[o + 6] = c02 * inv
            minv[o + 7] = (m01 * m20 - m00 * m21) * inv
            minv[o + 8] = (m00 * m11 - m01 * m10) * inv

    def accumulate(ctl, stats, slot):
        """stats[slot] += iterations of the solve just issued; stats[slot + 1] += 1 unless it
        converged (a solve replayed without a host check is verified at the end of the step)."""
        if cuda.grid(1) == 0:
            stats[slot] += ctl[ITS]
            if ctl[DONE] != CONVERGED:
                stats[slot + 1] += 1.0

    def copy(src, dst):
        i = cuda.grid(1)
        if i < dst.shape[0]:
            dst[i] = src[i]

    from dycore.backend.vector_kernels import build_vector_kernels
    return SolverKernels(rb=RB, **build_vector_kernels(jit, device_jit, rb),
                         bsr_spmv=jit(bsr_spmv), bsr3_lean_spmv=jit(bsr3_lean_spmv),
                         bsr3_lean_values=jit(bsr3_lean_values), csr_spmv=jit(csr_spmv), csr_spmv_dot=jit(csr_spmv_dot),
                         smooth=jit(smooth),
                         finish=jit(finish),
                         init_residual=jit(init_residual), update_xr=jit(update_xr),
                         cg_update_p=jit(cg_update_p), bi_update_p=jit(bi_update_p),
                         bi_update_s=jit(bi_update_s), bi_dots_ts=jit(bi_dots_ts),
                         block_inverse=jit(block_inverse),
                         accumulate=jit(accumulate), copy=jit(copy))


class SolverKernels:
    """The compiled solver kernels (attributes named after the functions above) and ``rb``."""

    def __init__(self, **kernels):
        self.__dict__.update(kernels)
