"""The GPU backend's sparse matrices and vector operations, as our own kernels (no cuSPARSE, no
CuPy arithmetic, no allocation): what the Picard step does between assemblies and solves.

Every operation reproduces the NumPy expression of :class:`dycore.backend.cpu.CPUVectorOps`
operation by operation, so with strict floating point (fma=0) the GPU gives the CPU's bits.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dycore.backend.vector_kernels import NSTEP_SCALARS

__all__ = ["DeviceCSR", "GPUVectorOps"]


class DeviceCSR:
    """A CSR matrix on the device whose product is SciPy's, row by row.

    One thread per row sums ``data[k]·x[indices[k]]`` in index order from 0.0 (SciPy's
    ``csr_matvec``); in strict mode (fma=0) ``A @ x`` has the CPU's bits. The kernel is the
    solvers' block-CSR SpMV (:mod:`dycore.backend.solver_kernels`), so one SpMV serves everything.

    Parameters
    ----------
    backend : GPUBackend
    data : (nnz,) float64; indices : (nnz,) int32, sorted within rows; indptr : (n+1,) int32
    shape : (n, m)
    """

    def __init__(self, backend, data, indices, indptr, shape):
        self.b, self.shape, self.dtype = backend, tuple(shape), np.dtype(np.float64)
        nb = backend.nb
        self.data = nb(backend.to_device(np.asarray(data, np.float64)))
        self.indices = nb(backend.to_device(np.asarray(indices, np.int32)))
        self.indptr = nb(backend.to_device(np.asarray(indptr, np.int32)))
        self._diag = sp.csr_matrix((data, indices, indptr), shape=shape).diagonal()

    def matvec(self, x, out) -> None:
        """out = A x into a preallocated (n,) backend array (no allocation)."""
        b = self.b
        ops = b.ops
        b.launch(ops.k.bsr_spmv, ops.grid(self.shape[0]), self.indptr, self.indices,
                 self.data, 1, 1, b.nb(x.reshape(-1)), ops.empty, b.nb(out.reshape(-1)), 0,
                 ops.empty, 0, ops.no_partial, -1, 0, ops.running, ops.ticket)

    def __matmul__(self, x):
        if x.ndim != 1 or x.shape[0] != self.shape[1]:
            raise ValueError(f"DeviceCSR {self.shape} @ vector of shape {x.shape}")
        y = self.b.xp.empty(self.shape[0], dtype=np.float64)
        self.matvec(x, y)
        return y

    def diagonal(self):
        """The main diagonal as a backend array, (min(n, m),) float64."""
        return self.b.to_device(self._diag)


class GPUVectorOps:
    """Vector operations of the Picard step on the GPU (see :mod:`dycore.backend.vector_kernels`).

    All arguments are backend arrays (any shape; used flat). Scalars that the host reads go to
    ``out[slot]`` of a caller's buffer, so the step reads all of them in one copy.
    """

    def __init__(self, backend):
        self.b = backend
        self.rb = backend.solver_block
        from dycore.backend.gpu_kernels import get_solver_kernels
        self.k = get_solver_kernels(backend.strict, self.rb)
        xp = backend.xp
        self.empty = backend.nb(xp.zeros(1))              # dummies for unused arguments
        self.no_partial = backend.nb(xp.zeros((1, 1)))
        self.ticket = backend.nb(xp.zeros(1, dtype=np.int32))   # SpMV finishes nothing here
        self.running = backend.nb(xp.zeros(16))          # a control array that says "run"
        self._partial = {}
        self._is_max = {key: backend.nb(backend.to_device(np.array(v, np.int32)))
                        for key, v in (("max", [1]), ("step", [1, 0, 1, 0]))}

    def grid(self, n: int):
        return (max(1, (n + self.rb - 1) // self.rb), self.rb)

    def _flat(self, a):
        return self.b.nb(a.reshape(-1))

    def _partials(self, n: int, ncol: int):
        key = (self.grid(n)[0], ncol)
        if key not in self._partial:
            self._partial[key] = self.b.nb(self.b.xp.zeros(key))
        return self._partial[key]

    def axpby(self, out, a, x, b, y, div=False) -> None:
        """out = a·x + b·y (b = 0: a·x; ``div``: a·x + y/b)."""
        self.b.launch(self.k.axpby, self.grid(out.size), self._flat(out), float(a),
                      self._flat(x), float(b), self._flat(y), bool(div))

    def copy(self, out, x) -> None:
        """out = x."""
        self.b.launch(self.k.copy, self.grid(out.size), self._flat(x), self._flat(out))

    def multiply(self, out, x, y) -> None:
        """out = x·y (elementwise)."""
        self.b.launch(self.k.multiply, self.grid(out.size), self._flat(out), self._flat(x),
                      self._flat(y))

    def x_plus_yz(self, out, x, y, z) -> None:
        """out = x + y·z."""
        self.b.launch(self.k.x_plus_yz, self.grid(out.size), self._flat(out), self._flat(x),
                      self._flat(y), self._flat(z))

    def advection_source(self, src, u_it, u_old, th, dtb) -> None:
        """src = −(θ·w + (1 − θ)·wⁿ)·dθ̄/dz with w the third column of (n,3) u_it, u_old."""
        self.b.launch(self.k.advection_source, self.grid(src.size), self._flat(src),
                      self._flat(u_it), self._flat(u_old), float(th), self._flat(dtb))

    def dirichlet(self, values, rhs, bs, ops) -> None:
        """Identity rows (blocks) and zero rhs at the Dirichlet nodes of ``ops``
        (MeshOperators); ``values`` None: the rhs only."""
        nodes = ops.dir_nodes
        if not nodes.shape[0]:
            return
        if values is None:                              # rhs only (scalar systems)
            self.scatter_fill(rhs, nodes, 0.0)
            return
        nb = self.b.nb
        self.b.launch(self.k.dirichlet_rows, self.grid(nodes.shape[0]), self._flat(values),
                      nb(ops.dir_row_start), nb(ops.dir_row_end), nb(nodes),
                      nb(ops.dir_diag_pos), int(bs), self._flat(rhs))

    def scatter_fill(self, a, idx, value) -> None:
        """a[idx] = value (idx a backend int array)."""
        if idx.shape[0]:
            self.b.launch(self.k.scatter_fill, self.grid(idx.shape[0]), self._flat(a),
                          self.b.nb(idx), float(value))

    def rotate_system(self, values, rhs, u_old, dt, nnf) -> None:
        """Momentum system to node-normal coordinates at the rotated nodes of ``nnf``
        (:mod:`dycore.assembly.no_normal_flow`): values (nnz,3,3), rhs (n,3), u_old (n,3)."""
        if not nnf.nodes.shape[0]:
            return
        nb = self.b.nb
        self.b.launch(self.k.nnf_rotate_blocks, self.grid(nnf.blk_pos.shape[0]),
                      self._flat(values), nb(nnf.frames), nb(nnf.fixed), nb(nnf.blk_pos),
                      nb(nnf.blk_row), nb(nnf.blk_col), nb(nnf.blk_diag))
        self.b.launch(self.k.nnf_rotate_rhs, self.grid(nnf.nodes.shape[0]), self._flat(rhs),
                      self._flat(u_old), nb(nnf.nodes), nb(nnf.frames), nb(nnf.fixed),
                      float(dt), self._flat(values), nb(nnf.diag_pos))

    def unrotate(self, x, nnf) -> None:
        """x (n,3) ← Rᵀ x at the rotated nodes."""
        if nnf.nodes.shape[0]:
            self.b.launch(self.k.nnf_unrotate, self.grid(nnf.nodes.shape[0]), self._flat(x),
                          self.b.nb(nnf.nodes), self.b.nb(nnf.frames))

    def remove_normal(self, x, nnf) -> None:
        """x (n,3) ← x − n(n·x) at the rotated nodes."""
        if nnf.nodes.shape[0]:
            self.b.launch(self.k.nnf_remove_normal, self.grid(nnf.nodes.shape[0]),
                          self._flat(x), self.b.nb(nnf.nodes), self.b.nb(nnf.frames),
                          self.b.nb(nnf.fixed))

    def max_abs_diff(self, x, y, out, slot) -> None:
        """out[slot] = max |x − y| (NaN if any difference is NaN)."""
        n = x.size
        part = self._partials(n, 1)
        self.b.launch(self.k.max_abs_diff, self.grid(n), self._flat(x), self._flat(y), part)
        self.b.launch(self.k.finish_columns, (1, self.rb), part, self.grid(n)[0],
                      self._is_max["max"], self._flat(out), int(slot))

    def step_scalars(self, u, th, ml, div, out, slot) -> None:
        """out[slot:slot+4] = max|w|, Σ M_L|u|², max|div/M_L|, number of non-finite u, θ'."""
        n = ml.shape[0]
        part = self._partials(n, NSTEP_SCALARS)
        self.b.launch(self.k.step_scalars, self.grid(n), self._flat(u), self._flat(th),
                      self._flat(ml), self._flat(div), part)
        self.b.launch(self.k.finish_columns, (1, self.rb), part, self.grid(n)[0],
                      self._is_max["step"], self._flat(out), int(slot))
