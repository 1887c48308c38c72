"""BiCGStab for the momentum (BCSR 3×3) and tracer (CSR) systems on GPU ranks.

The device twin of :func:`dycore.parallel.krylov.bicgstab` over a system's owned rows, as
:class:`~dycore.parallel.device_krylov.DeviceRankPCG` is the twin of its ``cg``. It is the
serial device solver's iteration (:class:`dycore.solvers.krylov.DeviceBiCGStab`) made of the
SAME kernels (:mod:`dycore.backend.solver_kernels`: ``init_residual``, ``block_inverse``,
``bi_update_p``, ``bi_update_s``, ``update_xr``, the block-CSR SpMV and the solver's scalar
recurrences ``OP_*`` of ``finish``) with its dot products taken across the ranks:

- each dot-producing kernel runs with ``op = -1`` (its block partials are written and not
  finished); the global dot products come from the rank reducer of DeviceRankPCG
  (``"exact"``: :class:`~dycore.parallel.device_reduce.DeviceExactReducer`, correctly
  rounded, the same bits on any rank count; ``"sum"``: per-rank partials + an all-reduce sum)
  and one kernel applies the serial solver's own recurrence (``_scalar_op``) to each system's
  control array (α, ω, β, ρ, the tolerance, the verdict), one thread a system, on the device;
- p̂ and ŝ are local vectors (owned + the ghosts of the pattern's plan, depth 1) whose ghosts
  :class:`~dycore.parallel.device_halo.DeviceHaloExchange` fills before each product;
- the matrix is the owned rows of the local assembly in GLOBAL column order
  (:func:`~dycore.parallel.partition.owned_row_order`), summed one thread per row from 0.0
  (``g = 1``, SciPy's order), so every owned entry of A x is the serial product's bits.

Per iteration: two halo exchanges (p̂, ŝ) and three reductions (r̂·v; s·s with t·s and t·t —
the half-step convergence test on s is applied from the same reduction as ω, after t = A ŝ,
which gives the iterates of testing s first and costs one product more in the last iteration
only; r·r with r̂·r). Stopping test ‖r‖² ≤ max(rtol²·‖b‖², atol²) (the serial device solver's, in
squares). With the exact reduction, deterministic assembly and ``g = 1`` every operation on an
owned entry is independent of the partition, so 1, 2 and 4 GPU ranks give the same bits.

Several systems with ONE matrix (θ′ and the moisture tracers share the tracer matrix when their
diffusivities agree) are solved together: :meth:`DeviceRankBiCGStab.steps` takes k right-hand
sides and runs the k iterations step by step — each system's kernels on its own vectors and
control array, so each gets the bits of its own solve — with ONE halo exchange of the k
stacked vectors and ONE reduction of all their dot products at each point. On GPU ranks the
solve is a chain of latency-bound messages (about a hundred per tracer solve), so k systems
cost about one solve's messages instead of k solves'.

Solves are replayed as DeviceRankPCG's are (:mod:`dycore.parallel.device_replay`): the first
converged solve is issued from Python with a host read of the control array every
``check_every`` iterations; it learns the iteration count, the ranks agree on a budget (+10 %,
at least 2) and later solves replay ``first`` (start + budget iterations: kernels, halo exchanges
and all-reduces) with one host read, then ``more`` while unfinished. With NCCL the replay is a
CUDA graph per rank; with the staged MPI transport or K loopback ranks (not capturable) the
same work is re-issued from Python in the same order, which gives the same bits. Iterations
past convergence are no-ops (their exchanges and reductions still run). The generator form
(:meth:`steps` yields after each post) lets K loopback ranks run in lock step
(:func:`~dycore.parallel.device_krylov.solve_lockstep`).
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from dycore.backend import solver_kernels as K
from dycore.errors import SolverDivergedError
from dycore.parallel.device_halo import DeviceHaloExchange
from dycore.parallel.device_replay import ReplayedSolve

__all__ = ["DeviceRankBiCGStab", "rank_reducer"]

KINDS = {"none": 0, "jacobi": 1, "block_jacobi": 2}

_CACHE: dict = {}


def _scalar_kernel(strict: bool):
    """``rank_scalar_ops(vals, stride, op, then, ctls, nsys)``: thread i < nsys applies the
    serial solvers' recurrence ``op`` (:func:`dycore.backend.solver_kernels._scalar_op`, the
    same device function) to system i's control array ``ctls[i]`` with the reduced values
    vals[i·stride], vals[i·stride + 1] — what ``finish`` does after summing its partials,
    without the block's tree (the values are already global) — and then, when ``then`` ≥ 0,
    the recurrence ``then`` with the values one further on (the merged half-step check).
    Like ``finish`` a recurrence does nothing once the solve has finished (except for OP_INIT
    / OP_STORE). Every system's recurrences in one launch: a thread's are those two
    one-thread launches would apply, in the same order, so the bits are the same."""
    if strict not in _CACHE:
        from dycore.backend.gpu_kernels import kernel_compiler
        scalar_op = cuda.jit(device=True)(K._scalar_op)
        op_init, op_store, done = K.OP_INIT, K.OP_STORE, K.DONE

        def rank_scalar_ops(vals, stride, op, then, ctls, nsys):
            i = cuda.grid(1)
            if i >= nsys:
                return
            ctl = ctls[i]
            at = i * stride
            if op == op_init or op == op_store or ctl[done] == 0.0:
                scalar_op(ctl, op, vals[at], vals[at + 1], 0)
            if then >= 0 and (then == op_init or then == op_store or ctl[done] == 0.0):
                scalar_op(ctl, then, vals[at + 1], vals[at + 2], 0)
        _CACHE[strict] = kernel_compiler(strict)(rank_scalar_ops)
    return _CACHE[strict]


def rank_reducer(backend, transport, reduction: str, max_dots: int, exact_blocks: int = 264,
                 exact_threads: int | None = None, sum_blocks: int | None = None,
                 sum_threads: int | None = None):
    """The dot-product reducer of GPU ranks (shared by the rank BiCGStab and the step's
    reductions): ``"exact"`` — :class:`~dycore.parallel.device_reduce.DeviceExactReducer`;
    ``"sum"`` — DeviceRankPCG's per-rank tree + all-reduce sum. Both have ``post_dots(*pairs)``
    and ``finish_on_device()`` and hold their results in ``values`` ((max_dots,) device array).

    Raises
    ------
    ValueError for another ``reduction`` or a ``sum_threads`` that is not a power of two.
    """
    from dycore.parallel.device_kernels import EXACT_BLOCK
    from dycore.parallel.device_krylov import DOT_BLOCK, SUM_BLOCKS, _SumReducer, \
        get_krylov_kernels
    from dycore.parallel.device_reduce import DeviceExactReducer
    if reduction == "exact":
        return DeviceExactReducer(backend, transport, max_dots, exact_blocks,
                                  exact_threads or EXACT_BLOCK)
    if reduction != "sum":
        raise ValueError(f"GPU-rank reduction must be 'exact' or 'sum', got {reduction!r}")
    rb = int(sum_threads or min(DOT_BLOCK, backend.solver_block))
    if rb < 1 or rb & (rb - 1):
        raise ValueError(f"GPU-rank reduction: sum_threads {rb} is not a power of two")
    kernels = dict(get_krylov_kernels(getattr(backend, "strict", False), rb), rb=rb)
    return _SumReducer(backend, transport, kernels, backend.nb, max_dots,
                       SUM_BLOCKS if sum_blocks is None else sum_blocks)


class DeviceRankBiCGStab(ReplayedSolve):
    """Right-preconditioned BiCGStab on this GPU rank's owned rows (module docstring).

    Parameters
    ----------
    backend : GPUBackend (or its simulator); transport : NcclTransport, MpiStagedTransport or
        a loopback transport (:mod:`dycore.parallel.nccl`)
    plan : HaloPlan covering the pattern's columns (``rp.plan(1)`` for the first-order pattern)
    indptr : (n_owned+1,) int; indices : (nnzb,) int local column ids (< plan.n_local), global
        column order within a row (:func:`~dycore.parallel.partition.extract_rows`)
    bs : 1 (tracer CSR) or 3 (momentum BCSR 3×3)
    preconditioner : "block_jacobi", "jacobi" or "none" (pointwise: the 3×3 diagonal-block
        inverses, or 1/diagonal, computed on the device at the start of each solve)
    rtol, atol, maxiter : stop when ‖r‖₂ ≤ max(rtol·‖b‖₂, atol); at most ``maxiter`` iterations
    reduction : "exact" | "sum" (:func:`rank_reducer`); reducer_options : its launch shape
    check_every : iterations issued between two host reads of the verdict
    block : threads per block of the vector and SpMV kernels (None: ``backend.solver_block``)
    graphs : replay later solves from graphs of a learnt iteration budget (as DeviceRankPCG;
        :mod:`dycore.parallel.device_replay`); False: every solve issued from Python and
        checked every ``check_every`` iterations. A plain attribute.
    name : the system's name in error messages
    lean : with bs 3, read the blocks lean in the products (``bsr3_lean_spmv``: the serial
        device path's :class:`~dycore.solvers.krylov.LeanBlocks`, the same bits for finite
        vectors), refreshed at each solve's start; ``full_pos`` (positions in :attr:`values` of
        the blocks read in full: the no-normal-flow rotated ones) and ``coriolis`` (whether the
        (0,1)/(1,0) entries may be nonzero) as LeanBlocks'

    Attributes
    ----------
    values : (nnzb,) or (nnzb,3,3) float64 backend array — the owned rows' values the solve
        reads (:meth:`load` fills it); x : (n_owned·bs,) backend array — the last solution
        ((k, n_owned·bs) after a solve of k systems); rhs : the right-hand side(s) the solve
        (and its graphs) read, shaped as x; iterations : int (last solve; the largest of its
        systems'); counts : list of int — each system's iterations; nsys : int — systems the
        work is allocated for; n_owned, n_local : int; halo : DeviceHaloExchange (of the
        stacked local vectors);
    graphs, capture, budget, replayed : as :class:`~dycore.parallel.device_krylov.DeviceRankPCG`

    Raises
    ------
    ValueError for an unknown preconditioner, a block size other than 1 or 3, or an owned row
    without its diagonal entry.
    """

    def __init__(self, backend, transport, plan, indptr, indices, bs: int, preconditioner: str,
                 rtol: float = 1e-8, atol: float = 0.0, maxiter: int = 1000,
                 reduction: str = "exact", reducer_options: dict | None = None,
                 check_every: int = 8, block: int | None = None, graphs: bool = True,
                 name: str = "momentum", lean: bool = False, full_pos=None,
                 coriolis: bool = True):
        from dycore.solvers.krylov import DeviceLinalg, DeviceMatrix, LeanBlocks
        if preconditioner not in KINDS:
            raise ValueError(f"GPU-rank BiCGStab ({name}): preconditioner must be one of "
                             f"{tuple(KINDS)}, got {preconditioner!r}")
        if bs not in (1, 3):
            raise ValueError(f"GPU-rank BiCGStab ({name}): block size {bs}, expected 1 or 3")
        indptr, indices = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
        n, nl = indptr.size - 1, int(plan.n_local)
        rows = np.repeat(np.arange(n), np.diff(indptr))
        diag = np.flatnonzero(indices == rows)
        if diag.size != n:
            raise ValueError(f"GPU-rank BiCGStab ({name}): an owned row has no diagonal entry")
        self.b, self.t, self.plan, self.bs, self.name = backend, transport, plan, int(bs), name
        self.kind, self.reduction = KINDS[preconditioner], reduction
        self.n_owned, self.n_local = n, nl
        self.check_every = max(1, int(check_every))
        la = self.la = DeviceLinalg(backend, int(block or backend.solver_block), max_group=1)
        shape = (indices.size,) if bs == 1 else (indices.size, 3, 3)
        self.values = backend.zeros(shape)
        self.a = DeviceMatrix(la, indptr.astype(np.int32), indices.astype(np.int32),
                              self.values, self.bs, 1)
        if lean and self.bs == 3:
            self.a.lean_blocks = LeanBlocks(la, backend.to_device(indices.astype(np.int32)),
                                            full_pos, coriolis)
        self.diag_pos = la.nb(backend.to_device(diag.astype(np.int32)))
        self._ctl0 = np.zeros(K.NCTL)
        self._ctl0[K.RTOL2], self._ctl0[K.ATOL2], self._ctl0[K.MAXIT] = (rtol * rtol,
                                                                         atol * atol, maxiter)
        self.minv = backend.zeros(n * self.bs * self.bs)
        self.partial = backend.zeros((la.nblocks(n * self.bs), 2))   # unfinished partials
        self._reducer = (reduction, dict(reducer_options or {}))
        self.scalar_op = _scalar_kernel(bool(getattr(backend, "strict", False)))
        self.maxiter = int(maxiter)
        self.graphs = bool(graphs)
        self.capture = bool(getattr(transport, "capturable", False))
        #: s·s reduced with t·s and t·t (three reductions per iteration); False: s·s on its
        #: own before t = A ŝ (four; the same iterates) — :meth:`set_merged`
        self.merged = True
        self.nsys = 0
        self._allocate(1)

    def _allocate(self, k: int) -> None:
        """The work of solves of ``k`` systems with this matrix at once: per system its
        vectors and control array; one halo exchange of the k local vectors stacked
        (:meth:`~dycore.parallel.partition.HaloPlan.stacked`: one message per neighbour);
        one reducer for the k systems' dots (one all-reduce per reduction point). The matrix,
        its block inverses and the kernels' scratch partials are shared. The replay graphs
        are dropped: the next solve is checked and learns its budget."""
        b, z = self.b, self.b.zeros
        m, nl, la = self.n_owned * self.bs, self.n_local, self.la
        self.nsys = k = int(k)
        self.ctls = b.to_device(np.tile(self._ctl0, (k, 1)))   # (read by _read, _accumulate)
        self._ctl_nb = [la.nb(self.ctls[i]) for i in range(k)]
        self._ctls_nb = la.nb(self.ctls)
        self.X, self.RHS = z((k, m)), z((k, m))
        self.x, self.rhs = (self.X[0], self.RHS[0]) if k == 1 else (self.X, self.RHS)
        self.r, self.rhat, self.p, self.v, self.tv = (z((k, m)) for _ in range(5))
        lshape = (k, nl) if self.bs == 1 else (k, nl, 3)
        self.phat, self.shat = z(lshape), z(lshape)    # local vectors: ghosts filled
        self.halo = DeviceHaloExchange(b, self.t, self.plan.stacked(k), self.bs)
        reduction, ro = self._reducer
        self.red = rank_reducer(b, self.t, reduction, 3 * k, **ro)
        self.iterations, self.counts = 0, [0] * k
        self._first = self._more = None
        self.budget, self.replayed = 0, False
        self._views: dict = {}

    def set_merged(self, merged: bool) -> None:
        """Reduce s·s with t·s and t·t (True, the default) or on its own (False: one more
        reduction per iteration, the same iterates; an A/B switch). The replay graphs are
        dropped: the next solve is checked and learns its budget again (the caller clears
        the stepper's captured iterations)."""
        self.merged = bool(merged)
        self.drop_graphs()

    # -- helpers -----------------------------------------------------------------------------
    def _nb(self, a):
        """The numba view of a backend array (made once per memory range)."""
        key = ((a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data.ptr),
               a.shape)
        hit = self._views.get(key)
        if hit is None:
            hit = self._views[key] = (a, self.b.nb(a))
        return hit[1]

    def _owned(self, local, i):
        """System i's owned entries of a stacked local vector (flat)."""
        return local[i].reshape(-1)[:self.n_owned * self.bs]

    def _reduce(self, op, pairs, then=None):
        """Post the global dots ``pairs(i)`` of every system i in ONE reduction (yields once,
        after the all-reduce's post), then apply the recurrence ``op`` to each system's
        control array on the device from its values in order, every system in one launch
        (:func:`_scalar_kernel`); ``then``: a second recurrence applied after it from the
        values past the first (the merged half-step check: s·s, then ω from t·s and t·t)."""
        per = [pairs(i) for i in range(self.nsys)]
        stride = len(per[0])
        if any(len(p) != stride for p in per):
            raise ValueError(f"GPU-rank BiCGStab ({self.name}): the systems post different "
                             f"numbers of dot products: {[len(p) for p in per]}")
        self.red.post_dots(*(pair for sys_pairs in per for pair in sys_pairs))
        yield
        self.red.finish_on_device()
        self.b.launch(self.scalar_op, (1, max(self.nsys, 1)), self._nb(self.red.values),
                      stride, op, -1 if then is None else then, self._ctls_nb, self.nsys)

    def _exchange(self, local):
        """The ghosts of every system's local vector in ``local`` (k, n_local[, 3]): one
        exchange of the stacked vectors."""
        flat = local.reshape((self.nsys * self.n_local,) + local.shape[2:])
        self.halo.begin(flat)
        yield
        self.halo.end(flat)

    def load(self, values, perm) -> None:
        """values[perm] -> :attr:`values` (the owned rows in global column order).

        values : (nnz_local,) or (nnz_local,3,3) float64 backend array of the local assembly;
        perm : (nnzb,) int64 backend array (:func:`~dycore.parallel.partition.owned_row_order`)
        """
        self.b.xp.take(values, perm, axis=0, out=self.values)

    # -- the solve ---------------------------------------------------------------------------
    def _start(self):
        """Each system's x = 0, r = r̂ = b (b in :attr:`rhs`) and tol from its global ‖b‖²;
        the block inverses of the shared matrix."""
        la, k, nb = self.la, self.la.k, self._nb
        m = self.n_owned * self.bs
        if self.a.lean_blocks is not None:
            self.a.lean_blocks.refresh(la, self.a)
        for i in range(self.nsys):
            la.launch(k.init_residual, m, nb(self.RHS[i]), nb(self.X[i]), nb(self.r[i]),
                      nb(self.rhat[i]), 1, nb(self.partial), -1, self._ctl_nb[i], la.ticket)
        yield from self._reduce(K.OP_INIT, lambda i: ((self.r[i], self.r[i]),))
        la.launch(k.block_inverse, self.n_owned, self.a.data, self.diag_pos, self.bs,
                  self.kind, nb(self.minv))

    def _iterations(self, count: int):
        """``count`` BiCGStab iterations of every system (no-ops for a system once its control
        array says finished)."""
        for _ in range(count):
            yield from self._iteration()

    def _iteration(self):
        """One iteration of each system, step by step together: the systems' kernels one
        after another, their halo exchanges and reductions shared."""
        la, k, nb, bs = self.la, self.la.k, self._nb, self.bs
        n, m, ks = self.n_owned, self.n_owned * self.bs, range(self.nsys)
        r, v, x, tv, rhat = self.r, self.v, self.X, self.tv, self.rhat
        part, minv, ctl = nb(self.partial), nb(self.minv), self._ctl_nb
        for i in ks:
            la.launch(k.bi_update_p, n, nb(r[i]), nb(self.p[i]), nb(v[i]), minv, bs,
                      nb(self._owned(self.phat, i)), ctl[i])
        yield from self._exchange(self.phat)
        for i in ks:
            la.spmv(self.a, nb(self.phat[i].reshape(-1)), nb(v[i]), ctl=ctl[i])
        yield from self._reduce(K.OP_BI_ALPHA, lambda i: ((rhat[i], v[i]),))
        for i in ks:
            la.launch(k.bi_update_s, n, nb(r[i]), nb(v[i]), nb(x[i]),
                      nb(self._owned(self.phat, i)), minv, bs, nb(self._owned(self.shat, i)),
                      part, -1, ctl[i], la.ticket)
        if not self.merged:                                              # (the A/B)
            yield from self._reduce(K.OP_BI_S, lambda i: ((r[i], r[i]),))   # s·s (s in r)
        yield from self._exchange(self.shat)
        for i in ks:
            la.spmv(self.a, nb(self.shat[i].reshape(-1)), nb(tv[i]), ctl=ctl[i])
        if self.merged:
            # s·s with t·s and t·t in ONE reduction: the half-step check (OP_BI_S) applied
            # before ω (OP_BI_OMEGA, a no-op once it has stopped the solve) — the iterates of
            # checking s before t = A ŝ, one global reduction fewer per iteration
            yield from self._reduce(K.OP_BI_S, lambda i: ((r[i], r[i]), (tv[i], r[i]),
                                                          (tv[i], tv[i])),
                                    then=K.OP_BI_OMEGA)
        else:
            yield from self._reduce(K.OP_BI_OMEGA, lambda i: ((tv[i], r[i]), (tv[i], tv[i])))
        for i in ks:
            la.launch(k.update_xr, m, nb(x[i]), nb(r[i]), nb(self._owned(self.shat, i)),
                      nb(tv[i]), K.OMEGA, nb(rhat[i]), 1, part, -1, ctl[i], la.ticket)
        yield from self._reduce(K.OP_BI_R, lambda i: ((r[i], r[i]), (rhat[i], r[i])))

    def _read(self):
        """Every system's control array on the host (one device→host copy), kept in
        :attr:`counts` / ``_last``; returns them combined as one control array: running
        while any system runs, converged when all have, else the first failure's verdict;
        ITS the largest count (what a replay's budget must cover)."""
        host = np.asarray(self.b.to_host(self.ctls)).reshape(self.nsys, K.NCTL)
        self._last = host
        self.counts = [int(h[K.ITS]) for h in host]
        out = host[0].copy()
        done = host[:, K.DONE]
        if (done == K.RUNNING).any():
            out[K.DONE] = K.RUNNING
        else:
            bad = np.flatnonzero(done != K.CONVERGED)
            out[K.DONE] = done[bad[0]] if bad.size else K.CONVERGED
        out[K.ITS] = host[:, K.ITS].max()
        return out

    def _accumulate(self, stats, slot: int) -> None:
        """Add each system's iterations (and shortfall) to ``stats[slot]`` (``slot + 1``)."""
        for ctl in self._ctl_nb:
            self.b.launch(self.la.k.accumulate, (1, 1), ctl, self.b.nb(stats), int(slot))

    def steps(self, rhs, names=None):
        """The solve of A x = rhs (A: :attr:`values`) as a generator that yields after every
        post of a message; the solution is :attr:`x`, the count :attr:`iterations`.

        rhs : (n_owned·bs,) float64 backend array (this rank's owned entries, flat), or
            (k, n_owned·bs) / a sequence of k of them: k systems with this matrix solved
            together (their kernels one after another, one halo exchange and one reduction
            for all; :attr:`x` then (k, n_owned·bs) for k > 1, :attr:`counts` each system's
            iterations, :attr:`iterations` the largest). Each system's iterates are the bits of its own
            solve: the systems share no arithmetic.
        names : the k systems' names in error messages (None: :attr:`name`)

        Raises
        ------
        ValueError for a right-hand side of the wrong size; SolverDivergedError (the same on
        every rank) naming the first system that stops unconverged or breaks down.
        """
        m = self.n_owned * self.bs
        many = not (hasattr(rhs, "shape") and len(rhs.shape) == 1)
        rows = list(rhs) if many else [rhs]
        for row in rows:
            if tuple(row.shape) != (m,):
                raise ValueError(f"GPU-rank BiCGStab ({self.name}): right-hand side of shape "
                                 f"{tuple(row.shape)}, expected ({m},)")
        if len(rows) != self.nsys:
            self._allocate(len(rows))
        if rhs is not self.rhs:
            for i, row in enumerate(rows):
                self.RHS[i][...] = row
        names = list(names) if names is not None else [self.name] * self.nsys
        yield from self._solve_steps()
        for i, h in enumerate(self._last):
            if h[K.DONE] != K.CONVERGED:
                why = {K.LIMIT: "iteration limit reached", K.BREAKDOWN: "breakdown or "
                       "non-finite residual"}.get(float(h[K.DONE]), "not finished")
                raise SolverDivergedError(
                    f"{names[i]} solve (GPU-rank BiCGStab, {self.reduction} dots) did not "
                    f"converge: {why} after {int(h[K.ITS])} iterations (max {self.maxiter})")

    def solve(self, rhs, names=None):
        """Solve A x = rhs on this rank (every rank calls it; rhs as :meth:`steps`'); returns
        (x, iterations): x the solver's own array ((n_owned·bs,), or (k, n_owned·bs) for k
        systems), overwritten by the next solve; iterations the largest count."""
        for _ in self.steps(rhs, names):
            pass
        return self.x, self.iterations
