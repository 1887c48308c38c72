"""The moisture tracers issued on a fork/join branch (:mod:`dycore.backend.streams`).

On a GPU they run on a second stream beside the momentum predictor; that is only right if,
between the fork and the join, the main stream neither reads what the branch writes nor
overwrites what it reads. :class:`DeferredBranch` issues the branch's work at the join, the
latest point that contract allows: the fields must come out bit for bit as with the work issued
in order (:class:`InlineBranch`) — on the CPU and on the device step under the simulator
(graph-replayed iterations, device solvers, deterministic assembly), with q_c made active so
that the branch holds several tracers, and with θ′ and q of different diffusivities (each tracer
then assembles its own matrix on the branch).
"""
import numpy as np
import pytest

from dycore.backend.streams import DeferredBranch, InlineBranch
from dycore.config import load_config
from dycore.timestepping.simulation import build_simulation


def _run(backend, branch, kappa_q=None, steps=2, cells=(3, 2, 2), rtol=None):
    over = {"mesh": dict(zip(("nx", "ny", "nz"), cells)), "backend": backend,
            "output": {"progress": False}}
    if kappa_q is not None:
        over["physics"] = {"kappa_q_h": kappa_q}
    if rtol is not None:
        over["solvers"] = {name: {"rtol": rtol} for name in ("pressure", "momentum", "tracer")}
    sim = build_simulation(load_config("configs/mountainwave3d_small.yaml", over))
    f = sim.host_fields()
    x = sim.mesh.coords[:, 0]
    f["q_c"] = 1e-4 * np.exp(-(x / 2000.0) ** 2)          # a cloud blob: q_c is solved too
    sim.load_state(f, sim.state.t)
    sim.stepper.branch = branch
    for _ in range(steps):
        sim.step()
    assert sim.stepper._inactive == frozenset({"q_r"})
    return sim.host_fields()


def _same(a, b):
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert np.any(a["q_c"] != 0.0) and np.any(a["q_v"] != 0.0)


@pytest.mark.parametrize("kappa_q", [None, 3.0])
def test_cpu_step_same_bits_with_the_branch_issued_at_the_join(kappa_q):
    cpu = {"name": "cpu"}
    _same(_run(cpu, InlineBranch(), kappa_q), _run(cpu, DeferredBranch(), kappa_q))


def test_device_step_same_bits_with_the_branch_issued_at_the_join():
    # deterministic assembly: atomic adds from the simulator's threads sum in any order
    # and, for the simulator's sake (11 min otherwise), 2 x 2 x 2 cells and rtol 1e-6: the
    # tracers still iterate (14 BiCGStab iterations a step) and the second step replays
    gpu = {"name": "gpu", "solver_mode": "device", "assembly": "deterministic"}
    small = {"steps": 2, "cells": (2, 2, 2), "rtol": 1e-6}
    _same(_run(gpu, InlineBranch(), **small), _run(gpu, DeferredBranch(), **small))


def test_cpu_and_simulator_backends_issue_in_order():
    from dycore.backend.cpu import CPUBackend
    from dycore.backend.gpu import gpu_backend
    assert type(CPUBackend().branch()) is InlineBranch
    assert type(gpu_backend(solver_mode="device").branch()) is InlineBranch
