"""Symmetric 3x3 eigen-decomposition, iterative (Jacobi) and closed form (docs/equations.md §3).

Both solvers return eigenvalues ascending and the matching unit eigenvectors as the COLUMNS of
``evecs`` (so ``a = evecs @ diag(evals) @ evecs.T``); the sign of each eigenvector is arbitrary.
They exist for :func:`~dycore.fem.metric.get_edge_lengths`, as in Fluidity.
"""
import math

from dycore.fem._jit import element_function

__all__ = ["eig3_jacobi", "eig3_closed_form", "JACOBI_MAX_SWEEPS", "JACOBI_RTOL", "JACOBI_ATOL"]

#: hard cap on Jacobi sweeps (3-6 are typical; the cap is reached only for NaN input)
JACOBI_MAX_SWEEPS = 50
#: a_pq is negligible when |a_pq| <= JACOBI_RTOL * sqrt(|a_pp|) * sqrt(|a_qq|) ...
JACOBI_RTOL = 1e-16
#: ... or when |a_pq| <= JACOBI_ATOL * max|a| (off-diagonals of a matrix with a zero eigenvalue)
JACOBI_ATOL = 1e-30

_TWO_PI_3 = 2.0 * math.pi / 3.0


@element_function
def _sort_ascending(evals, evecs):
    """Sort 3 eigenvalues ascending, swapping the matching columns of ``evecs`` (in place)."""
    for k in range(2):
        m = k
        for i in range(k + 1, 3):
            if evals[i] < evals[m]:
                m = i
        if m != k:
            t = evals[k]
            evals[k] = evals[m]
            evals[m] = t
            for r in range(3):
                t = evecs[r, k]
                evecs[r, k] = evecs[r, m]
                evecs[r, m] = t


@element_function
def _max_abs_and_identity(a, evecs):
    """Return max |a[i, j]| over the upper triangle (a NaN sticks) and set ``evecs`` to I."""
    amax = 0.0
    for i in range(3):
        for j in range(i, 3):
            v = abs(a[i, j])
            if v > amax or v != v:
                amax = v
    for i in range(3):
        for j in range(3):
            evecs[i, j] = 1.0 if i == j else 0.0
    return amax


@element_function
def _jacobi_rotation(app, aqq, apq):
    """``(t, c, s)`` of the rotation annihilating ``apq`` != 0 in [[app, apq], [apq, aqq]].

    The stable tangent formula t = sgn(theta) / (|theta| + sqrt(theta^2 + 1)),
    theta = (aqq - app) / (2 apq); c = 1 / sqrt(t^2 + 1), s = t c.
    """
    theta = (aqq - app) / (2.0 * apq)
    if abs(theta) > 1e150:
        t = 0.5 / theta  # theta*theta would overflow; t ~ 1/(2 theta)
    else:
        t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
        if theta < 0.0:
            t = -t
    c = 1.0 / math.sqrt(t * t + 1.0)
    return t, c, t * c


