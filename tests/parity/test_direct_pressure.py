"""``solvers.pressure.method: direct``: the constant pressure matrix factorised once per run.

Under numba-cuda's simulator the device systems factorise with SuperLU (cuDSS needs a GPU); the
step is the graph-replayed device step with the pressure solve swapped. The fields after two
steps agree with the CG runs to the solvers' tolerance (a direct solve is exact to round-off,
CG stops at rtol 1e-10), the host solver mode's direct solve agrees with the device one, and a
step still issues one replay per Picard iteration and three host syncs.
"""
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from dycore.config import load_config
from dycore.errors import ConfigError, SolverDivergedError
from dycore.solvers.direct import CudssDirect, HostDirect, check_factorisation
from dycore.timestepping.simulation import build_simulation


def _sim(mode, method):
    backend = {"name": "cpu"} if mode == "cpu" else {"name": "gpu", "solver_mode": mode}
    cfg = load_config("configs/mountainwave3d_small.yaml", {
        "mesh": {"nx": 2, "ny": 2, "nz": 2}, "backend": backend, "output": {"progress": False},
        "solvers": {"pressure": {"method": method}}})
    return build_simulation(cfg)


@pytest.fixture(scope="module")
def runs():
    out = {}
    for mode, method in (("device", "direct"), ("device", "cg"), ("cpu", "direct"),
                         ("cpu", "cg")):
        sim = _sim(mode, method)
        sim.step()
        before = sim.backend.counters.snapshot()
        diag = sim.step()
        after = sim.backend.counters.snapshot()
        out[mode, method] = (sim, diag, {k: after[k] - before[k] for k in before})
    return out


def test_direct_pressure_matches_cg_to_the_solver_tolerance(runs):
    for mode in ("device", "cpu"):
        fd, fc = (runs[mode, m][0].host_fields() for m in ("direct", "cg"))
        for name in fd:
            scale = np.abs(fc[name]).max()
            assert np.abs(fd[name] - fc[name]).max() <= 1e-8 * scale + 1e-14, (mode, name)
            assert np.all(np.isfinite(fd[name]))
        assert not all(np.array_equal(fd[n], fc[n]) for n in fd)    # a different solve ran
    # device direct (SuperLU under the simulator, BiCGStab elsewhere) against the CPU's
    fdev, fcpu = runs["device", "direct"][0].host_fields(), runs["cpu", "direct"][0].host_fields()
    for name in fdev:
        scale = np.abs(fcpu[name]).max()
        assert np.abs(fdev[name] - fcpu[name]).max() <= 1e-7 * scale + 1e-14, name


def test_direct_pressure_counts_no_iterations_and_keeps_the_step_graphs(runs):
    sim, diag, counts = runs["device", "direct"]
    assert sim.systems.pcg is None and sim.systems.direct.residual < 1e-12
    assert diag["solver_iterations_pressure"] == 0 and diag["solver_iterations_momentum"] > 0
    assert counts["graph_replays"] == 4 and counts["syncs"] == 3   # 2 iterations, scalars, commit
    assert runs["cpu", "direct"][1]["solver_iterations_pressure"] == 0
    assert runs["cpu", "cg"][1]["solver_iterations_pressure"] > 0


def test_host_direct_solves_and_checks_its_factorisation():
    n = 50
    lap = sp.diags([-np.ones(n - 1), 2.0 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1]).tocsr()
    b, x = np.arange(1.0, n + 1), np.zeros(n)
    d = HostDirect(lap, b, x)
    d.solve()
    np.testing.assert_allclose(lap @ x, b, rtol=1e-12)
    assert d.fill >= lap.nnz and d.residual < 1e-13
    assert check_factorisation(lap, lambda r: np.linalg.solve(lap.toarray(), r), 1e-10) < 1e-12


def test_singular_or_inaccurate_factorisation_is_refused():
    n = 20          # the unpinned Neumann Laplacian: singular
    lap = sp.diags([-np.ones(n - 1), np.r_[1.0, 2.0 * np.ones(n - 2), 1.0], -np.ones(n - 1)],
                   [-1, 0, 1]).tocsr()
    with pytest.raises(SolverDivergedError, match="method: cg"):
        HostDirect(lap, np.zeros(n), np.zeros(n))
    with pytest.raises(SolverDivergedError, match="relative residual"):
        check_factorisation(sp.identity(n, format="csr"), lambda r: 1.001 * r, 1e-10)


