"""Every element loop of the assembly table: generated CPU driver = generated GPU kernel, bit
for bit, under numba-cuda's simulator (no FMA there).

PARITY is the parity table: one entry per loop of ``dycore.assembly.loops.ASSEMBLY`` giving the
scalar arguments to use and the dtype of the loop's result; the arrays are random nodal fields
on the tiny mesh, built from the loop's own declarations. A loop added to the table without an
entry here fails ``test_every_loop_has_a_parity_entry``.
"""
import numpy as np
import pytest
from tiny_mesh import tiny_mesh

from dycore.assembly.loop_spec import ELEMENTS, Diagonal, Gather, Row, Scalar, Table
from dycore.assembly.loops import ASSEMBLY
from dycore.backend.cpu import CPUBackend

#: loop name -> (scalar arguments by parameter name, result dtype)
PARITY = {
    "tracer": ({"kxx": 5.0, "kyy": 4.0, "kzz": 1.5, "dt_theta": 5.0}, np.float64),
    "momentum": ({"u_ref0": 10.0, "u_ref1": -1.0, "u_ref2": 0.5, "nuxx": 5.0, "nuyy": 4.0,
                  "nuzz": 1.5, "f_cor": 1e-4, "dt_theta": 5.0}, np.float64),
    "divergence": ({}, np.float64),
    "stabilisation": ({}, np.int64),
    "lumped_mass": ({}, np.float64),
}


def test_every_loop_has_a_parity_entry():
    assert sorted(PARITY) == sorted(loop.name for loop in ASSEMBLY.loops)


def _args(loop, mesh, rng):
    """Named arguments of ``loop``: the mesh, random fields of the declared shapes, the
    table's scalars, zeroed element arrays and result."""
    scalars, rdtype = PARITY[loop.name]
    args = {"tets": mesh.tets.astype(np.int32), "coords": mesh.coords.copy()}
    for a in loop.args:
        if isinstance(a, Gather) and a.source not in args:
            args[a.source] = rng.standard_normal((mesh.nnodes, *a.shape[1:]))
        elif isinstance(a, Row):
            args[a.source] = rng.standard_normal((mesh.nele, *a.shape))
        elif isinstance(a, Table) and not a.module_global:
            args[a.source] = rng.standard_normal(a.shape)
        elif isinstance(a, Scalar):
            args[a.param] = scalars[a.param]
        elif isinstance(a, Diagonal):
            args.update({p: scalars[p] for p in a.params})
    for o in loop.outputs:
        args[o.elements] = np.zeros((mesh.nele, *o.shape))
        if o.target:
            args[o.target] = np.zeros(1)
            args[f"want_{o.name}"] = True
    if loop.result:
        args[loop.result.target] = np.zeros(mesh.nele, dtype=rdtype)
    args.update(lookup=np.zeros((1, 4, 4), np.int32), indptr=np.zeros(2, np.int32),
                indices=np.zeros(1, np.int32))
    return args


@pytest.mark.parametrize("name", sorted(PARITY))
def test_loop_cpu_equals_gpu_bitwise(name):
    from dycore.backend.gpu import gpu_backend

    loop, mesh = ASSEMBLY[name], tiny_mesh(4, 2, 2)
    cpu_args = _args(loop, mesh, np.random.default_rng(5))
    gpu_args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in cpu_args.items()}
    CPUBackend().launch_loop(loop, ELEMENTS, cpu_args)
    gpu_backend(block=32).launch_loop(loop, ELEMENTS, gpu_args)
    for o in loop.outputs:
        assert np.all(np.isfinite(cpu_args[o.elements])), o.name
        assert np.abs(cpu_args[o.elements]).max() > 0.0, o.name     # something was written
        assert np.array_equal(cpu_args[o.elements], gpu_args[o.elements]), o.name
    if loop.result:
        r = loop.result.target
        assert np.array_equal(cpu_args[r], gpu_args[r])
        if r == "detj":
            assert np.all(cpu_args[r] > 0.0)                          # positively oriented


def test_cpu_backend_refuses_atomic_rules():
    from dycore.assembly.loop_spec import ATOMIC

    with pytest.raises(ValueError, match="tracer"):
        CPUBackend().launch_loop(ASSEMBLY["tracer"], ATOMIC, {})
