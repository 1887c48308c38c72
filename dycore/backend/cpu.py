"""The CPU backend: NumPy arrays, ``@njit(parallel=True)`` element loops, SciPy/PyAMG solves."""
from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from dycore.assembly import cpu as launch
from dycore.assembly import no_normal_flow as nnf_ops
from dycore.diagnostics.counters import Counters
from dycore.diagnostics.timers import WallMarker
from dycore.dtypes import REAL

__all__ = ["CPUBackend", "CPUAssembler", "CPUVectorOps", "HostCSR"]


class HostCSR(sp.csr_matrix):
    """SciPy CSR with the backends' no-allocation product ``matvec(x, out)`` (out = A x)."""

    def matvec(self, x, out) -> None:
        out[...] = (self @ x.reshape(-1)).reshape(out.shape)


class CPUVectorOps:
    """Vector operations of the Picard step in NumPy (the reference the GPU kernels of
    :mod:`dycore.backend.gpu_ops` reproduce operation by operation). Arguments as there."""

    @staticmethod
    def axpby(out, a, x, b, y, div=False) -> None:
        if div:
            out[...] = a * x + y / b
        elif b == 0.0:
            out[...] = a * x
        else:
            out[...] = a * x + b * y

    @staticmethod
    def copy(out, x) -> None:
        out[...] = x

    @staticmethod
    def multiply(out, x, y) -> None:
        out[...] = x * y

    @staticmethod
    def x_plus_yz(out, x, y, z) -> None:
        out[...] = x + y * z

    @staticmethod
    def advection_source(src, u_it, u_old, th, dtb) -> None:
        src[...] = -(th * u_it[:, 2] + (1.0 - th) * u_old[:, 2]) * dtb

    @staticmethod
    def dirichlet(values, rhs, bs, ops) -> None:
        if values is not None:
            values[ops.dir_row_pos] = 0.0
            if bs == 1:
                values[ops.dir_diag_pos] = 1.0
            else:
                for a in range(bs):
                    values[ops.dir_diag_pos, a, a] = 1.0
        rhs[ops.dir_nodes] = 0.0

    @staticmethod
    def scatter_fill(a, idx, value) -> None:
        a[idx] = value

    @staticmethod
    def rotate_system(values, rhs, u_old, dt, nnf) -> None:
        nnf_ops.rotate_system(values, rhs, u_old, dt, nnf)

    @staticmethod
    def unrotate(x, nnf) -> None:
        nnf_ops.unrotate(x, nnf)

    @staticmethod
    def remove_normal(x, nnf) -> None:
        nnf_ops.remove_normal(x, nnf)

    @staticmethod
    def max_abs_diff(x, y, out, slot) -> None:
        out[slot] = np.max(np.abs(x - y))

    @staticmethod
    def step_scalars(u, th, ml, div, out, slot) -> None:
        out[slot] = np.max(np.abs(u[:, 2]))
        out[slot + 1] = np.sum(ml * np.sum(u * u, axis=1))
        out[slot + 2] = np.max(np.abs(div / ml))
        out[slot + 3] = np.count_nonzero(~np.isfinite(u)) + np.count_nonzero(~np.isfinite(th))


class CPUBackend:
    """Backend value for the CPU (docs/equations.md §6): owns arrays, launches, clocks.

    Parameters
    ----------
    threads : int — numba threads for the element loops; 0 = all cores.
    """

    name = "cpu"
    xp = np
    solver_mode = "host"
    ops = CPUVectorOps()

    def __init__(self, threads: int = 0):
        if threads:
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        self.threads = numba.get_num_threads()
        self.assembly = "deterministic"  # the CPU gather is the deterministic order
        self.counters = Counters()        # stays zero: the CPU issues no device work

    def describe(self) -> str:
        return f"cpu ({self.threads} numba threads, deterministic assembly order)"

    def to_device(self, a):
        return np.ascontiguousarray(a)

    def to_host(self, a):
        return np.asarray(a)

    def marker(self):
        return WallMarker()

    def synchronize(self) -> None:
        pass

    def csr(self, data, indices, indptr, shape):
        """A sparse matrix of this backend over (data, indices, indptr)."""
        return HostCSR((data, indices, indptr), shape=shape)

    def assembler(self, mesh, sparsity, timers):
        return CPUAssembler(mesh, sparsity, timers)


