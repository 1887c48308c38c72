"""transform_to_physical: Jacobian, physical gradients, detwei, orientation."""
import numpy as np
import pytest

from dycore.fem import REF_DSHAPE, get_quadrature, transform_to_physical

REF_NODES = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
REGULAR = np.array([[0.0, 0, 0], [1, 0, 0], [0.5, np.sqrt(3) / 2, 0],
                    [0.5, np.sqrt(3) / 6, np.sqrt(2.0 / 3.0)]])


def random_tets(seed, count):
    """Well-shaped random tetrahedra of random size, orientation and position [m]."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        scale = 10.0 ** rng.uniform(-2, 4)
        X = (REGULAR + 0.15 * rng.standard_normal((4, 3))) @ q.T * scale
        yield X + rng.uniform(-1, 1, 3) * 10 * scale


def transform(X, degree=4):
    q = get_quadrature(degree)
    dshape = np.full((4, 3), np.nan)
    detwei = np.full(q.weights.shape, np.nan)
    detj = transform_to_physical(np.ascontiguousarray(X), q.weights, dshape, detwei)
    return detj, dshape, detwei


@pytest.mark.parametrize("degree", [2, 3, 4])
def test_reference_tet(degree):
    detj, dshape, detwei = transform(REF_NODES, degree)
    assert detj == 1.0
    np.testing.assert_array_equal(dshape, REF_DSHAPE)
    np.testing.assert_array_equal(detwei, get_quadrature(degree).weights)
    assert abs(detwei.sum() - 1.0 / 6.0) < 1e-16


def test_random_tets_against_numpy():
    for X in random_tets(1, 200):
        detj, dshape, detwei = transform(X)
        # gradients of the linear interpolants: [1, x_k] . [c_i; g_i] = delta_ik
        P = np.column_stack([np.ones(4), X])
        coeffs = np.linalg.solve(P, np.eye(4))  # column i = (c_i, g_i)
        grad = coeffs[1:].T
        np.testing.assert_allclose(dshape, grad, rtol=0, atol=1e-10 * np.abs(grad).max())
        det_ref = np.linalg.det((X[1:] - X[0]).T)
        assert detj == pytest.approx(det_ref, rel=1e-12)
        assert detwei.sum() == pytest.approx(abs(det_ref) / 6.0, rel=1e-12)
        # the gradient of the coordinate function x_a = sum_i X[i, a] N_i is e_a
        np.testing.assert_allclose(X.T @ dshape, np.eye(3), rtol=0, atol=1e-11)
        np.testing.assert_allclose(dshape.sum(axis=0), 0.0, rtol=0,
                                   atol=1e-13 * np.abs(dshape).max())


def test_orientation_sign_and_node_permutation():
    for X in random_tets(2, 50):
        detj, dshape, detwei = transform(X)
        perm = [1, 0, 2, 3]  # one swap reverses the orientation
        detj_p, dshape_p, detwei_p = transform(X[perm])
        assert detj > 0 and detj_p < 0
        assert detj_p == pytest.approx(-detj, rel=1e-13)
        np.testing.assert_allclose(detwei_p, detwei, rtol=1e-13)
        np.testing.assert_allclose(dshape_p, dshape[perm], rtol=0,
                                   atol=1e-12 * np.abs(dshape).max())


def test_affine_scaling():
    # x -> s x scales gradients by 1/s and volume by s^3
    X = REGULAR.copy()
    detj1, dshape1, detwei1 = transform(X)
    detj2, dshape2, detwei2 = transform(X * 1000.0)
    assert detj2 == pytest.approx(detj1 * 1e9, rel=1e-14)
    np.testing.assert_allclose(dshape2, dshape1 / 1000.0, rtol=1e-13, atol=1e-18)
    assert detwei1.sum() == pytest.approx(np.sqrt(2) / 12, rel=1e-14)


def test_degenerate_element_returns_zero_without_raising():
    X = REF_NODES.copy()
    X[3] = [0.3, 0.3, 0.0]  # coplanar
    detj, dshape, detwei = transform(X)
    assert detj == 0.0
    assert not np.all(np.isfinite(dshape))
    np.testing.assert_array_equal(detwei, 0.0)
