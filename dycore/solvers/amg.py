"""Smoothed-aggregation AMG V-cycle run as our own device kernels (hierarchy set up once on the host).

The pressure matrix depends only on the mesh, so PyAMG builds its hierarchy once
(:func:`dycore.solvers.linear.amg_hierarchy`); every level's A, P and R are copied to the device as
CSR, and one V-cycle is a fixed sequence of kernels (:mod:`dycore.backend.solver_kernels`):

    level l < L−1:  ν polynomial smoothing steps from x = 0;  r = b − A x;  b_{l+1} = R r;
                    (recursion);  x += P x_{l+1};  ν smoothing steps
    level L−1:      x = A_c⁺ b (dense pseudo-inverse, a few hundred unknowns)

The smoother is a polynomial in D⁻¹A, so the V-cycle is a symmetric preconditioner for CG:
damped Jacobi (x += ω D⁻¹(b − A x)), or Chebyshev of degree ν on [ρ/30, 1.1 ρ], ρ the largest
eigenvalue of D⁻¹A (Adams, Brezina, Hu & Tuminaro, J. Comput. Phys. 188, 2003; the recurrence of
Saad, *Iterative Methods for Sparse Linear Systems*, Alg. 12.1). :func:`vcycle_reference` is the
same cycle in NumPy/SciPy, the independent check of the kernels.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from dycore.backend.timers import add_seconds
from dycore.solvers.krylov import MAX_GROUP, SMALL_ROWS, DeviceMatrix, row_group

__all__ = ["smoother_coefficients", "level_dtype", "HostHierarchy", "cached_hierarchy",
           "hierarchy_entry", "matrix_digest", "RANK_LOCAL_AMG",
           "vcycle_reference", "DeviceVCycle", "DeviceJacobi"]


#: the options of a rank-local hierarchy (each rank's V-cycle on its own block: CPU ranks'
#: LocalAMG, GPU ranks' local_amg; :func:`dycore.solvers.linear.amg_hierarchy`): one step of
#: the evolution measure (half the build of the default 2) and two energy-minimisation
#: iterations (15-23 % less again), for the same CG iterations on K ≥ 2 ranks
RANK_LOCAL_AMG = {"evolution_steps": 1, "energy_iterations": 2}


def _dinv_spectral_radius(a) -> float:
    """Largest eigenvalue of D⁻¹A for SPD a: Lanczos (ARPACK) on D^-½ A D^-½ applied as two
    scalings around A (not formed), fixed start vector, 10 Lanczos vectors, relative
    tolerance 3e-2.

    The Chebyshev interval [ρ/30, 1.1ρ] takes a 10 % margin above ρ, and a Ritz value is
    below ρ by at most the tolerance, so the interval still covers the spectrum. On the
    4.42 M-tet mesh's pressure matrix (762,129 rows) and its hierarchy's levels the values
    are 0.3-0.9 % below the converged ones (1.1-1.8 % on 5,736 rows), and CG with the
    V-cycle takes the same iterations as with ARPACK's defaults (20 vectors, tolerance 1e-2):
    19 on the whole matrix, 150 with four column blocks, for about half the time (1.11
    against 2.18 s and 1.40 against 2.54 s on the development machine; 16 against 31
    products on the finest level). At 30.7 M tets on four ranks the defaults took 10 s of a
    rank's set-up on an H200 host (docs/performance.md)."""
    n = a.shape[0]
    d = 1.0 / np.sqrt(a.diagonal())
    if n <= 64:
        return float(np.linalg.eigvalsh((a.toarray() * d[:, None]) * d[None, :]).max())
    op = spla.LinearOperator((n, n), matvec=lambda x: d * (a @ (d * np.ravel(x))),
                             dtype=np.float64)
    return float(spla.eigsh(op, k=1, which="LA", v0=np.ones(n), tol=3e-2, ncv=10,
                            return_eigenvectors=False)[0])