class CPUAssembler:
    """Element integration + deterministic gather into preallocated CSR/BCSR ``values``.

    Every method returns arrays owned by the assembler (overwritten by the next call of the same
    method). Stage names in ``timers``: ``integrate <op>`` and ``assemble <op>``.
    """

    def __init__(self, mesh, sparsity, timers):
        self.tets = np.ascontiguousarray(mesh.tets)
        self.coords = np.ascontiguousarray(mesh.coords, dtype=REAL)
        self.sp = sparsity
        self.timers = timers
        nele, nnz, n = mesh.nele, sparsity.nnz, mesh.nnodes
        self.detj = np.empty(nele)
        self._ele44 = np.empty((nele, 4, 4))
        self._ele4 = np.empty((nele, 4))
        self._ele_m = np.empty((nele, 4, 4, 3, 3))
        self._ele_v3 = np.empty((nele, 4, 3))
        self.csr_values = {}
        self._n, self._nnz = n, nnz

    def _out(self, key, shape):
        if key not in self.csr_values:
            self.csr_values[key] = np.empty(shape)
        return self.csr_values[key]

    def _gather_matrix(self, ele, bs, key):
        out = self._out(key, (self._nnz, bs))
        launch.gather_blocks(self.sp.contrib_ptr, self.sp.contrib, ele.reshape(-1, bs), out)
        return out

    def _gather_vector(self, ele, bs, key):
        out = self._out(key, (self._n, bs))
        launch.gather_blocks(self.sp.node_contrib_ptr, self.sp.node_contrib, ele.reshape(-1, bs), out)
        return out

    def tracer(self, name, u_nl, c_old, src, sigma, c_ref, kdiag, dt_theta, want_matrix=True):
        """Tracer matrix values (nnz,) and rhs (n,) (see :func:`tracer_element`)."""
        with self.timers(f"integrate tracer {name}"):
            launch.tracer_elements(self.tets, self.coords, u_nl, c_old, src, sigma, c_ref,
                                   kdiag[0], kdiag[1], kdiag[2], dt_theta, self._ele44,
                                   self._ele4, self.detj)
        values = None
        with self.timers(f"assemble tracer {name}"):
            if want_matrix:
                values = self._gather_matrix(self._ele44, 1, f"tracer_matrix_{name}")[:, 0]
            rhs = self._gather_vector(self._ele4, 1, f"tracer_rhs_{name}")[:, 0]
        return values, rhs

    def momentum(self, u_nl, u_old, buoy, p, sigma, u_ref, nudiag, f_cor, dt_theta):
        """Momentum BCSR values (nnz,3,3) and rhs (n,3) (see :func:`momentum_element`)."""
        with self.timers("integrate momentum"):
            launch.momentum_elements(self.tets, self.coords, u_nl, u_old, buoy, p, sigma,
                                     u_ref[0], u_ref[1], u_ref[2], nudiag[0], nudiag[1],
                                     nudiag[2], f_cor, dt_theta, self._ele_m, self._ele_v3,
                                     self.detj)
        with self.timers("assemble momentum"):
            values = self._gather_matrix(self._ele_m, 9, "big_m").reshape(-1, 3, 3)
            rhs = self._gather_vector(self._ele_v3, 3, "mom_rhs")
        return values, rhs

    def divergence(self):
        """C volume-term values (nnz,3) and det J of every element (nele,)."""
        ele = np.empty((self.tets.shape[0], 4, 4, 3))
        with self.timers("integrate divergence C"):
            launch.divergence_elements(self.tets, self.coords, ele, self.detj)
        with self.timers("assemble divergence C"):
            return self._gather_matrix(ele, 3, "C").copy(), self.detj.copy()

    def stabilisation(self):
        """K_p values (nnz,) and the per-element status (0 ok) of get_edge_lengths."""
        status = np.empty(self.tets.shape[0], dtype=np.int64)
        with self.timers("integrate stabilisation K_p"):
            launch.stabilisation_elements(self.tets, self.coords, self._ele44, status)
        with self.timers("assemble stabilisation K_p"):
            return self._gather_matrix(self._ele44, 1, "K_p")[:, 0].copy(), status

    def lumped_mass(self):
        """Lumped mass ∫Nᵢ per node, (n,) [m³]."""
        with self.timers("integrate lumped mass"):
            launch.lumped_mass_elements(self.tets, self.coords, self._ele4, self.detj)
        with self.timers("assemble lumped mass"):
            return self._gather_vector(self._ele4, 1, "ML")[:, 0].copy()
