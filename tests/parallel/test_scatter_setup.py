"""The scattered set-up, in one process: the piece rank 0 sends a rank holds only local arrays
(nothing of the global length), equal to the serial values at its local nodes; its owned rows
of C times a local vector are the serial product's bits; a build error on rank 0 reaches every
rank; the AMG pieces of every rank are the rows ``distribute_rows`` cuts from the global
hierarchy."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from dycore.errors import ConfigError
from dycore.parallel.partition import metis_partition, partition_mesh
from dycore.parallel.rank_ops import OwnedRowsOperator
from dycore.parallel.piece import rank_piece as _rank_piece
from dycore.parallel.simulation import _SETUP_TAG, DistributedSimulation

K = 4


def _arrays(obj, path="piece"):
    """Every ndarray inside dicts, tuples, lists, dataclasses and namespaces, with its path."""
    if isinstance(obj, np.ndarray):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _arrays(v, f"{path}[{k!r}]")
    elif isinstance(obj, (tuple, list)):
        for i, v in enumerate(obj):
            yield from _arrays(v, f"{path}[{i}]")
    elif dataclasses.is_dataclass(obj) or isinstance(obj, SimpleNamespace):
        for k, v in vars(obj).items():
            yield from _arrays(v, f"{path}.{k}")


@pytest.fixture(scope="module")
def pieces(systems):
    sim = systems["sim"]
    sp_ = sim.sparsity
    part = metis_partition(sp_.indptr, sp_.indices, K)
    rps = partition_mesh(sim.mesh.tets, sim.mesh.nnodes, sp_.indptr, sp_.indices, part)
    return sim, [_rank_piece(sim, rp) for rp in rps]


def test_a_rank_holds_only_local_arrays_equal_to_the_serial_values(pieces):
    sim, ps = pieces
    n = sim.mesh.nnodes
    for piece in ps:
        rp = piece["rp"]
        g = rp.l2g
        assert g.size < n                     # the check below can see a global array
        found = list(_arrays(piece))
        assert len(found) > 30
        for path, a in found:
            assert n not in a.shape, f"{path} has the global length {n}"
        assert np.array_equal(piece["coords"], sim.mesh.coords[g])
        assert np.array_equal(piece["state"].u, sim.state.u[g])
        assert np.array_equal(piece["coeffs"].sigma, sim.coeffs.sigma[g])
        assert np.array_equal(piece["ml"], np.asarray(sim.ops.ml)[g])
        assert piece["pin"] == rp.global_to_local(np.array([sim.ops.pin]), n)[0]


def test_owned_rows_of_c_times_a_local_vector_are_the_serial_bits(pieces):
    sim, ps = pieces
    x = np.random.default_rng(3).standard_normal((sim.mesh.nnodes, 3))    # C: (n, 3n)
    want = sim.ops.C @ x.ravel()
    for piece in ps:
        rp = piece["rp"]
        comm = SimpleNamespace(rank=rp.rank, size=K)
        op = OwnedRowsOperator(comm, rp, piece["C"])
        got = op.a @ x[rp.l2g[:rp.n_local(2)]].ravel()
        assert np.array_equal(got, want[rp.owned])


class _Comm:
    def __init__(self, rank, size, inbox=None):
        self.rank, self.size, self.inbox, self.sent = rank, size, inbox, []

    def send(self, obj, dest, tag):
        self.sent.append((dest, tag, obj))

    def recv(self, source, tag):
        assert (source, tag) == (0, _SETUP_TAG)
        return self.inbox


def test_a_build_error_on_rank_0_is_sent_to_and_raised_on_every_rank(monkeypatch, systems):
    import dycore.parallel.simulation as parallel_simulation

    def broken(*args, **kwargs):
        raise ConfigError("mesh.file: no such file")
    monkeypatch.setattr(parallel_simulation, "Simulation", broken)   # the serial build
    comm = _Comm(0, 3)
    cfg = systems["sim"].config
    serial, part, err = DistributedSimulation._scatter_setup(cfg, comm, None)
    assert serial is None and part is None and isinstance(err, ConfigError)
    assert [(d, t) for d, t, _ in comm.sent] == [(1, _SETUP_TAG), (2, _SETUP_TAG)]
    assert all(obj is err for _, _, obj in comm.sent)
    with pytest.raises(ConfigError, match="mesh.file: no such file"):
        DistributedSimulation(cfg, comm, setup="scattered")      # rank 0 raises it too
    with pytest.raises(ConfigError, match="mesh.file: no such file"):
        DistributedSimulation(cfg, _Comm(2, 3, inbox=err), setup="scattered")


def test_more_ranks_than_metis_can_fill_is_a_config_error_on_every_rank(systems):
    comm = _Comm(0, 10 ** 4)
    serial, part, err = DistributedSimulation._scatter_setup(systems["sim"].config, comm, None)
    assert isinstance(err, ConfigError)
    assert str(err).startswith("cannot partition the mesh over 10000 MPI ranks")
    assert len(comm.sent) == 10 ** 4 - 1


def test_amg_pieces_are_the_rows_distribute_rows_cuts(systems):
    import scipy.sparse as sp

    from dycore.parallel.amg import coarse_owners, rank_pieces
    from dycore.parallel.rowmatrix import distribute_rows
    from dycore.solvers.amg import HostHierarchy

    sim = systems["sim"]
    a = sim.ops.pressure_host
    part = metis_partition(sim.sparsity.indptr, sim.sparsity.indices, K)
    ps = rank_pieces(a, part, K)
    h = HostHierarchy(a)
    owners = [np.asarray(part, np.int64)]
    for _, p, _, _, _ in h.levels:
        owners.append(coarse_owners(p, owners[-1]))
    last = len(h.levels) - 1
    for r, piece in enumerate(ps):
        assert piece["sizes"] == h.sizes and len(piece["levels"]) == len(h.levels)
        for lev, ((ba, _, bp, dinv, _), (A, P, _, hd, _)) in enumerate(
                zip(piece["levels"], h.levels)):
            want = distribute_rows(SimpleNamespace(rank=r), A, owners[lev], owners[lev])
            plan, ptr, idx, val, n_own = ba
            assert np.array_equal(ptr, want._full[0]) and np.array_equal(idx, want._full[1])
            assert np.array_equal(val, want._full[2]) and n_own == want.n_cols
            assert np.array_equal(dinv, hd[owners[lev] == r])
            if lev == last:           # P reads the whole coarsest correction: global ids
                plan, ptr, idx, val, n_own = bp
                rows = sp.csr_matrix(P)[owners[lev] == r]
                assert plan.neighbours == () and n_own == P.shape[1]
                assert np.array_equal(ptr, rows.indptr) and np.array_equal(idx, rows.indices)
        whole = piece["whole"]
        assert whole["level"] == len(h.levels) and whole["levels"] == []
        assert np.array_equal(whole["owner"], owners[-1])
        assert np.array_equal(whole["coarse_inv"].toarray(), h.coarse_inv)
