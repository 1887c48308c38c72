"""The GPU backend: CuPy arrays in device memory, numba-cuda kernels, device or host solvers.

Everything mesh-sized lives on the device for the whole run (docs/equations.md §6); only scalars and
output snapshots come back, except in ``solver_mode="host"``, which copies each assembled system
to the host for SciPy/PyAMG (the reference paper's GPU+PETSc pipeline, used for validation).

Under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``; no CuPy there) the same kernels run on
NumPy arrays, which is how CI tests this backend without a GPU.
"""
from __future__ import annotations

import logging

import numpy as np
from numba import config as numba_config
from numba import cuda

from dycore.backend import _numpy_compat  # noqa: F401
from dycore.backend.gpu_kernels import ATOMIC, ELEMENTS, SEARCH, get_kernels, grid
from dycore.backend.gpu_ops import DeviceCSR, GPUVectorOps
from dycore.diagnostics.counters import Counters
from dycore.diagnostics.timers import WallMarker
from dycore.errors import BackendUnavailableError

log = logging.getLogger("dycore")

__all__ = ["GPUBackend", "GPUAssembler", "EventMarker", "Graph"]


class Graph:
    """Kernels captured once and replayed (a CUDA graph; re-issued under the simulator).

    Parameters
    ----------
    backend : GPUBackend
    issue : callable with no arguments that launches kernels through ``backend.launch``
    """

    def __init__(self, backend, issue, capture=True):
        self.b = backend
        self.issue = issue
        self.graph = None
        self.direct = not capture                # replays are plain launches
        before = backend.counters.launches
        if capture and not backend.simulator:
            import cupy
            stream = backend.stream
            try:
                stream.begin_capture(mode=cupy.cuda.runtime.streamCaptureModeRelaxed)
                try:
                    issue()
                finally:
                    graph = stream.end_capture()
                self.graph = graph
            except Exception as exc:  # noqa: BLE001 - any capture failure: launch directly
                log.warning("CUDA graph capture failed (%s: %s); launching these kernels "
                            "directly", type(exc).__name__, exc)
        self.kernels = backend.counters.launches - before
        backend.counters.launches = before       # captured, not run

    def replay(self) -> None:
        """Run the captured kernels once more (on the backend's stream).

        Under the simulator the kernels are re-issued and counted as a replay, as on a GPU;
        after a failed capture they are launched directly and counted as launches."""
        c = self.b.counters
        if self.direct or (self.graph is None and not self.b.simulator):
            self.issue()
            return
        c.graph_replays += 1
        if self.graph is not None:
            c.graph_kernels += self.kernels
            self.graph.launch(stream=self.b.stream)
            return
        saved = c.launches
        self.issue()
        self.kernels = c.launches - saved
        c.graph_kernels += self.kernels
        c.launches = saved


class EventMarker:
    """CUDA-event clock marker for :class:`StageTimers`, recorded on the backend's stream
    (no synchronize until :meth:`elapsed_ms` is read)."""

    __slots__ = ("ev", "stream")

    def __init__(self, stream=0):
        self.stream = stream

    def record(self) -> "EventMarker":
        self.ev = cuda.event(timing=True)
        self.ev.record(self.stream)
        return self

    def elapsed_ms(self, later: "EventMarker") -> float:
        later.ev.synchronize()
        return cuda.event_elapsed_time(self.ev, later.ev)


