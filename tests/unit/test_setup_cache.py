"""The on-disk set-up cache (dycore.io.setup_cache): a second build loads what the first stored,
bit for bit; anything that changes the set-up changes the key; a damaged file is rebuilt."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse as sp

import dycore
from dycore.io.setup_cache import SetupCache, cache_directory
from dycore.solvers.amg import HostHierarchy
from dycore.timestepping.simulation import Simulation

MESH = {"nx": 4, "ny": 4, "nz": 2}


def _config(**more):
    return dycore.load_config("configs/mountainwave3d_small.yaml", mesh=dict(MESH), **more)


def _operator_arrays(sim) -> dict:
    ops, b = sim.ops, sim.backend
    out = {"ml": b.to_host(ops.ml), "ml_inv_u": b.to_host(ops.ml_inv_u),
           "pressure": ops.pressure_host.toarray(), "dir_row_pos": b.to_host(ops.dir_row_pos),
           "dir_diag_pos": b.to_host(ops.dir_diag_pos), "pin": ops.pin,
           "detj_min": ops.detj_min}
    for f in ("indptr", "indices", "lookup", "contrib_ptr", "contrib", "row_of",
              "node_contrib_ptr", "node_contrib"):
        out[f] = getattr(sim.sparsity, f)
    return out


@pytest.mark.slow
def test_second_build_loads_bitwise_and_steps_identically(tmp_path):
    plain = Simulation(_config(), setup_cache=False)
    first = Simulation(_config(), setup_cache=tmp_path)
    assert first.setup_cache.misses == ["mesh", "sparsity", "operators"]
    assert not first.setup_cache.hits
    second = Simulation(_config(), setup_cache=tmp_path)
    assert second.setup_cache.hits == ["mesh", "sparsity", "operators"]
    assert not second.setup_cache.misses
    assert first.setup_cache.key == second.setup_cache.key
    timers = second.timers.as_dict()
    assert "integrate stabilisation K_p" not in timers            # nothing integrated again
    assert "mesh generation" not in timers and "set-up cache: load mesh" in timers
    assert "set-up cache: load mesh operators" in timers
    ref = _operator_arrays(plain)
    for sim in (first, second):
        got = _operator_arrays(sim)
        for name, value in ref.items():
            assert np.array_equal(np.asarray(got[name]), np.asarray(value)), name
    for sim in (plain, second):
        sim.step()
        sim.step()
    a, b = plain.host_fields(), second.host_fields()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def test_the_key_follows_what_the_set_up_depends_on(tmp_path):
    base = Simulation(_config(), setup_cache=tmp_path).setup_cache.key
    same = Simulation(_config(**{"physics.nu_h": 7.0, "time.dt": 5.0,
                                 "solvers.pressure.rtol": 1e-8}),
                      setup_cache=tmp_path).setup_cache.key
    assert same == base                          # viscosity, dt, tolerances: not in the set-up
    for over in ({"physics.stabilisation": 0.5}, {"physics.no_normal_flow": "weak"},
                 {"mesh.dz_min": 120.0}, {"solvers.pressure.preconditioner": "jacobi"}):
        assert Simulation(_config(**over), setup_cache=tmp_path).setup_cache.key != base, over


def test_a_generated_mesh_is_cached_under_its_configuration(tmp_path):
    """The mesh comes back bit for bit; its key follows the mesh section and the case's
    parameters (not the physics); a mesh read from a file is not cached."""
    import dataclasses

    from dycore.io.setup_cache import mesh_cache
    from dycore.mesh.mesh import Mesh

    cfg = _config()
    sim = Simulation(cfg, setup_cache=tmp_path)
    fresh = Simulation(cfg, setup_cache=False).mesh
    cache = mesh_cache(tmp_path, cfg, sim.params)
    stored = Mesh(**cache.load("mesh"))
    for f in dataclasses.fields(Mesh):
        a, b = getattr(stored, f.name), getattr(fresh, f.name)
        assert a.dtype == b.dtype and np.array_equal(a, b), f.name
    key = cache.key
    assert mesh_cache(tmp_path, _config(**{"physics.nu_h": 7.0}), sim.params).key == key
    finer = dycore.load_config("configs/mountainwave3d_small.yaml", mesh={**MESH, "nz": 3})
    assert mesh_cache(tmp_path, finer, sim.params).key != key
    for over in ({"mesh.dx_min": 400.0}, {"mesh.dz_min": 120.0},
                 {"case.parameters": {"h0": 100.0}}):
        c = _config(**over)
        assert mesh_cache(tmp_path, c, c.case.build_parameters()).key != key, over
    path = tmp_path / "small.msh"
    from dycore.mesh.write import write_mesh
    write_mesh(fresh, path)
    import yaml
    data = yaml.safe_load(open("configs/mountainwave3d_small.yaml"))
    data["mesh"] = {"file": str(path), "renumber": "none"}
    (tmp_path / "file.yaml").write_text(yaml.safe_dump(data))
    from_file = Simulation(dycore.load_config(tmp_path / "file.yaml"), setup_cache=tmp_path)
    assert "mesh" not in from_file.setup_cache.hits + from_file.setup_cache.misses
    assert "mesh generation" in from_file.timers.as_dict()


def test_a_damaged_file_is_rebuilt_with_a_warning(tmp_path, caplog):
    first = Simulation(_config(), setup_cache=tmp_path)
    path = first.setup_cache.folder / "operators.npz"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4096] = np.random.default_rng(1).integers(0, 256, 4096, np.uint8).tobytes()
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="dycore"):
        again = Simulation(_config(), setup_cache=tmp_path)
    assert again.setup_cache.misses == ["operators"]
    assert again.setup_cache.hits == ["mesh", "sparsity"]
    assert "unreadable" in caplog.text and "operators.npz" in caplog.text
    ref = _operator_arrays(Simulation(_config(), setup_cache=False))
    got = _operator_arrays(again)
    for name, value in ref.items():
        assert np.array_equal(np.asarray(got[name]), np.asarray(value)), name
    assert Simulation(_config(), setup_cache=tmp_path).setup_cache.hits == [
        "mesh", "sparsity", "operators"]


def test_the_amg_hierarchy_round_trips_bitwise(tmp_path):
    rng = np.random.default_rng(3)
    n = 400
    a = sp.random(n, n, density=0.02, random_state=4)
    a = (a @ a.T + sp.eye(n) * 5.0).tocsr()
    h = HostHierarchy(a, max_coarse=20)
    cache = SetupCache(tmp_path, (a.data,), {"t": 1})
    cache.store("amg", h.as_arrays())
    g = HostHierarchy.from_arrays(cache.load("amg"))
    assert g.sizes == h.sizes and len(g.levels) == len(h.levels) > 1
    assert np.array_equal(g.coarse_inv, h.coarse_inv)
    for (A, P, R, d, c), (A2, P2, R2, d2, c2) in zip(h.levels, g.levels):
        for m, m2 in ((A, A2), (P, P2), (R, R2)):
            assert m.shape == m2.shape and (m != m2).nnz == 0
            assert np.array_equal(m.data, m2.data) and np.array_equal(m.indices, m2.indices)
        assert np.array_equal(d, d2) and c == c2
    from dycore.solvers.amg import vcycle_reference
    b = rng.standard_normal(n)
    assert np.array_equal(vcycle_reference(h, b), vcycle_reference(g, b))


def test_a_cached_hierarchy_is_kept_for_its_own_matrix_only(tmp_path):
    """cached_hierarchy (the GPU ranks' rank-local V-cycles): a miss builds and stores, a hit
    under the same name for the same matrix gives the same V-cycle bit for bit, another matrix
    under that name is rebuilt (and stored over); SetupCache.at opens another process's cache
    (its folder and key), as the other ranks of a host do."""
    from dycore.solvers.amg import cached_hierarchy, matrix_digest, vcycle_reference
    n = 400
    a = sp.random(n, n, density=0.02, random_state=4)
    a = (a @ a.T + sp.eye(n) * 5.0).tocsr()
    cache = SetupCache(tmp_path, (a.data,), {"t": 1})
    h = cached_hierarchy(a, max_coarse=20, cache=cache, name="amg-rank1of2")
    assert cache.misses == ["amg-rank1of2"] and cache.hits == []
    other = SetupCache.at(tmp_path, cache.key)          # e.g. rank 1 with rank 0's (dir, key)
    g = cached_hierarchy(a, max_coarse=20, cache=other, name="amg-rank1of2")
    assert other.hits == ["amg-rank1of2"] and g.sizes == h.sizes
    # the set-up split: what the miss built and stored, what the hit only loaded
    assert list(h.setup_seconds) == ["matrix digest", "looked up in the set-up cache",
                                     "PyAMG hierarchy", "Chebyshev bounds and coarsest inverse",
                                     "stored in the set-up cache"]
    assert list(g.setup_seconds) == ["matrix digest", "loaded from the set-up cache"]
    assert all(v >= 0.0 for v in (*h.setup_seconds.values(), *g.setup_seconds.values()))
    b = np.random.default_rng(5).standard_normal(n)
    assert np.array_equal(vcycle_reference(h, b), vcycle_reference(g, b))
    a2 = a.copy()
    a2.data[0] *= 1.5                                    # another partition's block, say
    assert not np.array_equal(matrix_digest(a2), matrix_digest(a))
    cached_hierarchy(a2, max_coarse=20, cache=other, name="amg-rank1of2")
    assert other.misses == ["amg-rank1of2"]
    stored = cache.load("amg-rank1of2")["matrix_digest"]
    assert np.array_equal(stored, matrix_digest(a2))
    assert cached_hierarchy(a, max_coarse=20).sizes == h.sizes           # no cache: built
    a3 = a.copy()
    a3.data[1] *= 2.0
    later = cached_hierarchy(a3, max_coarse=20, cache=other, name="amg-rank1of2",
                             background=True)                # written by the writer thread
    other.flush()
    assert np.array_equal(cache.load("amg-rank1of2")["matrix_digest"], matrix_digest(a3))
    assert np.array_equal(vcycle_reference(later, b),
                          vcycle_reference(cached_hierarchy(a3, max_coarse=20), b))


def test_a_classical_hierarchy_has_an_entry_of_its_own(tmp_path):
    """coarsening="classical" is stored under ``<name>-classical``: neither kind of hierarchy
    is ever loaded for the other (the digest alone, of the same matrix, could not tell)."""
    from dycore.solvers.amg import cached_hierarchy, vcycle_reference
    n = 400
    a = sp.random(n, n, density=0.02, random_state=4)
    a = (a @ a.T + sp.eye(n) * 5.0).tocsr()
    cache = SetupCache(tmp_path, (a.data,), {"t": 2})
    sa = cached_hierarchy(a, max_coarse=20, cache=cache, name="amg")
    rs = cached_hierarchy(a, max_coarse=20, cache=cache, name="amg", coarsening="classical")
    assert cache.misses == ["amg", "amg-classical"]
    again = cached_hierarchy(a, max_coarse=20, cache=cache, name="amg", coarsening="classical")
    assert cache.hits == ["amg-classical"] and again.sizes == rs.sizes
    b = np.random.default_rng(6).standard_normal(n)
    assert np.array_equal(vcycle_reference(again, b), vcycle_reference(rs, b))
    assert not np.array_equal(vcycle_reference(sa, b), vcycle_reference(rs, b))


def test_cache_directory_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("DYCORE_CACHE_DIR", str(tmp_path / "c"))
    assert cache_directory() == tmp_path / "c"
    for off in ("off", "0", "none", ""):
        monkeypatch.setenv("DYCORE_CACHE_DIR", off)
        assert cache_directory() is None
    monkeypatch.delenv("DYCORE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_directory() == tmp_path / "x" / "dycore"


def test_the_cache_is_pruned_least_recently_used_first(tmp_path, monkeypatch):
    import os
    monkeypatch.setenv("DYCORE_CACHE_MAX_GB", "1")
    caches = [SetupCache(tmp_path, (np.array([i]),)) for i in range(3)]
    for i, c in enumerate(caches):
        c.store("x", {"a": np.zeros(100)})
        os.utime(c.folder, (1000 + i, 1000 + i))       # 0 oldest, 2 newest
    assert caches[0].load("x") is not None              # 0 used again: now the newest

    def size(c):
        return sum(f.stat().st_size for f in c.folder.iterdir())
    room = size(caches[0]) + size(caches[2]) + 10        # bytes: room for two of three
    monkeypatch.setenv("DYCORE_CACHE_MAX_GB", str(room / 1e9))
    caches[0]._prune()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([caches[0].folder.name, caches[2].folder.name])


def test_entries_in_use_are_never_pruned(tmp_path, monkeypatch):
    """Over the limit, an entry used within KEEP_RECENT_S (another folder of the same run: its
    mesh, say, stored by another process) stays; one older is removed."""
    import os
    import time
    from dycore.io.setup_cache import KEEP_RECENT_S
    caches = [SetupCache(tmp_path, (np.array([i]),)) for i in range(3)]
    for c in caches:
        c.store("x", {"a": np.zeros(1000)})
    now = time.time()
    os.utime(caches[0].folder, (now - KEEP_RECENT_S - 60,) * 2)      # unused for long
    os.utime(caches[1].folder, (now - KEEP_RECENT_S + 60,) * 2)      # in use a minute ago
    monkeypatch.setenv("DYCORE_CACHE_MAX_GB", "1e-9")                # 1 byte: all too big
    caches[2]._prune()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([caches[1].folder.name, caches[2].folder.name])


def test_off_means_always_build(tmp_path):
    c = SetupCache(None)
    built = []
    for _ in range(2):
        got = c.get("x", lambda: built.append(1) or {"a": np.arange(3.0)})
        assert np.array_equal(got["a"], np.arange(3.0))
    assert built == [1, 1] and c.misses == ["x", "x"] and c.folder is None


@pytest.mark.slow
@pytest.mark.gpu_sim
def test_device_solvers_take_the_amg_hierarchy_from_the_cache(tmp_path):
    """Device solver mode (simulator): the second build loads the pressure hierarchy, and it
    is the hierarchy PyAMG builds afresh, bit for bit."""
    over = {"backend.name": "gpu", "backend.solver_mode": "device"}
    first = Simulation(_config(**over), setup_cache=tmp_path)
    name = "amg-chebyshev-2-500"
    assert first.setup_cache.misses == ["mesh", "sparsity", "operators", name]
    second = Simulation(_config(**over), setup_cache=tmp_path)
    assert second.setup_cache.hits == ["mesh", "sparsity", "operators", name]
    assert "pressure AMG set-up (host, once)" not in second.timers.as_dict()
    fresh = HostHierarchy(second.ops.pressure_host, "chebyshev", 2).as_arrays()
    stored = second.setup_cache.load(name)
    assert sorted(fresh) == sorted(stored)
    for key, value in fresh.items():
        assert np.array_equal(value, stored[key]), key
    assert second.systems.amg_sizes == first.systems.amg_sizes


def test_the_key_covers_the_source_of_the_cases():
    """The cases live in the top-level cases/ folder: their source is part of the key (a
    changed terrain normal must not read an old operator)."""
    from pathlib import Path

    from dycore.io.setup_cache import SOURCE_FOLDERS, source_files

    root = Path(__file__).resolve().parents[2]
    files = dict(source_files())
    assert files["cases/schar/__init__.py"] == root / "cases" / "schar" / "__init__.py"
    assert files["cases/_background.py"] == root / "cases" / "_background.py"
    assert files["assembly/weak_forms.py"] == root / "dycore" / "assembly" / "weak_forms.py"
    assert {name.split("/")[0] for name in files} == set(SOURCE_FOLDERS)
    assert not any("dycore/cases" in str(p) for p in files.values())   # not the source-tree loader


def test_a_background_store_is_written_in_order_and_flushed(tmp_path, monkeypatch):
    """``store(..., background=True)`` returns at once; the writer thread writes the entries
    in the order given (a later store of the same name wins), under a temporary name renamed
    when complete; ``flush`` waits for them and ends the thread; a failed write only warns."""
    import threading
    c = SetupCache(tmp_path, (np.array([1]),))
    gate = threading.Event()
    real = c._write

    def slow(name, arrays):                        # the first write waits for the gate
        gate.wait(timeout=30)
        real(name, arrays)
    monkeypatch.setattr(c, "_write", slow)
    c.store("x", {"a": np.arange(3.0)}, background=True)
    c.store("x", {"a": np.arange(4.0)}, background=True)
    c.store("y", {"b": np.ones(2)}, background=True)
    assert c.load("x") is None and c.load("y") is None     # nothing yet: still queued
    gate.set()
    c.flush()
    assert np.array_equal(c.load("x")["a"], np.arange(4.0))
    assert np.array_equal(c.load("y")["b"], np.ones(2))
    assert c._writer is None and not [p for p in c.folder.iterdir() if p.suffix == ".tmp"]
    assert not [t for t in threading.enumerate() if t.name.startswith("dycore-setup-cache")]
    c.flush()                                              # nothing pending: returns
    off = SetupCache(None)
    off.store("x", {"a": np.zeros(1)}, background=True)    # caching off: nothing, no thread
    assert off._writer is None


def test_a_hierarchy_built_beside_is_the_one_built_in_line(tmp_path):
    """hierarchy_beside (a GPU rank's rank-local AMG, built on a thread while the rank uploads
    its operators): the Future's hierarchy gives the V-cycle of rank_local_hierarchy's bit for
    bit, is stored under the rank's entry once the cache is flushed, and a build that fails
    hands its error to the waiting caller."""
    from dycore.parallel.device_krylov import hierarchy_beside, rank_local_hierarchy
    from dycore.solvers.amg import vcycle_reference
    n = 400
    a = sp.random(n, n, density=0.02, random_state=7)
    a = (a @ a.T + sp.eye(n) * 5.0).tocsr()
    a.sort_indices()
    cache = SetupCache(tmp_path, (a.data,), {"t": 3})
    future = hierarchy_beside(a, cache=cache, entry="amg-rank0of2", max_coarse=20)
    h = future.result(timeout=120)
    cache.flush()
    assert cache.misses == ["amg-rank0of2-chebyshev-2-20"]
    assert cache.load("amg-rank0of2-chebyshev-2-20") is not None
    b = np.random.default_rng(8).standard_normal(n)
    ref = rank_local_hierarchy(a, max_coarse=20)
    assert h.sizes == ref.sizes and len(h.sizes) > 1
    assert np.array_equal(vcycle_reference(h, b), vcycle_reference(ref, b))
    bad = hierarchy_beside(sp.random(5, 7, density=0.5, random_state=1).tocsr())
    with pytest.raises(ValueError):
        bad.result(timeout=60)
