"""``dycore bench``: element-kernel, assembly, step and scaling benchmarks (docs/equations.md §8).

Modules: :mod:`~dycore.bench.timing` (CUDA-event / wall-clock timing, copy bandwidths),
:mod:`~dycore.bench.kernels` (standalone element kernels, CPU and GPU launchers, minimum bytes),
:mod:`~dycore.bench.assembly` (binary-search CSR assembly variant), :mod:`~dycore.bench.steps`
(whole-step runs), :mod:`~dycore.bench.report` (text tables), :mod:`~dycore.bench.runner`
(the driver, :func:`run_bench`).
"""
from dycore.bench.runner import DEFAULT_SIZES, PARTS, parse_mesh, parse_sizes, run_bench

__all__ = ["run_bench", "parse_mesh", "parse_sizes", "PARTS", "DEFAULT_SIZES"]