class GPUBackend:
    """Backend value for an NVIDIA GPU (or the CUDA simulator).

    Parameters
    ----------
    solver_mode : "device" (our CG + AMG and BiCGStab kernels on the GPU) or "host" (SciPy/PyAMG on the CPU)
    assembly : "atomic" (one thread per element, atomic adds) or "deterministic" (element
        arrays + gather by nonzero in the CPU's order)
    strict : compile kernels without FMA contraction and without LTO (bitwise mode)
    block : threads per block of element kernels
    graphs : capture solves and Picard iterations as CUDA graphs (False: every kernel is
        launched from Python; the same kernels in the same order)
    """

    name = "gpu"

    def __init__(self, solver_mode="host", assembly="atomic", strict=False, threads=0,
                 block=128, graphs=True):
        self.simulator = bool(numba_config.ENABLE_CUDASIM)
        if self.simulator:
            self.xp = np
        else:
            try:
                import cupy
            except ImportError as exc:
                raise BackendUnavailableError(f"backend.name: gpu needs CuPy ({exc})") from exc
            self.xp = cupy
        self.solver_mode = solver_mode
        self.assembly = assembly
        self.strict = strict
        self.block = block
        self.graphs = graphs
        self.kernels = get_kernels(strict)
        self.counters = Counters()
        self.stream, self.nb_stream = None, 0
        self._ops = None
        if not self.simulator:
            # one stream for CuPy and numba alike: ordered without host syncs, and capturable
            # (the legacy default stream cannot be captured into a CUDA graph)
            self.stream = self.xp.cuda.Stream(non_blocking=True)
            self.stream.use()
            self.nb_stream = cuda.external_stream(self.stream.ptr)
            self.counters.watch_cupy_allocations()

    def describe(self) -> str:
        dev = "CUDA simulator" if self.simulator else cuda.get_current_device().name
        if isinstance(dev, bytes):
            dev = dev.decode()
        return (f"gpu ({dev}; {self.assembly} assembly; {self.solver_mode} solvers"
                f"{'; strict FP' if self.strict else ''})")

    # -- arrays -----------------------------------------------------------------------------
    def to_device(self, a):
        return np.ascontiguousarray(a) if self.simulator else self.xp.ascontiguousarray(
            self.xp.asarray(a))

    def to_host(self, a):
        """A host copy of a backend array (a device→host copy: one host synchronisation)."""
        self.counters.syncs += 1
        return np.asarray(a) if self.simulator else self.xp.asnumpy(a, stream=self.stream)

    def nb(self, a):
        """A numba view of a backend array (zero-copy) for kernel arguments.

        No stream synchronisation (``sync=False``): CuPy and numba share the backend's stream,
        so the stream order already puts the producer before the consumer. Under the simulator
        the NumPy array is wrapped as a simulated device array over the same memory (a bare
        NumPy argument would be copied in and written back after the kernel, which breaks
        in-place kernels whose arguments alias)."""
        if self.simulator:
            if isinstance(a, np.ndarray) and a.ndim > 0:
                from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
                return FakeCUDAArray(a)
            return a
        return cuda.as_cuda_array(a, sync=False)

    def marker(self):
        return WallMarker() if self.simulator else EventMarker(self.nb_stream)

    def synchronize(self) -> None:
        self.counters.syncs += 1
        if not self.simulator:
            self.stream.synchronize()

    @property
    def ops(self):
        """The step's vector operations (:class:`GPUVectorOps`), built on first use."""
        if self._ops is None:
            self._ops = GPUVectorOps(self)
        return self._ops

    def launch(self, kernel, griddim, *args):
        """Launch ``kernel[griddim]`` on the backend's stream, counted in ``counters``.

        Parameters
        ----------
        kernel : compiled numba-cuda kernel (dispatcher)
        griddim : (blocks, threads per block), e.g. from :func:`grid`
        args : kernel arguments (numba device arrays from :meth:`nb`, or scalars)
        """
        self.counters.launches += 1
        if self.simulator:
            kernel[griddim](*args)
        else:
            kernel[griddim[0], griddim[1], self.nb_stream](*args)

    def capture(self, issue):
        """A :class:`Graph` of the kernels ``issue()`` launches through :meth:`launch`.

        On a GPU the launches are captured once from the backend's stream into a CUDA graph
        (nothing runs during capture); under the simulator the graph re-issues them; with
        ``graphs=False`` nothing is captured and a replay launches them from Python."""
        return Graph(self, issue, capture=self.graphs)

    def csr(self, data, indices, indptr, shape):
        """A :class:`DeviceCSR` over host (data, indices, indptr): our SpMV in SciPy's row order
        (no cuSPARSE handle: capturable; strict mode: the CPU's bits)."""
        return DeviceCSR(self, data, indices, indptr, shape)

    def fill(self, a, value=0.0):
        """a[:] = value with a kernel (numba device-array slice assignment is slow)."""
        flat = a.reshape(-1)
        self.launch(self.kernels.fill, grid(flat.shape[0], 256), self.nb(flat), value)

    # -- factories ----------------------------------------------------------------------------
    def assembler(self, mesh, sparsity, timers):
        return GPUAssembler(self, mesh, sparsity, timers)

    def device_systems(self, sparsity, ops, cfg, timers):
        from dycore.solvers.device import DeviceSystems
        return DeviceSystems(self, sparsity, ops, cfg, timers)


