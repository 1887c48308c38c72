"""A whole Picard step with device solvers (simulator) against the same step with host solvers.

Checks the fields after two steps (the solvers differ — BiCGStab vs GMRES, Chebyshev V-cycle vs
PyAMG's — so they agree to the solver tolerance, not bitwise) and what the second step issues,
counted by the backend: each Picard iteration is one graph replay (assembly, boundary rows,
solves, updates captured once), a handful of Python launches, three host synchronisations.
"""
import numpy as np
import pytest

from dycore.config import load_config
from dycore.timestepping.simulation import build_simulation


def _sim(mode):
    backend = {"name": "cpu"} if mode == "cpu" else {"name": "gpu", "solver_mode": mode}
    cfg = load_config("configs/mountainwave3d_small.yaml", {
        "mesh": {"nx": 2, "ny": 2, "nz": 2}, "backend": backend, "output": {"progress": False}})
    return build_simulation(cfg)


@pytest.fixture(scope="module")
def two_steps():
    out = {}
    for mode in ("device", "host", "cpu"):
        sim = _sim(mode)
        sim.step()
        before = sim.backend.counters.snapshot()
        diag = sim.step()
        after = sim.backend.counters.snapshot()
        out[mode] = (sim, diag, {k: after[k] - before[k] for k in before})
    return out


def test_device_step_fields_match_host_solvers_and_the_cpu(two_steps):
    fd = two_steps["device"][0].host_fields()
    fh = two_steps["host"][0].host_fields()
    fc = two_steps["cpu"][0].host_fields()
    for name in fd:
        scale = np.abs(fc[name]).max()
        assert np.abs(fh[name] - fc[name]).max() <= 1e-13 * scale + 1e-15, name
        scale = np.abs(fh[name]).max()
        assert np.abs(fd[name] - fh[name]).max() <= 1e-7 * scale + 1e-14, name
    dd, dh = two_steps["device"][1], two_steps["host"][1]
    assert dd["max_abs_w"] == pytest.approx(dh["max_abs_w"], rel=1e-7)
    assert dd["solver_iterations_pressure"] > 0 and dd["solver_iterations_momentum"] > 0


def test_device_step_issues_few_launches_and_syncs(two_steps):
    counts = two_steps["device"][2]
    assert counts["graph_replays"] == 4    # one per Picard iteration, end-of-step scalars, commit
    assert counts["syncs"] == 3            # Picard test, end-of-step scalars, solver statistics
    assert counts["launches"] <= 3         # statistics reset
    assert counts["graph_kernels"] > 20 * counts["launches"]   # the solves run inside graphs


def _deterministic_device_sim(graphs: bool = True, **sections):
    """The 2×2×2 small mesh with device solvers and deterministic assembly (reproducible
    bits: atomic adds from the simulator's threads sum in whatever order the threads take, which
    another process on the same cores changes), the config sections ``sections`` merged in."""
    return build_simulation(load_config("configs/mountainwave3d_small.yaml", {
        "mesh": {"nx": 2, "ny": 2, "nz": 2}, **sections,
        "backend": {"name": "gpu", "solver_mode": "device", "assembly": "deterministic",
                    "graphs": graphs},
        "output": {"progress": False}}))


def _two_steps(sim):
    """(fields, diagnostics of each step) after two steps of ``sim``."""
    diags = [sim.step(), sim.step()]
    return sim.host_fields(), diags


@pytest.fixture(scope="module")
def reference_steps():
    """Two deterministic steps with the defaults — lean momentum products (f = 0, the cases'
    default), the speculative Picard iteration, tolerance 1e-10 — the reference that each
    test below changes one thing against (one run shared: a simulator step takes minutes)."""
    sim = _deterministic_device_sim()
    assert sim.config.physics.coriolis_f == 0.0 and sim.config.time.picard_tolerance == 1e-10
    assert sim.stepper.speculate and sim.systems.lean_momentum
    fields, diags = _two_steps(sim)
    blocks = [m.lean_blocks for _, m in sim.systems._matrices.values() if m.bs == 3]
    assert len(blocks) == 1 and blocks[0].ncomp == 3
    assert 0 < blocks[0].nfull < blocks[0].nnzb             # rotated blocks read in full
    return fields, diags


def test_lean_momentum_products_leave_the_step_bitwise(reference_steps):
    """The momentum solves' products over lean blocks (the diagonal entries, the no-normal-flow
    rotated blocks in full; f = 0, the cases' default) give the full products' bits: two steps
    with and without them, the same fields and iteration counts. (With Coriolis entries:
    tests/parity/test_device_solvers.py, kernel by kernel.)"""
    sim = _deterministic_device_sim()
    sim.systems.set_products(lean=False)
    fields, diags = _two_steps(sim)
    assert [m.lean_blocks for _, m in sim.systems._matrices.values() if m.bs == 3] == [None]
    lean_fields, lean_diags = reference_steps
    its = [d["solver_iterations_momentum"] for d in diags]
    assert its == [d["solver_iterations_momentum"] for d in lean_diags] and its[0] > 0
    for name in lean_fields:
        assert np.array_equal(lean_fields[name], fields[name]), name


def test_graph_replays_equal_direct_launches_bitwise(reference_steps):
    """backend.graphs: false launches the same kernels in the same order from Python: the
    fields and diagnostics of the reference run's graph replays."""
    sim = _deterministic_device_sim(graphs=False)
    first = sim.step()
    before = sim.backend.counters.snapshot()
    second = sim.step()
    after = sim.backend.counters.snapshot()
    fields, diags = reference_steps
    direct = sim.host_fields()
    for name in fields:
        assert np.array_equal(fields[name], direct[name]), name
    assert [first, second] == diags
    assert after["graph_replays"] == before["graph_replays"]
    assert after["launches"] - before["launches"] > 250     # (q_c, q_r skipped)


@pytest.mark.parametrize("tolerance", [1e-10, 1e3])
def test_speculative_picard_iteration_gives_the_in_order_bits(tolerance, reference_steps):
    """Iteration k+1 issued before iteration k's change is read: the same fields and
    diagnostics as issuing it after the read — also when the change is below the tolerance
    (1e3 m/s: every step stops after one iteration, whose fields the speculative second
    iteration overwrote and which is issued again). (Speculative at 1e-10: the shared
    reference run.)"""
    out = [reference_steps] if tolerance == 1e-10 else []
    for speculate in ((False,) if tolerance == 1e-10 else (True, False)):
        sim = _deterministic_device_sim(time={"picard_tolerance": tolerance})
        assert sim.stepper.speculate                   # the default with device solvers
        sim.stepper.speculate = speculate
        out.append(_two_steps(sim))
    for name in out[0][0]:
        assert np.array_equal(out[0][0][name], out[1][0][name]), name
    for d_spec, d_order in zip(out[0][1], out[1][1]):
        assert d_spec == d_order
        assert d_spec["picard_iterations"] == (1 if tolerance > 1 else 2)
