"""Strict floating point for GPU kernels: no FMA contraction, no LTO (docs/equations.md §6–§7).

numba-cuda lets NVVM contract ``a*b + c`` into fused multiply-adds even with ``fastmath=False``;
CPU ``@njit`` code never does, so the GPU results differ from the CPU by a few ulp. Bitwise
CPU/GPU equality needs both:

(a) NVVM told ``-fma=0``. numba-cuda has no public option for it, so :func:`strict_compile`
    installs, on its first call, a wrapper around the private
    ``numba.cuda.cudadrv.nvvm.compile_ir(llvmir, **options)`` (numba-cuda 0.30.4; the code
    library calls it through the module attribute, ``nvvm.compile_ir(irs, **options)``, both
    for PTX and for LTO-IR). The wrapper is process-wide but acts only on compilation units
    whose LLVM IR contains :data:`MARK`: every strict kernel is a *renamed copy* of the Python
    kernel function (``__name__``/``__qualname__`` prefixed with :data:`MARK`), and numba mangles
    the qualified name into the kernel's LLVM symbol. For those units it sets
    ``options["fma"] = False`` (and drops ``fastmath``, which would turn FMA back on). Every other
    kernel in the process (the normal kernels, CuPy, user code) compiles unchanged.
(b) link-time optimisation off, which would re-fuse across modules: kernels are built with the
    call form ``cuda.jit(fn, lto=False)`` (the decorator form ``@cuda.jit(lto=False)`` ignores
    ``lto`` in numba-cuda 0.30.4).

Caches
------
- Strict kernels are separate dispatcher objects over separate function objects (the renamed
  copies), so they never share compiled code with the normal kernels of
  :mod:`dycore.backend.gpu_kernels`. The normal kernels are built with ``cache=True`` (numba's
  on-disk cache); strict kernels never are, so no fma=0 code is written to the cache and no
  cached (contracted) code is ever loaded into a strict kernel.
- The element functions (``@njit(cache=True)``, :mod:`dycore.fem._jit`) are cached on disk for
  the *CPU* target only. When a kernel calls one, numba-cuda compiles its ``py_func`` for the
  CUDA target in memory; the resulting LLVM IR has plain ``fmul``/``fadd`` (no ``contract``
  flag) and is linked into the calling kernel's code library, and all modules of that library go
  through ONE ``nvvm.compile_ir`` call with the *kernel's* options. Contraction is decided by
  NVVM at that point, so the same device-function IR gives unfused code inside a strict kernel
  and fused code inside a normal one: no FMA code can leak through a cache.

Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) arithmetic is Python/NumPy arithmetic
(no FMA), ``cuda.jit`` takes no ``lto`` option, and :func:`strict_compile` is plain
``cuda.jit(fn)``.
"""
from __future__ import annotations

import functools
import threading
import types

from numba import config as numba_config
from numba import cuda

__all__ = ["strict_compile", "MARK", "install_nvvm_fma_guard", "strict_nvvm_options"]

#: prefix of strict kernels' names; alphanumeric, so numba's mangler keeps it verbatim
MARK = "dycoreStrictFP"

_lock = threading.Lock()
_installed = False


def strict_nvvm_options(llvmir, options: dict) -> dict:
    """The NVVM options to use for one compilation unit.

    Parameters
    ----------
    llvmir : str or list of str
        The LLVM IR modules of the unit (as passed to ``nvvm.compile_ir``).
    options : dict
        The options numba-cuda passes (``opt``, ``arch``, ``fastmath``, ``gen-lto``, ...).

    Returns
    -------
    dict
        ``options`` unchanged (same object) when no module contains :data:`MARK`; otherwise a
        copy with ``fma = False`` and without ``fastmath``.
    """
    irs = [llvmir] if isinstance(llvmir, str) else llvmir
    if not any(MARK in ir for ir in irs if isinstance(ir, str)):
        return options
    out = dict(options)
    out.pop("fastmath", None)
    out["fma"] = False
    return out


def install_nvvm_fma_guard() -> bool:
    """Wrap ``numba.cuda.cudadrv.nvvm.compile_ir`` once per process (idempotent).

    Returns
    -------
    bool
        True when the wrapper was installed by this call, False when it already was.
    """
    global _installed
    with _lock:
        if _installed:
            return False
        from numba.cuda.cudadrv import nvvm

        original = nvvm.compile_ir

        @functools.wraps(original)
        def compile_ir(llvmir, **options):
            return original(llvmir, **strict_nvvm_options(llvmir, options))

        compile_ir.__dycore_original__ = original
        nvvm.compile_ir = compile_ir
        _installed = True
        return True


def _renamed(fn):
    """A copy of the Python function ``fn`` whose name and qualified name start with MARK."""
    name = f"{MARK}_{fn.__name__}"
    copy = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__,
                              fn.__closure__)
    copy.__qualname__ = name
    copy.__module__ = fn.__module__
    copy.__doc__ = fn.__doc__
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def strict_compile(fn):
    """Build a strict-FP CUDA kernel (dispatcher) from the Python function ``fn``.

    Parameters
    ----------
    fn : function
        A kernel body as written for ``@cuda.jit`` (not yet decorated).

    Returns
    -------
    numba CUDA dispatcher
        On a GPU: ``cuda.jit(renamed_copy_of_fn, lto=False)`` with the NVVM ``fma=0`` guard
        installed (compiled lazily at the first launch, never ``cache=True``). Under the
        simulator: ``cuda.jit(fn)``.
    """
    if numba_config.ENABLE_CUDASIM:
        return cuda.jit(fn)
    install_nvvm_fma_guard()
    return cuda.jit(_renamed(fn), lto=False)
