"""Dense 6x6 linear solve by Gaussian elimination with partial pivoting (docs/equations.md §3).

Used once per element by :func:`~dycore.fem.metric.get_edge_lengths` (the edge-length metric),
as in Fluidity's ``get_edge_lengths``.  Rows are equilibrated first so that the pivot choice and
the singularity test do not depend on the length scale of each edge.
"""
import math

from dycore.fem._jit import element_function

__all__ = ["solve6", "PIVOT_RTOL", "PIVOT_ATOL"]

#: a pivot is zero when |pivot| <= PIVOT_RTOL * (largest |entry| of its column after row scaling)
PIVOT_RTOL = 1e-12
#: ... or when |pivot| <= PIVOT_ATOL (also catches a zero row / column)
PIVOT_ATOL = 1e-300


@element_function
def solve6(a, b, x):
    """Solve ``a x = b`` for one dense 6x6 system.

    Algorithm: (1) equilibrate rows -- row i of ``a`` and ``b[i]`` are multiplied by
    1 / max_j |a[i, j]|; (2) Gaussian elimination with partial pivoting (largest |entry| of the
    column); (3) back substitution.

    Singularity criterion (scale-aware): after step (1) every row has max-norm 1, and
    ``colmax[k]`` is the largest |entry| of column k.  The system is declared singular when a
    pivot satisfies ``|pivot| <= PIVOT_RTOL * colmax[k]`` (1e-12, about 4500 machine epsilons:
    the column has cancelled to rounding level -- the edge systems of exactly coplanar nodes give
    ratios of 1e-16 to 3e-13, a well-shaped element flattened to aspect ratio 1e4 and tilted by
    45 degrees about 5e-8) or ``|pivot| <= PIVOT_ATOL`` (1e-300), or when a row is zero or holds
    an inf/NaN.  Elimination with partial pivoting is invariant under column scaling, so the
    test does not depend on the units of the unknowns either (the metric unknowns M_ab of a flat
    element differ by many orders of magnitude).

    Parameters
    ----------
    a : ndarray, shape (6, 6), float64
        Matrix; OVERWRITTEN (scratch: holds the scaled upper-triangular factor on return).
    b : ndarray, shape (6,), float64
        Right-hand side; OVERWRITTEN (scratch).
    x : ndarray, shape (6,), float64, OUT
        Solution; all NaN when the system is singular.

    Returns
    -------
    int
        0 on success, 1 if the matrix is singular by the criterion above.
    """
    # (1) row equilibration
    for i in range(6):
        m = 0.0
        for j in range(6):
            v = abs(a[i, j])
            if v > m or v != v:  # a NaN sticks: nothing compares greater than it
                m = v
        if not (m > PIVOT_ATOL and m < math.inf):
            for k in range(6):
                x[k] = math.nan
            return 1
        r = 1.0 / m
        for j in range(6):
            a[i, j] = a[i, j] * r
        b[i] = b[i] * r

    # column maxima of the scaled matrix; x is free scratch until the back substitution
    for j in range(6):
        m = 0.0
        for i in range(6):
            v = abs(a[i, j])
            if v > m:
                m = v
        x[j] = m

    # (2) elimination with partial pivoting
    for k in range(6):
        p = k
        piv = abs(a[k, k])
        for i in range(k + 1, 6):
            v = abs(a[i, k])
            if v > piv:
                piv = v
                p = i
        if not (piv > PIVOT_RTOL * x[k] and piv > PIVOT_ATOL):
            for j in range(6):
                x[j] = math.nan
            return 1
        if p != k:
            for j in range(k, 6):
                t = a[k, j]
                a[k, j] = a[p, j]
                a[p, j] = t
            t = b[k]
            b[k] = b[p]
            b[p] = t
        for i in range(k + 1, 6):
            f = a[i, k] / a[k, k]
            a[i, k] = 0.0
            for j in range(k + 1, 6):
                a[i, j] = a[i, j] - f * a[k, j]
            b[i] = b[i] - f * b[k]

    # (3) back substitution (x[k] is written only after the x[j > k] it needs)
    for k in range(5, -1, -1):
        s = b[k]
        for j in range(k + 1, 6):
            s = s - a[k, j] * x[j]
        x[k] = s / a[k, k]
    return 0
