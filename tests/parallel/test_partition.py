"""Partition rules checked for K simulated ranks in one process (no MPI): ownership, ghost
layers, symmetric send/receive lists, halo elements that assemble owned rows bit for bit, and
owned rows whose local product equals the serial SpMV bit for bit."""
import numpy as np
import pytest
import scipy.sparse as sp

from dycore.assembly.sparsity import build_sparsity
from dycore.mesh.mesh import Mesh
from dycore.parallel.partition import (
    extract_rows,
    metis_partition,
    owned_row_order,
    partition_mesh,
)

KS = (1, 2, 3, 4)


def _parts(s, k):
    part = metis_partition(s["indptr"], s["indices"], k)
    return part, partition_mesh(s["tets"], s["nnodes"], s["indptr"], s["indices"], part)


@pytest.mark.parametrize("k", KS)
def test_every_node_owned_once_and_ghosts_are_the_coupled_nodes(systems, k):
    s = systems
    n = s["nnodes"]
    part, rps = _parts(s, k)
    assert np.bincount(part, minlength=k).min() > 0
    owned = np.concatenate([rp.owned for rp in rps])
    assert np.array_equal(np.sort(owned), np.arange(n))            # each node exactly once
    g = sp.csr_matrix((np.ones(len(s["indices"])), s["indices"], s["indptr"]), shape=(n, n))
    g2 = g @ g
    for rp in rps:
        mask = np.zeros(n, bool)
        mask[rp.owned] = True
        near1 = (g @ mask.astype(float)) > 0
        near2 = (g2 @ mask.astype(float)) > 0
        want1 = np.flatnonzero(near1 & ~mask)
        want2 = np.flatnonzero(near2 & ~near1)
        assert np.array_equal(np.sort(rp.ghosts[rp.ghost_layer == 1]), want1)
        assert np.array_equal(np.sort(rp.ghosts[rp.ghost_layer == 2]), want2)
        assert np.array_equal(rp.ghost_owner, part[rp.ghosts])
        # ghosts ordered by (layer, owner, global id)
        key = np.lexsort((rp.ghosts, rp.ghost_owner, rp.ghost_layer))
        assert np.array_equal(key, np.arange(rp.ghosts.size))
        # local elements: exactly those touching an owned node, ascending
        touch = np.flatnonzero(np.any(mask[s["tets"]], axis=1))
        assert np.array_equal(rp.elements, touch)
        assert np.array_equal(rp.l2g[rp.local_tets], s["tets"][rp.elements])
    # every element owned by exactly one rank
    owners = np.zeros(len(s["tets"]), int)
    for rp in rps:
        owners[rp.elements[rp.element_owned]] += 1
    assert np.all(owners == 1)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("depth", (1, 2))
def test_send_and_receive_lists_are_symmetric_and_fill_every_ghost(systems, k, depth):
    s = systems
    _, rps = _parts(s, k)
    plans = [rp.plan(depth) for rp in rps]
    x = np.random.default_rng(k).standard_normal(s["nnodes"])
    local = [np.full(p.n_local, np.nan) for p in plans]
    for rp, p, xl in zip(rps, plans, local):
        xl[:rp.n_owned] = x[rp.owned]
    for r, (rp, p) in enumerate(zip(rps, plans)):
        for q, idx in p.send.items():
            # r sends q exactly the ghosts q expects from r, in q's order
            recv = plans[q].recv[r]
            assert np.array_equal(rp.l2g[idx], rps[q].l2g[recv])
            local[q][recv] = local[r][idx]
        assert set(p.recv) == {q for q in range(k) if r in plans[q].send}
        assert p.count()[1] == p.n_local - rp.n_owned
    for rp, p, xl in zip(rps, plans, local):                   # every ghost filled, right value
        assert np.array_equal(xl, x[rp.l2g[:p.n_local]])


def test_depth_one_rows_of_the_pressure_matrix_are_refused(systems):
    s = systems
    _, rps = _parts(s, 2)
    with pytest.raises(ValueError, match="beyond 1 ghost layer"):
        extract_rows(s["p_indptr"], s["p_indices"], rps[0], s["nnodes"], depth=1)
    with pytest.raises(ValueError, match="nparts must be between 1"):
        metis_partition(s["indptr"], s["indices"], 0)


