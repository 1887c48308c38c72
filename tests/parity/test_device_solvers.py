"""The device solver kernels and solvers under the CUDA simulator, against SciPy and NumPy.

Each kernel is checked on inputs spanning several thread blocks (small blocks, ``rb = 16``);
the solvers against SciPy's CG / BiCGStab with the same preconditioner (iteration counts and
solutions), the V-cycle bitwise against its NumPy twin, and a replayed graph against the direct
launches that it captured.
"""
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from dycore.backend.gpu import gpu_backend
from dycore.parallel.overlap import split_rows
from dycore.solvers import amg as amg_module
from dycore.backend import solver_kernels as K
from dycore.solvers.amg import (DeviceJacobi, DeviceVCycle, HostHierarchy, grouped_matvec,
                                smoother_coefficients, vcycle_reference)
from dycore.solvers.krylov import (DeviceBiCGStab, DeviceLinalg, DeviceMatrix, DevicePCG,
                                   LeanBlocks, SMALL_ROWS, group_size, replay_budget,
                                   row_group)

RB = 16


@pytest.fixture(scope="module")
def la():
    return DeviceLinalg(gpu_backend(solver_mode="device"), rb=RB)


def _laplacian(m=7, shift=1e-3):
    t = sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1])
    return (sp.kron(t, sp.eye(m)) + sp.kron(sp.eye(m), t) + shift * sp.eye(m * m)).tocsr()


def _block_system(nb=11, seed=0):
    """A non-symmetric BCSR 3×3 matrix (block tridiagonal, dominant diagonal blocks)."""
    rng = np.random.default_rng(seed)
    rows, cols = zip(*[(i, j) for i in range(nb) for j in (i - 1, i, i + 1) if 0 <= j < nb])
    pat = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(nb, nb))
    pat.sort_indices()
    vals = 0.3 * rng.standard_normal((pat.nnz, 3, 3))
    diag = np.array([pat.indptr[i] + np.flatnonzero(
        pat.indices[pat.indptr[i]:pat.indptr[i + 1]] == i)[0] for i in range(nb)])
    vals[diag] += 3.0 * np.eye(3)
    a = sp.bsr_matrix((vals, pat.indices, pat.indptr), shape=(3 * nb, 3 * nb))
    return pat, vals, diag, a


def _ctl():
    c = np.zeros(K.NCTL)
    return c


