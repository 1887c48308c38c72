"""Direct solves of the constant pressure matrix: factorised once per run, solved every iteration.

The pinned pressure matrix (CMC + s·KMK, docs/equations.md §4.5) depends only on the mesh, so
a sparse Cholesky/LU factorisation made at set-up serves every pressure solve of the run
(``solvers.pressure.method: direct``). Two factorisations, chosen by where the vectors live:

- :class:`CudssDirect`: NVIDIA cuDSS through nvmath-python's low-level bindings
  (``nvmath.bindings.cudss``) on a GPU — analysis (nested-dissection reordering, symbolic
  factorisation) and numeric factorisation once, then each solve is two triangular sweeps issued
  on the backend's stream into the solver's own right-hand-side and solution buffers (no host
  synchronisation, no allocation). Whether cuDSS's solve can be captured into a CUDA graph is
  measured at set-up (:attr:`CudssDirect.capturable`); if it cannot, the captured Picard
  iteration is split around it (:meth:`dycore.backend.gpu.GPUBackend.uncaptured`).
- :class:`HostDirect`: SciPy's SuperLU (``scipy.sparse.linalg.splu``, minimum-degree ordering on
  AᵀA + A) on host arrays — the host solver mode and numba-cuda's simulator.

Both check the factorisation once at set-up: the relative residual ‖b − A x‖₂/‖b‖₂ of a solve
with a fixed pseudo-random right-hand side must not exceed the configured ``rtol``
(:attr:`residual` keeps it).
"""
from __future__ import annotations

import glob
import logging
import os
import time
import weakref

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from dycore.errors import ConfigError, SolverDivergedError

__all__ = ["HostDirect", "CudssDirect", "direct_solver", "check_factorisation",
           "pressure_method", "on_gpu", "reproducible", "threading_layer", "comm_layer",
           "beside_cudss", "residual_verdict", "ordering_arrays", "solve_in_step",
           "AUTO_DIRECT_MAX_ROWS",
           "ORDERING_ENTRY"]

#: the set-up cache entry (:mod:`dycore.io.setup_cache`) of a cuDSS factorisation's ordering
#: and partition tree (:func:`ordering_arrays`); entries of the ordering alone, under the old
#: name, are not used: given back without its tree the ordering factorises as fast but solves
#: ≈ 3 ms slower on the verify mesh (the sweeps lose the tree's parallelism)
ORDERING_ENTRY = "cudss-ordering-tree"

#: ``method: auto`` factorises pressure matrices up to this many rows (measured on an H200:
#: 98,441 rows — solve 3.0 ms against 7.1 ms for CG + AMG, factors 164 M nonzeros;
#: 459,513 rows — 11.5 ms against 28.5 ms, set-up 15.8 s without a cached ordering;
#: 762,129 rows (4.42 M tets) — step 90.1 ms against 128.6 ms with CG + AMG, factors 2.98 G
#: nonzeros (24 GB), set-up 62 s against CG's 81 s of host AMG set-up; the factors grow
#: ~ n^(4/3) in 3-D: ≈ 35 GB at the limit, within an 80 GB card)
AUTO_DIRECT_MAX_ROWS = 1_000_000

log = logging.getLogger("dycore")

#: what to install for ``solvers.pressure.method: direct`` on a GPU
CUDSS_PACKAGE = "nvmath-python[cu13]"
CUDSS_INSTALL = f"pip install '{CUDSS_PACKAGE}'  (or [cu12] for a CUDA 12 driver)"


def check_factorisation(a, solve, rtol: float, label: str = "pressure") -> float:
    """Relative residual of one solve with a fixed pseudo-random right-hand side.

    Parameters
    ----------
    a : scipy sparse (n, n) — the factorised matrix
    solve : callable (n,) float64 host array -> (n,) float64 host array
    rtol : the configured relative tolerance; label : system name for the error

    Returns
    -------
    float : ‖b − A x‖₂ / ‖b‖₂

    Raises
    ------
    SolverDivergedError when the residual exceeds ``max(rtol, 1e-8)`` or is not finite.
    """
    b = np.random.default_rng(12345).standard_normal(a.shape[0])
    x = solve(b)
    res = float(np.linalg.norm(b - a @ x) / np.linalg.norm(b))
    return residual_verdict(res, rtol, f"{label} direct solve",
                            f"the matrix may be singular (is the pressure pinned?) — use "
                            f"solvers.{label}.method: cg")


