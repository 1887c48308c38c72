"""Element integrals against exact P1 formulas (int N_i N_j = vol (1 + delta_ij) / 20)."""
import numpy as np
import pytest

from dycore.fem import (
    dshape_shape,
    dshape_tensor_dshape,
    ele_val_at_quad,
    ele_vector_at_quad,
    get_quadrature,
    shape_dshape,
    shape_rhs,
    shape_shape,
    shape_values,
    shape_vector_dot_dshape,
    shape_vector_rhs,
    transform_to_physical,
)

REF_NODES = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
REGULAR = np.array([[0.0, 0, 0], [1, 0, 0], [0.5, np.sqrt(3) / 2, 0],
                    [0.5, np.sqrt(3) / 6, np.sqrt(2.0 / 3.0)]])
MASS_P1 = (np.ones((4, 4)) + np.eye(4)) / 20.0  # int N_i N_j / vol


def random_tets(seed, count):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        scale = 10.0 ** rng.uniform(-1, 3)
        X = (REGULAR + 0.15 * rng.standard_normal((4, 3))) @ q.T * scale
        yield X + rng.uniform(-1, 1, 3) * 10 * scale, rng


class Element:
    """n, dshape, detwei and the volume of one tetrahedron."""

    def __init__(self, X, degree=4):
        q = get_quadrature(degree)
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.n = shape_values(q.bary)
        self.ngi = q.weights.shape[0]
        self.dshape = np.empty((4, 3))
        self.detwei = np.empty(self.ngi)
        detj = transform_to_physical(self.X, q.weights, self.dshape, self.detwei)
        self.vol = abs(detj) / 6.0


def garbage(shape):
    """Output buffers start as NaN: every function must overwrite, not accumulate."""
    return np.full(shape, np.nan)