@element_function
def eig3_jacobi(a, evals, evecs):
    """Eigen-decomposition of a symmetric 3x3 matrix by cyclic Jacobi rotations.

    Each sweep visits (p, q) = (0,1), (0,2), (1,2).  A negligible a_pq (see
    :data:`JACOBI_RTOL`, :data:`JACOBI_ATOL`; the first gives high relative accuracy of the
    eigenvalues of graded SPD matrices) is set to zero, otherwise the rotation that annihilates
    it is applied (the stable tangent formula of Rutishauser / Numerical Recipes §11.1,
    t = sgn(theta) / (|theta| + sqrt(theta^2 + 1)), theta = (a_qq - a_pp) / (2 a_pq)) and
    accumulated into ``evecs``.  The iteration stops after the first sweep with no rotation, or
    after :data:`JACOBI_MAX_SWEEPS`.

    Parameters
    ----------
    a : ndarray, shape (3, 3), float64
        Symmetric matrix (only a[p, q] with p < q and the diagonal are read); OVERWRITTEN
        (diagonalised in place).
    evals : ndarray, shape (3,), float64, OUT
        Eigenvalues, ascending.
    evecs : ndarray, shape (3, 3), float64, OUT
        Column k is the unit eigenvector of ``evals[k]``.

    Returns
    -------
    int
        Number of sweeps that applied at least one rotation (0 for a diagonal matrix).
    """
    floor = JACOBI_ATOL * _max_abs_and_identity(a, evecs)

    sweeps = 0
    for _ in range(JACOBI_MAX_SWEEPS):
        rotated = False
        for pair in range(3):
            if pair == 0:
                p, q, r = 0, 1, 2
            elif pair == 1:
                p, q, r = 0, 2, 1
            else:
                p, q, r = 1, 2, 0
            apq = a[p, q]
            app = a[p, p]
            aqq = a[q, q]
            if abs(apq) <= floor or abs(apq) <= JACOBI_RTOL * math.sqrt(abs(app)) * math.sqrt(
                abs(aqq)
            ):
                a[p, q] = 0.0
                a[q, p] = 0.0
                continue
            rotated = True
            t, c, s = _jacobi_rotation(app, aqq, apq)
            tau = s / (1.0 + c)
            a[p, p] = app - t * apq
            a[q, q] = aqq + t * apq
            a[p, q] = 0.0
            a[q, p] = 0.0
            arp = a[p, r] if p < r else a[r, p]  # read the upper triangle only
            arq = a[q, r] if q < r else a[r, q]
            nrp = arp - s * (arq + tau * arp)
            nrq = arq + s * (arp - tau * arq)
            a[r, p] = nrp
            a[p, r] = nrp
            a[r, q] = nrq
            a[q, r] = nrq
            for k in range(3):
                vkp = evecs[k, p]
                vkq = evecs[k, q]
                evecs[k, p] = vkp - s * (vkq + tau * vkp)
                evecs[k, q] = vkq + s * (vkp - tau * vkq)
        if not rotated:
            break
        sweeps += 1

    for k in range(3):
        evals[k] = a[k, k]
    _sort_ascending(evals, evecs)
    return sweeps


@element_function
def _null_vector_rank2(b, lam, evecs, col):
    """Unit vector spanning the null space of ``b - lam I`` (rank 2) into ``evecs[:, col]``.

    The largest of the three cross products of rows of ``b - lam I`` is normalised; if all
    vanish (b == lam I) the first unit vector is used.
    """
    r00 = b[0, 0] - lam
    r01 = b[0, 1]
    r02 = b[0, 2]
    r11 = b[1, 1] - lam
    r12 = b[1, 2]
    r22 = b[2, 2] - lam
    # rows: r0 = (r00, r01, r02), r1 = (r01, r11, r12), r2 = (r02, r12, r22)
    x0 = r01 * r12 - r02 * r11  # r0 x r1
    y0 = r02 * r01 - r00 * r12
    z0 = r00 * r11 - r01 * r01
    x1 = r01 * r22 - r02 * r12  # r0 x r2
    y1 = r02 * r02 - r00 * r22
    z1 = r00 * r12 - r01 * r02
    x2 = r11 * r22 - r12 * r12  # r1 x r2
    y2 = r12 * r02 - r01 * r22
    z2 = r01 * r12 - r11 * r02
    d0 = x0 * x0 + y0 * y0 + z0 * z0
    d1 = x1 * x1 + y1 * y1 + z1 * z1
    d2 = x2 * x2 + y2 * y2 + z2 * z2
    if d0 >= d1 and d0 >= d2:
        x, y, z, d = x0, y0, z0, d0
    elif d1 >= d2:
        x, y, z, d = x1, y1, z1, d1
    else:
        x, y, z, d = x2, y2, z2, d2
    if d > 0.0:
        inv = 1.0 / math.sqrt(d)
        evecs[0, col] = x * inv
        evecs[1, col] = y * inv
        evecs[2, col] = z * inv
    else:
        evecs[0, col] = 1.0
        evecs[1, col] = 0.0
        evecs[2, col] = 0.0


