"""Preconditioned CG for the constant pressure matrix on GPU ranks, every vector on the device.

The device twin of :func:`dycore.parallel.krylov.cg` over the pressure matrix's owned rows
(docs/parallel.md, "GPU ranks: the pressure solve"). One rank per GPU; on each rank:

- the matrix: the owned rows of the pinned pressure matrix in local columns, serial entry order
  kept (:func:`dycore.parallel.rank_ops.owned_rows`, depth-2 columns), as a device CSR summed by
  the solver kernels' row kernel (``csr_spmv``; ``group=1``: one thread per row from 0.0, SciPy's
  order); the search direction p is a local vector whose ghosts :class:`DeviceHaloExchange` fills
  before each product (depth 2, one exchange per iteration);
- dot products (``reduction``): ``"exact"`` — :class:`DeviceExactReducer` (integer parts, one
  int64 all-reduce, rounded on the device): the correctly rounded global sum, the same bits on any
  rank count; ``"sum"`` — a per-rank partial (a fixed-order tree on the device: block
  partials and their sum in one launch for all the dots of a reduction, the last block to
  finish adding the partials) and an NCCL float64 all-reduce sum: one 8-byte value per dot
  instead of 33.6 kB, bits depend on the partition;
- preconditioner (``precond``): ``"jacobi"`` (z = D⁻¹ r, fused into the update kernel) or
  ``"local_amg"`` — the device V-cycle (:class:`dycore.solvers.amg.DeviceVCycle`) of PyAMG's
  hierarchy of the rank's owned × owned block: block-Jacobi over ranks with one V-cycle per
  block (additive Schwarz without overlap), so the iteration count grows with the rank count;
  or ``"global_amg"`` — the V-cycle of one hierarchy of the whole matrix distributed by rows
  (:class:`~dycore.parallel.device_amg.DeviceGlobalVCycle`): the serial V-cycle's bits and
  iterations on any rank count, for halo exchanges on every level;
- the scalars (α, β, the tolerance, the verdict) live in a device control array written by
  one-thread kernels from the reduced values: no host copy inside an iteration. Iterations
  issued past convergence are no-ops (every update kernel returns when the solve is finished;
  their halo exchange and all-reduces still run), so the result is that of the converged
  iteration;
- CUDA graphs (``graphs``, as the serial device solvers' ``_Solver._run``): the first
  converged solve is issued from Python, the host reading the control array every
  ``check_every`` iterations (one small device→host copy); it learns the iteration count, the
  ranks agree on a budget (the max of their counts by one all-reduce, +10 %, at least 2:
  :func:`~dycore.solvers.krylov.replay_budget`) and each
  captures the start with that many iterations — pack, NCCL group send/recv, unpack, the row
  kernel, the fused updates, the dots' kernels and all-reduces and the exact reducer's
  on-device rounding — into one graph, ``first``, and ``check_every`` iterations into
  ``more``. Later solves replay ``first`` with no host read inside, read the verdict once,
  and replay ``more`` while unfinished (a count above the budget captures ``first`` afresh,
  agreed again). Every rank replays the same graphs in the same order, so the NCCL calls
  match; the bits are those of the solve issued from Python.

The iteration is :func:`dycore.parallel.krylov.cg`'s, operation by operation (Saad, *Iterative
Methods for Sparse Linear Systems*, Alg. 9.1):

    r = b, x = 0, z = M⁻¹ r, p = z; (r·r = b·b, r·z) in one reduction; tol = max(rtol‖b‖, atol)
    repeat:  q = A p;  α = rz / (p·q);  x += α p;  r −= α q;  z = M⁻¹ r;
             (r·r, r·z) in one reduction; stop if ‖r‖ ≤ tol;  p = z + (rz'/rz) p

With ``"exact"``, Jacobi, ``group=1`` and strict kernels (fma=0) every operation gives the CPU
ranks' bits, so the solution equals :func:`~dycore.parallel.krylov.cg`'s with the exact
:class:`~dycore.parallel.reduce.Reducer` bit for bit, on any rank count (the tests check it under
the simulator for 1, 2 and 4 ranks). Without strict mode the row sums and updates may contract
a·b + c into FMAs: the bits then differ from the CPU's but not across rank counts, provided
``group`` is a fixed number (``None`` lets each rank choose from its own rows' lengths):
every owned entry is then computed by the same expression whatever the partition.

Communication points are written as a generator (:meth:`DeviceRankPCG.steps` yields after every
post of a halo exchange or an all-reduce), so K loopback ranks in one process
(:class:`~dycore.parallel.nccl.LoopbackWorld`, the simulator tests) advance in lock step
(:func:`solve_lockstep`); on GPUs :meth:`DeviceRankPCG.solve` runs the generator through, NCCL
ordering everything on the backend's stream. K > 1 loopback ranks cannot be captured (a rank's
receive needs the others' posts in between), so there the graphs' work is re-issued from
Python with its yields: the same kernels in the same order and the same single host read per
solve as a replay; one loopback rank is captured like an NCCL rank (``backend.capture``, which
the simulator re-issues).
"""
from __future__ import annotations