def smoother_coefficients(kind: str, sweeps: int, rho: float, omega: float = 2.0 / 3.0):
    """(c1, c2) of each smoothing step d = c1·D⁻¹r + c2·d, x += d.

    Parameters
    ----------
    kind : "jacobi" (damped Jacobi: c1 = ω, c2 = 0) or "chebyshev" (degree ``sweeps`` on
        [ρ/30, 1.1ρ])
    sweeps : steps per smoothing (≥ 1); rho : largest eigenvalue of D⁻¹A; omega : Jacobi damping

    Returns
    -------
    list of (c1, c2) float pairs, length ``sweeps``

    Raises
    ------
    ValueError for an unknown kind or sweeps < 1.
    """
    if sweeps < 1:
        raise ValueError(f"smoothing sweeps {sweeps}: expected >= 1")
    if kind == "jacobi":
        return [(float(omega), 0.0)] * sweeps
    if kind != "chebyshev":
        raise ValueError(f"smoother {kind!r}: expected jacobi or chebyshev")
    lo, hi = rho / 30.0, 1.1 * rho
    theta, delta = 0.5 * (hi + lo), 0.5 * (hi - lo)
    sigma = theta / delta
    out = [(1.0 / theta, 0.0)]
    rho_prev = 1.0 / sigma
    for _ in range(1, sweeps):
        rho_k = 1.0 / (2.0 * sigma - rho_prev)
        out.append((2.0 * rho_k / delta, rho_k * rho_prev))
        rho_prev = rho_k
    return out


def level_dtype(precision: str, strict: bool) -> np.dtype:
    """Storage of a device V-cycle's level matrices (A, P, R) for ``solvers.pressure.precision``:
    float32 for "auto" and "float32" outside strict mode, else float64 — one rule for the
    serial device V-cycle and the GPU ranks' (rank-local and global) V-cycles. Vectors, D⁻¹,
    the coarsest solve and all arithmetic stay float64; the cycle is the float64 cycle of
    :meth:`HostHierarchy.rounded` (float32 halves the bytes of a value, 12 → 8 bytes a
    nonzero with its int32 column).

    precision : "auto" | "float64" | "float32"; strict : the backend's strict mode

    Raises
    ------
    ValueError for another ``precision``.
    """
    if precision not in ("auto", "float64", "float32"):
        raise ValueError(f"solvers.pressure.precision: expected auto, float64 or float32, got "
                         f"{precision!r}")
    return np.dtype(np.float32 if precision != "float64" and not strict else np.float64)


def matrix_digest(a) -> np.ndarray:
    """SHA-256 of a CSR matrix's shape, indptr, indices and values, (32,) uint8: what a cached
    hierarchy is checked against."""
    import hashlib
    a = a.tocsr()
    h = hashlib.sha256(np.asarray(a.shape, np.int64).tobytes())
    for arr in (a.indptr, a.indices, a.data):
        h.update(np.ascontiguousarray(arr).view(np.uint8).ravel())
    return np.frombuffer(h.digest(), np.uint8).copy()


def hierarchy_entry(name: str, coarsening: str = "aggregation") -> str:
    """The set-up cache entry of a hierarchy: ``name``, with ``-classical`` for a Ruge-Stuben
    one (so an entry never serves the other coarsening; aggregation keeps the older names)."""
    return name if coarsening == "aggregation" else f"{name}-{coarsening}"


def cached_hierarchy(a, smoother: str = "chebyshev", sweeps: int = 2, max_coarse: int = 500,
                     cache=None, name: str | None = None,
                     coarsening: str = "aggregation",
                     evolution_steps: int = 2, energy_iterations: int = 4,
                     background: bool = False) -> "HostHierarchy":
    """``HostHierarchy(a, smoother, sweeps, max_coarse=max_coarse, coarsening=coarsening,
    evolution_steps=evolution_steps, energy_iterations=energy_iterations)``, or the one
    ``cache`` (:class:`~dycore.io.setup_cache.SetupCache` or None) holds under ``name`` for
    this very matrix: its :func:`matrix_digest` is stored beside it, and an entry made for
    another matrix (another partition, say) is rebuilt and stored over — by the cache's
    writer thread with ``background=True`` (the caller flushes the cache:
    :meth:`~dycore.io.setup_cache.SetupCache.flush`; the hierarchy's arrays are never
    changed). The GPU ranks' rank-local
    hierarchies come from here: 1.3 M rows each at 30.7 M tets on four ranks, PyAMG 34-39 s
    and the Chebyshev bounds 4.5-8 s a rank, built beside the GPU set-up in a 100-s cold
    set-up (docs/performance.md)."""
    if cache is None or name is None:
        return HostHierarchy(a, smoother, sweeps, max_coarse=max_coarse, coarsening=coarsening,
                             evolution_steps=evolution_steps,
                             energy_iterations=energy_iterations)
    name = hierarchy_entry(name, coarsening)
    seconds = {}
    with add_seconds(seconds, "matrix digest"):
        a = a.tocsr()
        a.sort_indices()           # (PyAMG sorts them in place: the digest of what it reads)
        digest = matrix_digest(a)
    with add_seconds(seconds, "loaded from the set-up cache"):
        arrays = cache.load(name)
        found = arrays is not None and np.array_equal(arrays.get("matrix_digest"), digest)
        h = HostHierarchy.from_arrays(arrays) if found else None
    if found:
        cache.hits.append(name)
        h.setup_seconds = seconds
        return h
    cache.misses.append(name)
    h = HostHierarchy(a, smoother, sweeps, max_coarse=max_coarse, coarsening=coarsening,
                      evolution_steps=evolution_steps, energy_iterations=energy_iterations)
    seconds["looked up in the set-up cache"] = seconds.pop("loaded from the set-up cache")
    h.setup_seconds = {**seconds, **h.setup_seconds}
    with add_seconds(h.setup_seconds, "stored in the set-up cache"):
        cache.store(name, {**h.as_arrays(), "matrix_digest": digest}, background=background)
    return h


