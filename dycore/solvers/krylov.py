"""Device Krylov solvers that need no host synchronisation per iteration: PCG and BiCGStab.

Both are written as sequences of the kernels of :mod:`dycore.backend.solver_kernels`, issued through
the backend (``backend.launch``), over work arrays allocated once. A solve is

    start       (x = 0, r = b, ||b||², the tolerance, the preconditioner set-up)
    iteration × K

where every iteration kernel is a no-op once the solve's control array says it is finished. On a
GPU the start and a chunk of K iterations are captured once as CUDA graphs and replayed; the host
reads the control array (one small device→host copy) only after a chunk, to see whether the solve
converged, so a solve costs one host synchronisation, not one per iteration.

Stopping test, as SciPy's: ``||r||₂ ≤ max(rtol·||b||₂, atol)`` on the recursively updated
residual; ``maxiter`` counts iterations (matrix–vector products for CG, pairs for BiCGStab).

PCG: Saad, *Iterative Methods for Sparse Linear Systems* (2nd ed.), Alg. 9.1. BiCGStab with right
preconditioning: van der Vorst (1992), in the form of SciPy's ``bicgstab``.
"""
from __future__ import annotations

import numpy as np

from dycore.backend import solver_kernels as K
from dycore.errors import SolverDivergedError
from dycore.solvers.sliced import sliced_ell

__all__ = ["DeviceLinalg", "DeviceMatrix", "LeanBlocks", "DevicePCG", "DeviceBiCGStab",
           "group_size", "row_group", "replay_budget", "MAX_GROUP", "SMALL_ROWS"]

#: most threads per matrix row in the row kernels (one warp)
MAX_GROUP = 32
#: a CSR matrix of at most this many rows takes its row group from its longest row alone
#: (:func:`row_group`): 4,096 rows of 32 threads fill half of an H200's resident threads
SMALL_ROWS = 4096


