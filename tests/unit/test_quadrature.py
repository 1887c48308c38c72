"""Quadrature rules on the reference tetrahedron: exactness degree, weights, errors."""
from math import factorial

import numpy as np
import pytest

from dycore.fem import QUADRATURE_DEGREES, get_quadrature

NPOINTS = {2: 4, 3: 5, 4: 11}


def exact_monomial(a, b, c):
    """int over the reference tet of x^a y^b z^c = a! b! c! / (a + b + c + 3)!."""
    return factorial(a) * factorial(b) * factorial(c) / factorial(a + b + c + 3)


def quad_monomial(quad, a, b, c):
    # reference tet (0,0,0),(1,0,0),(0,1,0),(0,0,1): x = L2, y = L3, z = L4
    x, y, z = quad.bary[:, 1], quad.bary[:, 2], quad.bary[:, 3]
    return float(np.sum(quad.weights * x**a * y**b * z**c))


def monomials(degree):
    return [(a, b, t - a - b) for t in range(degree + 1) for a in range(t + 1)
            for b in range(t - a + 1)]


@pytest.mark.parametrize("degree", QUADRATURE_DEGREES)
def test_rule_layout(degree):
    q = get_quadrature(degree)
    assert q.degree == degree
    assert q.weights.shape == (NPOINTS[degree],)
    assert q.bary.shape == (NPOINTS[degree], 4)
    for arr in (q.weights, q.bary):
        assert arr.dtype == np.float64 and arr.flags.c_contiguous
    assert abs(q.weights.sum() - 1.0 / 6.0) < 1e-15
    np.testing.assert_allclose(q.bary.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    assert np.all(q.bary >= 0.0) and np.all(q.bary <= 1.0)
    assert get_quadrature(degree) is q  # cached, read-only
    assert not q.weights.flags.writeable


@pytest.mark.parametrize("degree", QUADRATURE_DEGREES)
def test_exact_up_to_degree(degree):
    q = get_quadrature(degree)
    for a, b, c in monomials(degree):
        exact = exact_monomial(a, b, c)
        assert abs(quad_monomial(q, a, b, c) - exact) <= 1e-15 + 1e-13 * exact, (a, b, c)


@pytest.mark.parametrize("degree", QUADRATURE_DEGREES)
def test_not_exact_one_degree_higher(degree):
    q = get_quadrature(degree)
    errors = [abs(quad_monomial(q, a, b, c) - exact_monomial(a, b, c))
              for a, b, c in monomials(degree + 1) if a + b + c == degree + 1]
    assert max(errors) > 1e-6


def test_keast_11_point_values():
    q = get_quadrature(4)
    assert q.weights[0] == pytest.approx(-74.0 / 5625.0, rel=1e-15)
    np.testing.assert_array_equal(q.bary[0], 0.25)
    assert np.sum(q.weights < 0) == 1
    c = 0.399403576166799204996
    # the 6 (c, c, d, d) points are all permutations, each pair of slots once
    big = q.bary[5:] > 0.3
    assert np.all(big.sum(axis=1) == 2)
    assert len({tuple(np.flatnonzero(r)) for r in big}) == 6
    np.testing.assert_allclose(q.bary[5:][big], c, rtol=1e-15)


def test_degree3_negative_centroid_weight():
    q = get_quadrature(3)
    assert q.weights[0] < 0 and np.all(q.weights[1:] > 0)


@pytest.mark.parametrize("bad", [0, 1, 5, 7, "4", None])
def test_unknown_degree(bad):
    with pytest.raises(ValueError, match=repr(bad).replace("(", r"\(")):
        get_quadrature(bad)
