"""dycore.parallel.local_setup: each rank's piece from its own part of the mesh is the piece the
scattered set-up cuts from the serial build, array for array (in one process: no MPI needed
for the pieces), on 1, 2, 3 and 4 METIS parts of a small mountain-wave mesh with its strong
no-normal-flow ground and lid, Dirichlet inflow faces and the pinned pressure node; the
owned pressure rows gathered back give the serial pinned pressure matrix, bit for bit."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

MESH = {"nx": 6, "ny": 5, "nz": 4}


@pytest.fixture(scope="module")
def serial():
    import dycore
    from dycore.backend.cpu import CPUBackend
    from dycore.timestepping.simulation import Simulation
    cfg = dycore.load_config("configs/mountainwave3d_small.yaml", mesh=dict(MESH))
    return cfg, Simulation(cfg, backend=CPUBackend(threads=1), setup_cache=False)


def _parts(sim, k):
    from dycore.parallel.partition import metis_partition, partition_mesh
    sp_ = sim.sparsity
    part = metis_partition(sp_.indptr, sp_.indices, k)
    return partition_mesh(sim.mesh.tets, sim.mesh.nnodes, sp_.indptr, sp_.indices, part)


def _same(a, b, where):
    """Every array, number and field of two pieces equal (bits and dtypes)."""
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, SimpleNamespace):
        _same(vars(a), vars(b), where)
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        _same({f.name: getattr(a, f.name) for f in dataclasses.fields(a)},
              {f.name: getattr(b, f.name) for f in dataclasses.fields(b)}, where)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype,
                                                            a.shape, b.shape)
        assert np.array_equal(a, b), where
    else:
        assert a == b, (where, a, b)


@pytest.mark.parametrize("k", (1, 2, 3, 4))
def test_local_pieces_are_the_scattered_pieces(serial, k):
    from dycore.parallel.local_setup import local_piece, setup_mesh
    from dycore.parallel.piece import rank_piece as _rank_piece
    cfg, sim = serial
    assert sim.ops.nnf is not None and sim.ops.nnf.nodes.size > 0      # rotated nodes
    assert np.asarray(sim.ops.dir_nodes).size > 0                      # Dirichlet faces
    n = sim.mesh.nnodes
    detj = []
    for rp in _parts(sim, k):
        want = _rank_piece(sim, rp)
        part = setup_mesh(sim.mesh, rp)
        assert part["ids"].size < n or k == 1
        got = local_piece(cfg, part, rp, n, sim.ops.pin)
        detj.append(got.pop("detj_min"))
        want.pop("detj_min")
        _same(got, want, f"rank {rp.rank} of {k}")
    assert min(detj) == sim.ops.detj_min


def test_the_pin_reaches_the_rank_that_holds_it(serial):
    """The pinned node's rank gets the serial pinned rows; pinning another of its nodes
    instead changes them (the pin is the global one, not a choice of the part)."""
    from dycore.parallel.local_setup import local_piece, setup_mesh
    from dycore.parallel.piece import rank_piece as _rank_piece
    cfg, sim = serial
    n, pin = sim.mesh.nnodes, int(sim.ops.pin)
    rp = next(rp for rp in _parts(sim, 3) if pin in rp.owned)
    want = _rank_piece(sim, rp)["pressure_rows"]
    part = setup_mesh(sim.mesh, rp)
    _same(local_piece(cfg, part, rp, n, pin)["pressure_rows"], want, "pinned rank")
    other = int(rp.owned[rp.owned != pin][0])
    moved = local_piece(cfg, part, rp, n, other)["pressure_rows"]
    assert not all(np.array_equal(x, y) for x, y in zip(moved, want))


@pytest.mark.parametrize("k", (1, 3))
def test_gathered_owned_rows_are_the_serial_pressure_matrix(serial, k):
    from dycore.parallel.local_setup import gather_rows
    from dycore.parallel.piece import rank_piece as _rank_piece
    _, sim = serial
    rps = _parts(sim, k)
    rows = [_rank_piece(sim, rp)["pressure_rows"] for rp in rps]

    class Comm:                          # gather of k ranks in one process
        rank = 0

        def gather(self, mine, root=0):
            return got
    got = [(rp.owned, np.diff(np.asarray(r[0], np.int64)), rp.l2g[np.asarray(r[1], np.int64)],
            np.asarray(r[2], np.float64)) for rp, r in zip(rps, rows)]
    a = gather_rows(Comm(), rps[0], rows[0], sim.mesh.nnodes)
    want = sim.ops.pressure_host
    assert a.has_sorted_indices
    for x, y in ((a.indptr, want.indptr), (a.indices, want.indices), (a.data, want.data)):
        assert x.dtype == y.dtype and np.array_equal(x, y)


class _Comm:
    """Rank ``rank`` of ``size`` ranks in one process: records what it sends and broadcasts;
    a broadcast returns, on ranks other than 0, the next of ``root_values`` where given (what
    rank 0 broadcast, in order), else ``root_value``; an all-gather ``gathered`` where set
    (the other ranks' values), else this rank's alone."""

    def __init__(self, size, rank=0, root_value=None, gathered=None, root_values=None):
        self.rank, self.size, self.sent, self.broadcast = rank, size, [], []
        self.root_value, self.gathered = root_value, gathered
        self.root_values = None if root_values is None else iter(root_values)

    def send(self, obj, dest, tag):
        self.sent.append((dest, tag, obj))

    def bcast(self, obj, root=0):
        if self.rank == 0:
            self.broadcast.append(obj)
            return obj
        return self.root_value if self.root_values is None else next(self.root_values)

    def allgather(self, obj):
        return [obj] if self.gathered is None else self.gathered(obj)

    def Ibarrier(self):                 # (idle_wait: the other ranks are there at once)
        self.barriers = getattr(self, "barriers", 0) + 1
        return SimpleNamespace(Test=lambda: True)


def test_a_mesh_error_on_rank_0_reaches_every_rank(serial, monkeypatch):
    import dycore.timestepping.simulation as ts
    from dycore.errors import ConfigError
    from dycore.parallel.simulation import DistributedSimulation

    def broken(*args, **kwargs):
        raise ConfigError("mesh.file: no such file")
    monkeypatch.setattr(ts, "config_mesh", broken)
    mesh, cache, err = DistributedSimulation._root_mesh(serial[0])
    assert mesh is None and cache is None and isinstance(err, ConfigError)
    for rank in (0, 2):              # rank 0 raises its own error, rank 2 the broadcast one
        sim = DistributedSimulation.__new__(DistributedSimulation)
        with pytest.raises(ConfigError, match="mesh.file: no such file"):
            sim._receive_local(serial[0], _Comm(3, rank, root_value=err))


def test_more_ranks_than_metis_can_fill_is_a_config_error_on_every_rank(serial):
    from dycore.errors import ConfigError
    from dycore.parallel.simulation import DistributedSimulation
    root = _Comm(10 ** 4)
    part, err = DistributedSimulation._own_part(root, serial[1].mesh)
    assert part is None and isinstance(err, ConfigError)
    assert str(err).startswith("cannot partition the mesh over 10000 MPI ranks")
    assert root.sent == [] and root.broadcast[-1] is err
    other = _Comm(10 ** 4, 7, root_values=root.broadcast)        # rank 7: the same error
    assert DistributedSimulation._own_part(other, None) == (None, err)


def test_every_rank_cuts_its_own_part_from_the_broadcast_mesh(serial):
    """_own_part on 3 ranks in turn (ranks 1 and 2 given what rank 0 broadcast): the mesh's
    arrays and the METIS partition are all that is broadcast, nothing is sent; each rank's
    partition is ``partition_mesh``'s for it, its part ``setup_mesh``'s, the pin the serial
    set-up's, and the owned nodes cover the mesh once."""
    from dycore.parallel.local_setup import setup_mesh
    from dycore.parallel.partition import partition_mesh
    from dycore.parallel.simulation import DistributedSimulation
    cfg, sim = serial
    mesh, cache, err = DistributedSimulation._root_mesh(cfg)
    assert err is None and np.array_equal(mesh.coords, sim.mesh.coords)
    root = _Comm(3)
    part, own = DistributedSimulation._own_part(root, mesh)
    assert part.shape == (sim.mesh.nnodes,) and root.sent == []
    assert len(root.broadcast) == 2 and np.array_equal(root.broadcast[1], part)
    assert root.barriers == 1          # the partition's broadcast waits at an idle barrier
    msgs = [own] + [DistributedSimulation._own_part(_Comm(3, r, root_values=root.broadcast),
                                                    None)[1] for r in (1, 2)]
    spg = sim.sparsity
    want = partition_mesh(sim.mesh.tets, sim.mesh.nnodes, spg.indptr, spg.indices, part)
    assert [m["rp"].rank for m in msgs] == [0, 1, 2]
    for m, rp in zip(msgs, want):
        assert m["pin"] == sim.ops.pin and m["nnodes"] == sim.mesh.nnodes
        for name in ("owned", "ghosts", "ghost_layer", "elements", "local_tets"):
            assert np.array_equal(getattr(m["rp"], name), getattr(rp, name)), name
        _same(m["mesh"], setup_mesh(sim.mesh, rp), f"part of rank {rp.rank}")
    owned = np.sort(np.concatenate([m["rp"].owned for m in msgs]))
    assert np.array_equal(owned, np.arange(sim.mesh.nnodes))


@pytest.fixture
def built(serial):
    """Rank 0's piece of 3 METIS parts (its ``rp`` made for a 1-rank stand-in communicator
    is not needed: the cache entry is named by the communicator) and the partition."""
    from dycore.parallel.local_setup import local_piece, setup_mesh
    from dycore.parallel.partition import metis_partition, partition_mesh
    cfg, sim = serial
    sp_ = sim.sparsity
    part = metis_partition(sp_.indptr, sp_.indices, 3)
    rp = partition_mesh(sim.mesh.tets, sim.mesh.nnodes, sp_.indptr, sp_.indices, part)[0]
    return local_piece(cfg, setup_mesh(sim.mesh, rp), rp, sim.mesh.nnodes, sim.ops.pin), part


def test_a_stored_piece_is_loaded_array_for_array(built, tmp_path):
    """store_piece then load_pieces (one rank): the piece comes back, every array's dtype,
    shape and bits, with the partition on rank 0; the entry is named by rank, rank count and
    the code's digest. The writer thread writes it; ``flush`` waits for it."""
    from dycore.io.setup_cache import SetupCache
    from dycore.parallel.local_setup import load_pieces, store_piece
    piece, part = built
    cache = SetupCache(tmp_path, (np.arange(3),), {"test": 1})
    assert load_pieces(_Comm(1), cache) == (None, None)                  # nothing yet
    store_piece(_Comm(1), cache, piece, part)
    cache.flush()
    [entry] = cache.folder.glob("piece-*.npz")
    assert entry.name.startswith("piece-rank0of1-")
    got, got_part = load_pieces(_Comm(1), cache)
    _same(got, piece, "loaded piece")
    assert got_part.dtype == part.dtype and np.array_equal(got_part, part)
    assert load_pieces(_Comm(1), None) == (None, None)                   # caching off


def test_pieces_are_used_only_when_every_rank_has_one_of_one_partition(built, tmp_path,
                                                                         caplog):
    """All or none: another rank without its piece, or with a piece of another partition,
    makes every rank build anew; so does a damaged entry (with a warning)."""
    from dycore.io.setup_cache import SetupCache
    from dycore.parallel.local_setup import load_pieces, partition_digest, store_piece
    piece, part = built
    cache = SetupCache(tmp_path, (np.arange(3),), {"test": 2})
    store_piece(_Comm(1), cache, piece, part)
    cache.flush()
    assert load_pieces(_Comm(1), cache)[0] is not None
    mine = partition_digest(part)
    assert load_pieces(_Comm(1, gathered=lambda d: [d, None]), cache) == (None, None)
    assert load_pieces(_Comm(1, gathered=lambda d: [d, mine[::-1]]), cache) == (None, None)
    assert load_pieces(_Comm(1, gathered=lambda d: [d, d]), cache)[0] is not None
    [entry] = cache.folder.glob("piece-*.npz")
    arrays = dict(np.load(entry))
    arrays["tree"] = np.frombuffer(b'{"x": 1}', np.uint8)                # an unknown layout
    np.savez(entry, **arrays)
    with caplog.at_level("WARNING", logger="dycore"):
        assert load_pieces(_Comm(1), cache) == (None, None)
    assert "piece of rank 0 is unreadable" in caplog.text


def test_an_unknown_setup_is_a_value_error(serial):
    from dycore.parallel.simulation import DistributedSimulation
    with pytest.raises(ValueError, match="'local' or 'scattered'"):
        DistributedSimulation(serial[0], _Comm(1), setup="serial")
