"""Standalone element-kernel benchmarks (the paper's Tables 3–5), one thread per element.

Each benchmark kernel is one loop of :data:`dycore.bench.loops.BENCH` (the element-loop
contract) around ONE :mod:`dycore.fem` element function (or, for ``ele_val_*``, the gather
itself, which is what Fluidity's ``ele_val`` is). Its CPU ``@njit(parallel=True)`` ``prange``
driver (:mod:`dycore.bench.cpu_loops_gen`) and ``@cuda.jit`` kernel (:mod:`dycore.bench.gpu_loops_gen`)
are generated with the SAME argument list, so the harness calls ``cpu(*args)`` or
``gpu[grid](*args)`` interchangeably. The CPU drivers pass per-element rows (``dshape[e]``) to
the element functions; the GPU kernels copy them into ``cuda.local.array`` storage and back
(the production kernels' pattern, which the simulator also needs). Neither holds arithmetic of
its own.

The minimum traffic of every kernel (:attr:`BenchKernel.min_bytes`) counts each input array read
once and each output array written once (int32 connectivity = 4 bytes, float64 = 8 bytes); the
formulas are written out per kernel below and equal the sum of ``nbytes`` of the arguments.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from dycore.assembly.weak_forms import NGI, QUAD_N, QUAD_W
from dycore.bench import cpu_loops_gen, gpu_loops_gen
from dycore.bench.loops import BENCH

__all__ = ["BenchKernel", "KERNELS", "kernel_names", "make_inputs", "kernel_args",
           "gpu_kernel"]


# ------------------------------------------------------------------------- the registry
I4, F8 = 4, 8  #: bytes of an int32 index and of a float64 value


@dataclass(frozen=True)
class BenchKernel:
    """One benchmark kernel.

    Attributes
    ----------
    name : str
        Name as in the paper (Tables 3–5).
    min_bytes : callable
        ``min_bytes(nele, nnodes)``: each input read once, each output written once [bytes].
    formula : str
        ``min_bytes`` in words, for the report.
    paper_ms : float
        The paper's A100 time (554,394 tetrahedra) [ms], for reference.

    Properties ``loop`` (its :data:`~dycore.bench.loops.BENCH` entry), ``inputs`` and
    ``outputs`` (keys of :func:`make_inputs`'s dictionary in argument order: the loop's
    parameters), ``cpu`` and ``gpu_py`` (its generated driver and kernel body).
    """

    name: str
    min_bytes: Callable[[int, int], int]
    formula: str
    paper_ms: float

    @property
    def loop(self):
        return BENCH[self.name]

    @property
    def outputs(self) -> tuple:
        return tuple(o.elements for o in self.loop.outputs)

    @property
    def inputs(self) -> tuple:
        return tuple(p for p in self.loop.cpu_params() if p not in self.outputs)

    @property
    def cpu(self) -> Callable:
        """The generated ``@njit(parallel=True)`` driver, ``cpu(*inputs, *outputs)``."""
        return cpu_loops_gen.DRIVERS[self.name]

    @property
    def gpu_py(self) -> Callable:
        """The generated kernel's Python function, compiled by :func:`gpu_kernel`."""
        return gpu_loops_gen.KERNELS[self.name]


KERNELS: tuple[BenchKernel, ...] = (
    BenchKernel("ele_val_scalar", lambda ne, nn: I4 * 4 * ne + F8 * nn + F8 * 4 * ne,
                "tets 16*nele + field 8*n + out 32*nele", 0.028),
    BenchKernel("ele_val_vector", lambda ne, nn: I4 * 4 * ne + F8 * 3 * nn + F8 * 12 * ne,
                "tets 16*nele + field 24*n + out 96*nele", 0.077),
    BenchKernel("ele_val_tensor", lambda ne, nn: I4 * 4 * ne + F8 * 9 * nn + F8 * 36 * ne,
                "tets 16*nele + field 72*n + out 288*nele", 0.198),
    BenchKernel("transform_to_physical", lambda ne, nn: I4 * 4 * ne + F8 * 3 * nn + F8 * NGI
                + F8 * 12 * ne + F8 * NGI * ne,
                f"tets 16*nele + coords 24*n + weights 8*{NGI} + dshape 96*nele "
                f"+ detwei {8 * NGI}*nele", 3.96),
    BenchKernel("dshape_tensor_dshape",
                lambda ne, nn: F8 * 12 * ne + F8 * 9 * ne + F8 * NGI * ne + F8 * 16 * ne,
                f"dshape 96*nele + tensor 72*nele + detwei {8 * NGI}*nele + out 128*nele",
                1.97),
    BenchKernel("shape_shape", lambda ne, nn: F8 * 4 * NGI + F8 * NGI * ne + F8 * 16 * ne,
                f"n 8*{4 * NGI} + detwei {8 * NGI}*nele + out 128*nele", 1.01),
    BenchKernel("shape_dshape",
                lambda ne, nn: F8 * 4 * NGI + F8 * 12 * ne + F8 * NGI * ne + F8 * 48 * ne,
                f"n 8*{4 * NGI} + dshape 96*nele + detwei {8 * NGI}*nele + out 384*nele",
                1.37),
    BenchKernel("get_edge_lengths", lambda ne, nn: I4 * 4 * ne + F8 * 3 * nn + F8 * 9 * ne,
                "tets 16*nele + coords 24*n + hbar 72*nele", 7.48),
)


