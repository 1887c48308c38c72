"""Distributed CSR / BCSR sparse matrix–vector product over owned rows, bitwise equal to serial.

Each rank holds its owned rows with LOCAL column ids in the GLOBAL column order
(:func:`dycore.parallel.partition.extract_rows`). SciPy's ``csr_matvec`` and ``bsr_matvec``
sum a row from 0 in stored order (a BCSR row block by block, each 3×3 block row by row), so the
product of the local rows equals the serial product's rows bit for bit.

The rows are split into *interior* rows (every column owned) and *boundary* rows (a ghost
column): ``matvec`` posts the halo exchange, multiplies the interior rows while the messages
travel, waits, then multiplies the boundary rows.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dycore.parallel.halo import HaloExchange
from dycore.parallel.overlap import reads_ghost
from dycore.parallel.partition import row_subset

__all__ = ["DistributedMatrix"]


class DistributedMatrix:
    """A square matrix distributed by owned rows (scalar CSR or 3×3 BCSR).

    Parameters
    ----------
    comm : mpi4py communicator
    plan : HaloPlan whose depth covers the matrix's columns (1 first-order, 2 pressure)
    indptr : (n_owned+1,) int; indices : (nnz,) int local column ids (< plan.n_local)
    values : (nnz,) float64 (CSR) or (nnz, 3, 3) float64 (BCSR, one block per node pair)
    n_owned_cols : int or None — owned entries of the input vector (default: the owned rows;
        differs for the rectangular R and P of :mod:`dycore.parallel.rowmatrix`)

    Attributes
    ----------
    block : int (1 or 3); n_owned : int; halo : HaloExchange
    n_interior, n_boundary : int — rows without / with a ghost column

    Raises
    ------
    ValueError if the shapes disagree or a column is beyond ``plan.n_local``.
    """

    def __init__(self, comm, plan, indptr, indices, values, n_owned_cols=None):
        values = np.ascontiguousarray(values, dtype=np.float64)
        indices = np.asarray(indices, np.int64)
        indptr = np.asarray(indptr, np.int64)
        if values.ndim == 1:
            self.block = 1
        elif values.ndim == 3 and values.shape[1:] == (3, 3):
            self.block = 3
        else:
            raise ValueError(f"values must be (nnz,) or (nnz,3,3), got {values.shape}")
        if values.shape[0] != indices.size or indptr[-1] != indices.size:
            raise ValueError(f"{values.shape[0]} values, {indices.size} indices, "
                             f"indptr ends at {int(indptr[-1])}")
        if indices.size and (indices.min() < 0 or indices.max() >= plan.n_local):
            raise ValueError(f"column {int(indices.max())} beyond the {plan.n_local} local "
                             f"nodes of a depth-{plan.depth} halo")
        self.comm, self.plan = comm, plan
        self.n_owned = indptr.size - 1
        self.n_cols = self.n_owned if n_owned_cols is None else int(n_owned_cols)
        has_ghost = reads_ghost(indptr, indices, self.n_cols)
        self.interior = np.flatnonzero(~has_ghost)
        self.boundary = np.flatnonzero(has_ghost)
        self.n_interior, self.n_boundary = self.interior.size, self.boundary.size
        self._a_int = self._scipy(*row_subset(indptr, indices, values, self.interior))
        self._a_bnd = self._scipy(*row_subset(indptr, indices, values, self.boundary))
        self._full = (indptr, indices, values)
        self.halo = HaloExchange(comm, plan, self.block)
        shape = (plan.n_local,) + (() if self.block == 1 else (3,))
        self._x = np.zeros(shape)

    def _scipy(self, ptr, idx, val):
        m, n, b = ptr.size - 1, self.plan.n_local, self.block
        if b == 1:
            a = sp.csr_matrix((val, idx, ptr), shape=(m, n))
        else:
            a = sp.bsr_matrix((val, idx, ptr), shape=(3 * m, 3 * n))
        a.has_sorted_indices = False           # never reorder: the order is the point
        return a

    def matvec(self, x_owned: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """y = A x over the owned rows.

        Parameters
        ----------
        x_owned : (n_cols,) or (n_cols, 3) float64 — this rank's owned values
        out : optional array of the same shape (overwritten)

        Returns
        -------
        y : (n_owned,) or (n_owned, 3) float64 — bitwise the serial product's owned rows
        """
        b = self.block
        x = self._x
        x[:self.n_cols] = np.asarray(x_owned).reshape(x[:self.n_cols].shape)
        y = out if out is not None else np.empty((self.n_owned,) + x.shape[1:])
        self.halo.begin(x)
        flat = x.reshape(-1)
        if self.n_interior:
            y[self.interior] = (self._a_int @ flat).reshape((-1,) + (() if b == 1 else (3,)))
        self.halo.end(x)
        if self.n_boundary:
            y[self.boundary] = (self._a_bnd @ flat).reshape((-1,) + (() if b == 1 else (3,)))
        return y

    def owned_block(self) -> sp.csr_matrix:
        """The owned × owned block as SciPy CSR, sorted copy: what a rank-local
        preconditioner (block-Jacobi / additive Schwarz) factorises (square matrices)."""
        from dycore.parallel.rank_ops import owned_block
        a = self._scipy(*self._full).tocsr()
        return owned_block(a.indptr, a.indices, a.data, self.block * self.n_owned)