def residual_verdict(res: float, rtol: float, what: str, advice: str) -> float:
    """``res`` (a set-up check's relative residual) when it is at most ``max(rtol, 1e-8)``;
    else SolverDivergedError "``what``: the factorisation's relative residual is … (> rtol …);
    ``advice``" (also for a residual that is not finite)."""
    if not res <= max(rtol, 1e-8):
        raise SolverDivergedError(f"{what}: the factorisation's relative residual is "
                                  f"{res:.3e} (> rtol {rtol:g}); {advice}")
    return res


class HostDirect:
    """SuperLU factorisation of ``a`` solving ``x = A⁻¹ b`` between two fixed host arrays.

    Parameters
    ----------
    a : scipy sparse (n, n), float64, nonsingular
    b, x : (n,) float64 NumPy arrays (the simulator's "device" arrays are NumPy too): the
        right-hand side read by :meth:`solve` and the solution it overwrites
    rtol : tolerance of the set-up check (:func:`check_factorisation`)

    Raises
    ------
    SolverDivergedError when the matrix is singular or the set-up check fails.

    Attributes
    ----------
    fill : int — nonzeros of L + U; residual : float — the set-up check's relative residual;
    setup_s : float — seconds to factorise; capturable : False (host work)
    """

    capturable = False
    name = "SuperLU (host)"

    def __init__(self, a, b, x, rtol: float = 1e-10):
        t = time.perf_counter()
        try:
            self.lu = spla.splu(sp.csc_matrix(a), permc_spec="MMD_AT_PLUS_A")
        except RuntimeError as exc:                  # SuperLU: "Factor is exactly singular"
            raise SolverDivergedError(
                f"pressure direct solve: SuperLU could not factorise the matrix ({exc}); use "
                f"solvers.pressure.method: cg") from exc
        self.setup_s = time.perf_counter() - t
        self.fill = int(self.lu.L.nnz + self.lu.U.nnz)
        self.b, self.x = b, x
        self.residual = check_factorisation(a, self.lu.solve, rtol)

    def solve(self) -> None:
        """x ← A⁻¹ b (in place)."""
        self.x[:] = self.lu.solve(np.asarray(self.b))


