"""The benchmark kernels' element loops (the paper's Tables 3–5) in the contract of
:mod:`dycore.assembly.loop_spec`: one loop around ONE :mod:`dycore.fem` element function, or,
for ``ele_val_*``, the gather itself (what Fluidity's ``ele_val`` is).

Per-element inputs and outputs are rows of element arrays (``Row``, kind ``"element"``
outputs) which the CPU driver passes as views ``a[e]`` (``cpu_views``) and the GPU kernel copies
into ``cuda.local.array`` storage and back. The generated drivers are
:mod:`dycore.bench.cpu_loops_gen` and :mod:`dycore.bench.gpu_loops_gen` (``python -m
dycore.assembly.codegen``).
"""
from __future__ import annotations

from dycore.assembly.loop_spec import (
    ElementLoop, Gather, Literal, LoopTable, Output, Row, Scratch, Table,
)
from dycore.assembly.weak_forms import NGI

__all__ = ["BENCH"]


def _gather_only(name, shape, source, out):
    return ElementLoop(name, "", (Gather("field", shape, source),
                                  Output("out", shape, "element", out)),
                       flat=False, cpu_views=True, doc=f"{out}[e, i] = {source}[tets[e, i]]")


BENCH = LoopTable(
    name="dycore.bench.loops.BENCH",
    module="dycore.fem",
    imports=("from dycore.fem import EIG_JACOBI",),
    cpu_path="dycore/bench/cpu_loops_gen.py",
    gpu_path="dycore/bench/gpu_loops_gen.py",
    loops=(
        _gather_only("ele_val_scalar", (4,), "scalar", "ev_scalar"),
        _gather_only("ele_val_vector", (4, 3), "vector", "ev_vector"),
        _gather_only("ele_val_tensor", (4, 3, 3), "tensor_nodal", "ev_tensor"),
        ElementLoop("transform_to_physical", "transform_to_physical",
                    (Gather("X", (4, 3), "coords"),
                     Table("weights", (NGI,), "weights", module_global=False),
                     Output("dshape", (4, 3), "element", "dshape"),
                     Output("detwei", (NGI,), "element", "detwei")),
                    flat=False, cpu_views=True, doc="dshape and detwei of every element"),
        ElementLoop("dshape_tensor_dshape", "dshape_tensor_dshape",
                    (Row("dshape", (4, 3), "dshape"), Row("tensor", (3, 3), "tensor_ele"),
                     Row("detwei", (NGI,), "detwei"), Output("out", (4, 4), "element", "out44")),
                    flat=False, cpu_views=True, doc="int grad N_i . T_e grad N_j"),
        ElementLoop("shape_shape", "shape_shape",
                    (Table("n", (NGI, 4), "n", module_global=False),
                     Row("detwei", (NGI,), "detwei"), Output("out", (4, 4), "element", "out44")),
                    flat=False, cpu_views=True, doc="int N_i N_j"),
        ElementLoop("shape_dshape", "shape_dshape",
                    (Table("n", (NGI, 4), "n", module_global=False),
                     Row("dshape", (4, 3), "dshape"), Row("detwei", (NGI,), "detwei"),
                     Output("out", (3, 4, 4), "element", "out344")),
                    flat=False, cpu_views=True, doc="int N_i dN_j/dx_d"),
        ElementLoop("get_edge_lengths", "get_edge_lengths",
                    (Gather("X", (4, 3), "coords"), Scratch("a6", (6, 6)), Scratch("b6", (6,)),
                     Scratch("x6", (6,)), Scratch("metric", (3, 3)), Scratch("evals", (3,)),
                     Scratch("evecs", (3, 3)), Output("hbar", (3, 3), "element", "hbar"),
                     Literal("method", "EIG_JACOBI")),
                    flat=False, cpu_views=True, doc="element length tensor hbar (Jacobi)"),
    ),
)
