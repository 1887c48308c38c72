"""P1 (linear Lagrange) shape functions on the tetrahedron (docs/equations.md §3).

Local node i of the reference tetrahedron (0,0,0),(1,0,0),(0,1,0),(0,0,1) has
N_0 = 1 - xi - eta - zeta, N_1 = xi, N_2 = eta, N_3 = zeta: the shape values are the barycentric
coordinates and their reference derivatives are constant.
"""
import numpy as np

__all__ = ["REF_DSHAPE", "shape_values"]

#: dN_i/dxi_b on the reference tetrahedron, shape (4, 3), float64, read-only.
REF_DSHAPE = np.array(
    [[-1.0, -1.0, -1.0],
     [1.0, 0.0, 0.0],
     [0.0, 1.0, 0.0],
     [0.0, 0.0, 1.0]],
    dtype=np.float64,
)
REF_DSHAPE.flags.writeable = False


def shape_values(bary):
    """Return the P1 shape values N_i at quadrature points given in barycentric coordinates.

    Parameters
    ----------
    bary : array_like, shape (ngi, 4), float
        Barycentric coordinates of the points (e.g. ``get_quadrature(4).bary``).

    Returns
    -------
    n : ndarray, shape (ngi, 4), float64, C-contiguous, writable
        ``n[g, i] = N_i(x_g)``, which for P1 equals ``bary[g, i]`` (a fresh copy).

    Raises
    ------
    ValueError
        If ``bary`` is not two-dimensional with 4 columns.
    """
    n = np.array(bary, dtype=np.float64, order="C", copy=True)
    if n.ndim != 2 or n.shape[1] != 4:
        raise ValueError(f"bary must have shape (ngi, 4), got {n.shape}")
    return n
