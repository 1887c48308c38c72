"""The assembly's element loops (the contract of :mod:`dycore.assembly.loop_spec`), one per
weak form of :mod:`dycore.assembly.weak_forms`.

The generated drivers are :mod:`dycore.assembly.cpu_loops_gen` (CPU ``prange``) and
:mod:`dycore.backend.gpu_loops_gen` (``@cuda.jit`` bodies); regenerate both after editing this
table with ``python -m dycore.assembly.codegen`` (tests/unit/test_loop_codegen.py fails while
they differ from it).
"""
from __future__ import annotations

from dycore.assembly.loop_spec import (
    ATOMIC, ELEMENTS, SEARCH, Diagonal, ElementLoop, Gather, LoopTable, Output, Result, Scalar,
    Scratch, Table,
)
from dycore.assembly.weak_forms import NGI

__all__ = ["ASSEMBLY", "GEOMETRY", "MOMENTUM_BLOCK_NONZEROS", "TRANSPORT_SCRATCH"]

#: coordinates, quadrature shape values and weights: the first arguments of every weak form
GEOMETRY = (Gather("X", (4, 3), "coords"), Table("n", (NGI, 4), "QUAD_N"),
            Table("weights", (NGI,), "QUAD_W"))
#: scratch of :func:`transport_operator` and its callers
TRANSPORT_SCRATCH = (Scratch("dshape", (4, 3)), Scratch("detwei", (NGI,)),
                     Scratch("gi_a", (NGI,)), Scratch("gi_b", (NGI,)),
                     Scratch("vec_gi", (NGI, 3)), Scratch("m44", (4, 4)), Scratch("l44", (4, 4)))
#: the entries of a momentum 3x3 block that can be nonzero: [[l, -fm, 0], [fm, l, 0], [0, 0, l]]
#: (+ the lumped mass on the diagonal; :func:`momentum_element`). (0,2), (1,2), (2,0), (2,1)
#: are always 0.0, so the atomic scatter adds 80 instead of 144 values per element.
MOMENTUM_BLOCK_NONZEROS = ((0, 0), (0, 1), (1, 0), (1, 1), (2, 2))

ASSEMBLY = LoopTable(
    name="dycore.assembly.loops.ASSEMBLY",
    module="dycore.assembly.weak_forms",
    imports=("from dycore.assembly.weak_forms import QUAD_N, QUAD_W",),
    cpu_path="dycore/assembly/cpu_loops_gen.py",
    gpu_path="dycore/backend/gpu_loops_gen.py",
    loops=(
        ElementLoop(
            "tracer", "tracer_element",
            GEOMETRY + (
                Gather("u_nl", (4, 3), "u_nl"), Gather("c_old", (4,), "c_old"),
                Gather("src", (4,), "src"), Gather("sigma", (4,), "sigma"),
                Gather("c_ref", (4,), "c_ref"), Diagonal("tensor", ("kxx", "kyy", "kzz")),
                Scalar("dt_theta")) + TRANSPORT_SCRATCH + (
                Output("mat", (4, 4), "matrix", "ele_mat", "values", optional=True),
                Output("rhs", (4,), "vector", "ele_rhs", "rhs")),
            Result("detj"), modes=(ATOMIC, ELEMENTS, SEARCH),
            doc="tracer system (M + dt theta L) dc = -L c + int N (src + sigma c_ref)"),
        ElementLoop(
            "momentum", "momentum_element",
            GEOMETRY + (
                Gather("u_nl", (4, 3), "u_nl"), Gather("u_old", (4, 3), "u_old"),
                Gather("buoy", (4,), "buoy"), Gather("p", (4,), "p"),
                Gather("sigma", (4,), "sigma"), Scalar("u_ref0"), Scalar("u_ref1"),
                Scalar("u_ref2"), Diagonal("tensor", ("nuxx", "nuyy", "nuzz")),
                Scalar("f_cor"), Scalar("dt_theta")) + TRANSPORT_SCRATCH + (
                Scratch("d344", (3, 4, 4)),
                Output("mat", (4, 4, 3, 3), "matrix", "ele_mat", "values",
                       nonzeros=MOMENTUM_BLOCK_NONZEROS),
                Output("rhs", (4, 3), "vector", "ele_rhs", "rhs")),
            Result("detj"), modes=(ATOMIC, ELEMENTS),
            doc="momentum system in 3x3 blocks (BCSR) and its rhs"),
        ElementLoop(
            "divergence", "divergence_element",
            GEOMETRY + (Scratch("dshape", (4, 3)), Scratch("detwei", (NGI,)),
                        Scratch("d344", (3, 4, 4)),
                        Output("mat", (4, 4, 3), "matrix", "ele_mat")),
            Result("detj"), doc="volume part of the divergence matrix C (rows: pressure)"),
        ElementLoop(
            "stabilisation", "stabilisation_element",
            (GEOMETRY[0], GEOMETRY[2], Scratch("dshape", (4, 3)), Scratch("detwei", (NGI,)),
             Scratch("a6", (6, 6)), Scratch("b6", (6,)), Scratch("x6", (6,)),
             Scratch("metric", (3, 3)), Scratch("evals", (3,)), Scratch("evecs", (3, 3)),
             Scratch("hbar", (3, 3)), Output("mat", (4, 4), "matrix", "ele_mat")),
            Result("status"), doc="pressure stabilisation 1/2 int grad psi^T hbar grad psi"),
        ElementLoop(
            "lumped_mass", "lumped_mass_element",
            GEOMETRY + (Scratch("dshape", (4, 3)), Scratch("detwei", (NGI,)),
                        Output("vec", (4,), "vector", "ele_vec")),
            Result("detj"), doc="lumped mass int N_i"),
    ),
)