class CudssDirect:
    """cuDSS factorisation of the SPD matrix ``a`` on the GPU; ``solve()`` is stream-ordered.

    Parameters
    ----------
    backend : GPUBackend (CuPy arrays, its ``stream``)
    a : scipy sparse (n, n) float64, symmetric positive definite (the pinned pressure matrix)
    b, x : (n,) float64 CuPy arrays: the right-hand side read by :meth:`solve` and the solution
        it overwrites (fixed buffers: a captured graph keeps reading them)
    rtol : tolerance of the set-up check (:func:`check_factorisation`)
    reordering : name of a cuDSS ``ReorderingAlg`` (DEFAULT: nested dissection)
    perm : (n,) int32 or None — a fill-reducing permutation to use instead of reordering
        (cuDSS ``USER_PERM``, e.g. :meth:`permutation` of an earlier run)
    tree : uint8 bytes or None — with ``perm``, the nested-dissection partition tree of the
        same analysis (:meth:`partition_tree`; cuDSS ``USER_ND_PARTITION_TREE``). Without it
        cuDSS factorises in the given order but loses the tree its parallel sweeps follow:
        the verify mesh's steps took 62.1 instead of 56.0 ms (H100; 57.6 vs 51.6 ms on an
        H200), 3 ms more per solve; the paper mesh's solve 3.09 against 3.05 ms
    deterministic : cuDSS's deterministic mode: the same bits from solve to solve and run to
        run, and a solve that can be captured into a CUDA graph — but 6.7× slower on the paper
        mesh (20.6 against 3.05 ms, H100/H200); without it two solves of one right-hand side
        may differ in the last bits, as the atomic assembly's sums do
    options : {cuDSS ConfigParam name: value} — further settings (an enum member's name for
        SOLVE_ALG, FACTORIZATION_ALG, REORDERING_ALG; an int otherwise)

    The host part of the analysis runs multithreaded with cuDSS's threading layer
    (:func:`threading_layer`: ``CUDSS_THREADING_LIB``, else the library installed beside
    cuDSS; ``CUDSS_THREADING_LIB=off`` keeps it single-threaded).

    Attributes
    ----------
    fill : int — nonzeros of the factors (cuDSS's ``LU_NNZ``); residual : set-up check;
    setup_s : seconds for analysis + factorisation (analysis_s of them the analysis); capturable : bool — whether the solve was
    captured into a CUDA graph at set-up and its replay gave the same bits as the direct call

    Raises
    ------
    ConfigError when nvmath-python or the cuDSS library cannot be loaded (names the install);
    SolverDivergedError when the factorisation fails (cuDSS ``INFO`` ≠ 0) or its check does.
    """

    name = "cuDSS"

    def __init__(self, backend, a, b, x, rtol: float = 1e-10, reordering: str = "DEFAULT",
                 perm=None, deterministic: bool = False, options=None, tree=None):
        self._open(backend, b, x, reordering, deterministic, options)
        a = sp.csr_matrix(a)
        if perm is not None:                           # a reordering found before (cached)
            perm = np.ascontiguousarray(perm, np.int32)
            self.cd.data_set(self.handle, self.data, self.cd.DataParam.USER_PERM,
                             perm.ctypes.data, perm.nbytes)
            param = _tree_param(self.cd, user=True)
            if tree is not None and param is not None:
                tree = np.ascontiguousarray(tree, np.uint8)
                self.cd.data_set(self.handle, self.data, param, tree.ctypes.data, tree.nbytes)
        self._factorise(a, a.shape[0])
        self.residual = check_factorisation(a, self._solve_host, rtol)
        self.capturable = self._try_capture()

    def _open(self, backend, b, x, reordering="DEFAULT", deterministic=False, options=None,
              comm_layer=None) -> None:
        """The handle (on the backend's stream, with the threading layer and, for a
        factorisation over several processes, the communication layer ``comm_layer``), the
        configuration and the solver data; ConfigError when cuDSS cannot be loaded."""
        try:
            from nvmath.bindings import cudss
        except Exception as exc:  # noqa: BLE001 - ImportError or a missing shared library
            raise ConfigError(
                f"solvers.pressure.method: direct needs NVIDIA cuDSS through nvmath-python on "
                f"the GPU ({type(exc).__name__}: {exc}); install it with {CUDSS_INSTALL}, or "
                f"use solvers.pressure.method: cg") from exc
        self.cd, self.b_arr, self.x_arr, self.backend = cudss, b, x, backend
        self._t0 = time.perf_counter()
        try:
            self.handle = cudss.create()
        except Exception as exc:  # noqa: BLE001 - libcudss not found at first use
            raise ConfigError(
                f"solvers.pressure.method: direct: the cuDSS library could not be loaded "
                f"({type(exc).__name__}: {exc}); install it with {CUDSS_INSTALL}") from exc
        cudss.set_stream(self.handle, backend.stream.ptr)
        if comm_layer is not None:
            cudss.set_comm_layer(self.handle, comm_layer)
        self.threading = threading_layer()
        if self.threading:                              # cuDSS's multithreaded analysis
            cudss.set_threading_layer(self.handle, self.threading)
        self.config = cudss.config_create()
        self._set_config(cudss.ConfigParam.REORDERING_ALG,
                         int(getattr(cudss.ReorderingAlg, reordering)))
        self._set_config(cudss.ConfigParam.DETERMINISTIC_MODE, int(deterministic))
        for key, value in (options or {}).items():   # e.g. {"SOLVE_ALG": "GENERAL"}
            enum = {"SOLVE_ALG": cudss.SolveAlg, "FACTORIZATION_ALG": cudss.FactorizationAlg,
                    "REORDERING_ALG": cudss.ReorderingAlg}.get(key)
            self._set_config(getattr(cudss.ConfigParam, key),
                             int(getattr(enum, value)) if enum is not None else int(value))
        self.data = cudss.data_create(self.handle)
        self.a = self.b = self.x = None
        self._matrices = []
        self._finalizer = weakref.finalize(self, _destroy, cudss, self.handle, self.config,
                                           self.data, self._matrices)

    def _factorise(self, rows, n: int, first_row: int | None = None) -> None:
        """Analysis and numeric factorisation of the CSR ``rows`` ((m, n) scipy CSR: the whole
        matrix, m = n, or — ``first_row`` given — this process's rows first_row ..
        first_row + m − 1 of a matrix distributed by rows, with the right-hand side and the
        solution distributed alike). Sets fill, analysis_s, setup_s; SolverDivergedError when
        cuDSS reports INFO ≠ 0."""
        cudss, xp, m = self.cd, self.backend.xp, rows.shape[0]
        self._arrays = (xp.asarray(rows.indptr.astype(np.int32)),
                        xp.asarray(rows.indices.astype(np.int32)),
                        xp.asarray(rows.data.astype(np.float64)))
        ptr, idx, val = self._arrays
        r64, r32 = cudss.DataType.R_64F, cudss.DataType.R_32I
        self.a = cudss.matrix_create_csr(
            n, n, int(rows.nnz), ptr.data.ptr, 0, idx.data.ptr, val.data.ptr, r32, r32, r64,
            cudss.MatrixType.SPD, cudss.MatrixViewType.FULL, cudss.IndexBase.ZERO)
        self._matrices.append(self.a)
        self.b = cudss.matrix_create_dn(n, 1, m, self.b_arr.data.ptr, r64,
                                        cudss.Layout.COL_MAJOR)
        self._matrices.append(self.b)
        self.x = cudss.matrix_create_dn(n, 1, m, self.x_arr.data.ptr, r64,
                                        cudss.Layout.COL_MAJOR)
        self._matrices.append(self.x)
        if first_row is not None:
            for mat in (self.a, self.b, self.x):
                cudss.matrix_set_distribution_row1d(mat, first_row, first_row + m - 1)
        self._execute(cudss.Phase.ANALYSIS)
        self.backend.synchronize()
        self.analysis_s = time.perf_counter() - self._t0
        self._execute(cudss.Phase.FACTORIZATION)
        self.backend.synchronize()
        self.setup_s = time.perf_counter() - self._t0
        info = self._get(cudss.DataParam.INFO, np.int32)
        if info != 0:
            raise SolverDivergedError(f"pressure direct solve: cuDSS factorisation failed "
                                      f"(INFO = {info}: the matrix is not positive definite)")
        self.fill = self._get(cudss.DataParam.LU_NNZ, np.int64)

    def close(self) -> None:
        """Free the cuDSS matrices, data, configuration and handle now (not at garbage
        collection); later calls do nothing."""
        self._finalizer()

    def _execute(self, phase) -> None:
        self.cd.execute(self.handle, phase, self.config, self.data, self.a, self.x, self.b)

    def _set_config(self, param, value: int) -> None:
        v = np.array([value], np.int32)
        self.cd.config_set(self.config, param, v.ctypes.data, v.nbytes)

    def _get(self, param, dtype, size: int = 1):
        value, written = np.zeros(size, dtype), np.zeros(1, np.uint64)
        self.cd.data_get(self.handle, self.data, param, value.ctypes.data, value.nbytes,
                         written.ctypes.data)
        return int(value[0]) if size == 1 else value

    def permutation(self):
        """The reordering the analysis chose, (n,) int32 (cuDSS ``PERM_REORDER_ROW``)."""
        return self._get(self.cd.DataParam.PERM_REORDER_ROW, np.int32, self.b_arr.size)

    def partition_tree(self):
        """The analysis's nested-dissection partition tree as raw bytes ((k,) uint8; cuDSS
        ``ND_PARTITION_TREE``, ``ELIMINATION_TREE`` before cuDSS 0.8), to be given back with
        :meth:`permutation` (``tree=``); None where this cuDSS does not report one."""
        param = _tree_param(self.cd, user=False)
        if param is None:
            return None
        written = np.zeros(1, np.uint64)
        try:        # its size first (a null buffer of 0 bytes); then exactly that many bytes
            self.cd.data_get(self.handle, self.data, param, 0, 0, written.ctypes.data)
            value = np.zeros(int(written[0]), np.uint8)
            if value.size:
                self.cd.data_get(self.handle, self.data, param, value.ctypes.data,
                                 value.nbytes, written.ctypes.data)
        except Exception as exc:  # noqa: BLE001 - not reported by this version / config
            log.info("cuDSS partition tree not available (%s: %s)", type(exc).__name__, exc)
            return None
        return value if value.size else None

    def solve(self) -> None:
        """x ← A⁻¹ b: issued on the backend's stream, returns at once (no host sync)."""
        self._execute(self.cd.Phase.SOLVE)

    def _solve_host(self, rhs):
        self.b_arr[...] = self.backend.to_device(rhs)
        self.solve()
        return self.backend.to_host(self.x_arr)

    def _try_capture(self) -> bool:
        """Capture one solve into a CUDA graph and replay it: True if that works and gives the
        bits of the solve issued directly (then the solve may sit inside a captured iteration)."""
        import cupy
        stream, b = self.backend.stream, self.backend
        self.b_arr[...] = b.to_device(np.random.default_rng(7).standard_normal(self.b_arr.size))
        self.solve()
        direct = b.to_host(self.x_arr)
        self.x_arr.fill(0.0)
        try:
            stream.begin_capture(mode=cupy.cuda.runtime.streamCaptureModeRelaxed)
            try:
                self.solve()
            finally:
                graph = stream.end_capture()
            graph.launch(stream=stream)
            same = bool(np.array_equal(b.to_host(self.x_arr), direct))
        except Exception as exc:  # noqa: BLE001 - any capture failure: split the graphs
            log.info("cuDSS solve not capturable (%s: %s): the Picard iteration's graph is "
                     "split around it", type(exc).__name__, exc)
            return False
        if not same:
            log.info("cuDSS solve captured but its replay differs from a direct call: the "
                     "Picard iteration's graph is split around it")
        return same