class DeviceLinalg:
    """The solver kernels of one backend plus allocation and launch helpers.

    Parameters
    ----------
    backend : GPUBackend or SimulatorBackend (:class:`dycore.backend.protocol.DeviceBackend`)
    rb : threads per block of every solver kernel (a power of two)
    max_group : most threads per matrix row in the row kernels (a power of two ≤ min(32, rb);
        None: :attr:`DEFAULT_MAX_GROUP`, else min(32, rb, the backend's ``max_row_group``))
    fuse : finish each dot in the kernel that produced its partials (False: a separate
        one-block ``finish`` launch after it; the same bits). None: :attr:`FUSE`.

    The class attributes ``FUSE`` and ``DEFAULT_MAX_GROUP`` are the defaults of every workspace
    built afterwards (a profiling switch: ``scripts/gpu_check.py --parts solver_ab``).
    """

    FUSE = True
    DEFAULT_MAX_GROUP: int | None = None
    #: scalar CSR products without dots run the lean ``csr_spmv`` kernel (False: the general
    #: ``bsr_spmv``; the same bits — a profiling switch)
    LEAN = True
    #: sum a row's thread group with warp shuffles (False: shared memory; same bits)
    SHUFFLE = True

    def __init__(self, backend, rb: int = 256, max_group: int | None = None,
                 fuse: bool | None = None):
        from dycore.backend.gpu_kernels import get_solver_kernels
        if max_group is None:                 # (the simulator's backend asks for fewer)
            max_group = self.DEFAULT_MAX_GROUP or min(
                MAX_GROUP, rb, getattr(backend, "max_row_group", MAX_GROUP))
        self.fuse = self.FUSE if fuse is None else bool(fuse)
        self.lean = self.LEAN
        if max_group < 1 or max_group & (max_group - 1) or max_group > min(32, rb):
            raise ValueError(f"max_group {max_group}: expected a power of two <= min(32, rb)")
        self.b, self.rb, self.max_group = backend, rb, max_group
        self.k = get_solver_kernels(backend.strict, rb, self.SHUFFLE)
        # dummies for arguments a kernel does not use (1 element: no zero-size device arrays)
        self.empty_f = self.nb(backend.xp.zeros(1))
        self.no_partial = self.nb(backend.xp.zeros((1, 1)))
        #: the arrival counter of the fused finishes (zero between kernels; one suffices since
        #: the kernels run one after another on the backend's stream)
        self.ticket = self.nb(backend.xp.zeros(1, dtype=np.int32))

    def nb(self, a):
        return self.b.nb(a)

    def fused(self, op: int) -> int:
        """The ``op`` to pass to a dot-producing kernel: ``op`` when finishes are fused, else -1
        (partials only; :meth:`finish_unfused` then launches the finish)."""
        return op if self.fuse else -1

    def finish_unfused(self, partial, nparts: int, op: int, ctl) -> None:
        """Launch the separate finish of ``op`` over ``nparts`` partial rows, unless fused."""
        if not self.fuse:
            self.finish(partial, nparts, op, ctl)

    def zeros(self, *shape):
        """A zeroed float64 backend array and its numba view: (array, view)."""
        a = self.b.xp.zeros(shape if len(shape) > 1 else shape[0], dtype=np.float64)
        return a, self.nb(a)

    def nblocks(self, n: int) -> int:
        return max(1, (n + self.rb - 1) // self.rb)

    def launch(self, kernel, n: int, *args):
        """``kernel`` over ``n`` threads in blocks of ``rb``."""
        self.b.launch(kernel, (self.nblocks(n), self.rb), *args)

    def finish(self, partial, nparts: int, op: int, ctl, slot: int = 0):
        self.b.launch(self.k.finish, (1, self.rb), partial, nparts, op, slot, ctl)

    def nparts(self, a) -> int:
        """Rows of block partials that a dot-producing row kernel over ``a`` writes."""
        return self.nblocks(a.nrow * a.g)

    def spmv(self, a, x, y, mode=0, b=None, w=None, partial=None, ctl=None, op=-1, slot=0,
             ndot=1) -> int:
        """y = A x / b − A x / y + A x (mode 0/1/2), ``a.g`` threads per block row; with
        ``partial`` also block partials of w·y (``ndot`` 2: and of y·y), finished with ``op``
        (< 0: not finished; then :meth:`finish` the returned number of partial rows).
        A scalar CSR product without dots, or y = A x with w·y (and y·y), runs a lean kernel
        (``csr_spmv``, ``csr_spmv_dot``; the same bits); a BCSR 3×3 matrix with
        :attr:`DeviceMatrix.lean_blocks` runs ``bsr3_lean_spmv`` (the same bits for finite x)."""
        if a.bs == 1 and partial is None and (self.lean or a.sliced):
            if a.sliced and y.shape[0] != a.nrow:      # (the kernel takes nrow from y)
                raise ValueError(f"DeviceLinalg.spmv: y has {y.shape[0]} entries, the "
                                 f"sliced-ELL matrix {a.nrow} rows")
            self.launch(self.k.csr_spmv, a.nrow * a.g, a.indptr, a.indices, a.data, a.g,
                        a.sliced, x, self.empty_f if b is None else b, y, mode, ctl)
            return 0
        if a.sliced:
            raise ValueError("DeviceLinalg.spmv: a sliced-ELL matrix has products without "
                             "dot products only (csr_spmv)")
        if a.lean_blocks is not None:
            lb = a.lean_blocks
            self.launch(self.k.bsr3_lean_spmv, a.nrow * a.g, a.indptr, lb.cols, lb.values,
                        lb.ncomp, a.data, a.g, x, self.empty_f if b is None else b, y, mode,
                        self.empty_f if w is None else w, 0 if partial is None else ndot,
                        self.no_partial if partial is None else partial, op, slot, ctl,
                        self.ticket)
            return self.nparts(a)
        if a.bs == 1 and self.lean and mode == 0 and partial is not None and w is not None:
            self.launch(self.k.csr_spmv_dot, a.nrow * a.g, a.indptr, a.indices, a.data, a.g,
                        x, y, w, ndot, partial, op, slot, ctl, self.ticket)
            return self.nparts(a)
        self.launch(self.k.bsr_spmv, a.nrow * a.g, a.indptr, a.indices, a.data, a.bs, a.g, x,
                    self.empty_f if b is None else b, y, mode,
                    self.empty_f if w is None else w, 0 if partial is None else ndot,
                    self.no_partial if partial is None else partial, op, slot, ctl, self.ticket)
        return self.nparts(a)


def group_size(nnz_per_row: float, max_group: int = MAX_GROUP) -> int:
    """Threads that sum one block row: the power of two nearest below nnz_per_row / 4, in
    [1, max_group] (about four nonzeros per thread: a short dependent-load chain per thread,
    few idle lanes)."""
    g = 1
    while g * 2 <= min(max_group, nnz_per_row / 4.0):
        g *= 2
    return g


def row_group(indptr, max_group: int = MAX_GROUP) -> int:
    """Threads that sum one row of a scalar CSR matrix (the row kernels' ``g``).

    A matrix of more than :data:`SMALL_ROWS` rows fills the GPU with its rows: about eight
    nonzeros a thread of its mean row, or sixteen of its longest row where that asks for more
    threads (a restriction's rows are uneven) — the power of two nearest below max(mean / 8,
    longest / 16). A smaller one (an AMG hierarchy's coarse levels, their restrictions, the
    coarsest pseudo-inverse) leaves the GPU mostly idle, so its longest row sets the kernel's
    time: about two nonzeros a thread of that row (below longest / 2). Always in
    [1, max_group]. Measured on an H200 (CSR products in a CUDA graph,
    ``scripts/device/level_groups.py``; docs/performance.md): the paper mesh's pressure
    matrix (61 entries a row) 33.0 µs with 4 threads against 35.9 with 8 and 44.7 with 16;
    the 4.42 M-tet hierarchy's restriction to 27,159 unknowns (24 a row, the longest 158)
    8.5 µs with 8 against 10.8 with 4; the restriction from 1,800 to 69 unknowns (108 a row,
    the longest 327) 4.4 µs with 32 against 6.1 with 16. The paper-mesh step with device
    solvers: 20.96 ms with four nonzeros a thread of the mean row for every matrix
    (:func:`group_size`), 20.54 with the small matrices sized by their longest row, 18.67
    with this rule (medians of three runs each).

    indptr : (nrow + 1,) integer array (host); max_group : a power of two ≤ 32
    Returns a power of two in [1, max_group]; 1 for a matrix without rows.
    """
    lengths = np.diff(np.asarray(indptr, np.int64))
    if lengths.size == 0:
        return 1
    if lengths.size <= SMALL_ROWS:
        return group_size(2.0 * float(lengths.max()), max_group)
    return group_size(max(float(lengths.mean()) / 2.0, float(lengths.max()) / 4.0), max_group)


def replay_budget(its: int, maxiter: int) -> int:
    """Iterations the graph of a replayed solve holds: the learnt count ``its`` plus a margin
    of max(2, ⌈its / 10⌉) for the count's drift from step to step, at most ``maxiter``.

    Every iteration past convergence still runs its launches as no-ops (on GPU ranks its halo
    exchanges and reductions too), so the margin is paid in every solve of every step; a
    solve that needs more than its budget costs more, once: the serial device solver replays
    its ``more`` graph after a host read, and a captured Picard iteration repeats its step
    with every solve checked; either way the budget is learnt again from the new count. On
    the 4.42 M-tet mesh (19 CG, 7 momentum and 32 tracer iterations a solve) this margin
    keeps 2 / 2 / 4 spare iterations where 20 % + 2 kept 6 / 4 / 9, whose no-ops cost the
    2-GPU step about 2 ms (docs/performance.md).

    its : int ≥ 0 (a count of 0 is taken as 1); maxiter : int ≥ 1
    """
    its = max(int(its), 1)
    return int(min(maxiter, its + max(2, -(-its // 10))))


class DeviceMatrix:
    """A block-CSR matrix on the device: views of (indptr, indices, data) and the block size.

    Parameters
    ----------
    la : DeviceLinalg
    indptr : (nrow+1,) int32; indices : (nnzb,) int32 — backend or host arrays
    data : (nnzb·bs·bs,) float64 backend array (e.g. an assembler's values buffer, used in place)
    bs : 1 (CSR) or 3 (BCSR 3×3)
    g : threads per block row in the row kernels (None: :func:`row_group` of a CSR matrix's
        rows, :func:`group_size` of the mean nonzero blocks per row of a BCSR one; 1: SciPy's
        summation order); a power of two ≤ ``la.max_group``, else ValueError (the solvers'
        block partials hold rows of at most ``max_group`` threads)
    dtype : storage of ``data``: float64, or float32 (half the bytes per nonzero; the kernels
        promote each value to float64 before multiplying, so the arithmetic stays float64)
    sliced : store a CSR matrix (bs = 1, host arrays) as sliced ELL for its ``g``
        (:func:`~dycore.solvers.sliced.sliced_ell`): the same products, read coalesced; only
        :meth:`DeviceLinalg.spmv` without dot products and the V-cycle's smoothing read it.
        ``indptr`` / ``indices`` / ``data`` are then the slice pointers, columns and values.
    """

    def __init__(self, la, indptr, indices, data, bs: int = 1, g: int | None = None,
                 dtype=np.float64, sliced: bool = False):
        nrow = int(indptr.shape[0]) - 1
        if sliced:
            if bs != 1 or not isinstance(indptr, np.ndarray):
                raise ValueError("DeviceMatrix: sliced ELL is built from a scalar CSR matrix "
                                 "on the host")
            g = g if g is not None else row_group(indptr, la.max_group)
            indptr, indices, data = sliced_ell(indptr, indices, np.asarray(data, dtype), g)
        #: 1: stored as sliced ELL (:mod:`dycore.solvers.sliced`), 0: (block) CSR
        self.sliced = int(bool(sliced))
        self.indptr = la.nb(la.b.as_device(indptr, np.int32))
        self.indices = la.nb(la.b.as_device(indices, np.int32))
        self.data = la.nb(la.b.as_device(data, dtype).reshape(-1))
        self.nrow = nrow
        self.bs = bs
        self.n = self.nrow * bs
        if g is None and bs == 1:           # (the row lengths read on the host, once)
            g = row_group(indptr if isinstance(indptr, np.ndarray) else la.b.to_host(indptr),
                          la.max_group)
        self.g = g if g is not None else group_size(
            int(self.indices.shape[0]) / max(self.nrow, 1), la.max_group)
        if self.g < 1 or self.g & (self.g - 1) or self.g > la.max_group:
            # (the solvers size their block partials for rows of at most max_group threads)
            raise ValueError(f"DeviceMatrix: g {self.g} threads a row: expected a power of two "
                             f"<= the workspace's max_group {la.max_group}")
        #: :class:`LeanBlocks` of a BCSR 3×3 momentum matrix (None: every block read in full)
        self.lean_blocks = None

    @classmethod
    def from_scipy(cls, la, a, g: int | None = None, dtype=np.float64, sliced: bool = False):
        """From a SciPy CSR matrix (copied to the device once, values stored as ``dtype``;
        ``sliced``: as sliced ELL)."""
        a = a.tocsr()
        a.sort_indices()
        return cls(la, a.indptr, a.indices, a.data, 1, g, dtype, sliced)


class LeanBlocks:
    """The momentum matrix's blocks as its products read them (``bsr3_lean_spmv``).

    Every block of the momentum matrix is [[l0, a01, 0], [a10, l1, 0], [0, 0, l2]] (transport,
    mass and sponge on the diagonal, Coriolis in (0,1) and (1,0): the weak form's declared
    block sparsity, docs/architecture.md "Block sparsity"), except the blocks that the
    no-normal-flow rotation turns into full 3×3 blocks. The products read the five entries (or
    three, when the Coriolis parameter is zero and those entries are exact zeros) from a
    component-major copy refreshed at the start of every solve (``bsr3_lean_values``), and the
    rotated blocks in full from the assembled values: 28 (44) instead of 76 bytes per block,
    with the bits of the full product for finite vectors.

    Parameters
    ----------
    la : DeviceLinalg; indices : (nnzb,) int32 backend array — block columns
    full_pos : (nf,) int backend or host array or None — positions of the blocks to read in
        full (the rotated blocks, ``NoNormalFlow.blk_pos``)
    coriolis : whether the (0,1)/(1,0) entries may be nonzero (False: f = 0, ncomp 3)
    """

    def __init__(self, la, indices, full_pos=None, coriolis: bool = True):
        xp = la.b.xp
        cols = xp.array(indices, dtype=np.int32)
        if full_pos is not None and len(full_pos):
            pos = xp.asarray(full_pos, dtype=np.int64)
            cols[pos] = -cols[pos] - 1
        self.nnzb = int(cols.shape[0])
        self.ncomp = 5 if coriolis else 3
        self.nfull = 0 if full_pos is None else int(len(full_pos))
        self._cols = cols
        self.cols = la.nb(cols)
        self.values_arr, self.values = la.zeros(self.ncomp * self.nnzb)

    def refresh(self, la, a) -> None:
        """Copy the lean entries of the assembled values ``a.data`` (a kernel launch)."""
        la.launch(la.k.bsr3_lean_values, self.nnzb, a.data, self.cols, self.values,
                  self.ncomp)


class _Solver:
    """Control array, chunked replay and the convergence verdict shared by PCG and BiCGStab."""

    name = "solver"

    def __init__(self, la, n: int, cfg, ctl_row, label: str):
        self.la, self.n, self.cfg, self.label = la, n, cfg, label
        self.ctl_arr = ctl_row
        self.ctl = la.nb(ctl_row)
        self.partial_arr, self.partial = la.zeros(la.nblocks(n * la.max_group), 2)
        host = np.zeros(K.NCTL)
        host[K.RTOL2] = cfg.rtol * cfg.rtol
        host[K.ATOL2] = cfg.atol * cfg.atol
        host[K.MAXIT] = cfg.max_iterations
        ctl_row[...] = la.b.to_device(host)
        self.chunk = 8
        self._graphs = {}

    def _run(self, key, start, iterate, check: bool = True, inline: bool = False):
        """Issue (or replay) start + iterations; with ``check`` read the verdict.

        The first call with a given ``key`` launches directly (compiling the kernels) in chunks,
        reading the verdict after each, and learns how many iterations the solve takes. It then
        captures two graphs: ``first`` (the start plus :func:`replay_budget` iterations) and
        ``more`` (``chunk`` iterations). Later calls replay ``first``; with ``check`` they read
        the verdict (one host sync) and replay ``more`` until the solve is finished, re-capturing
        ``first`` with a larger budget when it fell short. Without ``check`` nothing is read:
        the caller verifies the solve later through :meth:`accumulate`. ``inline`` launches the
        kernels of ``first`` directly instead (while an enclosing graph is being captured).
        """
        g = self._graphs.get(key)
        if inline:
            if g is None:
                raise RuntimeError(f"{self.label} solve captured before its first run")
            g[3]()
            return None
        if g is None:
            start()
            while True:
                for _ in range(self.chunk):
                    iterate()
                done, its = self.read()
                if done != K.RUNNING:
                    break
            self._graphs[key] = self._capture(start, iterate, its)
            return self._verdict(done, its)
        first, more, budget, _ = g
        first.replay()
        if not check:
            return None
        done, its = self.read()
        while done == K.RUNNING:
            more.replay()
            done, its = self.read()
        if its > budget:
            self._graphs[key] = self._capture(start, iterate, its)
        return self._verdict(done, its)

    def _capture(self, start, iterate, its):
        b = self.la.b
        budget = replay_budget(its, self.cfg.max_iterations)

        def first():
            start()
            for _ in range(budget):
                iterate()

        def more():
            for _ in range(self.chunk):
                iterate()
        return b.capture(first), b.capture(more), budget, first

    def forget_graphs(self) -> None:
        """Drop the captured solves: the next solve of each kind runs checked again and
        learns its budget (after its matrix or launch shape changed)."""
        self._graphs.clear()

    def accumulate(self, stats, slot: int) -> None:
        """Launch stats[slot] += iterations, stats[slot + 1] += (not converged)."""
        self.la.b.launch(self.la.k.accumulate, (1, 1), self.ctl, stats, slot)

    def read(self):
        """(ctl[DONE], ctl[ITS]) from the device: one device→host copy."""
        host = self.la.b.to_host(self.ctl_arr)
        return float(host[K.DONE]), int(host[K.ITS])

    def _verdict(self, done, its):
        if done == K.CONVERGED:
            return its
        cfg = self.cfg
        why = {K.LIMIT: "iteration limit reached", K.BREAKDOWN: "breakdown or non-finite "
               "residual"}.get(done, "not finished")
        raise SolverDivergedError(
            f"{self.label} solve ({self.name}, device) did not converge: {why} after {its} "
            f"iterations (rtol {cfg.rtol:g}, max_iterations {cfg.max_iterations})")


class DevicePCG(_Solver):
    """Preconditioned CG for an SPD CSR matrix, the preconditioner being a device V-cycle.

    Parameters
    ----------
    la : DeviceLinalg; a : DeviceMatrix (bs = 1)
    precond : object with ``issue(r, partial, ctl, op) -> z`` launching z = M⁻¹ r and the block
        partials of r·z into ``partial``, finished with ``op`` (:class:`dycore.solvers.amg.DeviceVCycle`, or
        :class:`dycore.solvers.amg.DeviceJacobi`, whose D⁻¹ = 1 means no preconditioner)
    cfg : LinearSolverConfig (rtol, atol, max_iterations); ctl_row : (NCTL,) backend array
    """

    name = "cg"

    def __init__(self, la, a, precond, cfg, ctl_row, label="pressure"):
        super().__init__(la, a.n, cfg, ctl_row, label)
        self.a, self.m = a, precond
        n = a.n
        self.b_arr, self.bv = la.zeros(n)
        self.x_arr, self.x = la.zeros(n)
        self.r_arr, self.r = la.zeros(n)
        self.p_arr, self.p = la.zeros(n)
        self.q_arr, self.q = la.zeros(n)

    def _precondition(self, op):
        la = self.la
        z = self.m.issue(self.r, self.partial, self.ctl, la.fused(op))
        la.finish_unfused(self.partial, self.m.nparts, op, self.ctl)
        return z

    def _start(self):
        la, k, nb = self.la, self.la.k, self.la.nblocks(self.n)
        la.launch(k.init_residual, self.n, self.bv, self.x, self.r, la.empty_f, 0,
                  self.partial, la.fused(K.OP_INIT), self.ctl, la.ticket)
        la.finish_unfused(self.partial, nb, K.OP_INIT, self.ctl)
        z = self._precondition(K.OP_CG_RZ0)
        la.launch(k.cg_update_p, self.n, self.p, z, 1, self.ctl)

    def _iterate(self):
        """One CG iteration: four kernels around the V-cycle, each dot finished in the kernel
        that produced its partials (or by a finish launch after it, ``la.fuse`` False)."""
        la, k, nb = self.la, self.la.k, self.la.nblocks(self.n)
        npq = la.spmv(self.a, self.p, self.q, w=self.p, partial=self.partial, ctl=self.ctl,
                      op=la.fused(K.OP_CG_ALPHA))
        la.finish_unfused(self.partial, npq, K.OP_CG_ALPHA, self.ctl)
        la.launch(k.update_xr, self.n, self.x, self.r, self.p, self.q, K.ALPHA, la.empty_f, 0,
                  self.partial, la.fused(K.OP_CHECK), self.ctl, la.ticket)
        la.finish_unfused(self.partial, nb, K.OP_CHECK, self.ctl)
        z = self._precondition(K.OP_CG_BETA)
        la.launch(k.cg_update_p, self.n, self.p, z, 0, self.ctl)

    def solve(self, check: bool = True, inline: bool = False):
        """Solve A x = b for b in ``self.b_arr``; returns (x backend array, iterations or None).

        The solution array is the solver's own (overwritten by its next solve).

        Raises
        ------
        SolverDivergedError (with ``check``) when the solve stops unconverged.
        """
        its = self._run("cg", self._start, self._iterate, check, inline)
        return self.x_arr, its


class DeviceBiCGStab(_Solver):
    """Right-preconditioned BiCGStab for a (block-)CSR matrix assembled in place.

    Parameters
    ----------
    la : DeviceLinalg; nrow : block rows; bs : 1 (CSR) or 3 (BCSR 3×3)
    diag_pos : (nrow,) positions of the diagonal blocks in the matrix (for (block-)Jacobi)
    preconditioner : "block_jacobi", "jacobi" or "none" (pointwise, fused into the updates)
    cfg : LinearSolverConfig; ctl_row : (NCTL,) backend array; label : name for errors
    """

    name = "bicgstab"

    def __init__(self, la, nrow, bs, diag_pos, preconditioner, cfg, ctl_row, label):
        super().__init__(la, nrow * bs, cfg, ctl_row, label)
        self.nrow, self.bs = nrow, bs
        self.kind = {"none": 0, "jacobi": 1, "block_jacobi": 2}[preconditioner]
        self.diag_pos = la.nb(la.b.to_device(np.asarray(diag_pos, np.int32)))
        n = self.n
        self.x_arr, self.x = la.zeros(n)
        for name in ("r", "rhat", "p", "phat", "v", "shat", "t"):
            setattr(self, name, la.zeros(n)[1])
        self.minv = la.zeros(nrow * bs * bs)[1]

    def solve(self, a, rhs, check: bool = True, inline: bool = False):
        """Solve A x = rhs; a : DeviceMatrix over the assembled values, rhs : numba view.

        Returns (x backend array — the solver's own, iterations or None).

        Raises
        ------
        SolverDivergedError (with ``check``) when the solve stops unconverged.
        """
        la, k, n, nrow = self.la, self.la.k, self.n, self.nrow
        bs, ctl, part = self.bs, self.ctl, self.partial

        def start():
            la.launch(k.init_residual, n, rhs, self.x, self.r, self.rhat, 1, part,
                      la.fused(K.OP_INIT), ctl, la.ticket)
            la.finish_unfused(part, la.nblocks(n), K.OP_INIT, ctl)
            la.launch(k.block_inverse, nrow, a.data, self.diag_pos, bs, self.kind, self.minv)
            if a.lean_blocks is not None:
                a.lean_blocks.refresh(la, a)

        def iterate():
            # five kernels; each dot is finished by the kernel that produced its partials
            # (with la.fuse False, by a finish launch after it)
            la.launch(k.bi_update_p, nrow, self.r, self.p, self.v, self.minv, bs, self.phat,
                      ctl)
            nrv = la.spmv(a, self.phat, self.v, w=self.rhat, partial=part, ctl=ctl,
                          op=la.fused(K.OP_BI_ALPHA))
            la.finish_unfused(part, nrv, K.OP_BI_ALPHA, ctl)
            la.launch(k.bi_update_s, nrow, self.r, self.v, self.x, self.phat, self.minv, bs,
                      self.shat, part, la.fused(K.OP_BI_S), ctl, la.ticket)
            la.finish_unfused(part, la.nblocks(nrow), K.OP_BI_S, ctl)
            # t = A ŝ with the partials of t·s (s is in r) and t·t
            nts = la.spmv(a, self.shat, self.t, w=self.r, partial=part, ctl=ctl,
                          op=la.fused(K.OP_BI_OMEGA), ndot=2)
            la.finish_unfused(part, nts, K.OP_BI_OMEGA, ctl)
            la.launch(k.update_xr, n, self.x, self.r, self.shat, self.t, K.OMEGA, self.rhat, 1,
                      part, la.fused(K.OP_BI_R), ctl, la.ticket)
            la.finish_unfused(part, la.nblocks(n), K.OP_BI_R, ctl)

        key = (id(a), id(rhs))           # DeviceSystems caches both per buffer
        its = self._run(key, start, iterate, check, inline)
        return self.x_arr, its
