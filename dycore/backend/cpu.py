"""The CPU backend: NumPy arrays, ``@njit(parallel=True)`` element loops, SciPy/PyAMG solves."""
from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from dycore.assembly import no_normal_flow as nnf_ops
from dycore.assembly.assembler import Assembler
from dycore.assembly.gather import gather_blocks
from dycore.assembly.loop_spec import ELEMENTS
from dycore.backend.counters import Counters
from dycore.backend.graphs import Graph
from dycore.backend.streams import InlineBranch
from dycore.backend.timers import WallMarker

__all__ = ["CPUBackend", "CPUVectorOps", "HostCSR"]


class HostCSR(sp.csr_matrix):
    """SciPy CSR with the backends' no-allocation product ``matvec(x, out)`` (out = A x)."""

    def matvec(self, x, out) -> None:
        out[...] = (self @ x.reshape(-1)).reshape(out.shape)


class _Ready:
    """A read that is complete: ``result()`` gives the values (see ``read_later``)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


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

    def read_later(self, a):
        """The protocol's deferred read: on the CPU the values are there now (no sync)."""
        return _Ready(np.array(a))

    def marker(self):
        return WallMarker()

    def synchronize(self) -> None:
        pass

    def csr(self, data, indices, indptr, shape):
        """A sparse matrix of this backend over (data, indices, indptr)."""
        return HostCSR((data, indices, indptr), shape=shape)

    def capture(self, issue):
        """Nothing to capture on the CPU: a :class:`Graph` whose replay calls ``issue()``."""
        return Graph(self, issue, capture=False)

    def branch(self):
        """One stream of work on the CPU: an :class:`InlineBranch` (issued in order)."""
        return InlineBranch()

    # -- the assembler's protocol (dycore.assembly.assembler) ---------------------------------
    def zeros(self, shape, dtype=np.float64):
        """A zero-filled array of this backend."""
        return np.zeros(shape, dtype)

    def launch_loop(self, loop, mode, args) -> None:
        """Run the generated CPU driver of ``loop`` (:mod:`dycore.assembly.cpu_loops_gen`);
        ``args`` maps its parameter names to arrays/scalars. Only ``ELEMENTS`` (no atomics)."""
        from dycore.assembly.cpu_loops_gen import DRIVERS
        if mode != ELEMENTS:
            raise ValueError(f"CPU loops write element arrays only (mode {mode} asked of "
                             f"{loop.name!r})")
        DRIVERS[loop.name](*(args[p] for p in loop.cpu_params()))

    def gather(self, ptr, contrib, ele, out, bs) -> None:
        """out[k, :] = Σ ele[contrib[q], :] in element order (:func:`gather_blocks`)."""
        gather_blocks(ptr, contrib, ele.reshape(-1, bs), out.reshape(-1, bs))

    def fill(self, a, value=0.0) -> None:
        a[...] = value

    def assembler(self, mesh, sparsity, timers):
        """The :class:`Assembler` of ``mesh`` on this backend."""
        return Assembler(self, mesh, sparsity, timers)
