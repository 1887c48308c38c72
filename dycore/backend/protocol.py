"""What the code above the backend may ask of a backend, written down as ``typing.Protocol`` classes.

The time step (:class:`dycore.timestepping.picard.PicardStepper`), the assembler
(:class:`dycore.assembly.assembler.Assembler`), the Simulation and the checks see a backend only
through these members; the CPU (:class:`dycore.backend.cpu.CPUBackend`), the GPU
(:class:`dycore.backend.gpu.GPUBackend`), its simulator twin
(:class:`dycore.backend.gpu.SimulatorBackend`) and one MPI rank
(:class:`dycore.parallel.rank_ops.RankBackend`) implement them (``tests/unit/test_protocol.py``
checks each one with ``isinstance`` and that every member the stepper calls is listed here).

Conventions of the docstrings: ``n`` = number of mesh nodes, ``nnz`` = nonzeros of the node
sparsity pattern, ``nele`` = number of tetrahedra. A *backend array* is what ``backend.xp``
makes (NumPy on the CPU and under the simulator, CuPy on a GPU); every array is float64
C-contiguous unless an int dtype is named. Nodal vectors are ``(n,)`` (scalars) or ``(n, 3)``
(velocities, node-major: component ``a`` of node ``j`` at flat index ``3 j + a``). Operations
write into ``out`` arguments that the caller allocated once: nothing below allocates during a
step on a GPU.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

__all__ = ["Backend", "DeviceBackend", "VectorOps", "SparseOperator", "CapturedWork"]


@runtime_checkable
class SparseOperator(Protocol):
    """A sparse matrix of the backend (mesh-only operators C (n, 3n), Cᵀ (3n, n), s·KMK (n, n)):
    :class:`~dycore.backend.cpu.HostCSR`, :class:`~dycore.backend.gpu_ops.DeviceCSR`, or one
    rank's :class:`~dycore.parallel.rank_ops.OwnedRowsOperator`."""

    def matvec(self, x, out) -> None:
        """``out = A x``: ``x`` a backend array of A's column count (any shape, read flat, e.g.
        (n, 3) for C), ``out`` a preallocated backend array of A's row count, overwritten.
        Rows are summed in stored column order from 0.0 (SciPy's ``csr_matvec``)."""


@runtime_checkable
class CapturedWork(Protocol):
    """Work recorded once and replayed (a CUDA graph on a GPU; re-issued elsewhere)."""

    #: kernels one replay runs (0 when nothing was captured)
    kernels: int

    def replay(self) -> None:
        """Run the recorded work once more, on the backend's stream, without a host sync."""


@runtime_checkable
class VectorOps(Protocol):
    """The Picard step's arithmetic between assemblies and solves (``backend.ops``).

    NumPy expressions on the CPU (:class:`~dycore.backend.cpu.CPUVectorOps`, the reference),
    one fused kernel each on the GPU (:class:`~dycore.backend.gpu_ops.GPUVectorOps`), operation by
    operation the same rounding. Arrays are backend arrays of equal size (read flat unless a
    shape is named); ``out`` is overwritten and may be one of the inputs.
    """

    def axpby(self, out, a: float, x, b: float, y, div: bool = False) -> None:
        """``out = a·x + b·y``; ``b == 0``: ``a·x`` (y not read); ``div``: ``a·x + y/b``."""

    def copy(self, out, x) -> None:
        """``out = x``."""

    def multiply(self, out, x, y) -> None:
        """``out = x·y`` element-wise."""

    def x_plus_yz(self, out, x, y, z) -> None:
        """``out = x + y·z`` element-wise (M_L⁻¹ Cᵀδp added to u*: all (n, 3))."""

    def advection_source(self, src, u_it, u_old, th: float, dtb) -> None:
        """``src = −(θ·w + (1 − θ)·wⁿ)·dθ̄/dz``: src, dtb (n,); u_it, u_old (n, 3), w = column 2
        [K/s]."""

    def dirichlet(self, values, rhs, bs: int, ops) -> None:
        """Strong Dirichlet rows of the assembled system: at the nodes ``ops.dir_nodes`` (of a
        :class:`~dycore.assembly.operators.MeshOperators`) the row of ``values`` becomes the
        identity (bs = 1: (nnz,) CSR values; bs = 3: (nnz, 3, 3) BCSR blocks) and ``rhs``
        ((n,) or (n, 3)) zero. ``values`` None: the rhs only."""

    def scatter_fill(self, a, idx, value: float) -> None:
        """``a[idx] = value``; ``idx`` a backend int array (the pressure pin: (1,) int64)."""

    def rotate_system(self, values, rhs, u_old, dt: float, nnf) -> None:
        """The momentum system to node-normal coordinates at the rotated (ground / lid) nodes
        of ``nnf`` (:mod:`dycore.assembly.no_normal_flow`) and n·u* = 0 imposed there:
        values (nnz, 3, 3), rhs (n, 3), u_old (n, 3) [m/s], dt [s]."""

    def unrotate(self, x, nnf) -> None:
        """``x ← Rᵀ x`` at the rotated nodes; x (n, 3)."""

    def remove_normal(self, x, nnf) -> None:
        """``x ← x − n (n·x)`` at the rotated nodes (the normal(s) each node fixes); x (n, 3)."""

    def max_abs_diff(self, x, y, out, slot: int) -> None:
        """``out[slot] = max |x − y|`` (NaN when a difference is NaN); out a backend (k,)
        array the host reads in one copy."""

    def step_scalars(self, u, th, ml, div, out, slot: int) -> None:
        """``out[slot:slot + 4]`` = max|w| [m/s], Σ M_L |u|² [m⁵/s²], max|div / M_L| [1/s],
        number of non-finite entries of u and θ': u (n, 3), th, ml, div (n,)."""


