"""get_edge_lengths: edge metric M (e^T M e = 1 on all six edges) and h-bar = M^(-1/2)."""
import numpy as np
import pytest

from dycore.fem import EIG_CLOSED_FORM, EIG_JACOBI, get_edge_lengths

METHODS = [EIG_JACOBI, EIG_CLOSED_FORM]
EDGES = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
REF_NODES = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
REGULAR = np.array([[0.0, 0, 0], [1, 0, 0], [0.5, np.sqrt(3) / 2, 0],
                    [0.5, np.sqrt(3) / 6, np.sqrt(2.0 / 3.0)]])


def edge_lengths(X, method):
    bufs = dict(a6=np.empty((6, 6)), b6=np.empty(6), x6=np.empty(6),
                metric=np.full((3, 3), np.nan), evals=np.full(3, np.nan),
                evecs=np.full((3, 3), np.nan), hbar=np.full((3, 3), np.nan))
    status = get_edge_lengths(np.ascontiguousarray(X, dtype=np.float64), bufs["a6"],
                              bufs["b6"], bufs["x6"], bufs["metric"], bufs["evals"],
                              bufs["evecs"], bufs["hbar"], method)
    return status, bufs["metric"], bufs["evals"], bufs["evecs"], bufs["hbar"]


def edge_residual(X, M):
    return max(abs((X[j] - X[i]) @ M @ (X[j] - X[i]) - 1.0) for i, j in EDGES)


@pytest.mark.parametrize("method", METHODS)
def test_reference_tet(method):
    status, M, evals, evecs, hbar = edge_lengths(REF_NODES, method)
    assert status == 0
    np.testing.assert_allclose(M, [[1, .5, .5], [.5, 1, .5], [.5, .5, 1]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(evals, [0.5, 0.5, 2.0], rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.diag(hbar), 1.1785113, rtol=0, atol=1e-7)
    np.testing.assert_allclose(hbar[~np.eye(3, dtype=bool)], -0.2357023, rtol=0, atol=1e-7)
    np.testing.assert_allclose(M @ evecs, evecs * evals, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(hbar, hbar.T)


@pytest.mark.parametrize("method", METHODS)
def test_regular_unit_tet_gives_identity(method):
    rng = np.random.default_rng(0)
    for _ in range(20):
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        X = REGULAR @ q.T + rng.uniform(-5, 5, 3)
        status, M, evals, evecs, hbar = edge_lengths(X, method)
        assert status == 0
        np.testing.assert_allclose(M, np.eye(3), rtol=0, atol=1e-12)
        np.testing.assert_allclose(evals, 1.0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(hbar, np.eye(3), rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_random_tets(method):
    rng = np.random.default_rng(1)
    for _ in range(200):
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        scale = 10.0 ** rng.uniform(-2, 4)
        X = (REGULAR + 0.15 * rng.standard_normal((4, 3))) @ q.T * scale
        X += rng.uniform(-1, 1, 3) * 3 * scale
        status, M, evals, evecs, hbar = edge_lengths(X, method)
        assert status == 0
        assert edge_residual(X, M) < 1e-10
        np.testing.assert_array_equal(M, M.T)
        np.testing.assert_allclose(np.linalg.inv(hbar @ hbar), M, rtol=0,
                                   atol=1e-10 * np.abs(M).max())
        np.testing.assert_allclose(evals, np.linalg.eigvalsh(M), rtol=1e-10)
        assert np.all(evals > 0) and np.all(np.diff(evals) >= 0)
        # principal lengths are of the size of the element
        lengths = 1.0 / np.sqrt(evals)
        assert np.all(lengths < 2 * scale) and np.all(lengths > 0.05 * scale)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("height", [1e-2, 1e-4])
def test_flat_element(method, height):
    # regular tet squashed in z (a terrain-following layer): M = diag(1, 1, 1/h^2) exactly
    X = REGULAR * [1.0, 1.0, height]
    status, M, evals, evecs, hbar = edge_lengths(X, method)
    assert status == 0
    np.testing.assert_allclose(np.diag(M), [1.0, 1.0, height**-2], rtol=1e-10)
    assert edge_residual(X, M) < 1e-10
    np.testing.assert_allclose(evals, [1.0, 1.0, height**-2], rtol=1e-10)
    np.testing.assert_allclose(hbar, np.diag([1.0, 1.0, height]), rtol=0, atol=1e-10)


@pytest.mark.parametrize("method", METHODS)
def test_flat_tilted_element(method):
    # the same squashed tet on a 0.3 terrain slope, 500 m wide, 0.05 m thick (aspect 1e4)
    rng = np.random.default_rng(2)
    c, s = np.cos(np.arctan(0.3)), np.sin(np.arctan(0.3))
    tilt = np.array([[c, 0, -s], [0, 1, 0], [s, 0, c]])
    for _ in range(20):
        X = (REGULAR + 0.1 * rng.standard_normal((4, 3))) * [500.0, 500.0, 0.05] @ tilt.T
        status, M, evals, evecs, hbar = edge_lengths(X, method)
        assert status == 0
        assert edge_residual(X, M) < 1e-6  # conditioned like aspect ratio^2 (docstring)
        lengths = np.sort(1.0 / np.sqrt(evals))
        assert 0.01 < lengths[0] < 0.1 and 200.0 < lengths[1] <= lengths[2] < 1000.0
        np.testing.assert_allclose(hbar @ hbar @ M, np.eye(3), rtol=0, atol=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_degenerate_element_is_singular(method):
    rng = np.random.default_rng(3)
    for _ in range(50):
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        X = np.column_stack([rng.standard_normal((4, 2)), np.zeros(4)]) @ q.T  # coplanar
        status, M, evals, evecs, hbar = edge_lengths(X, method)
        assert status == 1
        for out in (M, evals, evecs, hbar):
            assert np.all(np.isnan(out))
    X = REF_NODES.copy()
    X[3] = X[2]  # two coincident nodes: a zero row
    assert edge_lengths(X, method)[0] == 1


def test_methods_agree():
    rng = np.random.default_rng(4)
    for _ in range(50):
        X = REGULAR + 0.2 * rng.standard_normal((4, 3))
        s0, M0, e0, _, h0 = edge_lengths(X, EIG_JACOBI)
        s1, M1, e1, _, h1 = edge_lengths(X, EIG_CLOSED_FORM)
        assert s0 == s1 == 0
        np.testing.assert_array_equal(M0, M1)
        np.testing.assert_allclose(e0, e1, rtol=1e-12)
        np.testing.assert_allclose(h0, h1, rtol=0, atol=1e-12 * np.abs(h0).max())