@element_function
def _store_pairs(evals, evecs, k0, k1, l0, l1, c, s, ux, uy, uz, wx, wy, wz):
    """``evals[k0] = l0`` with ``evecs[:, k0] = c U - s W``, ``evals[k1] = l1`` with
    ``evecs[:, k1] = s U + c W`` (of :func:`_eig2_in_complement`, called in each branch there:
    the compiled code stays that of the two written-out branches, PTX included)."""
    evals[k0] = l0
    evals[k1] = l1
    evecs[0, k0] = c * ux - s * wx
    evecs[1, k0] = c * uy - s * wy
    evecs[2, k0] = c * uz - s * wz
    evecs[0, k1] = s * ux + c * wx
    evecs[1, k1] = s * uy + c * wy
    evecs[2, k1] = s * uz + c * wz


@element_function
def _eig2_in_complement(b, evals, evecs, known, c0, c1):
    """The two eigenpairs of ``b`` orthogonal to the unit eigenvector ``evecs[:, known]``.

    ``b`` is restricted to an orthonormal basis (U, W) of the plane orthogonal to the known
    eigenvector, and the symmetric 2x2 matrix S = [U W]^T b [U W] is diagonalised by one Jacobi
    rotation (stable tangent formula).  Writes the eigenvalues to ``evals[c0]`` <= ``evals[c1]``
    (up to rounding) and the vectors to ``evecs[:, c0]``, ``evecs[:, c1]``; they are orthonormal
    and orthogonal to the known vector by construction, for distinct as well as repeated
    eigenvalues (where S is a multiple of the identity and U, W are kept).
    """
    u0 = evecs[0, known]
    u1 = evecs[1, known]
    u2 = evecs[2, known]
    if abs(u0) > abs(u1):
        inv = 1.0 / math.sqrt(u0 * u0 + u2 * u2)
        ux, uy, uz = -u2 * inv, 0.0, u0 * inv
    else:
        inv = 1.0 / math.sqrt(u1 * u1 + u2 * u2)
        ux, uy, uz = 0.0, u2 * inv, -u1 * inv
    wx = u1 * uz - u2 * uy  # W = known x U
    wy = u2 * ux - u0 * uz
    wz = u0 * uy - u1 * ux
    bux = b[0, 0] * ux + b[0, 1] * uy + b[0, 2] * uz
    buy = b[0, 1] * ux + b[1, 1] * uy + b[1, 2] * uz
    buz = b[0, 2] * ux + b[1, 2] * uy + b[2, 2] * uz
    bwx = b[0, 0] * wx + b[0, 1] * wy + b[0, 2] * wz
    bwy = b[0, 1] * wx + b[1, 1] * wy + b[1, 2] * wz
    bwz = b[0, 2] * wx + b[1, 2] * wy + b[2, 2] * wz
    s00 = ux * bux + uy * buy + uz * buz
    s01 = ux * bwx + uy * bwy + uz * bwz
    s11 = wx * bwx + wy * bwy + wz * bwz
    if s01 == 0.0:
        c = 1.0
        s = 0.0
        l0 = s00
        l1 = s11
    else:
        t, c, s = _jacobi_rotation(s00, s11, s01)
        l0 = s00 - t * s01
        l1 = s11 + t * s01
    # rotated basis: (c U - s W) for l0, (s U + c W) for l1; l0 goes to the lower column
    if l0 <= l1:
        _store_pairs(evals, evecs, c0, c1, l0, l1, c, s, ux, uy, uz, wx, wy, wz)
    else:
        _store_pairs(evals, evecs, c1, c0, l0, l1, c, s, ux, uy, uz, wx, wy, wz)


