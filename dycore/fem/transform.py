"""Reference-to-physical map of an affine P1 tetrahedron: det J, J^-1, dshape, detwei.

Follows Fluidity's ``transform_to_physical`` (docs/equations.md §3): for straight-sided P1 elements the
Jacobian J = dx/dxi is constant, so it is built once and every quadrature point reuses it.
"""
from dycore.fem._jit import element_function

__all__ = ["transform_to_physical"]


@element_function
def transform_to_physical(X, weights, dshape, detwei):
    """Physical shape-function gradients and quadrature weights of one P1 tetrahedron.

    With local node 0 as origin, ``J[a, b] = X[b+1, a] - X[0, a]`` (columns are the edge vectors
    x1-x0, x2-x0, x3-x0).  ``J^-1 = adj(J) / det J`` is formed from cofactors and the physical
    gradients are ``dN_i/dx_a = sum_b dN_i/dxi_b (J^-1)[b, a]`` with the constant reference
    derivatives of :data:`dycore.fem.shape.REF_DSHAPE`, i.e. ``dshape[k+1, :] = J^-1[k, :]`` and
    ``dshape[0, :] = -(J^-1[0, :] + J^-1[1, :] + J^-1[2, :])``.

    Parameters
    ----------
    X : ndarray, shape (4, 3), float64
        Node coordinates [m], row i = local node i.
    weights : ndarray, shape (ngi,), float64
        Reference quadrature weights (``Quadrature.weights``, sum 1/6).
    dshape : ndarray, shape (4, 3), float64, OUT (overwritten)
        ``dshape[i, a] = dN_i/dx_a`` [1/m], constant on the element.
    detwei : ndarray, shape (ngi,), float64, OUT (overwritten)
        ``|det J| * weights[g]`` [m^3]; the sum is the element volume.

    Returns
    -------
    float
        Signed det J [m^3] (6 x signed volume; > 0 for a positively oriented element).  A
        degenerate element (det J == 0) gives inf/nan in ``dshape`` and no exception; the caller
        checks the returned value.
    """
    j00 = X[1, 0] - X[0, 0]
    j01 = X[2, 0] - X[0, 0]
    j02 = X[3, 0] - X[0, 0]
    j10 = X[1, 1] - X[0, 1]
    j11 = X[2, 1] - X[0, 1]
    j12 = X[3, 1] - X[0, 1]
    j20 = X[1, 2] - X[0, 2]
    j21 = X[2, 2] - X[0, 2]
    j22 = X[3, 2] - X[0, 2]

    # cofactors C[a, b] of J; adj(J) = C^T
    c00 = j11 * j22 - j12 * j21
    c01 = j12 * j20 - j10 * j22
    c02 = j10 * j21 - j11 * j20
    c10 = j02 * j21 - j01 * j22
    c11 = j00 * j22 - j02 * j20
    c12 = j01 * j20 - j00 * j21
    c20 = j01 * j12 - j02 * j11
    c21 = j02 * j10 - j00 * j12
    c22 = j00 * j11 - j01 * j10

    detj = j00 * c00 + j01 * c01 + j02 * c02
    rdet = 1.0 / detj

    # (J^-1)[b, a] = C[a, b] / det J ; dshape[b+1, a] = (J^-1)[b, a]
    dshape[1, 0] = c00 * rdet
    dshape[1, 1] = c10 * rdet
    dshape[1, 2] = c20 * rdet
    dshape[2, 0] = c01 * rdet
    dshape[2, 1] = c11 * rdet
    dshape[2, 2] = c21 * rdet
    dshape[3, 0] = c02 * rdet
    dshape[3, 1] = c12 * rdet
    dshape[3, 2] = c22 * rdet
    for a in range(3):
        dshape[0, a] = -(dshape[1, a] + dshape[2, a] + dshape[3, a])

    absdet = abs(detj)
    for g in range(weights.shape[0]):
        detwei[g] = absdet * weights[g]
    return detj