def _tree_param(cudss, user: bool):
    """cuDSS's data parameter of the nested-dissection partition tree (to set with ``user``,
    else to read): ``[USER_]ND_PARTITION_TREE`` (cuDSS 0.8), ``[USER_]ELIMINATION_TREE``
    (0.7), or None."""
    prefix = "USER_" if user else ""
    for name in ("ND_PARTITION_TREE", "ELIMINATION_TREE"):
        param = getattr(cudss.DataParam, prefix + name, None)
        if param is not None:
            return param
    return None


def _destroy(cudss, handle, config, data, matrices) -> None:
    for m in matrices:
        cudss.matrix_destroy(m)
    cudss.data_destroy(handle, data)
    cudss.config_destroy(config)
    cudss.destroy(handle)


def threading_layer() -> str | None:
    """The cuDSS threading layer to load, so that the analysis's host part (the reordering)
    runs on all cores: the library ``CUDSS_THREADING_LIB`` names (``off``: none), else
    ``libcudss_mtlayer_gomp.so*`` installed beside cuDSS (the ``nvidia`` package's
    ``cu13/lib`` or ``cu12/lib``, where pip's cuDSS wheels put it), else None.

    Measured on an H200 (docs/performance.md): the paper mesh's analysis without a cached
    ordering 2.52 s single-threaded, 1.23 s with the layer; with the set-up cache's ordering
    the verify mesh's factorisation takes 3.8 s either way."""
    named = os.environ.get("CUDSS_THREADING_LIB")
    if named:
        return None if named.lower() in ("off", "0", "none") else named
    return beside_cudss("libcudss_mtlayer_gomp.so*")