class HostHierarchy:
    """The PyAMG hierarchy of an SPD matrix with what the V-cycle needs per level (host arrays).

    Attributes
    ----------
    levels : list of (A, P, R, dinv, coefficients) for every level but the coarsest (SciPy CSR)
    coarse_inv : (nc, nc) dense pseudo-inverse of the coarsest matrix

    setup_seconds : dict phase -> host wall seconds of the build: ``"PyAMG hierarchy"``,
        ``"Chebyshev bounds and coarsest inverse"`` (the levels' Lanczos estimates, the dense
        pseudo-inverse), and from :func:`cached_hierarchy` ``"matrix digest"`` and
        ``"looked up in the set-up cache"`` + ``"stored in the set-up cache"`` (a miss) or
        ``"loaded from the set-up cache"`` (a hit: nothing built)

    Parameters: ``smoother``, ``sweeps``, ``omega`` as :func:`smoother_coefficients`;
    ``max_coarse``, ``coarsening``, ``evolution_steps``, ``energy_iterations`` as
    :func:`dycore.solvers.linear.amg_hierarchy`.
    """

    def __init__(self, a, smoother: str = "chebyshev", sweeps: int = 2,
                 omega: float = 2.0 / 3.0, max_coarse: int = 500,
                 coarsening: str = "aggregation", evolution_steps: int = 2,
                 energy_iterations: int = 4):
        from dycore.solvers.linear import amg_hierarchy, one_blas_thread

        self.setup_seconds = {}
        with add_seconds(self.setup_seconds, "PyAMG hierarchy"):
            ml = amg_hierarchy(a, max_coarse=max_coarse, coarsening=coarsening,
                               evolution_steps=evolution_steps,
                               energy_iterations=energy_iterations)
        self.levels = []
        with one_blas_thread(), add_seconds(self.setup_seconds,
                                            "Chebyshev bounds and coarsest inverse"):
            for lev in ml.levels[:-1]:
                A = lev.A.tocsr()
                A.sort_indices()
                rho = _dinv_spectral_radius(A) if smoother == "chebyshev" else 1.0
                self.levels.append((A, lev.P.tocsr(), lev.R.tocsr(), 1.0 / A.diagonal(),
                                    smoother_coefficients(smoother, sweeps, rho, omega)))
            self.coarse_inv = np.linalg.pinv(ml.levels[-1].A.toarray())
        self.sizes = [lev.A.shape[0] for lev in ml.levels]

    def rounded(self, dtype) -> "HostHierarchy":
        """A copy whose level matrices A, P, R hold their values rounded to ``dtype`` (and
        back to float64): the hierarchy a V-cycle stored in ``dtype`` applies, bit for bit —
        the reference of :class:`DeviceVCycle` with ``dtype=float32``."""
        h = HostHierarchy.__new__(HostHierarchy)
        h.levels = []
        for A, P, R, dinv, coef in self.levels:
            mats = []
            for m in (A, P, R):
                m = m.copy()
                m.data = m.data.astype(dtype).astype(np.float64)
                mats.append(m)
            h.levels.append((*mats, dinv, coef))
        h.coarse_inv, h.sizes = self.coarse_inv, list(self.sizes)
        h.setup_seconds = {}
        return h

    def as_arrays(self) -> dict:
        """The hierarchy as named arrays (set-up cache); :meth:`from_arrays` inverts it."""
        out = {"coarse_inv": self.coarse_inv, "sizes": np.asarray(self.sizes, np.int64),
               "nlevels": np.int64(len(self.levels))}
        for i, (A, P, R, dinv, coef) in enumerate(self.levels):
            for name, m in (("A", A), ("P", P), ("R", R)):
                out[f"{i}.{name}.data"], out[f"{i}.{name}.indices"] = m.data, m.indices
                out[f"{i}.{name}.indptr"] = m.indptr
                out[f"{i}.{name}.shape"] = np.asarray(m.shape, np.int64)
            out[f"{i}.dinv"] = dinv
            out[f"{i}.coef"] = np.asarray(coef, np.float64).reshape(-1, 2)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict) -> "HostHierarchy":
        """A hierarchy from :meth:`as_arrays` (bit for bit the one that was stored)."""
        h = cls.__new__(cls)
        h.levels = []
        for i in range(int(arrays["nlevels"])):
            mats = [sp.csr_matrix((arrays[f"{i}.{n}.data"], arrays[f"{i}.{n}.indices"],
                                   arrays[f"{i}.{n}.indptr"]),
                                  shape=tuple(int(v) for v in arrays[f"{i}.{n}.shape"]))
                    for n in ("A", "P", "R")]
            coef = [(float(c1), float(c2)) for c1, c2 in arrays[f"{i}.coef"]]
            h.levels.append((*mats, arrays[f"{i}.dinv"], coef))
        h.coarse_inv = arrays["coarse_inv"]
        h.sizes = [int(v) for v in arrays["sizes"]]
        h.setup_seconds = {}
        return h


