"""Element integrals of P1 shape functions on one tetrahedron (docs/equations.md §3; Fluidity names).

Common arguments: ``n`` (ngi, 4) shape values N_i at the quadrature points
(``shape_values(quad.bary)``); ``dshape`` (4, 3) physical gradients dN_i/dx_d [1/m] and
``detwei`` (ngi,) [m^3] from :func:`~dycore.fem.transform.transform_to_physical`.  An integral
is ``int_e f dx = sum_g f(x_g) detwei[g]``.  Every ``out`` is OVERWRITTEN, never accumulated.
Because ``dshape`` is element-constant, gradient factors are taken outside the quadrature sums.
"""
from dycore.fem._jit import element_function

__all__ = [
    "ele_val_at_quad",
    "ele_vector_at_quad",
    "shape_shape",
    "shape_dshape",
    "dshape_shape",
    "dshape_tensor_dshape",
    "shape_vector_dot_dshape",
    "shape_rhs",
    "shape_vector_rhs",
]


@element_function
def ele_val_at_quad(n, ele_val, out):
    """Interpolate a nodal scalar to the quadrature points: ``out[g] = sum_i n[g,i] ele_val[i]``.

    Parameters
    ----------
    n : ndarray, shape (ngi, 4), float64
    ele_val : ndarray, shape (4,), float64
        Nodal values (any unit).
    out : ndarray, shape (ngi,), float64, OUT
    """
    for g in range(n.shape[0]):
        s = 0.0
        for i in range(4):
            s += n[g, i] * ele_val[i]
        out[g] = s


@element_function
def ele_vector_at_quad(n, ele_val, out):
    """Interpolate a nodal vector to the quadrature points.

    ``out[g, d] = sum_i n[g, i] ele_val[i, d]``.

    Parameters
    ----------
    n : ndarray, shape (ngi, 4), float64
    ele_val : ndarray, shape (4, 3), float64
        Nodal vectors (any unit, e.g. velocity [m/s]).
    out : ndarray, shape (ngi, 3), float64, OUT
    """
    for g in range(n.shape[0]):
        for d in range(3):
            s = 0.0
            for i in range(4):
                s += n[g, i] * ele_val[i, d]
            out[g, d] = s


@element_function
def shape_shape(n, detwei, out):
    """Mass matrix ``out[i,j] = int N_i N_j`` [m^3].

    Exact with any rule of degree >= 2: ``vol (1 + delta_ij) / 20``; on the reference
    tetrahedron (1 + delta_ij) / 120 (docs/equations.md §3).

    Parameters
    ----------
    n : ndarray, shape (ngi, 4), float64
    detwei : ndarray, shape (ngi,), float64 [m^3]
    out : ndarray, shape (4, 4), float64, OUT
    """
    for i in range(4):
        for j in range(4):
            s = 0.0
            for g in range(n.shape[0]):
                s += n[g, i] * n[g, j] * detwei[g]
            out[i, j] = s


@element_function
def _int_n(n, detwei, i):
    """``int N_i = sum_g n[g,i] detwei[g]`` [m^3]: the quadrature sum of :func:`shape_dshape`."""
    s = 0.0
    for g in range(n.shape[0]):
        s += n[g, i] * detwei[g]
    return s


@element_function
def shape_dshape(n, dshape, detwei, out):
    """``out[d,i,j] = int N_i dN_j/dx_d`` [m^2] = ``(int N_i) * dshape[j, d]``.

    Parameters
    ----------
    n : ndarray, shape (ngi, 4), float64
    dshape : ndarray, shape (4, 3), float64 [1/m]
    detwei : ndarray, shape (ngi,), float64 [m^3]
    out : ndarray, shape (3, 4, 4), float64, OUT
    """
    for i in range(4):
        s = _int_n(n, detwei, i)
        for d in range(3):
            for j in range(4):
                out[d, i, j] = s * dshape[j, d]


@element_function
def dshape_shape(n, dshape, detwei, out):
    """``out[d,i,j] = int dN_i/dx_d N_j`` [m^2] = ``dshape[i, d] * (int N_j)``.

    The transpose of :func:`shape_dshape` in (i, j) (bitwise: the same products are formed),
    with the same arguments: ``n`` (ngi, 4), ``dshape`` (4, 3) [1/m], ``detwei`` (ngi,) [m^3],
    ``out`` (3, 4, 4) OUT, all float64.
    """
    for j in range(4):
        s = _int_n(n, detwei, j)
        for d in range(3):
            for i in range(4):
                out[d, i, j] = dshape[i, d] * s


