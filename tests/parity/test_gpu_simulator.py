"""GPU kernels vs the CPU path under numba-cuda's simulator (docs/equations.md §7: no FMA there).

Element arrays must be bitwise equal; deterministic assembly bitwise equal; atomic assembly
equal to round-off (summation order differs); one whole time step of the small case bitwise
equal in deterministic mode. Block size 32 so even these small meshes span many blocks.
"""
import os

import numpy as np
import pytest
from tiny_mesh import tiny_mesh

from dycore.assembly.sparsity import build_sparsity
from dycore.backend.cpu import CPUBackend
from dycore.backend.timers import StageTimers


@pytest.fixture(scope="module")
def pair():
    from dycore.backend.gpu import gpu_backend
    mesh = tiny_mesh(4, 4, 3)
    s = build_sparsity(mesh.tets, mesh.nnodes)
    cpu = CPUBackend().assembler(mesh, s, StageTimers())
    det = gpu_backend(assembly="deterministic", block=32).assembler(mesh, s, StageTimers())
    ato = gpu_backend(assembly="atomic", block=32).assembler(mesh, s, StageTimers())
    rng = np.random.default_rng(7)
    n = mesh.nnodes
    inputs = dict(u_nl=rng.standard_normal((n, 3)), u_old=rng.standard_normal((n, 3)),
                  c=rng.standard_normal(n), src=rng.standard_normal(n),
                  sigma=rng.uniform(0, 0.01, n), cref=rng.standard_normal(n),
                  p=rng.standard_normal(n), b=rng.standard_normal(n))
    return mesh, cpu, det, ato, inputs


def test_tracer_kernel_bitwise_and_atomic(pair):
    mesh, cpu, det, ato, d = pair
    args = ("t", d["u_nl"], d["c"], d["src"], d["sigma"], d["cref"], (5.0, 5.0, 1.0), 5.0)
    v0, r0 = (a.copy() for a in cpu.tracer(*args))
    v1, r1 = det.tracer(*args)
    assert np.array_equal(cpu.element_array("tracer", "mat"),
                          det.element_array("tracer", "mat"))            # element matrices
    assert np.array_equal(cpu.element_array("tracer", "rhs"),
                          det.element_array("tracer", "rhs"))            # element rhs
    assert np.array_equal(v0, v1) and np.array_equal(r0, r1)
    v2, r2 = ato.tracer(*args)
    assert np.allclose(v2, v0, rtol=1e-14, atol=1e-14 * np.abs(v0).max())
    assert np.allclose(r2, r0, rtol=1e-14, atol=1e-14 * np.abs(r0).max())
    _, r3 = ato.tracer(*args, want_matrix=False)
    assert np.allclose(r3, r0, rtol=1e-14, atol=1e-14 * np.abs(r0).max())


def test_momentum_kernel_bitwise_and_atomic(pair):
    mesh, cpu, det, ato, d = pair
    args = (d["u_nl"], d["u_old"], d["b"], d["p"], d["sigma"], (10.0, 0.0, 0.0),
            (5.0, 5.0, 1.0), 1e-4, 5.0)
    v0, r0 = (a.copy() for a in cpu.momentum(*args))
    v1, r1 = det.momentum(*args)
    assert np.array_equal(cpu.element_array("momentum", "mat"),
                          det.element_array("momentum", "mat"))
    assert np.array_equal(v0, v1) and np.array_equal(r0, r1)
    v2, r2 = ato.momentum(*args)
    assert np.allclose(v2, v0, rtol=1e-14, atol=1e-14 * np.abs(v0).max())
    assert np.allclose(r2, r0, rtol=1e-14, atol=1e-14 * np.abs(r0).max())


def test_momentum_atomic_skips_only_zero_entries(pair):
    """The atomic momentum scatter adds 5 of 9 entries per 3x3 block (Output.nonzeros): the
    result equals the deterministic ELEMENTS + gather sum (all 9 entries) up to atomic order,
    and the 4 skipped entries are exactly 0.0 there and in the deterministic sum, also when the
    reused values buffer was overwritten in between (the no-normal-flow rotation writes full
    blocks at boundary rows): the assembler zero-fills it before every atomic assembly."""
    from dycore.assembly.loops import MOMENTUM_BLOCK_NONZEROS

    mesh, cpu, det, ato, d = pair
    args = (d["u_nl"], d["u_old"], d["b"], d["p"], d["sigma"], (10.0, 0.0, 0.0),
            (5.0, 5.0, 1.0), 1e-4, 5.0)
    skipped = np.ones((3, 3), bool)
    for t in MOMENTUM_BLOCK_NONZEROS:
        skipped[t] = False
    assert skipped.sum() == 4
    v0 = det.momentum(*args)[0].copy()
    assert np.all(v0[:, skipped] == 0.0) and np.all(v0[:, ~skipped].any(axis=0))
    v2 = ato.momentum(*args)[0]
    v2[:] = np.nan                                  # a dirty buffer, every entry
    v2 = ato.momentum(*args)[0]
    assert np.all(v2[:, skipped] == 0.0)
    np.testing.assert_allclose(v2, v0, rtol=1e-14, atol=1e-14 * np.abs(v0).max())


def test_mesh_only_kernels_bitwise(pair):
    mesh, cpu, det, _, _ = pair
    c0, j0 = cpu.divergence()
    c1, j1 = det.divergence()
    assert np.array_equal(c0, c1) and np.array_equal(j0, j1)
    k0, s0 = cpu.stabilisation()
    k1, s1 = det.stabilisation()
    assert np.array_equal(k0, k1) and np.all(s0 == 0) and np.array_equal(s0, s1)
    assert np.array_equal(cpu.lumped_mass(), det.lumped_mass())


def _tiny_config(**backend):
    from dycore.config import load_config
    here = os.path.dirname(__file__)
    ov = {"mesh": {"nx": 4, "ny": 4, "nz": 3, "dx_min": 8000.0, "dz_min": 2000.0},
          "backend": backend}
    return load_config(os.path.join(here, "..", "..", "configs", "mountainwave3d_small.yaml"), ov)


def test_one_step_gpu_equals_cpu():
    from dycore.timestepping.simulation import build_simulation
    cpu = build_simulation(_tiny_config(name="cpu"))
    det = build_simulation(_tiny_config(name="gpu", assembly="deterministic"))
    ato = build_simulation(_tiny_config(name="gpu", assembly="atomic"))
    for sim in (cpu, det, ato):
        sim.step()
    fc, fd, fa = cpu.host_fields(), det.host_fields(), ato.host_fields()
    assert np.max(np.abs(fc["w"])) > 1e-3                   # something happened
    for k in fc:
        assert np.array_equal(fc[k], fd[k]), k
        scale = max(np.abs(fc[k]).max(), 1e-30)
        assert np.max(np.abs(fc[k] - fa[k])) <= 1e-10 * scale, k


@pytest.mark.parametrize("env, expected", [(None, 0), ("1", 1)])
def test_low_occupancy_warnings_are_off_unless_asked_for(env, expected):
    """Importing the GPU backend turns numba-cuda's small-grid warning off; the user's
    NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS is left to decide (a fresh interpreter each)."""
    import subprocess
    import sys

    environ = {k: v for k, v in os.environ.items() if k != "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"}
    environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if env is not None:
        environ["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = env
    code = ("import dycore.backend.gpu; from numba import config; "
            "print(int(config.CUDA_LOW_OCCUPANCY_WARNINGS))")
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == str(expected)