import math

import numpy as np
from numba import config as numba_config
from numba import cuda, float64, int32

from dycore.backend import solver_kernels as _sk
from dycore.backend.gpu_kernels import grid
from dycore.backend.timers import add_seconds
from dycore.errors import SolverDivergedError
from dycore.parallel.device_halo import DeviceHaloExchange
from dycore.parallel.device_kernels import EXACT_BLOCK, NPARTS, get_rank_kernels
from dycore.parallel.overlap import (interior_first, leading_interior, renumber, send_last,
                                     split_rows)
from dycore.parallel.device_replay import ReplayedSolve

__all__ = ["DeviceRankPCG", "PRECONDITIONERS", "REDUCTIONS", "get_krylov_kernels",
           "solve_lockstep"]

REDUCTIONS = ("exact", "sum")
PRECONDITIONERS = ("jacobi", "local_amg", "global_amg")

# control-array slots: DONE must be the solver kernels' (the V-cycle and SpMV kernels return at
# once when ctl[DONE] != 0); the others are this module's own
DONE, ITS, RZ, BETA, TOL, RTOL, ATOL, MAXIT = range(8)
NCTL = 16
assert DONE == _sk.DONE
RUNNING, CONVERGED, LIMIT, BREAKDOWN = 0.0, 1.0, 2.0, 3.0
#: threads per block of the sum-mode dot kernel (a power of two)
DOT_BLOCK = 256
#: dot products one ``dot_pairs`` launch sums (its pair slots)
MAX_PAIRS = 6
#: blocks of a sum-mode dot (per pair; fixed, so the order of the sum is): one per SM of a
#: 132-SM H100 / H200. With warp-shuffle trees, two dots of 98,441 / 381,065 / 762,129
#: entries took 4.0 / 5.0 / 6.2 µs on an H200 against 4.6 / 5.5 / 6.8 µs with 264 blocks
#: (64 blocks had left the GPU two-thirds idle: 29 µs for one 762,129-entry dot;
#: docs/performance.md)
SUM_BLOCKS = 132
#: threads summing one row of the pressure matrix and of the global V-cycle's distributed
#: levels' A and R on GPU ranks outside strict mode (the step's ``group``; the levels held
#: whole take their own, :class:`~dycore.parallel.device_amg.DeviceGlobalVCycle`): coalesced
#: loads of the fine level's rows of about 61 entries, the same bits on any rank count;
#: strict runs keep one thread a row (the serial V-cycle's and the CPU ranks' bits). Four
#: (about sixteen entries a thread, as :func:`~dycore.solvers.krylov.row_group` gives the
#: serial solver's pressure matrix): the 4.42 M-tet step on one GPU rank 130.8 against
#: 139.9 ms with eight on an H200 (docs/performance.md)
ROW_GROUP = 4

_CACHE: dict = {}