@pytest.mark.parametrize("degree", [2, 3, 4])
def test_shape_shape_reference(degree):
    e = Element(REF_NODES, degree)
    out = garbage((4, 4))
    shape_shape(e.n, e.detwei, out)
    np.testing.assert_allclose(out, (1.0 + np.eye(4)) / 120.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(out.sum(axis=1), 1.0 / 24.0, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(out, out.T)


def test_shape_shape_random():
    for X, _ in random_tets(10, 100):
        e = Element(X)
        out = garbage((4, 4))
        shape_shape(e.n, e.detwei, out)
        np.testing.assert_allclose(out, e.vol * MASS_P1, rtol=1e-12)
        assert out.sum() == pytest.approx(e.vol, rel=1e-13)


def test_dshape_tensor_dshape_identity_is_laplacian():
    for X, _ in random_tets(11, 100):
        e = Element(X)
        out = garbage((4, 4))
        dshape_tensor_dshape(e.dshape, np.eye(3), e.detwei, out)
        scale = np.abs(out).max()
        np.testing.assert_allclose(out.sum(axis=1), 0.0, rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(out, out.T, rtol=0, atol=1e-15 * scale)
        for a in range(3):  # int grad(x_a) . grad(x_a) = vol
            xa = X[:, a]
            assert xa @ out @ xa == pytest.approx(e.vol, rel=1e-9)
        assert np.all(np.linalg.eigvalsh(out)[1:] > 0)  # SPD up to constants


def test_dshape_tensor_dshape_anisotropic():
    for X, rng in random_tets(12, 100):
        e = Element(X)
        T = rng.standard_normal((3, 3))  # not even symmetric
        T[2, 2] += 5.0
        out = garbage((4, 4))
        dshape_tensor_dshape(e.dshape, T, e.detwei, out)
        expected = e.vol * e.dshape @ T @ e.dshape.T
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-13 * np.abs(expected).max())
        T_diag = np.diag([30.0, 30.0, 0.1])  # nu_h, nu_h, nu_v
        dshape_tensor_dshape(e.dshape, T_diag, e.detwei, out)
        expected = e.vol * (e.dshape * np.diag(T_diag)) @ e.dshape.T
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-13 * np.abs(expected).max())


def test_shape_dshape_and_dshape_shape():
    for X, _ in random_tets(13, 100):
        e = Element(X)
        sd = garbage((3, 4, 4))
        ds = garbage((3, 4, 4))
        shape_dshape(e.n, e.dshape, e.detwei, sd)
        dshape_shape(e.n, e.dshape, e.detwei, ds)
        # int N_i dN_j/dx_d = vol/4 dshape[j, d]
        expected = e.vol / 4.0 * np.broadcast_to(e.dshape.T[:, None, :], (3, 4, 4))
        np.testing.assert_allclose(sd, expected, rtol=1e-12)
        np.testing.assert_array_equal(ds, np.transpose(sd, (0, 2, 1)))
        # integration by parts on the whole element: sum_i int N_i dN_j/dx = int dN_j/dx
        np.testing.assert_allclose(sd.sum(axis=1), e.vol * e.dshape.T, rtol=1e-12)


def test_shape_vector_dot_dshape_constant_and_linear_velocity():
    for X, rng in random_tets(14, 100):
        e = Element(X)
        u0 = rng.standard_normal(3) * 10.0
        u_gi = np.tile(u0, (e.ngi, 1))
        out = garbage((4, 4))
        shape_vector_dot_dshape(e.n, e.dshape, u_gi, e.detwei, out)
        expected = e.vol / 4.0 * np.tile(e.dshape @ u0, (4, 1))
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12 * np.abs(expected).max())

        u_nodes = rng.standard_normal((4, 3)) * 10.0  # linear velocity
        ele_vector_at_quad(e.n, u_nodes, u_gi)
        shape_vector_dot_dshape(e.n, e.dshape, u_gi, e.detwei, out)
        # int N_i (sum_k N_k u_k) . grad N_j = sum_k vol (1 + d_ik)/20 u_k . grad N_j
        expected = e.vol * MASS_P1 @ (u_nodes @ e.dshape.T)
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
        # each row sums to int N_i u . grad(sum_j N_j) = 0
        np.testing.assert_allclose(out.sum(axis=1), 0.0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("degree", [2, 3, 4])
def test_shape_rhs_constant_and_linear(degree):
    for X, rng in random_tets(15, 50):
        e = Element(X, degree)
        f_gi = np.full(e.ngi, 9.81)
        out = garbage(4)
        shape_rhs(e.n, f_gi, e.detwei, out)
        np.testing.assert_allclose(out, e.vol / 4.0 * 9.81, rtol=1e-12)
        f_nodes = rng.standard_normal(4)
        ele_val_at_quad(e.n, f_nodes, f_gi)
        shape_rhs(e.n, f_gi, e.detwei, out)
        np.testing.assert_allclose(out, e.vol * MASS_P1 @ f_nodes, rtol=0,
                                   atol=1e-12 * e.vol * np.abs(f_nodes).max())


@pytest.mark.parametrize("degree", [2, 4])
def test_shape_vector_rhs_constant_and_linear(degree):
    for X, rng in random_tets(16, 50):
        e = Element(X, degree)
        v0 = np.array([0.0, 0.0, 0.0327])  # buoyancy b z-hat [m/s^2]
        v_gi = np.tile(v0, (e.ngi, 1))
        out = garbage((4, 3))
        shape_vector_rhs(e.n, v_gi, e.detwei, out)
        np.testing.assert_allclose(out, e.vol / 4.0 * np.tile(v0, (4, 1)), rtol=1e-12,
                                   atol=1e-30)
        v_nodes = rng.standard_normal((4, 3))
        ele_vector_at_quad(e.n, v_nodes, v_gi)
        shape_vector_rhs(e.n, v_gi, e.detwei, out)
        np.testing.assert_allclose(out, e.vol * MASS_P1 @ v_nodes, rtol=0,
                                   atol=1e-12 * e.vol * np.abs(v_nodes).max())


def test_ele_val_at_quad_reproduces_linear_fields():
    for X, rng in random_tets(17, 50):
        e = Element(X)
        c, g = rng.standard_normal(), rng.standard_normal(3)
        xq = e.n @ X  # physical quadrature points
        out = garbage(e.ngi)
        ele_val_at_quad(e.n, c + X @ g, out)
        np.testing.assert_allclose(out, c + xq @ g, rtol=0, atol=1e-11 * np.abs(X).max())
        G = rng.standard_normal((3, 3))
        outv = garbage((e.ngi, 3))
        ele_vector_at_quad(e.n, X @ G, outv)
        np.testing.assert_allclose(outv, xq @ G, rtol=0, atol=1e-11 * np.abs(X).max())


def test_mass_matrix_same_for_all_rules():
    # int N_i N_j is quadratic: every rule is exact
    X = next(random_tets(18, 1))[0]
    outs = []
    for degree in (2, 3, 4):
        e = Element(X, degree)
        out = np.empty((4, 4))
        shape_shape(e.n, e.detwei, out)
        outs.append(out)
    np.testing.assert_allclose(outs[0], outs[2], rtol=1e-13)
    np.testing.assert_allclose(outs[1], outs[2], rtol=1e-13)