def kernel_names() -> list[str]:
    """Names of the benchmark kernels, in table order."""
    return [k.name for k in KERNELS]


def make_inputs(tets: np.ndarray, coords: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    """Host arrays for every benchmark kernel: mesh, random nodal fields, precomputed geometry.

    Parameters
    ----------
    tets : ndarray, (nele, 4), int
        Connectivity (converted to int32).
    coords : ndarray, (n, 3), float
        Node coordinates [m].
    seed : int
        Seed of the random fields.

    Returns
    -------
    dict of str to ndarray
        Inputs (``tets``, ``coords``, ``weights``, ``n``, ``scalar`` (n,), ``vector`` (n,3),
        ``tensor_nodal`` (n,3,3), ``tensor_ele`` (nele,3,3) symmetric positive definite,
        ``dshape``, ``detwei`` from the CPU ``transform_to_physical``) and zero-filled outputs
        (``ev_scalar``, ``ev_vector``, ``ev_tensor``, ``out44``, ``out344``, ``hbar``).
    """
    rng = np.random.default_rng(seed)
    tets = np.ascontiguousarray(tets, dtype=np.int32)
    coords = np.ascontiguousarray(coords, dtype=np.float64)
    nele, nn = tets.shape[0], coords.shape[0]
    a = rng.standard_normal((nele, 3, 3))
    d = {
        "tets": tets, "coords": coords,
        "weights": np.ascontiguousarray(QUAD_W, dtype=np.float64),
        "n": np.ascontiguousarray(QUAD_N, dtype=np.float64),
        "scalar": rng.standard_normal(nn),
        "vector": rng.standard_normal((nn, 3)),
        "tensor_nodal": rng.standard_normal((nn, 3, 3)),
        "tensor_ele": np.ascontiguousarray(a @ a.transpose(0, 2, 1) + 3.0 * np.eye(3)),
        "dshape": np.zeros((nele, 4, 3)), "detwei": np.zeros((nele, NGI)),
        "ev_scalar": np.zeros((nele, 4)), "ev_vector": np.zeros((nele, 4, 3)),
        "ev_tensor": np.zeros((nele, 4, 3, 3)), "out44": np.zeros((nele, 4, 4)),
        "out344": np.zeros((nele, 3, 4, 4)), "hbar": np.zeros((nele, 3, 3)),
    }
    cpu_loops_gen.DRIVERS["transform_to_physical"](tets, coords, d["weights"], d["dshape"],
                                               d["detwei"])
    return d


def kernel_args(kernel: BenchKernel, data: dict) -> tuple:
    """The argument tuple of ``kernel`` taken from ``data`` (inputs, then outputs)."""
    return tuple(data[k] for k in kernel.inputs + kernel.outputs)


_GPU_CACHE: dict[str, object] = {}


def gpu_kernel(kernel: BenchKernel):
    """The compiled ``@cuda.jit`` kernel of ``kernel`` (built on first use; needs CUDA or the
    simulator), through the one compile path :func:`dycore.backend.gpu_kernels.kernel_compiler`
    (normal floating point: ``lto=False`` off-simulator)."""
    from dycore.backend.gpu_kernels import kernel_compiler

    if kernel.name not in _GPU_CACHE:
        _GPU_CACHE[kernel.name] = kernel_compiler(False)(kernel.gpu_py)
    return _GPU_CACHE[kernel.name]