@element_function
def dshape_tensor_dshape(dshape, tensor, detwei, out):
    """Anisotropic diffusion matrix ``out[i,j] = int grad N_i . T grad N_j`` [m * unit(T)].

    ``T`` is element-constant, so ``out[i,j] = vol * sum_ab dshape[i,a] T[a,b] dshape[j,b]``
    with ``vol = sum_g detwei[g]`` (Fluidity ``dshape_tensor_dshape``; docs/equations.md §2-3).

    Parameters
    ----------
    dshape : ndarray, shape (4, 3), float64 [1/m]
    tensor : ndarray, shape (3, 3), float64
        E.g. viscosity / diffusivity [m^2/s]; need not be symmetric.
    detwei : ndarray, shape (ngi,), float64 [m^3]
    out : ndarray, shape (4, 4), float64, OUT
    """
    vol = 0.0
    for g in range(detwei.shape[0]):
        vol += detwei[g]
    for i in range(4):
        # t_b = sum_a dN_i/dx_a T[a, b], scaled by the volume
        t0 = vol * (dshape[i, 0] * tensor[0, 0] + dshape[i, 1] * tensor[1, 0]
                    + dshape[i, 2] * tensor[2, 0])
        t1 = vol * (dshape[i, 0] * tensor[0, 1] + dshape[i, 1] * tensor[1, 1]
                    + dshape[i, 2] * tensor[2, 1])
        t2 = vol * (dshape[i, 0] * tensor[0, 2] + dshape[i, 1] * tensor[1, 2]
                    + dshape[i, 2] * tensor[2, 2])
        for j in range(4):
            out[i, j] = t0 * dshape[j, 0] + t1 * dshape[j, 1] + t2 * dshape[j, 2]


@element_function
def _int_n_vector(n, v_gi, detwei, i):
    """``int N_i v_d`` for d = 0, 1, 2 as a tuple: ``sum_g (n[g,i] detwei[g]) v_gi[g,d]``.

    The one quadrature sum of :func:`shape_vector_dot_dshape` and :func:`shape_vector_rhs`.
    """
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for g in range(n.shape[0]):
        c = n[g, i] * detwei[g]
        s0 += c * v_gi[g, 0]
        s1 += c * v_gi[g, 1]
        s2 += c * v_gi[g, 2]
    return s0, s1, s2


@element_function
def shape_vector_dot_dshape(n, dshape, u_gi, detwei, out):
    """Advection matrix ``out[i,j] = int N_i (u . grad N_j)`` [m^3/s for u in m/s].

    Computed as ``w_i . dshape[j]`` with ``w_i[d] = sum_g n[g,i] u_gi[g,d] detwei[g]``.

    Parameters
    ----------
    n : ndarray, shape (ngi, 4), float64
    dshape : ndarray, shape (4, 3), float64 [1/m]
    u_gi : ndarray, shape (ngi, 3), float64
        Advecting velocity at the quadrature points [m/s] (``ele_vector_at_quad``).
    detwei : ndarray, shape (ngi,), float64 [m^3]
    out : ndarray, shape (4, 4), float64, OUT
    """
    for i in range(4):
        w0, w1, w2 = _int_n_vector(n, u_gi, detwei, i)
        for j in range(4):
            out[i, j] = w0 * dshape[j, 0] + w1 * dshape[j, 1] + w2 * dshape[j, 2]


@element_function
def shape_rhs(n, f_gi, detwei, out):
    """Load vector ``out[i] = int N_i f`` [m^3 * unit(f)].

    Parameters
    ----------
    n : ndarray, shape (ngi, 4), float64
    f_gi : ndarray, shape (ngi,), float64
        Source at the quadrature points (``ele_val_at_quad``).
    detwei : ndarray, shape (ngi,), float64 [m^3]
    out : ndarray, shape (4,), float64, OUT
    """
    for i in range(4):
        s = 0.0
        for g in range(n.shape[0]):
            s += n[g, i] * f_gi[g] * detwei[g]
        out[i] = s


@element_function
def shape_vector_rhs(n, v_gi, detwei, out):
    """Vector load ``out[i,d] = int N_i v_d`` [m^3 * unit(v)].

    Parameters
    ----------
    n : ndarray, shape (ngi, 4), float64
    v_gi : ndarray, shape (ngi, 3), float64
        Vector source at the quadrature points, e.g. buoyancy b z-hat [m/s^2].
    detwei : ndarray, shape (ngi,), float64 [m^3]
    out : ndarray, shape (4, 3), float64, OUT
    """
    for i in range(4):
        out[i, 0], out[i, 1], out[i, 2] = _int_n_vector(n, v_gi, detwei, i)