class GPUAssembler:
    """Same methods and return shapes as :class:`dycore.backend.cpu.CPUAssembler`, on the GPU."""

    def __init__(self, backend, mesh, sparsity, timers):
        b = self.b = backend
        self.k = backend.kernels
        self.timers = timers
        self.nele, self.n, self.nnz = mesh.nele, mesh.nnodes, sparsity.nnz
        dev = b.to_device
        self.tets = dev(mesh.tets.astype(np.int32))
        self.coords = dev(mesh.coords.astype(np.float64))
        self.lookup = dev(sparsity.lookup.astype(np.int32))
        self.indptr = dev(sparsity.indptr.astype(np.int32))
        self.indices = dev(sparsity.indices.astype(np.int32))
        self.cptr, self.contrib = dev(sparsity.contrib_ptr), dev(sparsity.contrib)
        self.nptr, self.ncontrib = dev(sparsity.node_contrib_ptr), dev(sparsity.node_contrib)
        self.detj = b.xp.empty(self.nele)
        self._buf = {}
        self._grid = grid(self.nele, b.block)
        self.deterministic = backend.assembly == "deterministic"

    def _buffer(self, key, size):
        if key not in self._buf:
            self._buf[key] = self.b.xp.empty(size)
        return self._buf[key]

    def _gather(self, ptr, contrib, ele, bs, out):
        b = self.b
        ntarget = out.shape[0] // bs
        b.launch(self.k.gather_blocks, grid(ntarget, 256), b.nb(ptr), b.nb(contrib), b.nb(ele),
                 bs, b.nb(out))

    def tracer(self, name, u_nl, c_old, src, sigma, c_ref, kdiag, dt_theta, want_matrix=True,
               search=False):
        """Tracer matrix values (nnz,) and rhs (n,); ``search=True`` (atomic mode only) finds
        each nonzero by binary search in the CSR row instead of the lookup table (the reference
        paper's method; for benchmarks)."""
        b, nb = self.b, self.b.nb
        values = self._buffer(f"tracer_matrix_{name}", self.nnz)
        rhs = self._buffer(f"tracer_rhs_{name}", self.n)
        em, er = self._buffer("ele16", 16 * self.nele), self._buffer("ele4", 4 * self.nele)
        args = (nb(self.tets), nb(self.coords), nb(u_nl), nb(c_old), nb(src), nb(sigma),
                nb(c_ref), kdiag[0], kdiag[1], kdiag[2], dt_theta, nb(self.lookup),
                nb(self.indptr), nb(self.indices))
        if self.deterministic:
            with self.timers(f"integrate tracer {name}"):
                b.launch(self.k.tracer, self._grid, *args, ELEMENTS, want_matrix, nb(values),
                         nb(rhs), nb(em), nb(er), nb(self.detj))
            with self.timers(f"assemble tracer {name}"):
                if want_matrix:
                    self._gather(self.cptr, self.contrib, em, 1, values)
                self._gather(self.nptr, self.ncontrib, er, 1, rhs)
        else:
            with self.timers(f"integrate+assemble tracer {name} (atomic)"):
                if want_matrix:
                    b.fill(values)
                b.fill(rhs)
                b.launch(self.k.tracer, self._grid, *args, SEARCH if search else ATOMIC,
                         want_matrix, nb(values), nb(rhs), nb(em), nb(er), nb(self.detj))
        return (values if want_matrix else None), rhs

    def momentum(self, u_nl, u_old, buoy, p, sigma, u_ref, nudiag, f_cor, dt_theta):
        b, nb = self.b, self.b.nb
        values = self._buffer("big_m", 9 * self.nnz)
        rhs = self._buffer("mom_rhs", 3 * self.n)
        em, er = self._buffer("ele144", 144 * self.nele), self._buffer("ele12", 12 * self.nele)
        args = (nb(self.tets), nb(self.coords), nb(u_nl), nb(u_old), nb(buoy), nb(p), nb(sigma),
                u_ref[0], u_ref[1], u_ref[2], nudiag[0], nudiag[1], nudiag[2], f_cor, dt_theta,
                nb(self.lookup))
        if self.deterministic:
            with self.timers("integrate momentum"):
                b.launch(self.k.momentum, self._grid, *args, ELEMENTS, nb(values), nb(rhs),
                         nb(em), nb(er), nb(self.detj))
            with self.timers("assemble momentum"):
                self._gather(self.cptr, self.contrib, em, 9, values)
                self._gather(self.nptr, self.ncontrib, er, 3, rhs)
        else:
            with self.timers("integrate+assemble momentum (atomic)"):
                b.fill(values)
                b.fill(rhs)
                b.launch(self.k.momentum, self._grid, *args, ATOMIC, nb(values), nb(rhs), nb(em),
                         nb(er), nb(self.detj))
        return values.reshape(self.nnz, 3, 3), rhs.reshape(self.n, 3)

    def divergence(self):
        nb, xp = self.b.nb, self.b.xp
        em = xp.empty(48 * self.nele)
        out = xp.empty(3 * self.nnz)
        with self.timers("integrate divergence C"):
            self.b.launch(self.k.divergence, self._grid, nb(self.tets), nb(self.coords), nb(em),
                          nb(self.detj))
        with self.timers("assemble divergence C"):
            self._gather(self.cptr, self.contrib, em, 3, out)
        return out.reshape(self.nnz, 3), self.detj.copy()

    def stabilisation(self):
        nb, xp = self.b.nb, self.b.xp
        em = self._buffer("ele16", 16 * self.nele)
        out = xp.empty(self.nnz)
        status = xp.empty(self.nele, dtype=np.int64)
        with self.timers("integrate stabilisation K_p"):
            self.b.launch(self.k.stabilisation, self._grid, nb(self.tets), nb(self.coords),
                          nb(em), nb(status))
        with self.timers("assemble stabilisation K_p"):
            self._gather(self.cptr, self.contrib, em, 1, out)
        return out, status

    def lumped_mass(self):
        nb, xp = self.b.nb, self.b.xp
        er = self._buffer("ele4", 4 * self.nele)
        out = xp.empty(self.n)
        with self.timers("integrate lumped mass"):
            self.b.launch(self.k.lumped_mass, self._grid, nb(self.tets), nb(self.coords), nb(er),
                          nb(self.detj))
        with self.timers("assemble lumped mass"):
            self._gather(self.nptr, self.ncontrib, er, 1, out)
        return out
