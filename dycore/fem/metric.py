"""Element edge-length metric M and length tensor h-bar of a tetrahedron (docs/equations.md §3).

M is the symmetric 3x3 matrix in which all six edges have unit length, e^T M e = 1 (Fluidity's
``get_edge_lengths``); h-bar = M^(-1/2) has the principal element lengths as eigenvalues and
scales the pressure stabilisation K_e = 1/2 int grad psi^T h-bar grad psi.
"""
import math

from dycore.fem._jit import element_function
from dycore.fem.eig3 import eig3_closed_form, eig3_jacobi
from dycore.fem.gauss6 import solve6

__all__ = ["get_edge_lengths", "EIG_JACOBI", "EIG_CLOSED_FORM"]

EIG_JACOBI = 0       #: ``method`` value selecting :func:`~dycore.fem.eig3.eig3_jacobi`
EIG_CLOSED_FORM = 1  #: ``method`` value selecting :func:`~dycore.fem.eig3.eig3_closed_form`


@element_function
def get_edge_lengths(X, a6, b6, x6, metric, evals, evecs, hbar, method):
    """Metric tensor, its eigen-decomposition and the length tensor of one tetrahedron.

    For the edges e = X[j] - X[i], (i, j) = (0,1), (0,2), (0,3), (1,2), (1,3), (2,3), row k of
    the 6x6 system is ``[e1^2, 2 e1 e2, 2 e1 e3, e2^2, 2 e2 e3, e3^2]`` with right-hand side 1
    for the unknowns (M11, M12, M13, M22, M23, M33); it is solved by
    :func:`~dycore.fem.gauss6.solve6`.  Then M = V diag(evals) V^T (a copy of M is diagonalised
    in ``hbar``) and ``hbar = V diag(evals^-1/2) V^T``, symmetric by construction.

    Accuracy: for a flat element whose thin direction is a coordinate axis (terrain-following
    layers) the 6x6 system is only column-scaled and the result is exact to rounding at any
    aspect ratio; tilting the thin direction out of the axes conditions the system like the
    squared aspect ratio (edge residuals |e^T M e - 1| ~ 1e-8 at aspect ratio 1e4 and 45
    degrees, ~1e-12 at 1e2).

    Parameters
    ----------
    X : ndarray, shape (4, 3), float64
        Node coordinates [m].
    a6 : ndarray, shape (6, 6), float64
        Scratch (overwritten).
    b6 : ndarray, shape (6,), float64
        Scratch (overwritten).
    x6 : ndarray, shape (6,), float64
        Scratch (overwritten): the solution (M11, M12, M13, M22, M23, M33).
    metric : ndarray, shape (3, 3), float64, OUT
        M [1/m^2], symmetric.
    evals : ndarray, shape (3,), float64, OUT
        Eigenvalues of M ascending [1/m^2] (1/evals**0.5 are the principal lengths [m]).
    evecs : ndarray, shape (3, 3), float64, OUT
        Column k = unit eigenvector of ``evals[k]``.
    hbar : ndarray, shape (3, 3), float64, OUT
        Length tensor M^(-1/2) [m], symmetric.
    method : int
        1 (``EIG_CLOSED_FORM``) for :func:`~dycore.fem.eig3.eig3_closed_form`; any other value,
        normally 0 (``EIG_JACOBI``), for :func:`~dycore.fem.eig3.eig3_jacobi`.

    Returns
    -------
    int
        0 on success; 1 if the 6x6 system is singular (degenerate element), in which case
        ``metric``, ``evals``, ``evecs`` and ``hbar`` are all NaN.  A non-positive eigenvalue
        (possible only for a numerically degenerate element) gives inf/NaN in ``hbar`` without
        an error, like det J == 0 in ``transform_to_physical``.
    """
    row = 0
    for i in range(3):
        for j in range(i + 1, 4):
            e1 = X[j, 0] - X[i, 0]
            e2 = X[j, 1] - X[i, 1]
            e3 = X[j, 2] - X[i, 2]
            a6[row, 0] = e1 * e1
            a6[row, 1] = 2.0 * e1 * e2
            a6[row, 2] = 2.0 * e1 * e3
            a6[row, 3] = e2 * e2
            a6[row, 4] = 2.0 * e2 * e3
            a6[row, 5] = e3 * e3
            b6[row] = 1.0
            row += 1

    status = solve6(a6, b6, x6)
    if status != 0:
        for i in range(3):
            evals[i] = math.nan
            for j in range(3):
                metric[i, j] = math.nan
                evecs[i, j] = math.nan
                hbar[i, j] = math.nan
        return status

    metric[0, 0] = x6[0]
    metric[0, 1] = x6[1]
    metric[0, 2] = x6[2]
    metric[1, 0] = x6[1]
    metric[1, 1] = x6[3]
    metric[1, 2] = x6[4]
    metric[2, 0] = x6[2]
    metric[2, 1] = x6[4]
    metric[2, 2] = x6[5]

    for i in range(3):  # hbar is the eigensolver's scratch copy of M
        for j in range(3):
            hbar[i, j] = metric[i, j]
    if method == EIG_CLOSED_FORM:
        eig3_closed_form(hbar, evals, evecs)
    else:
        eig3_jacobi(hbar, evals, evecs)

    r0 = 1.0 / math.sqrt(evals[0])
    r1 = 1.0 / math.sqrt(evals[1])
    r2 = 1.0 / math.sqrt(evals[2])
    for i in range(3):
        for j in range(i, 3):
            s = (evecs[i, 0] * r0 * evecs[j, 0] + evecs[i, 1] * r1 * evecs[j, 1]
                 + evecs[i, 2] * r2 * evecs[j, 2])
            hbar[i, j] = s
            hbar[j, i] = s
    return 0
