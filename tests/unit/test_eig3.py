"""Symmetric 3x3 eigensolvers (Jacobi and closed form) vs numpy.linalg.eigh."""
import numpy as np
import pytest

from dycore.fem import eig3_closed_form, eig3_jacobi
from dycore.fem.eig3 import JACOBI_MAX_SWEEPS

METHODS = {"jacobi": eig3_jacobi, "closed_form": eig3_closed_form}


def rotation(rng):
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    return q


def decompose(method, A):
    a = np.array(A, dtype=np.float64)
    evals = np.full(3, np.nan)
    evecs = np.full((3, 3), np.nan)
    ret = METHODS[method](a, evals, evecs)
    return ret, evals, evecs


def check(method, A, tol=1e-13):
    """A V = V Lambda, V orthonormal, ascending, eigenvalues == eigh to tol * |A|."""
    ret, evals, evecs = decompose(method, A)
    norm = max(np.abs(np.linalg.eigvalsh(A)).max(), 1e-300)
    assert np.all(np.diff(evals) >= 0.0), evals
    np.testing.assert_allclose(evals, np.linalg.eigvalsh(A), rtol=0, atol=tol * norm)
    np.testing.assert_allclose(A @ evecs, evecs * evals, rtol=0, atol=tol * norm)
    np.testing.assert_allclose(evecs.T @ evecs, np.eye(3), rtol=0, atol=1e-14)
    if method == "jacobi":
        assert 0 <= ret <= 6
    else:
        assert ret == 0
    return evals, evecs


@pytest.mark.parametrize("method", METHODS)
def test_random_spd(method):
    rng = np.random.default_rng(0)
    for _ in range(500):
        q = rotation(rng)
        lam = np.sort(10.0 ** rng.uniform(-3, 3, 3))
        A = q @ np.diag(lam) @ q.T
        evals, _ = check(method, A)
        np.testing.assert_allclose(evals, lam, rtol=1e-10)


@pytest.mark.parametrize("method", METHODS)
def test_random_symmetric_indefinite(method):
    rng = np.random.default_rng(1)
    for _ in range(300):
        B = rng.standard_normal((3, 3))
        check(method, B + B.T)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("lam", [(1.0, 1.0, 2.0), (1.0, 2.0, 2.0), (3.0, 3.0, 3.0),
                                 (1.0, 1.0 + 1e-9, 2.0), (-1.0, -1.0, 0.0)])
def test_repeated_eigenvalues(method, lam):
    rng = np.random.default_rng(2)
    for _ in range(100):
        q = rotation(rng)
        A = q @ np.diag(lam) @ q.T
        A = 0.5 * (A + A.T)
        evals, _ = check(method, A)
        np.testing.assert_allclose(evals, lam, rtol=0, atol=1e-14)


@pytest.mark.parametrize("method", METHODS)
def test_exact_multiples_of_identity_and_diagonal(method):
    for A, expected in [(3.0 * np.eye(3), [3.0, 3.0, 3.0]),
                        (np.zeros((3, 3)), [0.0, 0.0, 0.0]),
                        (np.diag([3.0, -1.0, 2.0]), [-1.0, 2.0, 3.0])]:
        ret, evals, evecs = decompose(method, A)
        np.testing.assert_array_equal(evals, expected)
        np.testing.assert_array_equal(np.abs(evecs) @ np.abs(np.diag(expected)),
                                      np.abs(A @ evecs))
        np.testing.assert_array_equal(np.abs(evecs.T @ evecs), np.eye(3))
        if method == "jacobi":
            assert ret == 0


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("pair", [(1.0, 1.0), (0.5, 2.0), (1.0, 1e8)])
def test_badly_scaled_flat_element_metrics(method, pair):
    # metric of a flat element: eigenvalue ratio 1e8 (1/h^2 with aspect ratio 1e4)
    rng = np.random.default_rng(3)
    for _ in range(200):
        q = rotation(rng)
        lam = np.sort(np.array([pair[0], pair[1], 1e8]))
        A = q @ np.diag(lam) @ q.T
        A = 0.5 * (A + A.T)
        evals, _ = check(method, A, tol=1e-14)
        # normwise accuracy only: the small eigenvalues to ~ eps * 1e8 absolute
        np.testing.assert_allclose(evals, lam, rtol=0, atol=1e-14 * 1e8)


@pytest.mark.parametrize("method", METHODS)
def test_graded_axis_aligned_metric_small_eigenvalues_relative(method):
    # nearly axis-aligned flat metric (terrain-following layer): the small eigenvalues are
    # recovered to high RELATIVE accuracy.  Reference: mpmath.eigsy at 50 digits (numpy's eigh
    # is only normwise accurate here: its middle eigenvalue is off by 1e-8 relative).
    A = np.array([[1.0, 1e-3, 2.0], [1e-3, 2.0, -3.0], [2.0, -3.0, 1e8]])
    ref = np.array([0.99999895988094623096804290677, 2.0000009101190515702320861292,
                    100000000.00000013000000219880])
    _, evals, _ = decompose(method, A)
    np.testing.assert_allclose(evals, ref, rtol=1e-14)


def test_jacobi_sweep_count_and_input_overwritten():
    A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]])
    a = A.copy()
    evals = np.empty(3)
    evecs = np.empty((3, 3))
    sweeps = eig3_jacobi(a, evals, evecs)
    assert 1 <= sweeps <= 5 < JACOBI_MAX_SWEEPS
    np.testing.assert_allclose(a, np.diag(np.diag(a)), rtol=0, atol=0)  # diagonalised
    np.testing.assert_allclose(np.sort(np.diag(a)), evals, rtol=0, atol=0)


@pytest.mark.parametrize("method", METHODS)
def test_only_upper_triangle_is_read(method):
    rng = np.random.default_rng(4)
    B = rng.standard_normal((3, 3))
    A = B + B.T
    garbage_lower = np.triu(A) + np.tril(np.full((3, 3), 1e3), -1)
    _, e1, v1 = decompose(method, A)
    _, e2, v2 = decompose(method, garbage_lower)
    np.testing.assert_array_equal(e1, e2)
    np.testing.assert_array_equal(v1, v2)


def test_both_methods_agree():
    rng = np.random.default_rng(5)
    for _ in range(100):
        B = rng.standard_normal((3, 3))
        A = B @ B.T
        _, ej, vj = decompose("jacobi", A)
        _, ec, vc = decompose("closed_form", A)
        np.testing.assert_allclose(ej, ec, rtol=0, atol=1e-13 * np.abs(ej).max())
        # same eigenvectors up to sign (eigenvalues of B B^T are distinct a.s.)
        np.testing.assert_allclose(np.abs(vj.T @ vc), np.eye(3), rtol=0, atol=1e-8)


@pytest.mark.parametrize("method", METHODS)
def test_nan_input_gives_nan_without_raising(method):
    A = np.array([[1.0, 2.0, np.nan], [2.0, 1.0, 0.5], [np.nan, 0.5, 3.0]])
    ret, evals, evecs = decompose(method, A)
    assert np.all(np.isnan(evals))
    if method == "jacobi":
        assert ret == JACOBI_MAX_SWEEPS
