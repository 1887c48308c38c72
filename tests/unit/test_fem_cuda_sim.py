"""CPU / CUDA parity of the element functions: one tiny @cuda.jit kernel per function group.

Each thread copies its element's inputs from the kernel arguments into ``cuda.local.array``s,
calls the SAME ``@njit`` element functions as the CPU path and copies the results out (the
local-kernel contract of docs/equations.md §6).  Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
set by tests/conftest.py) there is no FMA, so the results must be bitwise equal to the CPU;
on a real GPU without the strict floating-point mode FMA contraction makes them differ in the
last bits, so there the comparison is relative to 1e-10 instead.
"""
import numpy as np
import pytest
from numba import config, cuda, float64

from dycore.fem import (
    EIG_CLOSED_FORM,
    EIG_JACOBI,
    dshape_shape,
    dshape_tensor_dshape,
    eig3_closed_form,
    eig3_jacobi,
    ele_val_at_quad,
    ele_vector_at_quad,
    get_edge_lengths,
    get_quadrature,
    shape_dshape,
    shape_rhs,
    shape_shape,
    shape_values,
    shape_vector_dot_dshape,
    shape_vector_rhs,
    solve6,
    transform_to_physical,
)

SIM = bool(config.ENABLE_CUDASIM)
if not SIM and not cuda.is_available():
    pytest.skip("needs the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) or a GPU",
                allow_module_level=True)

NTHREADS = 256  # several blocks of 32 threads
BLOCK = 32
NGI = 11        # Keast rule: the local arrays need a compile-time size
QUAD = get_quadrature(4)
N_GI = shape_values(QUAD.bary)
REGULAR = np.array([[0.0, 0, 0], [1, 0, 0], [0.5, np.sqrt(3) / 2, 0],
                    [0.5, np.sqrt(3) / 6, np.sqrt(2.0 / 3.0)]])


def random_tets(seed, count):
    rng = np.random.default_rng(seed)
    X = np.empty((count, 4, 3))
    for e in range(count):
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        X[e] = (REGULAR + 0.15 * rng.standard_normal((4, 3))) @ q.T * 10.0 ** rng.uniform(-1, 3)
        X[e] += rng.uniform(-1e3, 1e3, 3)
    return X, rng