@pytest.mark.parametrize("bs,g", [(1, 1), (1, 4), (3, 1), (3, 2)])
def test_bsr_spmv_modes_and_dot_partials_match_scipy(la, bs, g):
    rng = np.random.default_rng(1)
    if bs == 1:
        a = _laplacian(6) + sp.random(36, 36, density=0.25, random_state=2, format="csr")
        a = a.tocsr()
        a.sort_indices()
        m = DeviceMatrix.from_scipy(la, a, g)
    else:
        pat, vals, _, a = _block_system()
        m = DeviceMatrix(la, pat.indptr, pat.indices, vals.reshape(-1), 3, g)
    n = a.shape[0]
    x, b, w = rng.standard_normal((3, n))
    partial = np.full((la.nparts(m), 1), np.nan)
    ref = a @ x
    for mode, expect in ((0, ref), (1, b - ref), (2, b + ref)):
        y = b.copy()
        nparts = la.spmv(m, x, y, mode=mode, b=b, w=w, partial=partial, ctl=_ctl())
        assert nparts == partial.shape[0] == -(-m.nrow * g // RB)
        np.testing.assert_allclose(y, expect, rtol=1e-14, atol=1e-14)
        assert partial[:, 0].sum() == pytest.approx(w @ expect, rel=1e-13)
    if bs == 1:        # the kernels' lane-and-tree order; g = 1 is SciPy's csr_matvec order
        y = np.empty(n)
        la.spmv(m, x, y, ctl=_ctl())
        assert np.array_equal(y, grouped_matvec(a, x, g))
        if g == 1:
            assert np.array_equal(y, a @ x)


@pytest.mark.parametrize("g", [1, 4])
def test_fused_finish_is_the_separate_finish_bitwise(la, g):
    """The last block of an SpMV adds the partials (w·y and y·y) as the finish kernel does."""
    a = (_laplacian(9) + sp.random(81, 81, density=0.2, random_state=5, format="csr")).tocsr()
    m = DeviceMatrix.from_scipy(la, a, g)
    x, w = np.random.default_rng(6).standard_normal((2, a.shape[0]))
    partial = np.zeros((la.nparts(m), 2))
    fused, separate = _ctl(), _ctl()
    y = np.empty(a.shape[0])
    la.spmv(m, x, y, w=w, partial=partial, ctl=fused, op=K.OP_BI_OMEGA, ndot=2)
    assert int(np.asarray(la.ticket)[0]) == 0          # re-armed by the last block
    la.finish(partial, la.nparts(m), K.OP_BI_OMEGA, separate)
    assert fused[K.OMEGA] == separate[K.OMEGA]
    assert fused[K.OMEGA] == pytest.approx((w @ y) / (y @ y), rel=1e-12)
    assert partial[:, 1].sum() == pytest.approx(y @ y, rel=1e-13)


def test_group_size_follows_nonzeros_per_row():
    assert [group_size(r) for r in (1, 7.9, 8, 15.9, 61, 128, 1e6)] == [1, 1, 2, 2, 8, 32, 32]
    assert group_size(1e6, max_group=4) == 4


def test_row_group_sizes_a_small_matrix_by_its_longest_row():
    """More than SMALL_ROWS rows: about eight entries a thread of the mean row, or sixteen of
    the longest where that asks for more; at most SMALL_ROWS rows: about two entries a thread
    of the longest row. (The cases are the measured matrices of docs/performance.md.)"""
    def ptr(lengths):
        return np.concatenate([[0], np.cumsum(lengths)])

    pressure = np.full(98441, 61)                        # the paper mesh's pressure matrix
    pressure[::10] = 65
    assert row_group(ptr(pressure)) == 4                 # 61 / 8 → 4 (65 / 16 → 4)
    restriction = np.full(27159, 22)                     # 24 a row, the longest 158
    restriction[::100] = 158
    assert row_group(ptr(restriction)) == 8              # 158 / 16 → 8 (24 / 8 → 2)
    assert row_group(ptr(np.full(SMALL_ROWS + 1, 3))) == 1
    assert row_group(ptr(np.full(1800, 94))) == 32       # small: 94 / 2 → 32
    assert row_group(ptr(np.full(1800, 11))) == 4        # 11 / 2 = 5.5 → 4
    assert row_group(ptr([1, 0, 1])) == 1 and row_group(ptr([])) == 1
    assert row_group(ptr(np.full(1800, 94)), max_group=8) == 8
    assert row_group(ptr(pressure), max_group=2) == 2


def test_a_row_group_above_the_workspaces_max_group_is_refused(la):
    """The solvers size their block partials for rows of at most ``max_group`` threads: a
    wider (or not power-of-two) explicit group is a clear error, not an overrun."""
    a = _laplacian(3)
    assert DeviceMatrix.from_scipy(la, a, g=la.max_group).g == la.max_group
    for g in (2 * la.max_group, 3):
        with pytest.raises(ValueError, match=f"g {g} threads a row.*max_group {la.max_group}"):
            DeviceMatrix.from_scipy(la, a, g=g)


def test_finished_solve_makes_every_kernel_a_no_op(la):
    a = _laplacian(5)
    m = DeviceMatrix.from_scipy(la, a)
    ctl = _ctl()
    ctl[K.DONE] = K.CONVERGED
    y = np.full(a.shape[0], 7.0)
    la.spmv(m, np.ones(a.shape[0]), y, ctl=ctl)
    assert np.all(y == 7.0)


def test_finish_reduction_is_fixed_order_and_exact_to_rounding(la):
    rng = np.random.default_rng(3)
    partial = rng.standard_normal((75, 2)) * 10.0 ** rng.integers(-8, 8, (75, 2))
    out = []
    for _ in range(2):
        ctl = _ctl()
        la.finish(partial, 75, K.OP_STORE, ctl, slot=K.RR)
        out.append(ctl[K.RR])
    assert out[0] == out[1]
    assert out[0] == pytest.approx(partial[:, 0].sum(), rel=1e-12)


def test_block_inverse_kinds(la):
    pat, vals, diag, _ = _block_system(nb=9)
    flat = vals.reshape(-1)
    dpos = la.nb(diag.astype(np.int32))
    for kind, expect in ((0, np.broadcast_to(np.eye(3), (9, 3, 3))),
                         (1, np.array([np.diag(1.0 / np.diag(vals[d])) for d in diag])),
                         (2, np.linalg.inv(vals[diag]))):
        minv = np.full(81, np.nan)
        la.launch(la.k.block_inverse, 9, flat, dpos, 3, kind, minv)
        np.testing.assert_allclose(minv.reshape(9, 3, 3), expect, rtol=1e-13, atol=1e-15)


def test_chebyshev_coefficients_damp_the_smoothing_interval():
    """The error polynomial of the degree-2 Chebyshev smoother is minimax on [ρ/30, 1.1ρ]: its
    largest value there is 1/T₂(σ), σ = (b + a)/(b − a) (analytic); damped Jacobi (ω = 2/3,
    two sweeps) leaves (1 − 2ω/30)² ≈ 0.91 at the low end."""
    rho = 2.0
    a_, b_ = rho / 30, 1.1 * rho
    lam = np.linspace(a_, b_, 4001)

    def poly(coef):
        e, d = np.ones_like(lam), np.zeros_like(lam)
        for c1, c2 in coef:                    # error recurrence of d = c1 D⁻¹r + c2 d
            d = c1 * lam * e + c2 * d
            e = e - d
        return e
    cheb = np.abs(poly(smoother_coefficients("chebyshev", 2, rho))).max()
    jac = np.abs(poly(smoother_coefficients("jacobi", 2, rho))).max()
    sigma = (b_ + a_) / (b_ - a_)
    assert cheb == pytest.approx(1.0 / (2 * sigma * sigma - 1), rel=1e-9)
    assert jac == pytest.approx((1 - 2.0 / 3.0 * a_) ** 2, rel=1e-12) and jac > cheb


@pytest.mark.parametrize("smoother, coarsening", [("chebyshev", "aggregation"),
                                                  ("jacobi", "aggregation"),
                                                  ("chebyshev", "classical")])
def test_vcycle_is_bitwise_its_numpy_twin(la, smoother, coarsening):
    lap = _laplacian(8)
    a = (lap @ lap).tocsr()      # at most 13 nonzeros in each of 512 rows (≤ SMALL_ROWS):
    h = HostHierarchy(a, smoother, 2, max_coarse=10, coarsening=coarsening)
    assert len(h.sizes) >= 3
    m = DeviceVCycle(la, h)
    assert m.levels[0]["A"].g == 4               # rows summed by 4 threads (13 / 2 → 4)
    b = np.random.default_rng(4).standard_normal(a.shape[0])
    partial = np.zeros((m.nparts, 2))
    z = m.issue(b, partial, _ctl())
    ref = vcycle_reference(h, b, la.max_group)
    assert np.array_equal(z, ref)
    assert partial[:, 0].sum() == pytest.approx(b @ ref, rel=1e-13)


def test_pcg_with_vcycle_takes_scipys_iterations_and_replays_bitwise(la):
    a = _laplacian(8)
    h = HostHierarchy(a, "chebyshev", 2, max_coarse=10)
    cfg = SimpleNamespace(rtol=1e-8, atol=0.0, max_iterations=100)
    pcg = DevicePCG(la, DeviceMatrix.from_scipy(la, a), DeviceVCycle(la, h), cfg,
                    np.zeros(K.NCTL))
    b = np.random.default_rng(5).standard_normal(a.shape[0])
    pcg.b_arr[...] = b
    x1, its1 = pcg.solve()
    x1 = x1.copy()
    count = [0]
    m = spla.LinearOperator(a.shape, matvec=lambda v: vcycle_reference(h, v))
    xs, info = spla.cg(a, b, rtol=1e-8, M=m, callback=lambda _: count.__setitem__(0, count[0] + 1))
    assert info == 0 and its1 == count[0]
    assert np.linalg.norm(b - a @ x1) <= 1e-8 * np.linalg.norm(b)
    np.testing.assert_allclose(x1, xs, rtol=1e-10, atol=1e-12)
    x2, its2 = pcg.solve()                      # the captured graph, replayed
    assert its2 == its1 and np.array_equal(x2, x1)
    assert la.b.counters.graph_replays >= 1


def test_replay_budget_keeps_a_tenth_and_at_least_two_spare_iterations():
    """The learnt count plus max(2, ⌈count/10⌉), capped at the iteration limit; a count of 0
    (a zero right-hand side) is taken as 1."""
    assert [replay_budget(i, 500) for i in (0, 1, 7, 19, 20, 21, 32, 100, 101)] == \
        [3, 3, 9, 21, 22, 24, 36, 110, 112]
    assert replay_budget(499, 500) == 500 and replay_budget(40, 30) == 30


def test_pcg_budget_replays_without_more_when_the_count_holds(la):
    """A replayed solve of the same right-hand side runs ``first`` alone (its budget covers
    the learnt count) and reads the verdict once."""
    a = _laplacian(6)
    cfg = SimpleNamespace(rtol=1e-8, atol=0.0, max_iterations=100)
    m = DeviceMatrix.from_scipy(la, a)
    pcg = DevicePCG(la, m, DeviceJacobi(la, m, 1.0 / a.diagonal()), cfg, np.zeros(K.NCTL))
    pcg.b_arr[...] = np.random.default_rng(3).standard_normal(a.shape[0])
    x1, its1 = pcg.solve()
    x1 = x1.copy()
    (budget,) = [g[2] for g in pcg._graphs.values()]
    assert budget == replay_budget(its1, 100) and budget - its1 == max(2, -(-its1 // 10))
    replays, syncs = la.b.counters.graph_replays, la.b.counters.syncs
    x2, its2 = pcg.solve()
    assert its2 == its1 and np.array_equal(x2, x1)
    assert la.b.counters.graph_replays - replays == 1 and la.b.counters.syncs - syncs == 1


def test_pcg_jacobi_and_zero_rhs(la):
    a = _laplacian(5, shift=0.5)
    cfg = SimpleNamespace(rtol=1e-9, atol=0.0, max_iterations=200)
    m = DeviceMatrix.from_scipy(la, a)
    pcg = DevicePCG(la, m, DeviceJacobi(la, m, 1.0 / a.diagonal()), cfg, np.zeros(K.NCTL))
    b = np.random.default_rng(6).standard_normal(a.shape[0])
    pcg.b_arr[...] = b
    x, its = pcg.solve()
    assert its > 0 and np.linalg.norm(b - a @ x) <= 1e-9 * np.linalg.norm(b)
    pcg.b_arr[...] = 0.0
    x, its = pcg.solve()
    assert its == 0 and not x.any()


@pytest.mark.parametrize("pre", ["block_jacobi", "jacobi", "none"])
def test_bicgstab_bcsr_matches_scipy(la, pre):
    pat, vals, diag, a = _block_system()
    cfg = SimpleNamespace(rtol=1e-10, atol=0.0, max_iterations=100)
    solver = DeviceBiCGStab(la, pat.shape[0], 3, diag, pre, cfg, np.zeros(K.NCTL), "momentum")
    m = DeviceMatrix(la, pat.indptr, pat.indices, vals.reshape(-1), 3)
    b = np.random.default_rng(7).standard_normal(a.shape[0])
    x, its = solver.solve(m, b)
    if pre == "block_jacobi":
        inv = np.linalg.inv(vals[diag])
        pc = spla.LinearOperator(a.shape, matvec=lambda v: np.einsum(
            "kab,kb->ka", inv, v.reshape(-1, 3)).ravel())
    elif pre == "jacobi":
        pc = spla.LinearOperator(a.shape, matvec=lambda v: v / a.diagonal())
    else:
        pc = None
    count = [0]
    xs, info = spla.bicgstab(a, b, rtol=1e-10, M=pc,
                             callback=lambda _: count.__setitem__(0, count[0] + 1))
    assert info == 0 and abs(its - count[0]) <= 1
    assert np.linalg.norm(b - a @ x) <= 1e-10 * np.linalg.norm(b)
    np.testing.assert_allclose(x, xs, rtol=1e-9, atol=1e-12)


def test_fused_and_separate_finishes_give_the_same_solves_bitwise(la):
    """la.fuse False launches a finish after every dot-producing kernel: the same bits."""
    unfused = DeviceLinalg(la.b, rb=RB, fuse=False)
    lap = _laplacian(8)
    a = (lap @ lap).tocsr()
    h = HostHierarchy(a, "chebyshev", 2, max_coarse=10)
    cfg = SimpleNamespace(rtol=1e-8, atol=0.0, max_iterations=100)
    b = np.random.default_rng(9).standard_normal(a.shape[0])
    out = []
    for w in (la, unfused):
        pcg = DevicePCG(w, DeviceMatrix.from_scipy(w, a), DeviceVCycle(w, h), cfg,
                        np.zeros(K.NCTL))
        pcg.b_arr[...] = b
        x, its = pcg.solve()
        out.append((x.copy(), its))
    assert out[0][1] == out[1][1] and np.array_equal(out[0][0], out[1][0])
    pat, vals, diag, a3 = _block_system(seed=3)
    b3 = np.random.default_rng(10).standard_normal(a3.shape[0])
    cfg = SimpleNamespace(rtol=1e-10, atol=0.0, max_iterations=100)
    out = []
    for w in (la, unfused):
        solver = DeviceBiCGStab(w, pat.shape[0], 3, diag, "block_jacobi", cfg,
                                np.zeros(K.NCTL), "momentum")
        m = DeviceMatrix(w, pat.indptr, pat.indices, vals.reshape(-1), 3)
        x, its = solver.solve(m, b3)
        out.append((x.copy(), its))
    assert out[0][1] == out[1][1] and np.array_equal(out[0][0], out[1][0])


def test_bicgstab_limit_is_reported(la):
    from dycore.errors import SolverDivergedError
    pat, vals, diag, a = _block_system(seed=8)
    cfg = SimpleNamespace(rtol=1e-14, atol=0.0, max_iterations=2)
    solver = DeviceBiCGStab(la, pat.shape[0], 3, diag, "none", cfg, np.zeros(K.NCTL), "tracer")
    m = DeviceMatrix(la, pat.indptr, pat.indices, vals.reshape(-1), 3)
    with pytest.raises(SolverDivergedError, match="tracer solve .*iteration limit"):
        solver.solve(m, np.ones(a.shape[0]))


@pytest.mark.parametrize("g", [1, 4])
def test_lean_csr_kernels_give_the_general_kernels_bits(la, g):
    """csr_spmv (modes 0-2) and csr_spmv_dot (y = A x with w·y, and with y·y) against
    bsr_spmv with bs = 1."""
    a = (_laplacian(9) + sp.random(81, 81, density=0.2, random_state=7, format="csr")).tocsr()
    a.sort_indices()
    m = DeviceMatrix.from_scipy(la, a, g)
    x, b, w = np.random.default_rng(8).standard_normal((3, a.shape[0]))
    try:
        for mode in (0, 1, 2):
            ys = []
            for lean in (False, True):
                la.lean = lean
                y = b.copy()
                assert la.spmv(m, x, y, mode=mode, b=b, ctl=_ctl()) == (0 if lean else
                                                                        la.nparts(m))
                ys.append(y)
            assert np.array_equal(ys[0], ys[1]), mode
        ctls, ys = [], []
        for lean in (False, True):
            la.lean = lean
            ctl, y = _ctl(), np.empty(a.shape[0])
            partial = np.full((la.nparts(m), 2), np.nan)
            la.spmv(m, x, y, w=w, partial=partial, ctl=ctl, op=K.OP_STORE, slot=K.PQ)
            ctls.append(ctl[K.PQ])
            ys.append(y)
        assert np.array_equal(ys[0], ys[1]) and np.array_equal(ys[0], grouped_matvec(a, x, g))
        assert ctls[0] == ctls[1] == pytest.approx(w @ ys[0], rel=1e-13)
        ctls, ys = [], []                    # ndot 2: w·y and y·y (BiCGStab's t·s, t·t)
        for lean in (False, True):
            la.lean = lean
            ctl, y = _ctl(), np.empty(a.shape[0])
            ctl[K.DONE] = K.RUNNING
            partial = np.full((la.nparts(m), 2), np.nan)
            la.spmv(m, x, y, w=w, partial=partial, ctl=ctl, op=K.OP_BI_OMEGA, ndot=2)
            ctls.append(ctl.copy())
            ys.append(y)
        assert np.array_equal(ys[0], ys[1]) and np.array_equal(ctls[0], ctls[1])
        assert ctls[1][K.OMEGA] == pytest.approx((w @ ys[1]) / (ys[1] @ ys[1]), rel=1e-12)
    finally:
        la.lean = DeviceLinalg.LEAN


def test_vcycle_with_float32_levels_is_the_rounded_hierarchys_cycle(la):
    """Levels stored in float32: bitwise the float64 cycle of the rounded hierarchy, within
    rounding of the float64 cycle, and CG with it converges to the same tolerance."""
    lap = _laplacian(8)
    a = (lap @ lap).tocsr()
    h = HostHierarchy(a, "chebyshev", 2, max_coarse=10)
    m32 = DeviceVCycle(la, h, np.float32)
    assert m32.levels[0]["A"].data.dtype == np.float32
    b = np.random.default_rng(9).standard_normal(a.shape[0])
    z = m32.issue(b, np.zeros((m32.nparts, 2)), _ctl()).copy()
    assert np.array_equal(z, vcycle_reference(h.rounded(np.float32), b, la.max_group))
    z64 = vcycle_reference(h, b, la.max_group)
    assert not np.array_equal(z, z64)
    assert np.linalg.norm(z - z64) <= 1e-6 * np.linalg.norm(z64)
    cfg = SimpleNamespace(rtol=1e-10, atol=0.0, max_iterations=100)
    pcg = DevicePCG(la, DeviceMatrix.from_scipy(la, a), m32, cfg, np.zeros(K.NCTL))
    pcg.b_arr[...] = b
    x, its = pcg.solve()
    assert np.linalg.norm(b - a @ x) <= 1e-10 * np.linalg.norm(b)


def _momentum_like(coriolis, nb=23, seed=11):
    """A BCSR 3×3 matrix with the momentum blocks' shape — [[l0, a01, 0], [a10, l1, 0],
    [0, 0, l2]], the Coriolis entries −0.0 / 0.0 when ``coriolis`` is False (as the weak form
    writes them for f = 0) — except the blocks at ``full`` (every 5th), which are full 3×3
    blocks (what the no-normal-flow rotation writes). Returns (pattern, values (nnzb,3,3),
    full positions, scipy BSR)."""
    rng = np.random.default_rng(seed)
    rows, cols = zip(*[(i, j) for i in range(nb) for j in (i - 2, i - 1, i, i + 1, i + 3)
                       if 0 <= j < nb])
    pat = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(nb, nb))
    pat.sort_indices()
    vals = np.zeros((pat.nnz, 3, 3))
    for d in range(3):
        vals[:, d, d] = rng.standard_normal(pat.nnz)
    if coriolis:
        f = rng.standard_normal(pat.nnz)
        vals[:, 0, 1], vals[:, 1, 0] = -f, f
    else:
        vals[:, 0, 1] = -0.0
    full = np.arange(2, pat.nnz, 5)
    vals[full] = rng.standard_normal((full.size, 3, 3))
    a = sp.bsr_matrix((vals, pat.indices, pat.indptr), shape=(3 * nb, 3 * nb))
    return pat, vals, full, a


@pytest.mark.parametrize("coriolis,g", [(False, 1), (False, 2), (True, 1), (True, 4)])
def test_lean_momentum_product_gives_the_full_products_bits(la, coriolis, g):
    """bsr3_lean_spmv reads 3 (5) entries of a block and the rotated blocks in full: every
    mode and both dot products bitwise those of bsr_spmv; SciPy to rounding."""
    pat, vals, full, a = _momentum_like(coriolis)
    full_m = DeviceMatrix(la, pat.indptr, pat.indices, vals.reshape(-1), 3, g)
    lean_m = DeviceMatrix(la, pat.indptr, pat.indices, vals.reshape(-1), 3, g)
    lean_m.lean_blocks = lb = LeanBlocks(la, pat.indices.astype(np.int32), full, coriolis)
    assert lb.ncomp == (5 if coriolis else 3) and lb.nfull == full.size
    lb.refresh(la, lean_m)
    x, b, w = np.random.default_rng(12).standard_normal((3, a.shape[0]))
    for mode, ndot in ((0, 0), (0, 1), (0, 2), (1, 1), (2, 2)):
        out = []
        for m in (full_m, lean_m):
            y, ctl = b.copy(), _ctl()
            partial = np.full((la.nparts(m), 2), np.nan)
            la.spmv(m, x, y, mode=mode, b=b, w=w if ndot else None,
                    partial=partial if ndot else None, ctl=ctl,
                    op=K.OP_BI_OMEGA if ndot == 2 else K.OP_STORE, slot=K.PQ, ndot=ndot)
            out.append((y, ctl.copy()))
        assert np.array_equal(out[0][0], out[1][0]), (mode, ndot)
        assert np.array_equal(out[0][1], out[1][1]), (mode, ndot)
        expect = {0: a @ x, 1: b - a @ x, 2: b + a @ x}[mode]
        np.testing.assert_allclose(out[1][0], expect, rtol=1e-13, atol=1e-13)


def test_lean_momentum_product_reads_only_the_declared_entries(la):
    """The contract the lean product rests on: an entry outside the declared block sparsity
    (here (0,2) of a non-rotated block) is not read — which is why the weak form's zeros are
    checked (tests/unit/test_block_sparsity.py) — while a rotated block is read whole."""
    pat, vals, full, a = _momentum_like(True)
    lean = vals.copy()
    lean[0, 0, 2] = 5.0                      # block 0: not rotated
    lean[full[0], 0, 2] += 5.0               # a rotated block
    m = DeviceMatrix(la, pat.indptr, pat.indices, lean.reshape(-1), 3)
    m.lean_blocks = LeanBlocks(la, pat.indices.astype(np.int32), full, True)
    m.lean_blocks.refresh(la, m)
    x = np.random.default_rng(13).standard_normal(a.shape[0])
    y = np.empty_like(x)
    la.spmv(m, x, y, ctl=_ctl())
    seen = vals.copy()
    seen[full[0], 0, 2] += 5.0
    expect = sp.bsr_matrix((seen, pat.indices, pat.indptr), shape=a.shape) @ x
    np.testing.assert_allclose(y, expect, rtol=1e-13, atol=1e-13)
    assert abs(y[0] - (sp.bsr_matrix((lean, pat.indices, pat.indptr), shape=a.shape) @ x)[0]) > 1


def test_bicgstab_over_lean_momentum_blocks_is_bitwise_the_full_solve(la):
    pat, vals, full, a = _momentum_like(True, nb=31, seed=14)
    diag = np.array([pat.indptr[i] + np.flatnonzero(
        pat.indices[pat.indptr[i]:pat.indptr[i + 1]] == i)[0] for i in range(pat.shape[0])])
    vals[diag] += 6.0 * np.eye(3)
    cfg = SimpleNamespace(rtol=1e-10, atol=0.0, max_iterations=200)
    b = np.random.default_rng(15).standard_normal(a.shape[0])
    out = []
    for lean in (False, True):
        m = DeviceMatrix(la, pat.indptr, pat.indices, vals.reshape(-1), 3)
        if lean:
            m.lean_blocks = LeanBlocks(la, pat.indices.astype(np.int32), full, True)
        solver = DeviceBiCGStab(la, pat.shape[0], 3, diag, "block_jacobi", cfg,
                                np.zeros(K.NCTL), "momentum")
        x, its = solver.solve(m, b)
        out.append((x.copy(), its))
    assert out[0][1] == out[1][1] > 3 and np.array_equal(out[0][0], out[1][0])
    a = sp.bsr_matrix((vals, pat.indices, pat.indptr), shape=a.shape)
    assert np.linalg.norm(b - a @ out[1][0]) <= 1e-10 * np.linalg.norm(b)


@pytest.mark.parametrize("g", [1, 2, 4])
def test_sliced_csr_products_are_the_csr_products_bitwise(la, g):
    """y = A x, b − A x and y + A x from a sliced-ELL matrix: the CSR kernel's bits (rows of 0
    to 20 entries over several slices and blocks), float64 and float32 values."""
    rng = np.random.default_rng(11)
    a = sp.random(75, 60, density=0.15, random_state=12, format="csr")
    a = sp.csr_matrix(a.toarray() * (np.arange(75) % 17 != 5)[:, None])   # some empty rows
    a.sort_indices()
    x, b = rng.standard_normal(60), rng.standard_normal(75)
    for dtype in (np.float64, np.float32):
        csr = DeviceMatrix.from_scipy(la, a, g=g, dtype=dtype)
        ell = DeviceMatrix.from_scipy(la, a, g=g, dtype=dtype, sliced=True)
        assert (csr.sliced, ell.sliced, ell.nrow, ell.n, ell.g) == (0, 1, 75, 75, g)
        for mode in (0, 1, 2):
            y0 = rng.standard_normal(75)
            ys = []
            for m in (csr, ell):
                y = y0.copy()
                la.spmv(m, x, y, mode=mode, b=b, ctl=_ctl())
                ys.append(y)
            assert np.array_equal(ys[0], ys[1]), (dtype, mode)
        y = np.zeros(75)
        la.spmv(ell, x, y, ctl=_ctl())
        am = a.astype(dtype).astype(np.float64)
        assert np.array_equal(y, grouped_matvec(am, x, g))
    with pytest.raises(ValueError, match="sliced-ELL"):
        la.spmv(ell, x, np.zeros(75), w=x, partial=np.zeros((la.nparts(ell), 2)), ctl=_ctl())
    with pytest.raises(ValueError, match="sliced-ELL"):
        split_rows(ell, 10)
    with pytest.raises(ValueError, match="y has 74 entries"):
        la.spmv(ell, x, np.zeros(74), ctl=_ctl())


def test_vcycle_with_sliced_levels_gives_the_csr_cycles_bits(la, monkeypatch):
    """Every level sliced (the size threshold lowered to 0): the same z and r·z partials as
    the CSR levels and the NumPy twin, float64 and float32 levels."""
    monkeypatch.setattr(amg_module, "SMALL_ROWS", 0)
    lap = _laplacian(8)
    a = (lap @ lap).tocsr()
    h = HostHierarchy(a, "chebyshev", 2, max_coarse=10)
    b = np.random.default_rng(13).standard_normal(a.shape[0])
    for dtype, hh in ((np.float64, h), (np.float32, h.rounded(np.float32))):
        out = []
        for sliced in (False, True):
            m = DeviceVCycle(la, h, dtype, sliced=sliced)
            assert all(lev[k].sliced == sliced for lev in m.levels for k in "APR")
            partial = np.zeros((m.nparts, 2))
            out.append((m.issue(b, partial, _ctl()).copy(), partial.copy()))
        assert np.array_equal(out[0][0], out[1][0]) and np.array_equal(out[0][1], out[1][1])
        assert np.array_equal(out[1][0], vcycle_reference(hh, b, la.max_group))
    monkeypatch.undo()
    m = DeviceVCycle(la, h)                   # the default: levels of ≤ SMALL_ROWS rows in CSR
    assert DeviceVCycle.SLICED and not any(lev["A"].sliced for lev in m.levels)