def _serial(s, what):
    n = s["nnodes"]
    if what == "tracer":
        return sp.csr_matrix((s["tracer"], s["indices"], s["indptr"]), shape=(n, n)), s["x1"], 1
    if what == "momentum":
        return (sp.bsr_matrix((s["momentum"], s["indices"], s["indptr"]), shape=(3 * n, 3 * n)),
                s["x3"], 1)
    return (sp.csr_matrix((s["p_values"], s["p_indices"], s["p_indptr"]), shape=(n, n)),
            s["x1"], 2)


@pytest.mark.parametrize("k", (2, 4))
@pytest.mark.parametrize("what", ("tracer", "momentum", "pressure"))
def test_owned_rows_times_local_vector_equal_serial_spmv_bitwise(systems, k, what):
    """The rows each rank keeps, multiplied by its local vector (owned + ghosts), are the
    serial SciPy product's rows bit for bit (the distributed SpMV without the messages)."""
    from dycore.parallel.spmv import DistributedMatrix  # noqa: F401  (module imports without MPI)
    s = systems
    a, x, depth = _serial(s, what)
    y = (a @ x.ravel()).reshape(x.shape)
    _, rps = _parts(s, k)
    got = np.full_like(y, np.nan)
    for rp in rps:
        ip, ix = (s["p_indptr"], s["p_indices"]) if what == "pressure" else (s["indptr"],
                                                                            s["indices"])
        lp, li, pos = extract_rows(ip, ix, rp, s["nnodes"], depth)
        vals = a.data[pos] if what != "momentum" else s["momentum"][pos]
        nl = rp.n_local(depth)
        xl = x[rp.l2g[:nl]]
        if what == "momentum":
            al = sp.bsr_matrix((vals, li, lp), shape=(3 * rp.n_owned, 3 * nl))
        else:
            al = sp.csr_matrix((vals, li, lp), shape=(rp.n_owned, nl))
        got[rp.owned] = (al @ xl.ravel()).reshape((-1,) + x.shape[1:])
    assert np.array_equal(got, y)


@pytest.mark.parametrize("k", (2, 4))
def test_halo_elements_assemble_owned_rows_bitwise(systems, k):
    """Each rank assembles its local mesh (owned + halo elements) with the CPU backend's
    assembler: the
    owned rows of the tracer and momentum matrices, their right-hand sides, C and K_p equal
    the serial assembly's bit for bit."""
    from dycore.backend.timers import StageTimers
    s = systems
    sim = s["sim"]
    c, tc = sim.coeffs, sim.config.time
    n = s["nnodes"]
    ser = sim.backend.assembler(sim.mesh, sim.sparsity, StageTimers())
    zeros = np.zeros(n)
    buoy = np.linspace(-0.01, 0.01, n)
    p = np.cos(np.arange(n))
    tv, tr = (a.copy() for a in ser.tracer("t", s["u"], s["theta"], zeros, c.sigma, c.zeros,
                                           c.kappa, tc.dt * tc.theta))
    mv, mr = (a.copy() for a in ser.momentum(s["u"], s["u"], buoy, p, c.sigma, c.u_ref, c.nu,
                                             c.f_cor, tc.dt * tc.theta))
    cv = ser.divergence()[0]
    kp = ser.stabilisation()[0]
    _, rps = _parts(s, k)
    for rp in rps:
        n1 = rp.n_local(1)
        l2g = rp.l2g[:n1]
        mesh = Mesh(coords=s["coords"][l2g], tets=rp.local_tets, faces=np.zeros((0, 3)),
                    face_tags=np.zeros(0), face_ele=np.zeros(0))
        lsp = build_sparsity(mesh.tets, n1)
        loc = sim.backend.assembler(mesh, lsp, StageTimers())
        perm = owned_row_order(lsp.indptr, lsp.indices, rp)
        _, _, pos = extract_rows(s["indptr"], s["indices"], rp, n, 1)
        ltv, ltr = loc.tracer("t", s["u"][l2g], s["theta"][l2g], zeros[l2g], c.sigma[l2g],
                              c.zeros[l2g], c.kappa, tc.dt * tc.theta)
        assert np.array_equal(ltv[perm], tv[pos]) and np.array_equal(ltr[:rp.n_owned],
                                                                     tr[rp.owned])
        lmv, lmr = loc.momentum(s["u"][l2g], s["u"][l2g], buoy[l2g], p[l2g], c.sigma[l2g],
                                c.u_ref, c.nu, c.f_cor, tc.dt * tc.theta)
        assert np.array_equal(lmv[perm], mv[pos]) and np.array_equal(lmr[:rp.n_owned],
                                                                     mr[rp.owned])
        assert np.array_equal(loc.divergence()[0][perm], cv[pos])
        assert np.array_equal(loc.stabilisation()[0][perm], kp[pos])


