"""The backend protocol (dycore/backend/protocol.py): every backend implements it, and the time
step asks nothing of a backend that the protocol does not list.

The second part steps a real (tiny) simulation through a stepper whose backend, vector
operations and linear systems are recording proxies, with the iteration graphs switched on, and
compares the members it touched with the protocol's.
"""
from types import SimpleNamespace

import numpy as np
import pytest

from dycore.backend import protocol as P
from dycore.backend import select_backend
from dycore.backend.cpu import CPUBackend, CPUVectorOps, HostCSR
from dycore.backend.gpu import GPUBackend, SimulatorBackend, gpu_backend
from dycore.backend.gpu_ops import DeviceCSR, GPUVectorOps
from dycore.config import load_config
from dycore.parallel.rank_ops import RankBackend, RankVectorOps
from dycore.timestepping.picard import PicardStepper
from dycore.timestepping.simulation import build_simulation


def members(proto) -> set:
    """The names a Protocol class declares (annotations and methods, its bases' included)."""
    out = set()
    for cls in proto.__mro__:
        if cls.__module__ != P.__name__:
            continue
        out |= set(getattr(cls, "__annotations__", {}))
        out |= {k for k, v in vars(cls).items() if callable(v) and not k.startswith("_")}
    return out


def _csr(backend):
    a = np.array([[2.0, 0.0], [1.0, 3.0]])
    import scipy.sparse as sp
    m = sp.csr_matrix(a)
    return backend.csr(m.data, m.indices, m.indptr, m.shape)


@pytest.fixture(scope="module")
def backends():
    cpu = CPUBackend()
    sim = gpu_backend(solver_mode="device")
    rank = RankBackend(SimpleNamespace(rank=0, size=1), 4)
    return {"cpu": cpu, "simulator": sim, "rank": rank}


def test_protocol_members_are_what_the_docs_say():
    assert members(P.VectorOps) == {
        "axpby", "copy", "multiply", "x_plus_yz", "advection_source", "dirichlet",
        "scatter_fill", "rotate_system", "unrotate", "remove_normal", "max_abs_diff",
        "step_scalars"}
    assert {"xp", "ops", "to_device", "to_host", "capture", "csr", "launch_loop", "gather",
            "zeros", "fill"} <= members(P.Backend)
    assert members(P.DeviceBackend) - members(P.Backend) == {
        "strict", "solver_block", "nb", "launch", "as_device"}


def test_every_backend_implements_the_protocol(backends):
    for name, b in backends.items():
        assert isinstance(b, P.Backend), name
        assert isinstance(b.ops, P.VectorOps), name
        assert isinstance(_csr(b), P.SparseOperator), name
        g = b.capture(lambda: None)
        assert isinstance(g, P.CapturedWork), name
    assert isinstance(backends["simulator"], P.DeviceBackend)
    assert not isinstance(backends["cpu"], P.DeviceBackend)
    assert isinstance(backends["cpu"].ops, CPUVectorOps)
    assert isinstance(backends["rank"].ops, RankVectorOps)
    assert isinstance(backends["simulator"].ops, GPUVectorOps)
    assert isinstance(_csr(backends["cpu"]), HostCSR)
    assert isinstance(_csr(backends["simulator"]), DeviceCSR)


def test_select_backend_returns_the_simulator_backend_explicitly():
    cfg = SimpleNamespace(name="gpu", solver_mode="host", assembly="atomic", strict=False,
                          threads=0, graphs=True)
    b = select_backend(cfg)
    assert type(b) is SimulatorBackend and isinstance(b, GPUBackend)
    assert b.solver_block == 32 and GPUBackend.solver_block == 256
    # a host array is used in place under the simulator (the kernels see in-place updates)
    a = np.arange(3.0)
    assert b.as_device(a, np.float64) is a
    assert b.as_device(a, np.int32).dtype == np.int32


class Recorder:
    """Forwards every attribute to ``target`` and records the names asked for."""

    def __init__(self, target, seen: set, overrides=None):
        object.__setattr__(self, "_t", target)
        object.__setattr__(self, "_seen", seen)
        object.__setattr__(self, "_over", overrides or {})

    def __getattr__(self, name):
        self._seen.add(name)
        if name in self._over:
            return self._over[name]
        return getattr(self._t, name)

    def __setattr__(self, name, value):
        self._seen.add(name)
        if name not in self._over:
            setattr(self._t, name, value)


def test_the_stepper_asks_only_for_protocol_members():
    cfg = load_config("configs/mountainwave3d_small.yaml", {
        "mesh": {"nx": 2, "ny": 2, "nz": 2}, "backend": {"name": "cpu"},
        "output": {"progress": False}})
    sim = build_simulation(cfg)
    ref = build_simulation(cfg)
    st = sim.stepper
    seen_b, seen_ops, seen_sys = set(), set(), set()
    ops = Recorder(sim.backend.ops, seen_ops)
    backend = Recorder(sim.backend, seen_b, {"ops": ops})
    # graph_ready: the iteration graphs capture and replay (a re-issue on the CPU)
    systems = Recorder(st.sys, seen_sys, {"graph_ready": True, "inline": False})
    stepper = PicardStepper(backend, st.asm, st.ops, systems, st.c, st.cfg, st.timers)
    for _ in range(2):
        stepper.step(sim.state)
        ref.step()
    assert seen_b and seen_b <= members(P.Backend), seen_b - members(P.Backend)
    assert seen_b >= {"xp", "ops", "to_device", "to_host", "capture"}
    assert seen_ops <= members(P.VectorOps), seen_ops - members(P.VectorOps)
    assert {"axpby", "dirichlet", "step_scalars", "max_abs_diff"} <= seen_ops
    assert "inline" in seen_sys                       # the iterations were captured
    for name in ("C", "CT", "kmk"):
        assert isinstance(getattr(st.ops, name), P.SparseOperator)
    # the same bits as the Simulation's own stepper (graphs re-issued on the CPU)
    fa, fb = sim.host_fields(), ref.host_fields()
    assert all(np.array_equal(fa[k], fb[k]) for k in fa)


def test_every_backend_member_named_in_the_stepper_source_is_in_the_protocol():
    """Static companion of the recording test (it also sees branches a tiny run skips, such as
    the no-normal-flow rotation): every ``self.b.X`` / ``backend.X`` and ``self.vops.X`` /
    ``v.X`` in dycore/timestepping/picard.py, and every ``self.b.X`` / ``backend.X`` of
    IterationGraphs and of the Assembler."""
    import ast
    import inspect

    from dycore.assembly import assembler
    from dycore.backend import graphs
    from dycore.timestepping import picard

    def names(source_of, owners):
        found = set()
        for node in ast.walk(ast.parse(inspect.getsource(source_of))):
            if isinstance(node, ast.Attribute):
                owner = ast.unparse(node.value)
                if owner in owners:
                    found.add((owner, node.attr))
        return found

    backend = {a for o, a in names(picard, {"self.b", "backend"})}
    backend |= {a for o, a in names(graphs.IterationGraphs, {"self.b"})}
    backend |= {a for o, a in names(assembler.Assembler, {"self.b", "backend"})}
    ops = {a for o, a in names(picard, {"self.vops", "v"})}
    assert backend and backend <= members(P.Backend), backend - members(P.Backend)
    assert ops == members(P.VectorOps), ops ^ members(P.VectorOps)
