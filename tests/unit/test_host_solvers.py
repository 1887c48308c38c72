"""Host linear solvers: the pressure AMG hierarchy is reproducible and effective on anisotropy."""
import numpy as np
import scipy.sparse as sp
import pytest
import scipy.sparse.linalg as spla

from dycore.solvers.linear import HostSolver, amg_hierarchy


def _anisotropic_laplacian(n=24, eps=0.01):
    """7-point 3-D Laplacian, couplings 1, 1, eps (x, y, z), Dirichlet; SPD."""
    one = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    eye = sp.identity(n)
    a = (sp.kron(sp.kron(one, eye), eye) + sp.kron(sp.kron(eye, one), eye)
         + eps * sp.kron(sp.kron(eye, eye), one))
    return a.tocsr()


def test_amg_hierarchy_is_bitwise_reproducible_and_leaves_the_global_rng_alone():
    a = _anisotropic_laplacian(12)
    np.random.seed(123)
    expected_next = np.random.rand()
    np.random.seed(123)
    m1 = amg_hierarchy(a)
    assert np.random.rand() == expected_next                 # caller's stream untouched
    np.random.seed(999)                                      # a different outside state
    m2 = amg_hierarchy(a)
    assert len(m1.levels) == len(m2.levels) > 1
    for l1, l2 in zip(m1.levels[:-1], m2.levels[:-1]):
        d = l1.P - l2.P
        assert d.nnz == 0 or abs(d).max() == 0.0


@pytest.mark.slow
def test_amg_preconditioned_cg_is_fast_on_strong_anisotropy():
    """Aggregation must follow the strong direction: CG + V-cycle converges in few iterations
    on a 100:1 anisotropic Laplacian (13,824 unknowns), far fewer than unpreconditioned CG
    (evolution strength: 8 iterations; the symmetric measure with θ = 0.25: 44)."""
    a = _anisotropic_laplacian(24, eps=0.01)
    b = np.random.default_rng(0).standard_normal(a.shape[0])
    m = amg_hierarchy(a).aspreconditioner(cycle="V")
    its = {"amg": 0, "none": 0}

    def cb(key):
        return lambda _: its.__setitem__(key, its[key] + 1)
    x, info = spla.cg(a, b, rtol=1e-10, M=m, maxiter=200, callback=cb("amg"))
    assert info == 0 and np.linalg.norm(b - a @ x) <= 1e-10 * np.linalg.norm(b) * 1.01
    spla.cg(a, b, rtol=1e-10, maxiter=5000, callback=cb("none"))
    assert its["amg"] <= 15 and its["amg"] * 5 < its["none"], its


def _pressure_8x8x6():
    """The pinned pressure matrix of an 8×8×6 mountain-wave mesh (567 unknowns)."""
    import dycore
    cfg = dycore.load_config("configs/mountainwave3d_small.yaml",
                             mesh={"nx": 8, "ny": 8, "nz": 6})
    return dycore.Simulation(cfg).ops.pressure_host.tocsr()


def _cg_iterations(a, b, ml) -> int:
    """CG iterations to rtol 1e-10 with PyAMG's V-cycle of ``ml`` (checked converged)."""
    count = [0]
    x, info = spla.cg(a, b, rtol=1e-10, M=ml.aspreconditioner(cycle="V"), maxiter=200,
                      callback=lambda _: count.__setitem__(0, count[0] + 1))
    assert info == 0 and np.linalg.norm(b - a @ x) <= 1e-10 * np.linalg.norm(b) * 1.01
    return count[0]


def test_one_evolution_step_is_another_hierarchy_that_still_preconditions_the_pressure():
    """``evolution_steps=1`` (the rank-local hierarchies' setting) reaches PyAMG — on the
    pressure matrix of an 8×8×6 mountain-wave mesh (567 unknowns) it aggregates otherwise than
    the default 2 (155 against 174 aggregates) — and CG + its V-cycle converges within two
    iterations of the default's."""
    a = _pressure_8x8x6()
    b = np.random.default_rng(0).standard_normal(a.shape[0])
    mls = {k: amg_hierarchy(a, max_coarse=50, evolution_steps=k) for k in (1, 2)}
    assert mls[1].levels[0].P.shape[1] != mls[2].levels[0].P.shape[1]
    its = {k: _cg_iterations(a, b, ml) for k, ml in mls.items()}
    assert its[1] <= its[2] + 2 and its[2] < 40, its


def test_two_energy_iterations_are_another_hierarchy_that_still_preconditions_the_pressure():
    """``energy_iterations=2`` (with one evolution step: the rank-local hierarchies'
    :data:`~dycore.solvers.amg.RANK_LOCAL_AMG`) reaches PyAMG — other prolongation values than
    the default 4 on the pressure matrix of an 8×8×6 mountain-wave mesh — and CG + its V-cycle
    converges within two iterations of the default's."""
    from dycore.solvers.amg import RANK_LOCAL_AMG
    a = _pressure_8x8x6()
    b = np.random.default_rng(1).standard_normal(a.shape[0])
    assert RANK_LOCAL_AMG == {"evolution_steps": 1, "energy_iterations": 2}
    mls = {k: amg_hierarchy(a, max_coarse=50, evolution_steps=1, energy_iterations=k)
           for k in (2, 4)}
    p2, p4 = (mls[k].levels[0].P.tocsr() for k in (2, 4))
    assert p2.shape == p4.shape and abs(p2 - p4).max() > 1e-3 * abs(p4).max()
    its = {k: _cg_iterations(a, b, ml) for k, ml in mls.items()}
    assert its[2] <= its[4] + 2 and its[4] < 40, its