@pytest.mark.parametrize("k", (2, 3))
@pytest.mark.parametrize("blocks", ((1, 3), (3, 1), (1, 1)))
def test_owned_rows_equal_a_numpy_construction(systems, k, blocks):
    """:func:`~dycore.parallel.rank_ops.owned_rows` (a numba gather) equals the rows taken
    with NumPy: the owned rows of C (1, 3), Cᵀ (3, 1) and KMK (1, 1), entry order kept,
    columns renumbered to local ids — from the serial operator and from one over a subset of
    the nodes (``ids``, with a shared ``node_local``); a row reaching beyond the depth-2
    ghosts is refused."""
    from dycore.parallel.rank_ops import owned_rows
    s = systems
    ops, n = s["sim"].ops, s["nnodes"]
    rb, cb = blocks
    a = {(1, 3): ops.C, (3, 1): ops.CT, (1, 1): ops.kmk}[blocks].tocsr()
    _, rps = _parts(s, k)
    for rp in rps:
        g2l = np.full(n, -1, np.int64)
        g2l[rp.l2g] = np.arange(rp.l2g.size)
        rows = (rb * rp.owned[:, None] + np.arange(rb)).ravel()
        want_ptr = np.concatenate([[0], np.cumsum(np.diff(a.indptr)[rows])])
        pos = np.concatenate([np.arange(a.indptr[r], a.indptr[r + 1]) for r in rows])
        want_cols = cb * g2l[a.indices[pos] // cb] + a.indices[pos] % cb
        ptr, cols, vals, shape, got_rb = owned_rows(rp, n, a, rb, cb)
        assert np.array_equal(ptr, want_ptr) and np.array_equal(cols, want_cols)
        assert vals.tobytes() == a.data[pos].tobytes()
        assert shape == (rows.size, cb * rp.n_local(2)) and got_rb == rb
        # the same operator over the nodes ``ids`` (every local node, ascending) only
        ids = np.sort(rp.l2g)
        sel = (cb * ids[:, None] + np.arange(cb)).ravel()
        rsel = (rb * ids[:, None] + np.arange(rb)).ravel()
        sub = a[rsel][:, sel].tocsr()
        got = owned_rows(rp, n, sub, rb, cb, ids, node_local=g2l[ids])
        direct = sub[(rb * np.searchsorted(ids, rp.owned)[:, None] + np.arange(rb)).ravel()]
        assert np.array_equal(got[0], direct.indptr)
        assert np.array_equal(got[1], cb * g2l[ids[direct.indices // cb]] + direct.indices % cb)
        assert got[2].tobytes() == direct.data.tobytes()
    far = rps[0]
    beyond = np.setdiff1d(np.arange(n), far.l2g)           # not local to rank 0 at all
    assert beyond.size
    bad = a.tolil(copy=True)
    bad[rb * far.owned[0], cb * beyond[0]] = 1.0
    with pytest.raises(ValueError, match="beyond two ghost layers"):
        owned_rows(far, n, bad.tocsr(), rb, cb)


def test_owned_block_equals_scipys_column_slice_sorted():
    """owned_block (the rank-local AMG's matrix): the columns < n of every row, sorted, values
    with them — SciPy's ``[:, :n]`` + ``sort_indices`` array for array — from rows whose
    columns come in any order, with ghost columns, empty rows and rows of ghosts only."""
    from dycore.parallel.rank_ops import owned_block
    rng = np.random.default_rng(11)
    m, n, nl = 300, 300, 420
    rows = []
    for i in range(m):
        k = 0 if i % 37 == 0 else int(rng.integers(1, 40))
        cols = rng.choice(nl, size=k, replace=False)
        if i % 53 == 1:
            cols = cols[cols >= n]                    # a row of ghost columns only
        rows.append(cols)
    indptr = np.concatenate(([0], np.cumsum([r.size for r in rows]))).astype(np.int64)
    indices = np.concatenate(rows).astype(np.int64)
    data = rng.standard_normal(indices.size)
    got = owned_block(indptr, indices, data, n)
    ref = sp.csr_matrix((data, indices, indptr), shape=(m, nl))[:, :n].tocsr()
    ref.sort_indices()
    assert got.shape == (m, n) and got.indices.dtype == np.int32
    for a, b in ((got.indptr, ref.indptr), (got.indices, ref.indices), (got.data, ref.data)):
        assert np.array_equal(a, b)
    assert got.has_sorted_indices