@element_function
def eig3_closed_form(a, evals, evecs):
    """Eigen-decomposition of a symmetric 3x3 matrix in closed form (no iteration).

    1. The matrix is divided by max|a_ij| (against overflow/underflow; scaled back at the end).
    2. Trigonometric solution of the characteristic cubic (Smith, Commun. ACM 4 (1961) 168):
       with q = tr(A)/3, p = sqrt(|A - qI|_F^2 / 6), B = (A - qI)/p and
       phi = acos(det(B)/2)/3, the eigenvalues are q + 2p cos(phi + 2k pi/3).
    3. Only the most isolated eigenvalue (the one farther from the middle one) is taken from
       step 2: it is accurate to rounding even when the other two coincide, whereas acos makes
       the clustered pair accurate only to ~sqrt(eps) relative to |A|.  Its eigenvector is the
       largest cross product of two rows of A - lambda I (rank 2 there).
    4. The other two eigenpairs come from A restricted to the plane orthogonal to that vector
       (a 2x2 symmetric problem, diagonalised by one Jacobi rotation), so repeated eigenvalues
       need no special case and the columns are orthonormal by construction (Eberly, "A robust
       eigensolver for 3x3 symmetric matrices", Geometric Tools 2014, uses the same plane).

    Parameters
    ----------
    a : ndarray, shape (3, 3), float64
        Symmetric matrix (only a[p, q] with p <= q is read); OVERWRITTEN (scaled).
    evals, evecs : ndarray, shapes (3,) and (3, 3), float64, OUT
        As in :func:`eig3_jacobi`: the eigenvalues ascending, and the unit eigenvector of
        ``evals[k]`` in column k.

    Returns
    -------
    int
        Always 0 (:func:`eig3_jacobi` returns its sweep count there).
    """
    scale = _max_abs_and_identity(a, evecs)  # a NaN sticks, so NaN input gives NaN eigenvalues
    if scale == 0.0:
        for k in range(3):
            evals[k] = 0.0
        return 0
    rs = 1.0 / scale
    for i in range(3):
        for j in range(i, 3):
            a[i, j] = a[i, j] * rs
            a[j, i] = a[i, j]

    p1 = a[0, 1] * a[0, 1] + a[0, 2] * a[0, 2] + a[1, 2] * a[1, 2]
    if p1 == 0.0:  # already diagonal
        for k in range(3):
            evals[k] = a[k, k] * scale
        _sort_ascending(evals, evecs)
        return 0

    q = (a[0, 0] + a[1, 1] + a[2, 2]) / 3.0
    d0 = a[0, 0] - q
    d1 = a[1, 1] - q
    d2 = a[2, 2] - q
    p = math.sqrt((d0 * d0 + d1 * d1 + d2 * d2 + 2.0 * p1) / 6.0)
    rp = 1.0 / p
    b00 = d0 * rp
    b11 = d1 * rp
    b22 = d2 * rp
    b01 = a[0, 1] * rp
    b02 = a[0, 2] * rp
    b12 = a[1, 2] * rp
    half_det = 0.5 * (b00 * (b11 * b22 - b12 * b12) - b01 * (b01 * b22 - b12 * b02)
                      + b02 * (b01 * b12 - b11 * b02))
    if half_det <= -1.0:
        half_det = -1.0
    elif half_det >= 1.0:
        half_det = 1.0
    phi = math.acos(half_det) / 3.0
    beta2 = 2.0 * math.cos(phi)               # largest root of det(B - beta I) = 0
    beta0 = 2.0 * math.cos(phi + _TWO_PI_3)   # smallest root

    if beta0 + beta2 >= 0.0:  # lambda2 - lambda1 >= lambda1 - lambda0: the largest is isolated
        evals[2] = q + p * beta2
        _null_vector_rank2(a, evals[2], evecs, 2)
        _eig2_in_complement(a, evals, evecs, 2, 0, 1)
    else:
        evals[0] = q + p * beta0
        _null_vector_rank2(a, evals[0], evecs, 0)
        _eig2_in_complement(a, evals, evecs, 0, 1, 2)

    for k in range(3):
        evals[k] = evals[k] * scale
    _sort_ascending(evals, evecs)
    return 0
