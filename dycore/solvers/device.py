"""Device-resident linear solvers (CuPy): nothing but scalars leaves the GPU.

- tracers: GMRES over the assembled CSR ``values`` (zero-copy ``cupyx`` CSR), Jacobi;
- momentum: GMRES over the BCSR 3×3 system expanded once-per-mesh into a scalar CSR view
  (a fixed gather permutation; CuPy has no BSR type), block-Jacobi (batched 3×3 inverses);
- pressure: CG with smoothed-aggregation AMG whose hierarchy is built ONCE on the host by PyAMG
  (the pressure matrix depends only on the mesh) and applied on the device as a V-cycle with
  damped-Jacobi smoothing and a dense coarsest-level inverse; or Jacobi.

Iteration counts are matrix-vector products, counted on the host without a synchronisation.
"""
from __future__ import annotations

import numpy as np

from dycore.errors import ConfigError, SolverDivergedError

__all__ = ["DeviceSystems", "DeviceAMG", "bcsr_to_csr_permutation"]


def bcsr_to_csr_permutation(indptr: np.ndarray, indices: np.ndarray):
    """Scalar CSR pattern of a 3×3-block BCSR matrix and the gather from flat block values.

    Returns
    -------
    indptr3 : (3n+1,) int32; indices3 : (9 nnzb,) int32
    perm : (9 nnzb,) int64 with ``csr_data = bcsr_values.reshape(-1)[perm]``
    """
    n = indptr.shape[0] - 1
    counts = np.diff(indptr).astype(np.int64)
    row_blocks = np.repeat(np.arange(n), counts)                   # block row of each block
    k = np.arange(indices.shape[0], dtype=np.int64)
    # scalar row 3i+a holds, for each block k in block row i, columns 3j+b, b = 0..2
    rows = (3 * row_blocks[:, None] + np.arange(3)[None, :])      # (nnzb,3)
    order = np.lexsort((np.repeat(k, 3), rows.ravel()))            # by scalar row, then block
    blk = np.repeat(k, 3)[order]
    a = np.tile(np.arange(3), indices.shape[0])[order]
    perm = (blk[:, None] * 9 + a[:, None] * 3 + np.arange(3)[None, :]).ravel()
    indices3 = (3 * indices.astype(np.int64)[blk][:, None] + np.arange(3)[None, :]).ravel()
    indptr3 = np.zeros(3 * n + 1, dtype=np.int64)
    indptr3[1:] = np.cumsum(np.repeat(counts, 3) * 3)
    return indptr3.astype(np.int32), indices3.astype(np.int32), perm


class DeviceAMG:
    """Smoothed-aggregation V-cycle on the device over a PyAMG hierarchy built on the host.

    Parameters
    ----------
    a_host : scipy CSR (n,n), SPD
    cp : array module of the device (``cupy``; ``numpy`` in tests)
    csr_matrix : its CSR constructor (``cupyx.scipy.sparse.csr_matrix``; SciPy's in tests)
    sweeps : damped-Jacobi sweeps before and after the coarse correction; omega : damping
    """

    def __init__(self, a_host, cp, csr_matrix, sweeps: int = 2, omega: float = 2.0 / 3.0):
        from dycore.solvers.linear import amg_hierarchy

        ml = amg_hierarchy(a_host)
        self.cp, self.sweeps, self.omega = cp, sweeps, omega
        self.levels = []
        for lev in ml.levels[:-1]:
            self.levels.append((csr_matrix(lev.A.tocsr()), cp.asarray(1.0 / lev.A.diagonal()),
                                csr_matrix(lev.P.tocsr()), csr_matrix(lev.R.tocsr())))
        coarse = ml.levels[-1].A.toarray()
        self.coarse_inv = cp.asarray(np.linalg.pinv(coarse))
        self.nlevels = len(ml.levels)

    def _cycle(self, lev: int, b):
        if lev == len(self.levels):
            return self.coarse_inv @ b
        a, dinv, p, r = self.levels[lev]
        x = self.omega * dinv * b
        for _ in range(self.sweeps - 1):
            x = x + self.omega * dinv * (b - a @ x)
        x = x + p @ self._cycle(lev + 1, r @ (b - a @ x))
        for _ in range(self.sweeps):
            x = x + self.omega * dinv * (b - a @ x)
        return x

    def __call__(self, b):
        return self._cycle(0, b)