def comm_layer() -> str | None:
    """cuDSS's NCCL communication layer, for one factorisation over several processes (MGMN
    mode, :class:`dycore.parallel.distributed_direct.MgmnDirect`): the library
    ``CUDSS_COMM_LIB`` names (``off``: none), else ``libcudss_commlayer_nccl.so*`` installed
    beside cuDSS, else None. The layer NCCL-sends the factors' data between GPUs and sends its
    host messages with Open MPI (it links ``libmpi.so.40``)."""
    named = os.environ.get("CUDSS_COMM_LIB")
    if named:
        return None if named.lower() in ("off", "0", "none") else named
    return beside_cudss("libcudss_commlayer_nccl.so*")


def beside_cudss(pattern: str) -> str | None:
    """The first file matching ``pattern`` in the ``lib`` folders where pip's cuDSS wheels put
    the library (the ``nvidia`` package's ``cu13``, ``cu12`` or ``cudss``), or None."""
    try:
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for sub in ("cu13", "cu12", "cudss"):
            found = sorted(glob.glob(os.path.join(root, sub, "lib", pattern)))
            if found:
                return found[0]
    return None


def on_gpu(backend) -> bool:
    """Whether ``backend`` holds CuPy arrays on a real GPU (cuDSS), not host arrays."""
    return getattr(backend, "name", "cpu") == "gpu" and not getattr(backend, "simulator", False)


