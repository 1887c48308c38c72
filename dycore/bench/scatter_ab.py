"""A/B/A in one process: the atomic assembly of one loop scattering only its declared block
nonzeros (``Output.nonzeros``: the production kernel) against the same kernel scattering every
entry of each block (the loop rendered with no declared sparsity; compiled here, never written
to the package). For the momentum loop: 80 against 144 float64 matrix atomics per element
(+ 12 for the right-hand side in both).

For each variant, in the order given (default declared, all entries, declared again, so that
drift between the phases shows): the kernel alone (the launch of the atomic rule with the
arguments of one assembler call; the values keep accumulating, which costs the same atomics),
and the whole assembler call (zero-fill of the values and the rhs, then the kernel), each the
median, minimum and maximum of ``repeat`` timings (:func:`~dycore.bench.timing.time_gpu`: CUDA
events on the backend's stream, the host clock under the simulator); and the assembled values
against the deterministic assembly (element arrays + gather, the CPU's order) on the same
backend: the largest difference relative to max |values| (atomic order only) and the number of
undeclared block entries that are not exactly 0.0 (must be 0).

Used by ``scripts/momentum_scatter_ab.py`` (the GPU command) and tests/parity/test_scatter_ab.py
(the simulator).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from dycore.assembly.codegen import render_gpu
from dycore.assembly.loop_spec import ATOMIC, LoopTable, Output
from dycore.bench.timing import kernel_resources, time_gpu

__all__ = ["dense_source", "dense_kernel_body", "scatter_ab", "VARIANTS"]

#: variant label -> whether the kernel scatters only the declared entries
VARIANTS = {"declared": True, "all entries": False}


def dense_source(table: LoopTable, loop_name: str) -> str:
    """The GPU module text of ``table`` with every output of ``loop_name`` stripped of its
    ``nonzeros`` (all block entries scattered), as :func:`render_gpu` writes it.

    Raises
    ------
    KeyError naming the table and the loop when ``table`` has no such loop.
    """
    table[loop_name]                                   # KeyError naming the table's loops
    loops = tuple(replace(lp, args=tuple(replace(a, nonzeros=None) if isinstance(a, Output)
                                         else a for a in lp.args))
                  if lp.name == loop_name else lp for lp in table.loops)
    return render_gpu(replace(table, loops=loops))


def dense_kernel_body(table: LoopTable, loop_name: str):
    """The ``@cuda.jit`` body of ``loop_name`` from :func:`dense_source`: a plain function like
    those of the generated module, executed from the rendered text (nothing is written to disk).

    Raises
    ------
    KeyError as :func:`dense_source`.
    """
    text = dense_source(table, loop_name)
    ns: dict = {"__name__": "dycore_dense_scatter"}
    exec(compile(text, f"<{table.name} without block sparsity>", "exec"), ns)
    return ns["KERNELS"][loop_name]


def _compile(backend, fn):
    """``fn`` compiled as the backend's kernels are, but not cached on disk (its source is not a
    file): :func:`kernel_compiler` under the simulator and in strict mode, else
    ``cuda.jit(fn, lto=False)``."""
    from numba import config as numba_config
    from numba import cuda

    from dycore.backend.gpu_kernels import kernel_compiler
    if backend.strict or numba_config.ENABLE_CUDASIM:
        return kernel_compiler(backend.strict)(fn)
    return cuda.jit(fn, lto=False)


def _momentum_args(d: dict) -> tuple:
    """The arguments of ``Assembler.momentum`` from :func:`~dycore.checks.operators.inputs_on`."""
    return tuple(d[k] for k in ("u_nl", "u_old", "buoy", "p", "sigma", "u_ref", "nu", "f_cor",
                                "dt_theta"))


def scatter_ab(mesh, sp, repeat: int = 20, warmup: int = 2, block: int = 128,
               order=("declared", "all entries", "declared"), seed: int = 0) -> dict:
    """Time and check the momentum assembly's atomic scatter: declared nonzeros vs all entries.

    Parameters
    ----------
    mesh : Mesh; sp : Sparsity of ``mesh``
    repeat : int — timed calls per measurement; warmup : int — untimed calls first
    block : int — threads per block of the element kernel
    order : labels of :data:`VARIANTS`, run in this order on one backend
    seed : seed of :func:`dycore.checks.operators.random_inputs`

    Returns
    -------
    dict with ``mesh`` (tets, nodes, nnz), ``device``, ``atomics_per_element`` (label ->
    matrix + rhs atomics), ``kernel_resources`` (label -> registers / local bytes, None under
    the simulator) and ``runs``: one dict per entry of ``order`` with ``variant``,
    ``kernel`` and ``call`` (:func:`~dycore.bench.timing.stats`, ms), ``kernel_atomic_gb_s``
    (8 bytes per atomic over the kernel's median), ``max_rel_diff_vs_deterministic``,
    ``undeclared_nonzero`` (count) and ``rhs_max_rel_diff_vs_deterministic``.

    Raises
    ------
    KeyError for a label of ``order`` not in :data:`VARIANTS`.
    """
    from dycore.assembly.loops import ASSEMBLY
    from dycore.backend.gpu import gpu_backend
    from dycore.backend.timers import StageTimers
    from dycore.checks.operators import inputs_on, random_inputs

    for label in order:
        VARIANTS[label]                                # KeyError naming the label
    loop = ASSEMBLY["momentum"]
    mat = next(o for o in loop.outputs if o.name == "mat")
    rhs_out = next(o for o in loop.outputs if o.name == "rhs")
    host = random_inputs(mesh.nnodes, seed)

    det_b = gpu_backend(assembly="deterministic", block=block, solver_mode="host")
    det = det_b.assembler(mesh, sp, StageTimers())
    args = _momentum_args(inputs_on(det_b, host))
    ref_v, ref_r = (det_b.to_host(a).copy() for a in det.momentum(*args))

    b = gpu_backend(assembly="atomic", block=block, solver_mode="host")
    asm = b.assembler(mesh, sp, StageTimers())
    args = _momentum_args(inputs_on(b, host))
    kernels = {"declared": b.kernels.loops["momentum"],
               "all entries": _compile(b, dense_kernel_body(ASSEMBLY, "momentum"))}

    recorded = {}
    launch = b.launch_loop

    def record(lp, mode, a):
        recorded.update(loop=lp, mode=mode, args=dict(a))
        launch(lp, mode, a)

    b.launch_loop = record                     # the arguments of one assembler call
    try:
        asm.momentum(*args)
    finally:
        del b.launch_loop
    assert recorded["mode"] == ATOMIC, recorded["mode"]

    undeclared = np.ones(mat.block, bool)
    for t in mat.scattered:
        undeclared[t] = False
    nele = mesh.nele
    per_ele = {label: 16 * (len(mat.scattered) if VARIANTS[label] else mat.block_size)
               + 4 * rhs_out.block_size for label in VARIANTS}
    runs, resources = [], {}
    production = b.kernels.loops["momentum"]
    try:
        for label in order:
            b.kernels.loops["momentum"] = kernels[label]
            v, r = (b.to_host(a).copy() for a in asm.momentum(*args))
            kernel = time_gpu(lambda: b.launch_loop(recorded["loop"], ATOMIC, recorded["args"]),
                              repeat, warmup, stream=b.nb_stream)
            call = time_gpu(lambda: asm.momentum(*args), repeat, warmup, stream=b.nb_stream)
            resources[label] = kernel_resources(kernels[label])
            runs.append({
                "variant": label, "kernel": kernel, "call": call,
                "kernel_atomic_gb_s": nele * per_ele[label] * 8 / kernel["median_ms"] / 1e6,
                "max_rel_diff_vs_deterministic": float(np.abs(v - ref_v).max()
                                                       / np.abs(ref_v).max()),
                "rhs_max_rel_diff_vs_deterministic": float(np.abs(r - ref_r).max()
                                                           / np.abs(ref_r).max()),
                "undeclared_nonzero": int(np.count_nonzero(v[:, undeclared])),
            })
    finally:
        b.kernels.loops["momentum"] = production
    describe = getattr(b, "_device_name", lambda: "?")
    return {"mesh": {"tets": int(nele), "nodes": int(mesh.nnodes), "nnz": int(sp.nnz)},
            "device": describe(), "block": block, "repeat": repeat,
            "declared_nonzeros": [list(t) for t in mat.scattered],
            "atomics_per_element": per_ele, "kernel_resources": resources, "runs": runs}
