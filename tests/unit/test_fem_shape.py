"""P1 shape values and reference derivatives."""
import numpy as np
import pytest

from dycore.fem import REF_DSHAPE, get_quadrature, shape_values

REF_NODES = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])


def test_ref_dshape_is_gradient_of_linear_shape_functions():
    # N_i(x) = c_i + REF_DSHAPE[i] . x must be 1 at node i and 0 at the other nodes
    c = np.array([1.0, 0.0, 0.0, 0.0])
    values = c[:, None] + REF_DSHAPE @ REF_NODES.T  # [i, node]
    np.testing.assert_array_equal(values, np.eye(4))
    assert REF_DSHAPE.shape == (4, 3) and REF_DSHAPE.dtype == np.float64
    assert not REF_DSHAPE.flags.writeable


@pytest.mark.parametrize("degree", [2, 3, 4])
def test_shape_values_are_barycentric(degree):
    q = get_quadrature(degree)
    n = shape_values(q.bary)
    np.testing.assert_array_equal(n, q.bary)
    assert n.flags.c_contiguous and n.flags.writeable and n.dtype == np.float64
    # N_i at x = sum_k L_k X_k of the reference tet, evaluated from the formulas
    x = q.bary @ REF_NODES
    expected = np.column_stack([1 - x.sum(axis=1), x[:, 0], x[:, 1], x[:, 2]])
    np.testing.assert_allclose(n, expected, rtol=0, atol=1e-15)


def test_shape_values_rejects_wrong_shape():
    with pytest.raises(ValueError, match="ngi, 4"):
        shape_values(np.zeros((3, 3)))
