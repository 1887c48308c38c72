"""dycore.checks.operators: one function returns every assembly operator with its inputs, so an
operator added to the loop table cannot be silently missing from validation and benchmarks."""
import numpy as np
import pytest
from tiny_mesh import tiny_mesh

from dycore.assembly.loops import ASSEMBLY
from dycore.assembly.sparsity import build_sparsity
from dycore.backend.cpu import CPUBackend
from dycore.backend.timers import StageTimers
from dycore.checks.operators import (
    inputs_on, operator_calls, operator_outputs, random_inputs, state_inputs,
)


@pytest.fixture(scope="module")
def mesh_asm():
    mesh = tiny_mesh(3, 3, 2)
    s = build_sparsity(mesh.tets, mesh.nnodes)
    return mesh, s, CPUBackend().assembler(mesh, s, StageTimers())


def test_every_loop_of_the_assembly_table_is_called(mesh_asm):
    mesh, _, asm = mesh_asm
    calls = operator_calls(asm, random_inputs(mesh.nnodes))
    assert {loop for loop, _ in calls.values()} == {loop.name for loop in ASSEMBLY.loops}
    assert list(calls) == ["tracer t", "momentum", "divergence C", "stabilisation K_p",
                           "lumped mass"]


def test_outputs_are_the_direct_calls_bitwise(mesh_asm):
    mesh, s, asm = mesh_asm
    d = random_inputs(mesh.nnodes, seed=3)
    got = operator_outputs(asm, d)
    assert sorted(got) == sorted(["tracer t matrix", "tracer t rhs", "momentum matrix",
                                  "momentum rhs", "divergence C", "det J",
                                  "stabilisation K_p", "lumped mass"])
    t = d["tracers"]["t"]
    fresh = CPUBackend().assembler(mesh, s, StageTimers())
    v, r = fresh.tracer("x", d["u_nl"], t["c_old"], t["src"], d["sigma"], t["c_ref"],
                        (5.0, 5.0, 1.0), 5.0)
    assert np.array_equal(got["tracer t matrix"], v) and np.array_equal(got["tracer t rhs"], r)
    v, r = fresh.momentum(d["u_nl"], d["u_old"], d["buoy"], d["p"], d["sigma"],
                          (10.0, 0.0, 0.0), (5.0, 5.0, 1.0), 1e-4, 5.0)
    assert np.array_equal(got["momentum matrix"], v) and np.array_equal(got["momentum rhs"], r)
    assert got["momentum matrix"].shape == (s.nnz, 3, 3)
    # the lumped masses add up to the volume of the 8 km x 8 km x 4 km box above the mountain
    vol = float(np.sum(got["det J"])) / 6.0
    assert got["lumped mass"].sum() == pytest.approx(vol, rel=1e-12)
    assert 8000.0 * 8000.0 * 3000.0 < vol < 8000.0 * 8000.0 * 4000.0
    # the rhs-only variant leaves the matrix out
    calls = operator_calls(asm, d, want_matrix=False)
    m, r = calls["tracer t"][1]()
    assert m is None and np.array_equal(r, got["tracer t rhs"])


def test_simulator_backend_gives_the_cpu_bits(mesh_asm):
    from dycore.backend.gpu import gpu_backend
    mesh, s, asm = mesh_asm
    d = random_inputs(mesh.nnodes, seed=5)
    ref = operator_outputs(asm, d)
    b = gpu_backend(assembly="deterministic", block=32)
    got = operator_outputs(b.assembler(mesh, s, StageTimers()), inputs_on(b, d))
    assert sorted(got) == sorted(ref)
    for name in ref:
        assert np.array_equal(ref[name], got[name]), name


def test_state_inputs_cover_theta_prime_and_q_v():
    from dycore.config import load_config
    from dycore.timestepping.simulation import build_simulation
    cfg = load_config("configs/mountainwave3d_small.yaml", {
        "mesh": {"nx": 3, "ny": 3, "nz": 2}, "backend": {"name": "cpu"},
        "output": {"progress": False}})
    sim = build_simulation(cfg)
    d = state_inputs(sim)
    assert sorted(d["tracers"]) == ["q_v", "theta_prime"]
    before = {k: np.array(v, copy=True) for k, v in sim.host_fields().items()}
    out = operator_outputs(sim.assembler, d)
    assert {"tracer theta_prime matrix", "tracer q_v rhs", "momentum rhs"} <= set(out)
    # a smooth perturbation of the balanced state: the momentum rhs is not cancellation
    assert np.abs(out["momentum rhs"]).max() > 1.0
    after = sim.host_fields()
    assert all(np.array_equal(before[k], after[k]) for k in before)   # state untouched