@runtime_checkable
class Backend(Protocol):
    """A backend value, chosen once (:func:`dycore.backend.select_backend`) and passed down.

    Attributes: ``name`` ("cpu" or "gpu"); ``xp`` (the array module: numpy or cupy);
    ``solver_mode`` ("host": SciPy/PyAMG, or "device"); ``assembly`` ("deterministic" or
    "atomic"); ``ops`` (:class:`VectorOps`); ``counters``
    (:class:`~dycore.backend.counters.Counters`: launches, graph replays, host syncs).
    """

    name: str
    xp: Any
    solver_mode: str
    assembly: str
    ops: Any
    counters: Any

    def describe(self) -> str:
        """One line for the log: the device, the assembly order, the solvers."""

    def to_device(self, a):
        """A C-contiguous backend array with the values of ``a`` (host or backend array)."""

    def to_host(self, a):
        """A NumPy array with the values of backend array ``a`` (on a GPU: one host sync)."""

    def read_later(self, a):
        """A host read of the small array ``a`` whose values ``result()`` gives: on a GPU a
        device→host copy issued now and waited for at ``result()`` (one host sync), so that
        work issued in between runs on; on the CPU the values at once."""

    def zeros(self, shape, dtype=...):
        """A zero-filled backend array of ``shape`` (float64 by default)."""

    def fill(self, a, value: float = 0.0) -> None:
        """``a[...] = value`` (backend array, any shape)."""

    def marker(self):
        """A clock marker for :class:`~dycore.backend.timers.StageTimers` (``record()``,
        ``elapsed_ms(later)``): CUDA events on a GPU, the wall clock elsewhere."""

    def synchronize(self) -> None:
        """Wait until the backend's queued work is done (nothing on the CPU)."""

    def csr(self, data, indices, indptr, shape) -> SparseOperator:
        """A :class:`SparseOperator` over host CSR arrays: data (nnz,) float64, indices (nnz,)
        int32 sorted within rows, indptr (rows + 1,) int32; ``shape`` (rows, cols)."""

    def launch_loop(self, loop, mode: int, args: dict) -> None:
        """Run the generated element loop ``loop`` (an
        :class:`~dycore.assembly.loop_spec.ElementLoop`) with scatter rule ``mode``; ``args``
        maps its parameter names to backend arrays / scalars. Raises ValueError for a rule
        the backend lacks (the CPU writes element arrays only)."""

    def gather(self, ptr, contrib, ele, out, bs: int) -> None:
        """The deterministic gather: ``out[k] = Σ ele[contrib[q]]`` over q in ptr[k]:ptr[k+1],
        in element order; ele (nele·16 or nele·4, bs), out (targets, bs); ptr, contrib int32."""

    def assembler(self, mesh, sparsity, timers):
        """The :class:`~dycore.assembly.assembler.Assembler` of ``mesh`` on this backend."""

    def capture(self, issue: Callable[[], None]) -> CapturedWork:
        """Record the work ``issue()`` launches (a CUDA graph on a GPU; re-issued on each replay
        under the simulator, on the CPU and with ``graphs=False``)."""

    def branch(self):
        """A fork/join branch (:mod:`dycore.backend.streams`): ``issue(work)`` launches
        ``work()`` beside the main stream (a second CUDA stream on a GPU, in order elsewhere),
        ``join()`` makes the main stream wait for it."""


@runtime_checkable
class DeviceBackend(Backend, Protocol):
    """What the device solvers (:mod:`dycore.solvers.krylov`, :mod:`dycore.solvers.amg`) and
    the GPU vector operations add to :class:`Backend`: kernel launches on one stream."""

    strict: bool
    #: threads per block of the reduction and solver kernels (256 on a GPU; 32 under the
    #: simulator, which runs every thread of a block as a Python thread)
    solver_block: int

    def nb(self, a):
        """A numba device-array view of backend array ``a`` (zero copy) for kernel arguments;
        scalars unchanged."""

    def launch(self, kernel, griddim, *args) -> None:
        """``kernel[griddim](*args)`` on the backend's stream, counted in ``counters``."""

    def as_device(self, a, dtype):
        """``a`` as a backend array of ``dtype``: a host array is copied to the device once; a
        backend array is used in place (cast when its dtype differs)."""