def grouped_matvec(a, x, g: int) -> np.ndarray:
    """A x summed in the row kernels' order (:mod:`dycore.backend.solver_kernels`): lane j of a row's
    ``g`` lanes adds entries j, j+g, ... in index order from 0.0, then the lanes meet in a fixed
    tree (lane l += lane l+g/2, then l+g/4, ...). ``g = 1`` is SciPy's order. (n,) float64."""
    a = a.tocsr()
    a.sort_indices()
    n = a.shape[0]
    start, length = a.indptr[:-1], np.diff(a.indptr)
    lanes = np.zeros((n, g))
    for m in range(int(-(-length.max() // g)) if n and length.max() else 0):
        for j in range(g):
            pos = m * g + j
            rows = np.flatnonzero(length > pos)
            k = start[rows] + pos
            lanes[rows, j] += a.data[k] * x[a.indices[k]]
    off = g // 2
    while off > 0:
        lanes[:, :off] += lanes[:, off:2 * off]
        off //= 2
    return lanes[:, 0].copy()


def vcycle_reference(h: HostHierarchy, b: np.ndarray, max_group: int = MAX_GROUP) -> np.ndarray:
    """The V-cycle of :class:`DeviceVCycle` in NumPy: z ≈ A⁻¹ b, (n,) float64, with every row
    sum in the device kernels' order (threads per row from :func:`row_group`, at most
    ``max_group``), so the two agree bitwise where the device does not contract a·b + c."""

    def mv(a, x):
        a = a.tocsr()
        return grouped_matvec(a, x, row_group(a.indptr, max_group))

    def smooth(a, dinv, coef, b, x):
        d = None
        for c1, c2 in coef:
            r = b if x is None else b - mv(a, x)
            d = c1 * (dinv * r) + (0.0 if d is None else c2 * d)
            x = d.copy() if x is None else x + d
        return x

    def cycle(level, b):
        if level == len(h.levels):
            return mv(sp.csr_matrix(h.coarse_inv), b)
        a, p, r, dinv, coef = h.levels[level]
        x = smooth(a, dinv, coef, b, None)
        x = x + mv(p, cycle(level + 1, mv(r, b - mv(a, x))))
        return smooth(a, dinv, coef, b, x)

    return cycle(0, np.asarray(b, np.float64))


class DeviceVCycle:
    """The V-cycle on the device as a kernel sequence (a CG preconditioner).

    Parameters
    ----------
    la : DeviceLinalg
    h : HostHierarchy
    dtype : storage of the levels' A, P and R values: float64, or float32 (two thirds of the
        bytes per nonzero; vectors, D⁻¹, the coarsest solve and all arithmetic stay float64).
        The cycle is then the float64 cycle of ``h.rounded(float32)``: still a fixed symmetric
        operator, so CG's convergence test is unchanged; only the preconditioner differs
        (by the rounding of its matrices, ~6e-8 relative).
    sliced : store the levels' A, P and R of more than
        :data:`~dycore.solvers.krylov.SMALL_ROWS` rows as sliced ELL
        (:mod:`dycore.solvers.sliced`: the same bits, read coalesced). None: :attr:`SLICED`.
    """

    #: the default of ``sliced`` (a profiling switch)
    SLICED = True

    def __init__(self, la, h: HostHierarchy, dtype=np.float64, sliced: bool | None = None):
        self.la = la
        self.dtype = np.dtype(dtype)
        self.levels = []
        sliced = self.SLICED if sliced is None else sliced

        def matrix(m):
            return DeviceMatrix.from_scipy(la, m, dtype=dtype,
                                           sliced=sliced and m.shape[0] > SMALL_ROWS)

        for A, P, R, dinv, coef in h.levels:
            n = A.shape[0]
            bufs = [la.zeros(n)[1] for _ in range(3)]
            self.levels.append(dict(
                A=matrix(A), P=matrix(P), R=matrix(R),
                dinv=la.nb(la.b.to_device(dinv)), coef=coef,
                n=n, bufs=bufs, d=la.zeros(n)[1], r=la.zeros(n)[1], b=la.zeros(n)[1]))
        nc = h.coarse_inv.shape[0]
        # the coarsest solve z = A_c⁺ b: the dense pseudo-inverse as a CSR matrix, so that its
        # rows are summed by a thread group like every other level
        self.coarse = DeviceMatrix.from_scipy(la, sp.csr_matrix(h.coarse_inv))
        self.coarse_b, self.coarse_x = la.zeros(nc)[1], la.zeros(nc)[1]
        #: rows of block partials of r·z that :meth:`issue` leaves in ``partial``
        self.nparts = (la.nparts(self.levels[0]["A"]) if self.levels else la.nblocks(nc))

    def _smooth(self, lev, b, x, partial, ctl, op=-1):
        la, k, a = self.la, self.la.k, lev["A"]
        for step, (c1, c2) in enumerate(lev["coef"]):
            dst = next(buf for buf in lev["bufs"] if buf is not x)
            last = step == len(lev["coef"]) - 1
            g = 1 if x is None else a.g          # the first step from x = 0 sums no row
            la.launch(k.smooth, lev["n"] * g, a.indptr, a.indices, a.data, g, a.sliced, 0,
                      lev["bufs"][0] if x is None else x, b, lev["dinv"], lev["d"], dst,
                      c1, c2, 1 if x is None else 0, 1 if (last and partial is not None) else 0,
                      partial if (last and partial is not None) else la.no_partial,
                      op if last else -1, 0, ctl, la.ticket)
            x = dst
        return x

    def _cycle(self, level, b, partial, ctl, op=-1):
        la = self.la
        if level == len(self.levels):
            la.spmv(self.coarse, b, self.coarse_x, ctl=ctl)
            return self.coarse_x
        lev = self.levels[level]
        x = self._smooth(lev, b, None, None, ctl)
        la.spmv(lev["A"], x, lev["r"], mode=1, b=b, ctl=ctl)
        bc = self.levels[level + 1]["b"] if level + 1 < len(self.levels) else self.coarse_b
        la.spmv(lev["R"], lev["r"], bc, ctl=ctl)
        xc = self._cycle(level + 1, bc, None, ctl)
        la.spmv(lev["P"], xc, x, mode=2, ctl=ctl)
        return self._smooth(lev, b, x, partial, ctl, op)

    def issue(self, r, partial, ctl, op=-1):
        """Launch z = V(r) and the block partials of r·z into ``partial`` (:attr:`nparts`
        rows), finished with ``op`` (< 0: left for a separate finish); returns z's view."""
        la = self.la
        if not self.levels:
            la.spmv(self.coarse, r, self.coarse_x, ctl=ctl)
            la.launch(la.k.bi_dots_ts, self.coarse_x.shape[0], self.coarse_x, r, partial, op,
                      ctl, la.ticket)
            return self.coarse_x
        return self._cycle(0, r, partial, ctl, op)


class DeviceJacobi:
    """z = D⁻¹ r as a CG preconditioner (one first smoothing step with c1 = 1).

    Parameters
    ----------
    la : DeviceLinalg; a : DeviceMatrix (bs = 1); dinv : (n,) host array (ones: no
        preconditioner)
    """

    def __init__(self, la, a, dinv):
        self.la, self.a = la, a
        self.dinv = la.nb(la.b.to_device(np.asarray(dinv, np.float64)))
        self.z, self.d = la.zeros(a.n)[1], la.zeros(a.n)[1]
        self.nparts = la.nblocks(a.nrow)       #: rows of block partials of r·z

    def issue(self, r, partial, ctl, op=-1):
        la, a = self.la, self.a
        la.launch(la.k.smooth, a.nrow, a.indptr, a.indices, a.data, 1, 0, 0, self.z, r,
                  self.dinv, self.d, self.z, 1.0, 0.0, 1, 1, partial, op, 0, ctl, la.ticket)
        return self.z