def reproducible(backend) -> bool:
    """Whether the run asks for reproducible sums (deterministic assembly or strict mode)."""
    return (getattr(backend, "assembly", "atomic") == "deterministic"
            or bool(getattr(backend, "strict", False)))


def pressure_method(cfg, backend, n: int,
                    max_rows: int = AUTO_DIRECT_MAX_ROWS) -> tuple[str, str]:
    """The pressure method a run uses: ``cfg.method`` unless it is ``auto``.

    ``auto`` means ``direct`` on a GPU with device solvers, atomic assembly (not strict, not
    deterministic: cuDSS's fast solve is not bitwise reproducible), where cuDSS can be
    imported and the matrix has at most ``max_rows`` rows (:data:`AUTO_DIRECT_MAX_ROWS` on
    one GPU; GPU ranks that share one factorisation pass K times that); ``cg`` otherwise.

    Returns
    -------
    (method, reason) — reason: a short phrase for the log
    """
    if cfg.method != "auto":
        return cfg.method, "configured"
    if not on_gpu(backend) or getattr(backend, "solver_mode", "host") != "device":
        return "cg", "direct is chosen on a GPU with device solvers only"
    if reproducible(backend):
        return "cg", ("strict mode or deterministic assembly keeps CG (cuDSS's reproducible "
                      "mode is slower than CG)")
    if n > max_rows:
        return "cg", f"{n:,} rows > {max_rows:,} (factors too large)"
    try:
        from nvmath.bindings import cudss  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - not installed or its libraries missing
        return "cg", (f"cuDSS not available ({type(exc).__name__}); install "
                      f"'{CUDSS_PACKAGE}' for the direct solve")
    return "direct", "cuDSS on the GPU"


def ordering_arrays(s) -> dict:
    """What the set-up cache keeps of a factorisation ``s`` (a :class:`CudssDirect`) under
    :data:`ORDERING_ENTRY`: {"perm": (n,) int32 ordering, "tree": (k,) uint8 partition tree —
    absent where this cuDSS reports none}; given back to :func:`direct_solver` as ``perm=``,
    ``tree=`` it skips the analysis's reordering."""
    out = {"perm": s.permutation()}
    tree = s.partition_tree()
    if tree is not None:
        out["tree"] = tree
    return out


def solve_in_step(backend, direct) -> None:
    """Run ``direct.solve()`` as a step's pressure solve: at once, or — while a Picard
    iteration is being captured and the solve cannot be (cuDSS's fast mode, the MGMN mode,
    a host factorisation) — at this point of every replay of that graph, which is split
    around it (:meth:`~dycore.backend.gpu.GPUBackend.uncaptured`).

    backend : GPUBackend (its ``uncaptured``); direct : HostDirect, CudssDirect or MgmnDirect
    """
    if getattr(direct, "capturable", False):
        direct.solve()
    else:
        backend.uncaptured(direct.solve)


def direct_solver(backend, a, b, x, rtol: float = 1e-10, perm=None, tree=None):
    """The direct solver for the backend's arrays: cuDSS on a GPU, SuperLU on host arrays.

    cuDSS runs in its deterministic mode where the run asks for reproducible sums
    (deterministic assembly or strict mode), else in its fast mode.

    Parameters
    ----------
    backend : CPUBackend / GPUBackend / its simulator; a : scipy sparse (n, n)
    b, x : (n,) float64 backend arrays (right-hand side, solution)
    perm : a cached cuDSS ordering (:meth:`CudssDirect.permutation`) or None
    tree : its partition tree (:meth:`CudssDirect.partition_tree`) or None

    Returns
    -------
    CudssDirect or HostDirect, factorised and checked (logs its set-up time and fill)
    """
    gpu = on_gpu(backend)
    s = (CudssDirect(backend, a, b, x, rtol, perm=perm, tree=tree,
                     deterministic=reproducible(backend))
         if gpu else HostDirect(a, b, x, rtol))
    given = ("" if perm is None else
             " with the cached ordering" + ("" if tree is None else " and partition tree"))
    log.info("pressure: %s factorisation of %d rows in %.2f s%s (%d nonzeros in the factors, "
             "%.1f× the matrix), set-up residual %.1e%s", s.name, a.shape[0], s.setup_s, given,
             s.fill, s.fill / max(a.nnz, 1), s.residual,
             "" if not gpu else (", solve captured in the iteration graphs" if s.capturable
                                    else ", iteration graphs split around the solve"))
    return s