class DeviceSystems:
    """Same interface as :class:`dycore.solvers.systems.HostSystems`, on the GPU (CuPy)."""

    def __init__(self, backend, sparsity, ops, cfg, timers):
        import cupy as cp
        from cupyx.scipy.sparse import csr_matrix
        from cupyx.scipy.sparse.linalg import LinearOperator

        self.cp, self.csr, self.LinearOperator = cp, csr_matrix, LinearOperator
        self.cfg, self.timers, self.n = cfg, timers, sparsity.n
        self.indptr = cp.asarray(sparsity.indptr)
        self.indices = cp.asarray(sparsity.indices)
        self.diag_pos = cp.asarray(sparsity.diagonal_positions())
        ip3, ix3, perm = bcsr_to_csr_permutation(sparsity.indptr, sparsity.indices)
        self.indptr3, self.indices3, self.perm = cp.asarray(ip3), cp.asarray(ix3), cp.asarray(perm)
        self.pressure_matrix = ops.pressure
        pc = cfg.pressure.preconditioner
        if pc == "amg":
            with timers("pressure AMG set-up (host, once)"):
                amg = DeviceAMG(ops.pressure_host, cp, csr_matrix)
            self.pressure_pc = LinearOperator((self.n, self.n), matvec=amg, dtype=np.float64)
        elif pc == "jacobi":
            dinv = 1.0 / self.pressure_matrix.diagonal()
            self.pressure_pc = LinearOperator((self.n, self.n), matvec=lambda x: dinv * x,
                                              dtype=np.float64)
        elif pc == "none":
            self.pressure_pc = None
        else:
            raise ConfigError(f"solvers.pressure.preconditioner: '{pc}' is not available in "
                              "device mode (use amg, jacobi or none)")
        for name in ("tracer", "momentum"):
            c = getattr(cfg, name)
            if c.method != "gmres" or c.preconditioner not in ("jacobi", "block_jacobi", "none"):
                raise ConfigError(
                    f"solvers.{name}: device mode supports method gmres with preconditioner "
                    f"jacobi, block_jacobi or none (got {c.method} + {c.preconditioner})")

    def _counted(self, a):
        count = [0]

        def mv(x):
            count[0] += 1
            return a @ x
        return self.LinearOperator(a.shape, matvec=mv, dtype=np.float64), count

    def _krylov(self, name, a, b, m, cfg, x0=None):
        from cupyx.scipy.sparse.linalg import cg, gmres
        op, count = self._counted(a)
        if cfg.method == "cg":
            x, info = cg(op, b, x0=x0, rtol=cfg.rtol, atol=cfg.atol,
                         maxiter=cfg.max_iterations, M=m)
        else:
            # cupyx counts maxiter in inner iterations (SciPy counts restart cycles)
            x, info = gmres(op, b, x0=x0, rtol=cfg.rtol, atol=cfg.atol, restart=cfg.restart,
                            maxiter=cfg.max_iterations, M=m)
        if info != 0:
            raise SolverDivergedError(f"{name} solve ({cfg.method}, device) did not converge: "
                                      f"info={info} after {count[0]} matrix-vector products "
                                      f"(rtol {cfg.rtol:g})")
        return x, count[0]

    def _jacobi(self, diag):
        dinv = 1.0 / diag
        return self.LinearOperator((diag.shape[0],) * 2, matvec=lambda x: dinv * x,
                                   dtype=np.float64)

    def tracer(self, values, rhs, x0=None):
        """Solve the tracer system on the device; values (nnz,), rhs (n,)."""
        a = self.csr((values, self.indices, self.indptr), shape=(self.n, self.n))
        m = None if self.cfg.tracer.preconditioner == "none" else self._jacobi(values[self.diag_pos])
        return self._krylov("tracer", a, rhs, m, self.cfg.tracer, x0)

    def momentum(self, values, rhs, x0=None):
        """Solve big_m δu = rhs on the device; values (nnz,3,3), rhs (n,3)."""
        cp, n = self.cp, self.n
        data = values.reshape(-1)[self.perm]
        a = self.csr((data, self.indices3, self.indptr3), shape=(3 * n, 3 * n))
        kind = self.cfg.momentum.preconditioner
        if kind == "block_jacobi":
            binv = cp.linalg.inv(values[self.diag_pos])

            def apply(x):
                return cp.matmul(binv, x.reshape(n, 3, 1)).reshape(-1)
            m = self.LinearOperator((3 * n, 3 * n), matvec=apply, dtype=np.float64)
        elif kind == "jacobi":
            m = self._jacobi(cp.diagonal(values[self.diag_pos], axis1=1, axis2=2).reshape(-1))
        else:
            m = None
        x, its = self._krylov("momentum", a, rhs.reshape(-1), m, self.cfg.momentum,
                              None if x0 is None else x0.reshape(-1))
        return x.reshape(n, 3), its

    def pressure(self, rhs, x0=None):
        """Solve the pinned (CMC + KMK) δp = rhs on the device with CG."""
        return self._krylov("pressure", self.pressure_matrix, rhs, self.pressure_pc,
                            self.cfg.pressure, x0)