def launch(kernel, *args):
    dargs = [cuda.to_device(np.ascontiguousarray(a)) for a in args]
    kernel[(NTHREADS + BLOCK - 1) // BLOCK, BLOCK](*dargs)
    cuda.synchronize()
    return [d.copy_to_host() for d in dargs]


def assert_parity(gpu, cpu):
    if SIM:
        assert np.array_equal(gpu, cpu, equal_nan=True)
    else:
        scale = np.nanmax(np.abs(cpu)) if np.any(np.isfinite(cpu)) else 1.0
        np.testing.assert_allclose(gpu, cpu, rtol=1e-10, atol=1e-10 * scale)


# --------------------------------------------------------------------------- transform
@cuda.jit
def k_transform(X_all, weights, dshape_all, detwei_all, detj_all):
    t = cuda.grid(1)
    if t >= X_all.shape[0]:
        return
    X = cuda.local.array((4, 3), float64)
    w = cuda.local.array(NGI, float64)
    dshape = cuda.local.array((4, 3), float64)
    detwei = cuda.local.array(NGI, float64)
    for i in range(4):
        for a in range(3):
            X[i, a] = X_all[t, i, a]
    for g in range(NGI):
        w[g] = weights[g]
    detj_all[t] = transform_to_physical(X, w, dshape, detwei)
    for i in range(4):
        for a in range(3):
            dshape_all[t, i, a] = dshape[i, a]
    for g in range(NGI):
        detwei_all[t, g] = detwei[g]


def test_transform_parity():
    X, _ = random_tets(0, NTHREADS)
    X[7, 3] = X[7, 2]  # one degenerate element: det J = 0, inf/nan gradients
    _, _, dshape, detwei, detj = launch(k_transform, X, QUAD.weights,
                                        np.zeros((NTHREADS, 4, 3)),
                                        np.zeros((NTHREADS, NGI)), np.zeros(NTHREADS))
    c_dshape = np.empty_like(dshape)
    c_detwei = np.empty_like(detwei)
    c_detj = np.array([transform_to_physical(X[e], QUAD.weights, c_dshape[e], c_detwei[e])
                       for e in range(NTHREADS)])
    regular = np.arange(NTHREADS) != 7
    assert c_detj[7] == 0.0 and np.all(c_detj[regular] != 0.0)
    assert_parity(detj, c_detj)
    assert_parity(detwei, c_detwei)
    if SIM:
        assert_parity(dshape, c_dshape)
    else:  # with FMA the GPU's det J of the degenerate element is rounding noise, not 0
        assert_parity(dshape[regular], c_dshape[regular])


# --------------------------------------------------------------------------- integrals
@cuda.jit
def k_integrals(X_all, weights, n_all, tensor_all, u_all, f_all,
                mass_all, sd_all, ds_all, k_all, adv_all, rhs_all, vrhs_all):
    t = cuda.grid(1)
    if t >= X_all.shape[0]:
        return
    X = cuda.local.array((4, 3), float64)
    w = cuda.local.array(NGI, float64)
    n = cuda.local.array((NGI, 4), float64)
    tensor = cuda.local.array((3, 3), float64)
    u_nodes = cuda.local.array((4, 3), float64)
    f_nodes = cuda.local.array(4, float64)
    dshape = cuda.local.array((4, 3), float64)
    detwei = cuda.local.array(NGI, float64)
    u_gi = cuda.local.array((NGI, 3), float64)
    f_gi = cuda.local.array(NGI, float64)
    m44 = cuda.local.array((4, 4), float64)
    m344 = cuda.local.array((3, 4, 4), float64)
    v4 = cuda.local.array(4, float64)
    v43 = cuda.local.array((4, 3), float64)
    for i in range(4):
        f_nodes[i] = f_all[t, i]
        for a in range(3):
            X[i, a] = X_all[t, i, a]
            u_nodes[i, a] = u_all[t, i, a]
    for g in range(NGI):
        w[g] = weights[g]
        for i in range(4):
            n[g, i] = n_all[g, i]
    for a in range(3):
        for b in range(3):
            tensor[a, b] = tensor_all[t, a, b]

    transform_to_physical(X, w, dshape, detwei)
    ele_val_at_quad(n, f_nodes, f_gi)
    ele_vector_at_quad(n, u_nodes, u_gi)

    shape_shape(n, detwei, m44)
    for i in range(4):
        for j in range(4):
            mass_all[t, i, j] = m44[i, j]
    dshape_tensor_dshape(dshape, tensor, detwei, m44)
    for i in range(4):
        for j in range(4):
            k_all[t, i, j] = m44[i, j]
    shape_vector_dot_dshape(n, dshape, u_gi, detwei, m44)
    for i in range(4):
        for j in range(4):
            adv_all[t, i, j] = m44[i, j]
    shape_dshape(n, dshape, detwei, m344)
    for d in range(3):
        for i in range(4):
            for j in range(4):
                sd_all[t, d, i, j] = m344[d, i, j]
    dshape_shape(n, dshape, detwei, m344)
    for d in range(3):
        for i in range(4):
            for j in range(4):
                ds_all[t, d, i, j] = m344[d, i, j]
    shape_rhs(n, f_gi, detwei, v4)
    for i in range(4):
        rhs_all[t, i] = v4[i]
    shape_vector_rhs(n, u_gi, detwei, v43)
    for i in range(4):
        for a in range(3):
            vrhs_all[t, i, a] = v43[i, a]


def test_integrals_parity():
    X, rng = random_tets(1, NTHREADS)
    tensor = rng.standard_normal((NTHREADS, 3, 3))
    u = rng.standard_normal((NTHREADS, 4, 3)) * 10.0
    f = rng.standard_normal((NTHREADS, 4))
    outs = [np.zeros((NTHREADS, 4, 4)), np.zeros((NTHREADS, 3, 4, 4)),
            np.zeros((NTHREADS, 3, 4, 4)), np.zeros((NTHREADS, 4, 4)),
            np.zeros((NTHREADS, 4, 4)), np.zeros((NTHREADS, 4)), np.zeros((NTHREADS, 4, 3))]
    res = launch(k_integrals, X, QUAD.weights, N_GI, tensor, u, f, *outs)[6:]

    cpu = [np.empty_like(o) for o in outs]
    dshape = np.empty((4, 3))
    detwei = np.empty(NGI)
    u_gi = np.empty((NGI, 3))
    f_gi = np.empty(NGI)
    for e in range(NTHREADS):
        transform_to_physical(X[e], QUAD.weights, dshape, detwei)
        ele_val_at_quad(N_GI, f[e], f_gi)
        ele_vector_at_quad(N_GI, u[e], u_gi)
        shape_shape(N_GI, detwei, cpu[0][e])
        shape_dshape(N_GI, dshape, detwei, cpu[1][e])
        dshape_shape(N_GI, dshape, detwei, cpu[2][e])
        dshape_tensor_dshape(dshape, tensor[e], detwei, cpu[3][e])
        shape_vector_dot_dshape(N_GI, dshape, u_gi, detwei, cpu[4][e])
        shape_rhs(N_GI, f_gi, detwei, cpu[5][e])
        shape_vector_rhs(N_GI, u_gi, detwei, cpu[6][e])
    for g, c in zip(res, cpu):
        assert np.all(np.isfinite(c))
        assert_parity(g, c)


# --------------------------------------------------------------------------- solve6
@cuda.jit
def k_solve6(a_all, b_all, x_all, status_all):
    t = cuda.grid(1)
    if t >= a_all.shape[0]:
        return
    a = cuda.local.array((6, 6), float64)
    b = cuda.local.array(6, float64)
    x = cuda.local.array(6, float64)
    for i in range(6):
        b[i] = b_all[t, i]
        for j in range(6):
            a[i, j] = a_all[t, i, j]
    status_all[t] = solve6(a, b, x)
    for i in range(6):
        x_all[t, i] = x[i]


def test_solve6_parity():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((NTHREADS, 6, 6)) * 10.0 ** rng.uniform(-4, 4, (NTHREADS, 6, 1))
    a[::17, 4] = 0.0          # singular systems
    a[5::23, :, 0] = 0.0
    b = rng.standard_normal((NTHREADS, 6))
    _, _, x, status = launch(k_solve6, a, b, np.zeros((NTHREADS, 6)),
                             np.zeros(NTHREADS, dtype=np.int64))
    c_x = np.empty_like(x)
    c_status = np.array([solve6(a[e].copy(), b[e].copy(), c_x[e]) for e in range(NTHREADS)])
    assert 0 < c_status.sum() < NTHREADS
    np.testing.assert_array_equal(status, c_status)
    assert_parity(x, c_x)


# --------------------------------------------------------------------------- eig3
@cuda.jit
def k_eig3(A_all, evals_all, evecs_all, ret_all):
    t = cuda.grid(1)
    if t >= A_all.shape[0]:
        return
    a = cuda.local.array((3, 3), float64)
    evals = cuda.local.array(3, float64)
    evecs = cuda.local.array((3, 3), float64)
    for m in range(2):
        for i in range(3):
            for j in range(3):
                a[i, j] = A_all[t, i, j]
        if m == 0:
            ret_all[t, m] = eig3_jacobi(a, evals, evecs)
        else:
            ret_all[t, m] = eig3_closed_form(a, evals, evecs)
        for i in range(3):
            evals_all[t, m, i] = evals[i]
            for j in range(3):
                evecs_all[t, m, i, j] = evecs[i, j]


def test_eig3_parity():
    rng = np.random.default_rng(3)
    A = np.empty((NTHREADS, 3, 3))
    for e in range(NTHREADS):
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        kind = e % 4
        lam = [rng.uniform(0.1, 10, 3), [1.0, 1.0, 2.0], [1.0, 2.0, 1e8], [3.0, 3.0, 3.0]][kind]
        A[e] = q @ np.diag(lam) @ q.T
        A[e] = 0.5 * (A[e] + A[e].T)
    _, evals, evecs, ret = launch(k_eig3, A, np.zeros((NTHREADS, 2, 3)),
                                  np.zeros((NTHREADS, 2, 3, 3)),
                                  np.zeros((NTHREADS, 2), dtype=np.int64))
    c_evals = np.empty_like(evals)
    c_evecs = np.empty_like(evecs)
    c_ret = np.empty_like(ret)
    for e in range(NTHREADS):
        c_ret[e, 0] = eig3_jacobi(A[e].copy(), c_evals[e, 0], c_evecs[e, 0])
        c_ret[e, 1] = eig3_closed_form(A[e].copy(), c_evals[e, 1], c_evecs[e, 1])
    if SIM:
        np.testing.assert_array_equal(ret, c_ret)
    else:  # FMA rounding can move the Jacobi stopping test by one sweep
        assert np.abs(ret - c_ret).max() <= 1
    assert_parity(evals, c_evals)
    if SIM:
        assert_parity(evecs, c_evecs)
    else:  # eigenvectors of a repeated eigenvalue are not unique: compare the projectors
        p_gpu = np.einsum("emik,emk,emjk->emij", evecs, evals, evecs)
        p_cpu = np.einsum("emik,emk,emjk->emij", c_evecs, c_evals, c_evecs)
        assert_parity(p_gpu, p_cpu)


# --------------------------------------------------------------------------- metric
@cuda.jit
def k_metric(X_all, method, metric_all, evals_all, evecs_all, hbar_all, status_all):
    t = cuda.grid(1)
    if t >= X_all.shape[0]:
        return
    X = cuda.local.array((4, 3), float64)
    a6 = cuda.local.array((6, 6), float64)
    b6 = cuda.local.array(6, float64)
    x6 = cuda.local.array(6, float64)
    metric = cuda.local.array((3, 3), float64)
    evals = cuda.local.array(3, float64)
    evecs = cuda.local.array((3, 3), float64)
    hbar = cuda.local.array((3, 3), float64)
    for i in range(4):
        for a in range(3):
            X[i, a] = X_all[t, i, a]
    status_all[t] = get_edge_lengths(X, a6, b6, x6, metric, evals, evecs, hbar, method[0])
    for i in range(3):
        evals_all[t, i] = evals[i]
        for j in range(3):
            metric_all[t, i, j] = metric[i, j]
            evecs_all[t, i, j] = evecs[i, j]
            hbar_all[t, i, j] = hbar[i, j]


@pytest.mark.parametrize("method", [EIG_JACOBI, EIG_CLOSED_FORM])
def test_get_edge_lengths_parity(method):
    X, _ = random_tets(4, NTHREADS)
    X[3::10, :, 2] *= 1e-3    # flat elements
    X[11, 3] = X[11, 1]       # degenerate: status 1, NaN outputs
    res = launch(k_metric, X, np.array([method], dtype=np.int64),
                 np.zeros((NTHREADS, 3, 3)), np.zeros((NTHREADS, 3)),
                 np.zeros((NTHREADS, 3, 3)), np.zeros((NTHREADS, 3, 3)),
                 np.zeros(NTHREADS, dtype=np.int64))
    metric, evals, evecs, hbar, status = res[2:]
    cpu = [np.empty_like(metric), np.empty_like(evals), np.empty_like(evecs),
           np.empty_like(hbar)]
    a6 = np.empty((6, 6))
    b6 = np.empty(6)
    x6 = np.empty(6)
    c_status = np.array([get_edge_lengths(X[e], a6, b6, x6, cpu[0][e], cpu[1][e], cpu[2][e],
                                          cpu[3][e], method) for e in range(NTHREADS)])
    assert c_status[11] == 1 and c_status.sum() == 1
    np.testing.assert_array_equal(status, c_status)
    assert_parity(metric, cpu[0])
    assert_parity(evals, cpu[1])
    if SIM:
        assert_parity(evecs, cpu[2])
    assert_parity(hbar, cpu[3])