def test_the_amg_set_up_runs_blas_on_one_thread_and_gives_it_back(monkeypatch):
    """one_blas_thread sets every BLAS pool threadpoolctl finds to one thread and restores
    it; PyAMG's build runs inside it."""
    import pyamg
    from threadpoolctl import threadpool_info

    from dycore.solvers.linear import one_blas_thread

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    before = blas_threads()
    assert before                                   # numpy's BLAS is seen
    with one_blas_thread():
        assert blas_threads() == [1] * len(before)
    assert blas_threads() == before
    seen = []
    build = pyamg.smoothed_aggregation_solver

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return build(*args, **kwargs)
    monkeypatch.setattr(pyamg, "smoothed_aggregation_solver", spy)
    amg_hierarchy(_anisotropic_laplacian(8))
    assert seen == [[1] * len(before)] and blas_threads() == before


def test_the_smoothers_spectral_radius_is_a_lanczos_value_below_the_true_one():
    """The Chebyshev interval's ρ(D⁻¹A) (Lanczos to 3e-2, :func:`_dinv_spectral_radius`) is
    within 3 % below the dense eigenvalue of D^-½ A D^-½ — so 1.1 ρ bounds the spectrum — on a
    variable-coefficient SPD matrix of 1,728 unknowns."""
    from dycore.solvers.amg import _dinv_spectral_radius
    a = _anisotropic_laplacian(12, eps=0.3)
    a = (a + sp.diags(np.linspace(0.0, 2.0, a.shape[0]))).tocsr()
    d = 1.0 / np.sqrt(a.diagonal())
    exact = np.linalg.eigvalsh(a.toarray() * d[:, None] * d[None, :]).max()
    rho = _dinv_spectral_radius(a)
    assert exact * (1 - 3e-2) <= rho <= exact * (1 + 1e-12) and 1.1 * rho > exact


def test_classical_coarsening_is_ruge_stuben_and_preconditions_cg():
    """``coarsening="classical"``: PyAMG's Ruge-Stuben hierarchy (C/F splitting: the fine
    points are a subset, R = Pᵀ, P is the identity on the coarse points), reproducible, and
    CG + its V-cycle converges on the 100:1 anisotropic Laplacian far faster than plain CG;
    an unknown coarsening is refused by name."""
    a = _anisotropic_laplacian(12, eps=0.01)
    m1 = amg_hierarchy(a, coarsening="classical")
    m2 = amg_hierarchy(a, coarsening="classical")
    assert len(m1.levels) > 2 and hasattr(m1.levels[0], "splitting")
    for l1, l2 in zip(m1.levels[:-1], m2.levels[:-1]):
        assert (l1.P != l2.P).nnz == 0
        assert (l1.R != l1.P.T).nnz == 0
        c = np.flatnonzero(l1.splitting == 1)               # coarse points: identity rows
        assert c.size == l1.P.shape[1]
        assert (l1.P[c] != sp.identity(c.size, format="csr")).nnz == 0
    b = np.random.default_rng(0).standard_normal(a.shape[0])
    its = {"rs": 0, "none": 0}

    def cb(key):
        return lambda _: its.__setitem__(key, its[key] + 1)
    x, info = spla.cg(a, b, rtol=1e-10, M=m1.aspreconditioner(cycle="V"), maxiter=200,
                      callback=cb("rs"))
    assert info == 0 and np.linalg.norm(b - a @ x) <= 1e-10 * np.linalg.norm(b) * 1.01
    spla.cg(a, b, rtol=1e-10, maxiter=5000, callback=cb("none"))
    assert its["rs"] <= 20 and its["rs"] * 3 < its["none"], its
    with pytest.raises(ValueError, match="'geometric' is not 'aggregation' or 'classical'"):
        amg_hierarchy(a, coarsening="geometric")


def test_gmres_max_iterations_counts_iterations_not_restart_cycles():
    """max_iterations = 40 with restart 10 allows 4 restart cycles, 40 iterations (SciPy's own
    maxiter would allow 40 cycles, 400 iterations): an unpreconditioned 1-D Laplacian of 200
    unknowns needs far more, and the error reports the 40 iterations done."""
    import pytest
    from types import SimpleNamespace
    from dycore.errors import SolverDivergedError
    n = 200
    a = sp.diags([-np.ones(n - 1), 2.0 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1]).tocsr()
    cfg = SimpleNamespace(method="gmres", preconditioner="none", rtol=1e-8, atol=0.0,
                          max_iterations=40, restart=10)
    with pytest.raises(SolverDivergedError, match=r" 40 iterations, .*max_iterations 40"):
        HostSolver("tracer", cfg).solve(a, np.ones(n))