def _build(jit, rb: int) -> dict:
    def cg_init(b, x, r, z, dinv, n, jacobi, ctl):
        """x = 0, r = b, z = D⁻¹ r (``jacobi``); thread 0 re-opens the solve (DONE, ITS = 0)."""
        i = cuda.grid(1)
        if i == 0:
            ctl[DONE] = RUNNING
            ctl[ITS] = 0.0
        if i < n:
            x[i] = 0.0
            r[i] = b[i]
            if jacobi:
                z[i] = dinv[i] * b[i]

    def cg_start(ctl, vals):
        """vals = (r·r, r·z) with r = b: tol = max(rtol·‖b‖, atol), rz; converged if
        ‖r‖ ≤ tol."""
        rn = math.sqrt(vals[0])
        tol = ctl[RTOL] * rn
        if ctl[ATOL] > tol:
            tol = ctl[ATOL]
        ctl[TOL] = tol
        ctl[RZ] = vals[1]
        if rn <= tol:
            ctl[DONE] = CONVERGED

    def cg_update_xr(x, r, z, p, q, dinv, vals, ctl, n, jacobi):
        """vals[0] = p·q: α = rz / p·q; x += α p; r −= α q; z = D⁻¹ r (``jacobi``)."""
        if ctl[DONE] != 0.0:
            return
        i = cuda.grid(1)
        if i < n:
            alpha = ctl[RZ] / vals[0]
            x[i] = x[i] + alpha * p[i]
            ri = r[i] - alpha * q[i]
            r[i] = ri
            if jacobi:
                z[i] = dinv[i] * ri

    def cg_check(ctl, vals):
        """vals = (r·r, r·z): its += 1; converged / non-finite / limit; else β and rz."""
        if ctl[DONE] != 0.0:
            return
        ctl[ITS] += 1.0
        rn = math.sqrt(vals[0])
        if rn <= ctl[TOL]:
            ctl[DONE] = CONVERGED
        elif not (rn == rn) or rn == math.inf:
            ctl[DONE] = BREAKDOWN
        elif ctl[ITS] >= ctl[MAXIT]:
            ctl[DONE] = LIMIT
        else:
            ctl[BETA] = vals[1] / ctl[RZ]
            ctl[RZ] = vals[1]

    def cg_update_p(p, z, ctl, n, first):
        """p = z (``first``) or p = z + β p over the owned entries."""
        if ctl[DONE] != 0.0:
            return
        i = cuda.grid(1)
        if i < n:
            if first:
                p[i] = z[i]
            else:
                p[i] = z[i] + ctl[BETA] * p[i]

    # the block's tree of a dot: each warp's W lanes (lane l adds lane l + off, off = W/2, …,
    # 1), then the NW warp sums the same way; warp shuffles on a GPU (no block barrier inside
    # a warp), shared memory under the simulator (no shuffles) and for blocks under a warp —
    # the same tree, so the same bits
    W = min(32, rb)
    NW = rb // W
    SHUFFLE = not numba_config.ENABLE_CUDASIM and rb >= 32

    def dot_pairs(x0, y0, x1, y1, x2, y2, x3, y3, x4, y4, x5, y5, n, first, partial,
                  nblk, out, count):
        """Σ x_j·y_j of up to MAX_PAIRS pairs in one launch, a fixed-order sum: block
        (b, j) of the (nblk, pairs) grid sums pair j's grid-stride share (thread t: i = b·rb
        + t, step nblk·rb) and reduces its threads in a two-level tree (each warp's lanes,
        then the warps' sums) into partial[first + j, b]; the last block of pair j to finish
        (a global counter, after a fence) sums the nblk partials in the same way (thread t:
        b = t, t + rb, …; the same tree) into out[first + j] and resets the counter. The
        order depends only on (nblk, rb), so the bits are those of a partials launch and a
        finishing launch. (A block-wide shared-memory tree took 11.4 against 6.2 µs for two
        762,129-entry dots on an H200: docs/performance.md.)"""
        sh = cuda.shared.array(rb, float64)
        last = cuda.shared.array(1, int32)
        t = cuda.threadIdx.x
        lane = t % W
        blk = cuda.blockIdx.x
        j = cuda.blockIdx.y
        row = first + j
        s = 0.0
        # (one branch per pair slot: a kernel takes no list of arrays; the branch is the
        # same for every thread of a block)
        for i in range(blk * rb + t, n, nblk * rb):
            if j == 0:
                s += x0[i] * y0[i]
            elif j == 1:
                s += x1[i] * y1[i]
            elif j == 2:
                s += x2[i] * y2[i]
            elif j == 3:
                s += x3[i] * y3[i]
            elif j == 4:
                s += x4[i] * y4[i]
            else:
                s += x5[i] * y5[i]
        for phase in range(2):
            if SHUFFLE:
                off = W // 2
                while off > 0:
                    s += cuda.shfl_down_sync(0xFFFFFFFF, s, off)
                    off //= 2
                if lane == 0:
                    sh[t // W] = s
                cuda.syncthreads()
                if t < W:                            # (warp 0: NW ≤ 32 warp sums)
                    s = sh[t] if t < NW else 0.0
                    off = NW // 2
                    while off > 0:
                        s += cuda.shfl_down_sync(0xFFFFFFFF, s, off)
                        off //= 2
            else:
                sh[t] = s
                off = W // 2
                while off > 0:
                    cuda.syncthreads()
                    if lane < off:
                        sh[t] += sh[t + off]
                    off //= 2
                cuda.syncthreads()
                off = NW // 2
                while off > 0:
                    if t < off:
                        sh[t * W] += sh[(t + off) * W]
                    cuda.syncthreads()
                    off //= 2
                s = sh[0]
            if phase == 1:
                if t == 0:
                    out[row] = s
                    count[row] = 0
                return
            if t == 0:
                partial[row, blk] = s
                cuda.threadfence()                   # the partial visible before the count
                last[0] = 1 if cuda.atomic.add(count, row, 1) == nblk - 1 else 0
            cuda.syncthreads()
            if last[0] == 0:
                return
            s = 0.0
            for b in range(t, nblk, rb):             # (atomic reads: from L2, not a stale L1)
                s += cuda.atomic.add(partial, (row, b), 0.0)

    fns = (cg_init, cg_start, cg_update_xr, cg_check, cg_update_p, dot_pairs)
    return {fn.__name__: jit(fn) for fn in fns}


def get_krylov_kernels(strict: bool = False, rb: int = DOT_BLOCK) -> dict:
    """The GPU-rank CG kernels (name -> compiled kernel), built on first use through the one
    compile path :func:`dycore.backend.gpu_kernels.kernel_compiler`; ``rb`` is the block of
    the sum-mode dot kernels."""
    key = (bool(strict), int(rb))
    if key not in _CACHE:
        from dycore.backend.gpu_kernels import kernel_compiler
        _CACHE[key] = _build(kernel_compiler(strict), int(rb))
    return _CACHE[key]


class _SumReducer:
    """Σ x·y over the ranks as per-rank partials + an all-reduce sum of float64 (k values).

    Every :meth:`post_dots` is one ``dot_pairs`` launch per :data:`MAX_PAIRS` pairs (each
    pair's partials and their fixed-order finish in that launch) and one all-reduce."""

    def __init__(self, backend, transport, kernels, nb, max_dots: int = 3,
                 blocks: int = SUM_BLOCKS):
        self.b, self.t, self.k, self.nb = backend, transport, kernels, nb
        self.rb = kernels["rb"]
        self.blocks = int(blocks)
        self.partial = backend.zeros((int(max_dots), self.blocks))
        self.values = backend.zeros(int(max_dots))
        #: per dot: blocks of the current launch that have written their partial
        self.count = backend.zeros(int(max_dots), np.int32)
        self.calls = 0

    def post_dots(self, *pairs) -> None:
        """Launch Σ x·y of every pair (1-D float64 device arrays of one length, owned
        entries) and the all-reduce of the values; :meth:`finish_on_device` returns them.

        Raises
        ------
        ValueError for more pairs than ``max_dots`` or arrays of different lengths.
        """
        if len(pairs) > self.values.shape[0]:
            raise ValueError(f"sum reducer: {len(pairs)} dot products in one call, at most "
                             f"{self.values.shape[0]}")
        n = int(pairs[0][0].shape[0])
        if any(a.shape != (n,) for pair in pairs for a in pair):
            raise ValueError("sum reducer: the dot products' vectors differ in shape: "
                             f"{[tuple(a.shape) for pair in pairs for a in pair]}")
        b, nb = self.b, self.nb
        part, vals, count = nb(self.partial), nb(self.values), nb(self.count)
        for first in range(0, len(pairs), MAX_PAIRS):
            chunk = pairs[first:first + MAX_PAIRS]
            arrays = [nb(a) for pair in chunk for a in pair]
            arrays += [arrays[0]] * (2 * MAX_PAIRS - len(arrays))     # slots not read
            b.launch(self.k["dot_pairs"], ((self.blocks, len(chunk)), self.rb), *arrays, n,
                     first, part, self.blocks, vals, count)
        self._n = len(pairs)
        self.t.allreduce(self.values[:self._n], "sum")
        self.calls += 1

    def finish_on_device(self):
        return self.values[:self._n]


def rank_local_hierarchy(owned, cache=None, entry: str | None = None,
                         smoother: str = "chebyshev", sweeps: int = 2, max_coarse: int = 500,
                         coarsening: str = "aggregation"):
    """The rank-local AMG hierarchy of a rank's owned × owned pressure block
    (:func:`~dycore.parallel.rank_ops.owned_block`): PyAMG with the rank-local options
    (:data:`~dycore.solvers.amg.RANK_LOCAL_AMG`), kept in ``cache`` under
    ``<entry>-<smoother>-<sweeps>-<max_coarse>`` (:func:`~dycore.solvers.amg.
    cached_hierarchy`; a new entry is written by the cache's writer thread, flushed by the
    caller). Returns the :class:`~dycore.solvers.amg.HostHierarchy` (its ``setup_seconds``
    split). No numba parallel loop runs here, so it may run beside the main thread's
    (:func:`hierarchy_beside`)."""
    from dycore.solvers.amg import RANK_LOCAL_AMG, cached_hierarchy
    return cached_hierarchy(owned, smoother, sweeps, max_coarse, cache,
                            entry and f"{entry}-{smoother}-{sweeps}-{max_coarse}",
                            coarsening=coarsening, background=True, **RANK_LOCAL_AMG)


def hierarchy_beside(owned, **options):
    """:func:`rank_local_hierarchy` (``options``) built on a daemon thread while the caller
    goes on (a GPU rank uploads its operators meanwhile; PyAMG's and SciPy's compiled loops
    and the digest's hash run without the GIL). Returns a ``concurrent.futures.Future`` of
    the hierarchy, which :class:`DeviceRankPCG` takes as ``amg_hierarchy``; its result
    re-raises the build's error. A daemon thread, so a set-up that fails meanwhile exits
    without waiting for the build."""
    import threading
    from concurrent.futures import Future
    future = Future()

    def build():
        try:
            future.set_result(rank_local_hierarchy(owned, **options))
        except BaseException as exc:        # noqa: BLE001 - handed to the waiting rank
            future.set_exception(exc)
    threading.Thread(target=build, name="dycore-rank-amg", daemon=True).start()
    return future


class DeviceRankPCG(ReplayedSolve):
    """CG on this GPU rank's owned rows of the pinned pressure matrix (module docstring).

    Parameters
    ----------
    backend : GPUBackend (or its simulator)
    transport : NcclTransport or a loopback transport (:mod:`dycore.parallel.nccl`)
    plan : HaloPlan of depth 2 of this rank (``rp.plan(2)``)
    rows : the owned rows, :func:`dycore.parallel.rank_ops.owned_rows` of the serial pinned
        pressure matrix (indptr, indices, values, shape (n_owned, n_local(2)), 1)
    reduction : "exact" | "sum"; precond : "jacobi" | "local_amg" | "global_amg"
    rtol, atol, maxiter : stop when ‖r‖₂ ≤ max(rtol·‖b‖₂, atol); at most ``maxiter`` iterations
    group : threads summing one matrix row (1: SciPy's order, the CPU ranks' bits, for the
        pressure rows and the local V-cycle's matrices alike; another power of two ≤ 32: that
        many on every rank; None: :func:`dycore.solvers.krylov.row_group` of this rank's
        rows, which may differ between ranks)
    check_every : iterations issued between two host reads of the verdict
    amg_dtype : storage of the V-cycle's level matrices, local or global (float64 or float32;
        the caller's rule: :func:`~dycore.solvers.amg.level_dtype`)
    amg_max_coarse, amg_smoother, amg_sweeps : the local hierarchy (as the serial device solver)
    amg_coarsening : "aggregation" or "classical" (``solvers.pressure.amg_coarsening``)
    exact_blocks, exact_threads : launch shape of the exact reducer's parts kernel
    sum_blocks, sum_threads : launch shape of the sum-mode dot kernels (fixed, so the sum's
        order is; ``sum_threads`` a power of two, None: min(256, the backend's solver block))
    block : threads per block of the vector, SpMV and V-cycle kernels (None: the backend's
        ``solver_block``, 256 on a GPU)
    graphs : replay later solves from captured graphs of a learnt iteration budget
        (:meth:`steps`); False: every solve issued from Python and checked every
        ``check_every`` iterations. A plain attribute: it may be switched between solves.
    name : the system's name in error messages
    vcycle_piece : this rank's dict of :func:`~dycore.parallel.amg.rank_pieces` (``global_amg``)
    amg_cache, amg_entry : a SetupCache (or None) and the name under which the local hierarchy
        is kept, with the smoother, sweeps and coarsest size appended
        (:func:`rank_local_hierarchy`: checked against the owned block's digest)
    amg_hierarchy : a Future of ``local_amg``'s hierarchy (:func:`hierarchy_beside`, from
        the same rows and options), or None: built here
    overlap : number the owned rows interior first and sum the interior rows of A p (and of
        the global V-cycle's products) while the halo exchange travels on a second stream
        (:mod:`dycore.parallel.overlap`; the same bits; not with ``local_amg``); False: every
        row after the exchange

    Attributes
    ----------
    n_owned, n_local : int; iterations : int (last solve); halo : DeviceHaloExchange
    rhs : (n_owned,) float64 backend array — the right-hand side the solve reads
    graphs : bool; capture : bool — the transport can be captured (else the graphs' work is
        re-issued from Python); budget : int — iterations of the ``first`` graph (0: none yet);
        replayed : bool — the last solve replayed it
    hierarchy : the local :class:`~dycore.solvers.amg.HostHierarchy` (``local_amg``; None
        else); amg_sizes : list of int — its level sizes

    Raises
    ------
    ValueError for an unknown ``reduction`` / ``precond``, rows that do not match the plan, or
    a zero diagonal entry.
    """

    def __init__(self, backend, transport, plan, rows, reduction: str = "exact",
                 precond: str = "jacobi", rtol: float = 1e-8, atol: float = 0.0,
                 maxiter: int = 1000, group: int | None = 1, check_every: int = 8,
                 amg_dtype=np.float64, amg_max_coarse: int = 500,
                 amg_smoother: str = "chebyshev", amg_sweeps: int = 2,
                 exact_blocks: int = 264, exact_threads: int | None = None,
                 sum_blocks: int = SUM_BLOCKS, sum_threads: int | None = None,
                 block: int | None = None, graphs: bool = True, name: str = "pressure",
                 amg_cache=None, amg_entry: str | None = None, vcycle_piece: dict | None = None,
                 amg_coarsening: str = "aggregation", amg_hierarchy=None,
                 overlap: bool = False):
        from dycore.parallel.device_reduce import DeviceExactReducer
        from dycore.solvers.krylov import DeviceLinalg, DeviceMatrix
        if reduction not in REDUCTIONS:
            raise ValueError(f"GPU-rank CG: reduction must be one of {REDUCTIONS}, got "
                             f"{reduction!r}")
        if precond not in PRECONDITIONERS:
            raise ValueError(f"GPU-rank CG: precond must be one of {PRECONDITIONERS}, got "
                             f"{precond!r}")
        ptr, cols, vals, shape, row_block = rows
        ptr, cols = np.asarray(ptr, np.int64), np.asarray(cols, np.int64)
        vals = np.asarray(vals, np.float64)
        n, nl = ptr.size - 1, int(plan.n_local)
        if row_block != 1 or tuple(shape) != (n, nl):
            raise ValueError(f"GPU-rank CG: rows of shape {tuple(shape)} (row block "
                             f"{row_block}) for a plan of {nl} local nodes: expected the "
                             "scalar owned rows of a depth-2 plan")
        # the owned rows interior first, so that A p's interior rows run while p's halo
        # exchange travels (dycore.parallel.overlap): the solve permutes b on entry and x on
        # exit; every row keeps its entries' order, so the bits do not change (the local
        # V-cycle's hierarchy is built from the rows as given, so it keeps their order)
        # Without overlap, the global V-cycle's fine level (four of a cycle's exchanges) is
        # numbered with its sent rows last, in the message's order (send_last): on two ranks
        # its messages leave from the vector itself, with no pack kernel
        self.order = None
        overlap = bool(overlap) and precond != "local_amg"
        order = None
        if overlap:
            order, _ = interior_first(ptr, cols, n)
        elif precond == "global_amg" and vcycle_piece is not None and vcycle_piece["levels"]:
            order = send_last(vcycle_piece["levels"][0][0][0], n)
        if order is not None and not np.array_equal(order, np.arange(n)):
            self.order = order
            plan, ptr, cols, vals = renumber(plan, ptr, cols, vals, order, order)
        self.b, self.t, self.plan = backend, transport, plan
        self.reduction, self.precond, self.name = reduction, precond, name
        self.check_every = max(1, int(check_every))
        self.n_owned, self.n_local = n, nl
        strict = getattr(backend, "strict", False)
        rb = int(sum_threads or min(DOT_BLOCK, backend.solver_block))
        if rb < 1 or rb & (rb - 1):
            raise ValueError(f"GPU-rank CG: sum_threads {rb} is not a power of two")
        self.k = dict(get_krylov_kernels(strict, rb), rb=rb)
        rank_kernels = get_rank_kernels(strict)
        self.pack, self.unpack = rank_kernels["pack_rows"], rank_kernels["unpack_rows"]
        la = self.la = DeviceLinalg(backend, int(block or backend.solver_block),
                                    max_group=1 if group == 1 else None)
        self.a = DeviceMatrix(la, ptr.astype(np.int32), cols.astype(np.int32), vals, 1, group)
        #: owned rows summed before p's ghosts are in (0: every row after the exchange)
        self.n_interior = leading_interior(ptr, cols, n) if overlap else 0
        self.a_inner, self.a_outer = split_rows(self.a, self.n_interior)
        rowid = np.repeat(np.arange(n), np.diff(ptr))
        on_diag = cols == rowid
        diag = np.zeros(n)
        diag[rowid[on_diag]] = vals[on_diag]
        del rowid, on_diag
        if precond != "local_amg":    # (uploaded: the host copies go before the V-cycle's)
            cols = vals = None
        if np.any(diag == 0.0):
            raise ValueError(f"GPU-rank CG: zero diagonal at owned row "
                             f"{int(np.flatnonzero(diag == 0.0)[0])}")
        self.dinv = backend.to_device(1.0 / diag)          # Jacobi's 1.0 / diag, as the CPU's
        z = backend.zeros
        self.x, self.r, self.q, self.zbuf = z(n), z(n), z(n), z(n)
        # (x: the caller's numbering; xs, rhs_s: the solver's — the same arrays without order)
        self.xs, self.rhs_s, self.order_dev = self.x, None, None
        if self.order is not None:
            self.xs, self.rhs_s = z(n), z(n)
            self.order_dev = backend.to_device(self.order)
        self.p = z(nl)                                     # a local vector: ghosts filled
        host = np.zeros(NCTL)
        host[RTOL], host[ATOL], host[MAXIT] = rtol, atol, maxiter
        self.ctl = backend.to_device(host)
        self.halo = DeviceHaloExchange(backend, transport, plan, 1,
                                       overlap=0 < self.n_interior < n)
        if reduction == "exact":
            self.red = DeviceExactReducer(backend, transport, 3, exact_blocks,
                                          exact_threads or EXACT_BLOCK)
        else:
            self.red = _SumReducer(backend, transport, self.k, self._nb, 3, sum_blocks)
        self.vcycle, self.hierarchy, self.amg_sizes = None, None, []
        #: host wall seconds of the rank-local AMG set-up's parts (``local_amg``; else empty):
        #: the owned block cut, :attr:`HostHierarchy.setup_seconds`, the V-cycle's upload
        self.setup_seconds = {}
        if precond == "local_amg":
            from dycore.parallel.rank_ops import owned_block
            from dycore.solvers.amg import DeviceVCycle
            if amg_hierarchy is None:
                with add_seconds(self.setup_seconds, "owned block"):
                    owned = owned_block(ptr, cols, vals, n)
                h = rank_local_hierarchy(owned, amg_cache, amg_entry, amg_smoother, amg_sweeps,
                                         amg_max_coarse, amg_coarsening)
            else:
                with add_seconds(self.setup_seconds, "waited for the hierarchy built beside"):
                    h = amg_hierarchy.result()
            self.setup_seconds.update(h.setup_seconds)
            self.hierarchy, self.amg_sizes = h, list(h.sizes)
            with add_seconds(self.setup_seconds, "V-cycle on the GPU"):
                self.vcycle = DeviceVCycle(la, h, amg_dtype)
            self.partial = la.zeros(la.nblocks(n * la.max_group), 2)[1]
        elif precond == "global_amg":
            from dycore.parallel.device_amg import DeviceGlobalVCycle
            if vcycle_piece is None:
                raise ValueError("GPU-rank CG: precond 'global_amg' needs this rank's "
                                 "vcycle_piece (dycore.parallel.amg.rank_pieces)")
            self.vcycle = DeviceGlobalVCycle(la, transport, vcycle_piece, self.order,
                                             overlap, self.a.g, amg_dtype)
            if self.vcycle.n_owned != n:
                raise ValueError(f"GPU-rank CG: the global V-cycle's piece has "
                                 f"{self.vcycle.n_owned} owned rows, the matrix {n}")
            self.amg_sizes = list(self.vcycle.sizes)
        self.rhs = z(n)
        if self.rhs_s is None:
            self.rhs_s = self.rhs
        self.maxiter = int(maxiter)
        self.graphs = bool(graphs)
        self.capture = bool(getattr(transport, "capturable", False))
        self._first = self._more = None
        self.budget, self.replayed = 0, False
        self.iterations = 0
        self._views: dict = {}

    # -- reporting -------------------------------------------------------------------------
    def bytes_per_iteration(self) -> dict:
        """Bytes this rank moves per CG iteration: ``halo`` (sent, one depth-2 exchange of p)
        and ``allreduce`` (the payload of its two all-reduces: 3 dot products)."""
        per_dot = 8 * NPARTS if self.reduction == "exact" else 8
        return {"halo": 8 * self.halo.values_sent, "allreduce": 3 * per_dot}

    def graph_info(self) -> dict:
        """The ``first`` graph: ``budget`` (iterations; 0: none yet), ``cuda_graph`` (True when
        it is a captured CUDA graph; False before the first converged solve, with ``graphs``
        off, for re-issued loopback ranks, under the simulator or after a failed capture) and
        ``kernels`` (kernel launches captured through the backend; NCCL calls and memsets not
        counted)."""
        g = getattr(self._first, "graph", None)
        return {"budget": self.budget,
                "cuda_graph": bool(g is not None and getattr(g, "graph", None) is not None),
                "kernels": int(getattr(g, "kernels", 0)) if g is not None else 0}

    # -- the solve ---------------------------------------------------------------------------
    def _nb(self, a):
        """The numba view of a backend array, made once per memory range (a view costs a few
        µs of host time on a GPU; an iteration passes about twenty); a numba view as is."""
        if isinstance(a, np.ndarray):
            key = (a.__array_interface__["data"][0], a.shape)
        elif hasattr(a, "data") and hasattr(a.data, "ptr"):          # CuPy
            key = (a.data.ptr, a.shape)
        else:
            return a
        hit = self._views.get(key)
        if hit is None:
            hit = self._views[key] = (a, self.b.nb(a))     # the array kept alive with it
        return hit[1]

    def _launch(self, name, n, *args):
        self.b.launch(self.k[name], grid(n, self.la.rb), *args)

    def _reduce(self, *pairs):
        """Post the dots (a generator: yields once, after the all-reduce's post); returns the
        (k,) device array of the reduced values."""
        self.red.post_dots(*pairs)
        yield
        return self.red.finish_on_device()

    def _precondition(self):
        """z = M⁻¹ r for a V-cycle (a generator: the global one posts messages; Jacobi is
        fused into the update kernels)."""
        if self.precond == "global_amg":
            return (yield from self.vcycle.issue(self.r, self._nb(self.ctl)))
        return self.vcycle.issue(self._nb(self.r), self.partial, self._nb(self.ctl), -1)

    # the solve's pieces, as generators that yield after every post of a message
    def _start(self):
        """x = 0, r = b (b in :attr:`rhs`), z = M⁻¹ r, the first reduction, tol, p = z."""
        nb, n = self._nb, self.n_owned
        jac = 1 if self.precond == "jacobi" else 0
        ctl = nb(self.ctl)
        if self.order is not None and n:          # b in the solver's numbering
            self.b.launch(self.pack, grid(n, self.la.rb), nb(self.rhs), nb(self.order_dev), 1,
                          nb(self.rhs_s))
        self.b.launch(self.k["cg_init"], grid(max(n, 1), self.la.rb), nb(self.rhs_s),
                      nb(self.xs), nb(self.r), nb(self.zbuf), nb(self.dinv), n, jac, ctl)
        z = self.zbuf if jac else (yield from self._precondition())
        vals = yield from self._reduce((self.r, self.r), (self.r, z))     # r = b: b·b = r·r
        self.b.launch(self.k["cg_start"], (1, 1), ctl, nb(vals))
        self._launch("cg_update_p", n, nb(self.p), nb(z), ctl, n, 1)

    def _iterations(self, count: int):
        """``count`` CG iterations (no-ops once the control array says finished); no host
        read."""
        nb, n = self._nb, self.n_owned
        jac = 1 if self.precond == "jacobi" else 0
        ctl = nb(self.ctl)
        pown, m = self.p[:n], self.n_interior
        for _ in range(count):
            self.halo.begin(self.p)
            if m:                                 # q = A p: the rows that read no ghost
                self.la.spmv(self.a_inner, nb(self.p), nb(self.q[:m]), ctl=ctl)
            yield
            self.halo.end(self.p)
            if m < n:                             # ... and, once the ghosts are in, the rest
                self.la.spmv(self.a_outer, nb(self.p), nb(self.q[m:]), ctl=ctl)
            vals = yield from self._reduce((pown, self.q))
            self._launch("cg_update_xr", n, nb(self.xs), nb(self.r), nb(self.zbuf),
                         nb(self.p), nb(self.q), nb(self.dinv), nb(vals), ctl, n, jac)
            z = self.zbuf if jac else (yield from self._precondition())
            vals = yield from self._reduce((self.r, self.r), (self.r, z))
            self.b.launch(self.k["cg_check"], (1, 1), ctl, nb(vals))
            self._launch("cg_update_p", n, nb(self.p), nb(z), ctl, n, 0)
        if self.order is not None and n:          # x in the caller's numbering
            self.b.launch(self.unpack, grid(n, self.la.rb), nb(self.x), nb(self.order_dev), 1,
                          nb(self.xs))

    def steps(self, b):
        """The solve of A x = b as a generator that yields after every post of a message
        (halo exchange, all-reduce); exhausted when the solve has finished.

        With :attr:`graphs`, the first converged solve is issued from Python and checked every
        ``check_every`` iterations; it learns the iteration count, agrees on a budget with the
        other ranks (the max of their counts, one all-reduce, +10 %, at least 2, at most
        ``maxiter``) and captures ``first`` (the start and that many iterations) and ``more``
        (``check_every`` iterations). Later solves replay ``first`` — no host read inside — read
        the verdict once, replay ``more`` while unfinished, and capture ``first`` afresh when
        the count exceeded the budget. Iterations past convergence change nothing, so a
        replayed solve gives the bits of the checked one. Without a capturable transport
        (K loopback ranks) the graphs' work is re-issued from Python with its yields, so the
        ranks stay in lock step; the kernels and their order are the graph's.

        Parameters
        ----------
        b : (n_owned,) float64 backend array — this rank's owned right-hand side (copied into
            :attr:`rhs`, which the graphs read)

        The solution is :attr:`x` ((n_owned,) backend array, the solver's own), the iteration
        count :attr:`iterations`; :attr:`replayed` says whether the solve replayed ``first``.

        Raises
        ------
        ValueError for a right-hand side of the wrong shape; SolverDivergedError (the same on
        every rank) when the solve stops unconverged.
        """
        if tuple(b.shape) != (self.n_owned,):
            raise ValueError(f"GPU-rank CG: right-hand side of shape {tuple(b.shape)}, "
                             f"expected ({self.n_owned},)")
        if b is not self.rhs:
            self.rhs[...] = self.b.as_device(b, np.float64)
        host = yield from self._solve_steps()
        its = self.iterations
        if host[DONE] != CONVERGED:
            why = {LIMIT: "iteration limit reached", BREAKDOWN: "non-finite residual"}.get(
                float(host[DONE]), "not finished")
            raise SolverDivergedError(
                f"{self.name} solve (GPU-rank CG, {self.reduction} dots, {self.precond}) did "
                f"not converge: {why} after {its} iterations (tol {host[TOL]:.3e})")

    def solve(self, b):
        """Solve A x = b on this rank (every rank calls it; NCCL orders the messages).

        b : (n_owned,) float64 backend array. Returns (x (n_owned,) backend array — the
        solver's own, overwritten by the next solve —, iterations).

        Raises
        ------
        SolverDivergedError when the solve stops unconverged.
        """
        for _ in self.steps(b):
            pass
        return self.x, self.iterations


def solve_lockstep(solvers, rhs) -> list:
    """Run the solves of K loopback ranks in one process, in lock step: every rank posts its
    messages before any rank completes them (:class:`~dycore.parallel.nccl.LoopbackWorld`).

    Parameters
    ----------
    solvers : list of DeviceRankPCG, rank order; rhs : list of (n_owned,) backend arrays

    Returns
    -------
    list of (x, iterations) per rank.

    Raises
    ------
    RuntimeError if the ranks do not finish after the same number of messages;
    SolverDivergedError from the solves.
    """
    gens = [s.steps(b) for s, b in zip(solvers, rhs)]
    live = [True] * len(gens)
    while any(live):
        for i, g in enumerate(gens):
            try:
                next(g)
            except StopIteration:
                live[i] = False
        if any(live) and not all(live):
            raise RuntimeError("GPU-rank CG: the ranks finished after different numbers of "
                               f"messages (finished: {[not v for v in live]})")
    return [(s.x, s.iterations) for s in solvers]