def test_missing_cudss_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvmath", None)
    with pytest.raises(ConfigError, match="nvmath-python"):
        CudssDirect(object(), sp.identity(3, format="csr"), None, None)


def test_direct_is_for_the_pressure_matrix_only():
    with pytest.raises(ConfigError, match="solvers.momentum.method"):
        load_config("configs/mountainwave3d_small.yaml",
                    {"solvers": {"momentum": {"method": "direct"}}})


def test_the_cudss_ordering_comes_from_the_setup_cache(tmp_path, monkeypatch):
    """On a GPU the first factorisation stores its ordering and partition tree; the next run's
    passes both back (a stand-in for cuDSS records what it was given)."""
    import types

    import dycore.solvers.device as device
    from dycore.backend.timers import StageTimers
    from dycore.io.setup_cache import SetupCache

    given = []

    class FakeCudss:
        def __init__(self, perm, tree):
            self.perm, self.tree = perm, tree

        def permutation(self):
            return np.arange(5, dtype=np.int32)[::-1]

        def partition_tree(self):
            return np.arange(12, dtype=np.uint8)

    def fake_direct_solver(backend, a, b, x, rtol, perm=None, tree=None):
        given.append((perm, tree))
        return FakeCudss(perm, tree)

    monkeypatch.setattr(device, "on_gpu", lambda backend: True)
    monkeypatch.setattr(device, "direct_solver", fake_direct_solver)
    cfg = types.SimpleNamespace(pressure=types.SimpleNamespace(rtol=1e-10))
    ops = types.SimpleNamespace(pressure_host=None)
    for run in range(2):
        cache = SetupCache(tmp_path, (np.arange(3.0),), {"k": 1})
        stub = types.SimpleNamespace(b=None, b_arr=None, x_arr=None, timers=StageTimers())
        d = device.DeviceSystems._factorise(stub, ops, cfg, cache)
        assert (cache.misses, cache.hits) == ((["cudss-ordering-tree"], []) if run == 0
                                              else ([], ["cudss-ordering-tree"]))
    assert given[0] == (None, None) and len(given) == 2
    assert np.array_equal(given[1][0], [4, 3, 2, 1, 0])
    assert np.array_equal(given[1][1], np.arange(12)) and given[1][1].dtype == np.uint8
    assert np.array_equal(d.perm, [4, 3, 2, 1, 0]) and np.array_equal(d.tree, np.arange(12))


def test_the_cudss_tree_parameter_follows_the_bindings():
    """cuDSS 0.8 calls it ND_PARTITION_TREE, 0.7 ELIMINATION_TREE; without either: None."""
    import types

    from dycore.solvers.direct import _tree_param
    new = types.SimpleNamespace(DataParam=types.SimpleNamespace(
        ND_PARTITION_TREE=22, USER_ND_PARTITION_TREE=21))
    old = types.SimpleNamespace(DataParam=types.SimpleNamespace(
        ELIMINATION_TREE=21, USER_ELIMINATION_TREE=20))
    assert (_tree_param(new, False), _tree_param(new, True)) == (22, 21)
    assert (_tree_param(old, False), _tree_param(old, True)) == (21, 20)
    assert _tree_param(types.SimpleNamespace(DataParam=types.SimpleNamespace()), True) is None


def test_the_cudss_threading_layer_is_found_beside_cudss(tmp_path, monkeypatch):
    """CUDSS_THREADING_LIB wins (``off``: none); else the layer in the nvidia package's lib."""
    import types

    from dycore.solvers.direct import threading_layer
    lib = tmp_path / "cu13" / "lib"
    lib.mkdir(parents=True)
    monkeypatch.setitem(sys.modules, "nvidia", types.SimpleNamespace(__path__=[str(tmp_path)]))
    monkeypatch.delenv("CUDSS_THREADING_LIB", raising=False)
    assert threading_layer() is None                        # cuDSS without the layer
    (lib / "libcudss_mtlayer_gomp.so.0").write_bytes(b"")
    assert threading_layer() == str(lib / "libcudss_mtlayer_gomp.so.0")
    monkeypatch.setenv("CUDSS_THREADING_LIB", "off")
    assert threading_layer() is None
    monkeypatch.setenv("CUDSS_THREADING_LIB", "/opt/x/libcudss_mtlayer_gomp.so")
    assert threading_layer() == "/opt/x/libcudss_mtlayer_gomp.so"
