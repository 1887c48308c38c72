"""The fem parity loops of tests/unit/test_fem_cuda_sim.py, in the contract of
:mod:`dycore.assembly.loop_spec`: one loop per :mod:`dycore.fem` element function, every input
a row of a per-thread array (``Row``), inputs copied into local storage (``cpu_views=False``:
solve6 and eig3 overwrite their inputs).

The table is a test's, so its kernels are rendered at test time (:func:`gpu_module`, through
:func:`dycore.assembly.codegen.render_gpu`) into a temporary module instead of living in the
package; the tests' CPU side calls the element functions directly.
"""
from __future__ import annotations

import atexit
import importlib.util
import shutil
import tempfile
from functools import cache
from pathlib import Path

from dycore.assembly.codegen import render_gpu
from dycore.assembly.loop_spec import (
    ElementLoop, LoopTable, Output, Result, Row, Scalar, Scratch, Table,
)
from dycore.fem.quadrature import get_quadrature

__all__ = ["FEM_CHECKS", "gpu_module"]

NGI = get_quadrature(4).weights.shape[0]    #: the Keast rule of the physics
_N = Table("n", (NGI, 4), "n", module_global=False)
_DSHAPE, _DETWEI = Row("dshape", (4, 3), "dshape_all"), Row("detwei", (NGI,), "detwei_all")


def _loop(name, args, result=None, doc=""):
    return ElementLoop(name, name, args, result, flat=False, cpu_views=False, doc=doc)


def _integral(name, args, out_shape, out):
    return _loop(name, args + (Output("out", out_shape, "element", out),), doc=name)


FEM_CHECKS = LoopTable(
    name="tests/fem_loops.py FEM_CHECKS",
    module="dycore.fem",
    cpu_path="",                # the tests compare with direct calls of the functions
    gpu_path="",                # rendered at test time: gpu_module()
    loops=(
        _loop("transform_to_physical",
              (Row("X", (4, 3), "X_all"), Table("weights", (NGI,), "weights", False),
               Output("dshape", (4, 3), "element", "dshape_all"),
               Output("detwei", (NGI,), "element", "detwei_all")),
              Result("detj_all"), "dshape, detwei and det J per element"),
        _integral("ele_val_at_quad", (_N, Row("ele_val", (4,), "f_all")), (NGI,), "f_gi_all"),
        _integral("ele_vector_at_quad", (_N, Row("ele_val", (4, 3), "u_all")), (NGI, 3),
                  "u_gi_all"),
        _integral("shape_shape", (_N, _DETWEI), (4, 4), "mass_all"),
        _integral("shape_dshape", (_N, _DSHAPE, _DETWEI), (3, 4, 4), "sd_all"),
        _integral("dshape_shape", (_N, _DSHAPE, _DETWEI), (3, 4, 4), "ds_all"),
        _integral("dshape_tensor_dshape", (_DSHAPE, Row("tensor", (3, 3), "tensor_all"),
                                           _DETWEI), (4, 4), "k_all"),
        _integral("shape_vector_dot_dshape",
                  (_N, _DSHAPE, Row("u_gi", (NGI, 3), "u_gi_all"), _DETWEI), (4, 4), "adv_all"),
        _integral("shape_rhs", (_N, Row("f_gi", (NGI,), "f_gi_all"), _DETWEI), (4,), "rhs_all"),
        _integral("shape_vector_rhs", (_N, Row("v_gi", (NGI, 3), "u_gi_all"), _DETWEI), (4, 3),
                  "vrhs_all"),
        _loop("solve6", (Row("a", (6, 6), "a_all"), Row("b", (6,), "b_all"),
                         Output("x", (6,), "element", "x_all")),
              Result("status_all"), "6x6 solve (a, b overwritten: copied in)"),
        _loop("eig3_jacobi", (Row("a", (3, 3), "A_all"), Output("evals", (3,), "element",
                                                                "evals_all"),
                              Output("evecs", (3, 3), "element", "evecs_all")),
              Result("ret_all"), "3x3 symmetric eigensolver, Jacobi"),
        _loop("eig3_closed_form", (Row("a", (3, 3), "A_all"), Output("evals", (3,), "element",
                                                                     "evals_all"),
                                   Output("evecs", (3, 3), "element", "evecs_all")),
              Result("ret_all"), "3x3 symmetric eigensolver, closed form"),
        _loop("get_edge_lengths",
              (Row("X", (4, 3), "X_all"), Scratch("a6", (6, 6)), Scratch("b6", (6,)),
               Scratch("x6", (6,)), Output("metric", (3, 3), "element", "metric_all"),
               Output("evals", (3,), "element", "evals_all"),
               Output("evecs", (3, 3), "element", "evecs_all"),
               Output("hbar", (3, 3), "element", "hbar_all"), Scalar("method")),
              Result("status_all"), "edge-length metric and length tensor"),
    ),
)



@cache
def gpu_module():
    """The kernel bodies of :data:`FEM_CHECKS` (``KERNELS``: loop name -> plain function),
    rendered now and imported from a temporary file (a real file, so tracebacks and the
    simulator show the generated lines)."""
    folder = Path(tempfile.mkdtemp(prefix="dycore_fem_loops_"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "fem_gpu_loops_gen.py"
    path.write_text(render_gpu(FEM_CHECKS), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("fem_gpu_loops_gen", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
