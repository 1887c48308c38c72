"""The GPU backend: CuPy arrays in device memory, numba-cuda kernels, device or host solvers.

Everything mesh-sized lives on the device for the whole run (docs/equations.md §6); only scalars and
output snapshots come back, except in ``solver_mode="host"``, which copies each assembled system
to the host for SciPy/PyAMG (the reference paper's GPU+PETSc pipeline, used for validation).

Under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``; no CuPy there) the same kernels run on
NumPy arrays, which is how CI tests this backend without a GPU.
"""
from __future__ import annotations

import os

import numpy as np
from numba import config as numba_config
from numba import cuda

from dycore.backend import _numpy_compat  # noqa: F401
from dycore.assembly.assembler import Assembler
from dycore.backend.gpu_kernels import get_kernels, grid
from dycore.backend.gpu_ops import DeviceCSR, GPUVectorOps
from dycore.backend.graphs import Graph
from dycore.backend.streams import InlineBranch, SideStream
from dycore.backend.counters import Counters
from dycore.backend.timers import WallMarker
from dycore.errors import BackendUnavailableError

__all__ = ["GPUBackend", "SimulatorBackend", "EventMarker", "Graph", "PendingRead", "gpu_backend"]

#: numba-cuda warns at every launch of fewer than 128 blocks; ours are deliberate (a reduction's
#: second pass, the coarse AMG levels, the small meshes of tests) and the warnings buried a
#: run's own messages, so they are off unless NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS is set
if "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS" not in os.environ:
    numba_config.CUDA_LOW_OCCUPANCY_WARNINGS = 0


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


class PendingRead:
    """A device→host copy issued on a stream and not waited for: :meth:`result` waits for the
    copy only (an event recorded after it), not for work issued after it."""

    __slots__ = ("_host", "_event", "_counters")

    def __init__(self, host, event, counters):
        self._host, self._event, self._counters = host, event, counters

    def result(self):
        """The host values (a NumPy copy); the one host synchronisation of the read."""
        if self._event is not None:
            self._event.synchronize()
        self._counters.syncs += 1
        return np.array(self._host)


