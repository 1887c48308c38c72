"""The GPU kernels of the assembly and the one compile path of every dycore kernel.

The element-loop kernels are generated from :data:`dycore.assembly.loops.ASSEMBLY`
(:mod:`dycore.backend.gpu_loops_gen`, written by ``python -m dycore.assembly.codegen``): one thread
per element gathers into ``cuda.local.array`` storage, calls the one-source weak form of
:mod:`dycore.assembly.weak_forms`, then either

- ``mode == ATOMIC``: adds into CSR/BCSR ``values`` through the element→nonzero ``lookup`` table
  and into the right-hand side through the connectivity, with float64 ``cuda.atomic.add``; or
- ``mode == ELEMENTS``: writes the element matrix/vector to global memory, for the deterministic
  gather (:func:`_gather_blocks`, one thread per nonzero, fixed order — the CPU's order).

Every kernel (these, the benchmark loops, the device solvers) is compiled through
:func:`kernel_compiler`, lazily (never at import: compiling needs a GPU): ``cuda.jit(fn,
lto=False)``; in strict mode NVVM is also told ``fma=0`` (see ``strict_fp``); the simulator is
plain ``cuda.jit``. Arrays of values are passed flattened (1-D) so one atomic index addresses
any block layout.
"""
from __future__ import annotations

from dycore.backend import _numpy_compat  # noqa: F401  (before the first kernel compile)
from numba import config as numba_config
from numba import cuda

from dycore.assembly.loop_spec import ATOMIC, ELEMENTS, SEARCH
from dycore.backend import gpu_loops_gen

__all__ = ["ATOMIC", "ELEMENTS", "SEARCH", "get_kernels", "get_solver_kernels",
           "kernel_compiler", "BLOCK"]

BLOCK = 128  #: threads per block for element kernels (tests pass smaller ones)


def _gather_blocks(ptr, contrib, ele_blocks, bs, out):
    """out[k*bs + b] = Σ ele_blocks[contrib[q]*bs + b], q in ptr[k]:ptr[k+1] (element order)."""
    k = cuda.grid(1)
    if k >= ptr.shape[0] - 1:
        return
    for b in range(bs):
        s = 0.0
        for q in range(ptr[k], ptr[k + 1]):
            s += ele_blocks[contrib[q] * bs + b]
        out[k * bs + b] = s


def _fill(a, value):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] = value


def kernel_compiler(strict: bool):
    """The one compile path of every dycore kernel: ``jit(fn) -> dispatcher``.

    Strict mode: NVVM fma=0 and no LTO (:func:`strict_compile`; never cached on disk, see
    ``strict_fp``); the simulator: plain ``cuda.jit`` (it takes no lto option); otherwise
    ``cuda.jit(fn, lto=False, cache=True)`` (the call form: the decorator form ignores lto in
    numba-cuda 0.30.4). ``cache=True`` keeps the compiled kernels in numba's on-disk cache
    (``__pycache__`` beside the source, or ``NUMBA_CACHE_DIR``), keyed by the kernel's
    bytecode, its closure values (block sizes, device functions), the argument types and the
    GPU's compute capability, and invalidated when the source file changes: a second run loads
    them instead of compiling (the first step of the paper-size run took 12.1 s cold on an
    H200, docs/performance.md)."""
    if strict:
        from dycore.backend.strict_fp import strict_compile
        return strict_compile
    if numba_config.ENABLE_CUDASIM:
        return cuda.jit

    def jit(fn):
        return cuda.jit(fn, lto=False, cache=True)
    return jit


def _install_csr_find_device() -> None:
    """Give the generated kernels :func:`csr_find` as a CUDA device function, before their first
    compile (the simulator passes kernel arguments to device functions, not to ``@njit``
    functions)."""
    if gpu_loops_gen.csr_find_device is None:
        from dycore.assembly.csr_search import csr_find
        gpu_loops_gen.csr_find_device = cuda.jit(device=True)(csr_find.py_func)


class Kernels:
    """The compiled kernels of one floating-point mode.

    Attributes: ``loops`` (loop name -> kernel of :mod:`dycore.backend.gpu_loops_gen`; also readable
    as attributes, ``kernels.tracer``), ``gather_blocks``, ``fill``, ``strict``."""

    def __init__(self, strict: bool):
        _install_csr_find_device()
        jit = kernel_compiler(strict)
        self.strict = strict
        self.loops = {name: jit(fn) for name, fn in gpu_loops_gen.KERNELS.items()}
        self.gather_blocks = jit(_gather_blocks)
        self.fill = jit(_fill)

    def __getattr__(self, name):
        loops = self.__dict__.get("loops", {})
        if name in loops:
            return loops[name]
        raise AttributeError(f"no kernel {name!r} (loops: {sorted(loops)})")


_CACHE: dict[bool, Kernels] = {}


def get_kernels(strict: bool = False) -> Kernels:
    """The kernels for the given floating-point mode, built on first use."""
    if strict not in _CACHE:
        _CACHE[strict] = Kernels(strict)
    return _CACHE[strict]


_SOLVER_CACHE: dict = {}


def get_solver_kernels(strict: bool = False, rb: int = 256, shuffle: bool = True):
    """The device solver kernels (:mod:`dycore.backend.solver_kernels`) for a floating-point mode,
    reduction block size and row-group sum (warp shuffles or shared memory; the simulator
    always uses shared memory), built on first use through :func:`kernel_compiler`."""
    key = (strict, rb, shuffle)
    if key not in _SOLVER_CACHE:
        from dycore.backend.solver_kernels import build_solver_kernels
        _SOLVER_CACHE[key] = build_solver_kernels(kernel_compiler(strict),
                                                  cuda.jit(device=True), rb, shuffle=shuffle)
    return _SOLVER_CACHE[key]


def grid(nthreads: int, block: int = BLOCK) -> tuple[int, int]:
    """(blocks, threads) covering ``nthreads`` with ``block`` threads per block."""
    return (max(1, (nthreads + block - 1) // block), block)
