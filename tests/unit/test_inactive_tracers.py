"""Tracers that are zero everywhere with a zero reference (q_c, q_r of the mountain wave) are
not assembled or solved: the run gives the same bits and iteration counts as solving them, and
a state written by ``load_state`` with such a tracer non-zero brings it back into the step."""
import numpy as np
import pytest

import dycore
from dycore.physics.state import TRACERS

CONFIG = "configs/mountainwave3d_small.yaml"
MESH = {"nx": 4, "ny": 4, "nz": 3}


def _sim(skip: bool):
    sim = dycore.Simulation(dycore.load_config(CONFIG, mesh=dict(MESH)))
    sim.stepper.skip_inactive_tracers = skip
    return sim


def _fields(sim):
    f = sim.host_fields()
    return {k: np.array(v) for k, v in f.items()}


@pytest.fixture(scope="module")
def pair():
    a, b = _sim(True), _sim(False)
    ia, ib = [], []
    for _ in range(3):
        ia.append(a.stepper.step(a.state).iterations)
        ib.append(b.stepper.step(b.state).iterations)
    return a, b, ia, ib


def test_the_dry_case_skips_q_c_and_q_r_with_the_same_bits(pair):
    a, b, ia, ib = pair
    assert a.stepper._inactive == frozenset({"q_c", "q_r"})
    assert b.stepper._inactive == frozenset()
    assert ia == ib                               # iteration counts, tracer solves included
    fa, fb = _fields(a), _fields(b)
    for name in fa:
        assert np.array_equal(fa[name], fb[name]), name
    assert not np.any(fa["q_c"]) and np.any(fa["q_v"] != 0.0)
    assert a.timers.as_dict().get("solve tracer q_c") is None
    assert b.timers.as_dict().get("solve tracer q_c") is not None


def test_load_state_with_a_nonzero_tracer_brings_it_back(pair):
    a, b, _, _ = pair
    for sim in (a, b):
        f = _fields(sim)
        x = sim.mesh.coords[:, 0]
        f["q_c"] = 1e-4 * np.exp(-(x / 2000.0) ** 2)      # a cloud blob
        sim.load_state(f, sim.state.t)
        sim.stepper.step(sim.state)
    assert a.stepper._inactive == frozenset({"q_r"})
    fa, fb = _fields(a), _fields(b)
    for name in ("u", "p", "theta_prime", *TRACERS):
        assert np.array_equal(fa[name], fb[name]), name
    assert np.any(fa["q_c"] != 0.0)