class GPUBackend:
    """Backend value for an NVIDIA GPU (CuPy arrays, numba-cuda kernels on one stream).

    Under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``) the same backend is
    :class:`SimulatorBackend` (NumPy arrays, simulated launches); :func:`gpu_backend` (and so
    :func:`dycore.backend.select_backend`) picks the one that runs here, so the code above the
    backend has no simulator branch.

    Parameters
    ----------
    solver_mode : "device" (our CG + AMG and BiCGStab kernels on the GPU) or "host" (SciPy/PyAMG
        on the CPU)
    assembly : "atomic" (one thread per element, atomic adds) or "deterministic" (element
        arrays + gather by nonzero in the CPU's order)
    strict : compile kernels without FMA contraction and without LTO (bitwise mode)
    block : threads per block of element kernels
    graphs : capture solves and Picard iterations as CUDA graphs (False: every kernel is
        launched from Python; the same kernels in the same order)

    Raises
    ------
    BackendUnavailableError when CuPy cannot be imported (GPU only).
    """

    name = "gpu"
    simulator = False
    #: threads per block of the reduction and solver kernels
    solver_block = 256
    #: most threads per matrix row by default (DeviceLinalg's max_group)
    max_row_group = 32

    def __init__(self, solver_mode="host", assembly="atomic", strict=False, threads=0,
                 block=128, graphs=True):
        self.solver_mode = solver_mode
        self.assembly = assembly
        self.strict = strict
        self.block = block
        self.graphs = graphs
        self.kernels = get_kernels(strict)
        self.counters = Counters()
        self.stream, self.nb_stream = None, 0
        #: the Graph being captured (None: launches run now)
        self.capturing = None
        self._ops = None
        self._pinned = {}                 # read_later's pinned host buffers, by size
        self._start()

    def _start(self) -> None:
        """CuPy as the array module and one stream for CuPy and numba alike: ordered without
        host syncs, and capturable (the legacy default stream cannot be captured into a CUDA
        graph)."""
        try:
            import cupy
        except ImportError as exc:
            raise BackendUnavailableError(f"backend.name: gpu needs CuPy ({exc})") from exc
        self.xp = cupy
        self.stream = self.xp.cuda.Stream(non_blocking=True)
        self.stream.use()
        self.nb_stream = cuda.external_stream(self.stream.ptr)
        self.counters.watch_cupy_allocations()

    def _device_name(self) -> str:
        dev = cuda.get_current_device().name
        return dev.decode() if isinstance(dev, bytes) else dev

    def describe(self) -> str:
        return (f"gpu ({self._device_name()}; {self.assembly} assembly; {self.solver_mode} "
                f"solvers{'; strict FP' if self.strict else ''})")

    # -- arrays -----------------------------------------------------------------------------
    def to_device(self, a):
        return self.xp.ascontiguousarray(self.xp.asarray(a))

    def to_host(self, a):
        """A host copy of a backend array (a device→host copy: one host synchronisation)."""
        self.counters.syncs += 1
        return self.xp.asnumpy(a, stream=self.stream)

    def read_later(self, a) -> PendingRead:
        """Issue a device→host copy of the small float64 backend array ``a`` (contiguous) on
        this stream into pinned host memory (one buffer per size, reused: take the
        :meth:`PendingRead.result` before the next read of that size) and return at once."""
        import cupy
        n = int(a.size)
        if n not in self._pinned:
            mem = cupy.cuda.alloc_pinned_memory(8 * max(n, 1))
            self._pinned[n] = np.frombuffer(mem, np.float64, n)
        host = self._pinned[n]
        cupy.cuda.runtime.memcpyAsync(host.ctypes.data, a.data.ptr, 8 * n,
                                      cupy.cuda.runtime.memcpyDeviceToHost, self.stream.ptr)
        event = cupy.cuda.Event(block=False, disable_timing=True)
        event.record(self.stream)
        return PendingRead(host, event, self.counters)

    def as_device(self, a, dtype):
        """``a`` as a backend array of ``dtype``: a host (NumPy) array is copied to the device
        once; a backend array is used in place (cast when its dtype differs)."""
        if isinstance(a, np.ndarray):
            return self.to_device(np.asarray(a, dtype))
        return a if a.dtype == dtype else a.astype(dtype)

    def nb(self, a):
        """A numba view of a backend array (zero-copy) for kernel arguments.

        No stream synchronisation (``sync=False``): CuPy and numba share the backend's stream,
        so the stream order already puts the producer before the consumer."""
        return cuda.as_cuda_array(a, sync=False)

    def marker(self):
        return EventMarker(self.nb_stream)

    def synchronize(self) -> None:
        self.counters.syncs += 1
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
        kernel[griddim[0], griddim[1], self.nb_stream](*args)

    def capture(self, issue):
        """A :class:`Graph` of the kernels ``issue()`` launches through :meth:`launch`.

        On a GPU the launches are captured once from the backend's stream into a CUDA graph
        (nothing runs during capture); under the simulator the graph re-issues them; with
        ``graphs=False`` nothing is captured and a replay launches them from Python."""
        return Graph(self, issue, capture=self.graphs)

    def branch(self):
        """A :class:`~dycore.backend.streams.SideStream`: work issued beside this backend's
        stream, forked and joined by events (captured as parallel graph branches)."""
        return SideStream(self)

    def uncaptured(self, call) -> None:
        """Run ``call()`` (host code that issues GPU work on this stream but cannot be captured
        into a CUDA graph) now, or, while a :class:`Graph` is being captured, at this point of
        every replay: the graph is split around it (:meth:`Graph.split`)."""
        if self.capturing is None:
            call()
        else:
            self.capturing.split(call)

    def csr(self, data, indices, indptr, shape):
        """A :class:`DeviceCSR` over host (data, indices, indptr): our SpMV in SciPy's row order
        (no cuSPARSE handle: capturable; strict mode: the CPU's bits)."""
        return DeviceCSR(self, data, indices, indptr, shape)

    def fill(self, a, value=0.0):
        """a[:] = value with a kernel (numba device-array slice assignment is slow)."""
        flat = a.reshape(-1)
        self.launch(self.kernels.fill, grid(flat.shape[0], 256), self.nb(flat), value)

    # -- the assembler's protocol (dycore.assembly.assembler) ---------------------------------
    def zeros(self, shape, dtype=np.float64):
        """A zero-filled array of this backend (CuPy; NumPy under the simulator)."""
        return self.xp.zeros(shape, dtype)

    def launch_loop(self, loop, mode, args) -> None:
        """Launch the generated kernel of ``loop`` (:mod:`dycore.backend.gpu_loops_gen`), one thread
        per element, with scatter rule ``mode``; ``args`` maps its parameter names to backend
        arrays/scalars (output arrays are passed flattened when the loop says so)."""
        nb, vals = self.nb, []
        for p, kind in loop.gpu_param_kinds:
            if kind == "scalar":
                vals.append(mode if p == "mode" else args[p])
            elif kind == "flat":
                vals.append(nb(args[p].reshape(-1)))
            else:
                vals.append(nb(args[p]))
        nele = args[loop.count_source].shape[0]
        self.launch(self.kernels.loops[loop.name], grid(nele, self.block), *vals)

    def gather(self, ptr, contrib, ele, out, bs) -> None:
        """out[k*bs + b] = Σ ele[contrib[q]*bs + b] in element order (one thread per target)."""
        flat = out.reshape(-1)
        self.launch(self.kernels.gather_blocks, grid(flat.shape[0] // bs, 256), self.nb(ptr),
                    self.nb(contrib), self.nb(ele.reshape(-1)), bs, self.nb(flat))

    # -- factories ----------------------------------------------------------------------------
    def assembler(self, mesh, sparsity, timers):
        """The :class:`Assembler` of ``mesh`` on this backend."""
        return Assembler(self, mesh, sparsity, timers)


class SimulatorBackend(GPUBackend):
    """The GPU backend under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``): NumPy arrays
    wrapped as simulated device arrays, kernels run by the simulator, wall-clock markers; a
    "graph" re-issues its kernels. What :class:`GPUBackend` does with CuPy and streams, this
    class does with NumPy; nothing above the backend asks which one it has."""

    simulator = True
    solver_block = 32     # the simulator runs every thread of a block as a Python thread
    #: most threads per matrix row by default (DeviceLinalg's max_group): each is a Python
    #: thread here, and 32 a row made the simulator's V-cycle tests 3.5× slower (48 → 168 s)
    max_row_group = 4

    def _start(self) -> None:
        self.xp = np

    def _device_name(self) -> str:
        return "CUDA simulator"

    def to_device(self, a):
        return np.ascontiguousarray(a)

    def to_host(self, a):
        self.counters.syncs += 1
        return np.asarray(a)

    def read_later(self, a) -> PendingRead:
        """:meth:`GPUBackend.read_later`: the simulator's kernels have run, so a copy now."""
        return PendingRead(np.array(a), None, self.counters)

    def as_device(self, a, dtype):
        """Host and backend arrays are both NumPy here: ``a`` itself (cast when its dtype
        differs), so that in-place updates of it are seen by the kernels."""
        return a if a.dtype == dtype else a.astype(dtype)

    def nb(self, a):
        """The NumPy array wrapped as a simulated device array over the same memory (a bare
        NumPy argument would be copied in and written back after the kernel, which breaks
        in-place kernels whose arguments alias); scalars as they are."""
        if isinstance(a, np.ndarray) and a.ndim > 0:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
            return FakeCUDAArray(a)
        return a

    def marker(self):
        return WallMarker()

    def synchronize(self) -> None:
        self.counters.syncs += 1

    def branch(self):
        """The simulator has one stream: an :class:`~dycore.backend.streams.InlineBranch`."""
        return InlineBranch()

    def launch(self, kernel, griddim, *args):
        self.counters.launches += 1
        kernel[griddim](*args)


def gpu_backend(**options) -> GPUBackend:
    """The GPU backend that runs on this machine: :class:`SimulatorBackend` under numba-cuda's
    simulator (``NUMBA_ENABLE_CUDASIM=1``), else :class:`GPUBackend`; ``options`` as theirs.

    Raises
    ------
    BackendUnavailableError when CuPy cannot be imported (GPU only).
    """
    cls = SimulatorBackend if numba_config.ENABLE_CUDASIM else GPUBackend
    return cls(**options)
