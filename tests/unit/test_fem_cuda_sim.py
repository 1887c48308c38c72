"""CPU / CUDA parity of the element functions: one generated @cuda.jit kernel per function.

The kernels are the loops of ``FEM_CHECKS`` (tests/fem_loops.py: the element-loop contract,
rendered at test time): each thread copies its element's inputs into
``cuda.local.array``s, calls the SAME ``@njit`` element function as the CPU path and copies the
results out (the local-kernel contract of docs/equations.md §6). The CPU side calls the
functions directly, element by element.  Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
set by tests/conftest.py) there is no FMA, so the results must be bitwise equal to the CPU;
on a real GPU without the strict floating-point mode FMA contraction makes them differ in the
last bits, so there the comparison is relative to 1e-10 instead.
"""
import numpy as np
import pytest
from numba import config, cuda

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


def launch(name, *args):
    """Run the generated kernel of FEM_CHECKS loop ``name`` on ``args`` (in its parameter
    order); the host copies of every argument afterwards."""
    from fem_loops import gpu_module

    from dycore.backend.gpu_kernels import kernel_compiler

    kernel = kernel_compiler(False)(gpu_module().KERNELS[name])
    dargs = [cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a
             for a in args]
    kernel[(NTHREADS + BLOCK - 1) // BLOCK, BLOCK](*dargs)
    cuda.synchronize()
    return [d.copy_to_host() if hasattr(d, "copy_to_host") else d for d in dargs]


def assert_parity(gpu, cpu):
    if SIM:
        assert np.array_equal(gpu, cpu, equal_nan=True)
    else:
        scale = np.nanmax(np.abs(cpu)) if np.any(np.isfinite(cpu)) else 1.0
        np.testing.assert_allclose(gpu, cpu, rtol=1e-10, atol=1e-10 * scale)


# --------------------------------------------------------------------------- transform
def test_transform_parity():
    X, _ = random_tets(0, NTHREADS)
    X[7, 3] = X[7, 2]  # one degenerate element: det J = 0, inf/nan gradients
    _, _, dshape, detwei, detj = launch("transform_to_physical", X, QUAD.weights,
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
def test_integrals_parity():
    X, rng = random_tets(1, NTHREADS)
    tensor = rng.standard_normal((NTHREADS, 3, 3))
    u = rng.standard_normal((NTHREADS, 4, 3)) * 10.0
    f = rng.standard_normal((NTHREADS, 4))
    z = np.zeros
    _, _, ds, dw, _ = launch("transform_to_physical", X, QUAD.weights, z((NTHREADS, 4, 3)),
                             z((NTHREADS, NGI)), z(NTHREADS))
    f_gi = launch("ele_val_at_quad", N_GI, f, z((NTHREADS, NGI)))[-1]
    u_gi = launch("ele_vector_at_quad", N_GI, u, z((NTHREADS, NGI, 3)))[-1]
    res = [launch("shape_shape", N_GI, dw, z((NTHREADS, 4, 4)))[-1],
           launch("shape_dshape", N_GI, ds, dw, z((NTHREADS, 3, 4, 4)))[-1],
           launch("dshape_shape", N_GI, ds, dw, z((NTHREADS, 3, 4, 4)))[-1],
           launch("dshape_tensor_dshape", ds, tensor, dw, z((NTHREADS, 4, 4)))[-1],
           launch("shape_vector_dot_dshape", N_GI, ds, u_gi, dw, z((NTHREADS, 4, 4)))[-1],
           launch("shape_rhs", N_GI, f_gi, dw, z((NTHREADS, 4)))[-1],
           launch("shape_vector_rhs", N_GI, u_gi, dw, z((NTHREADS, 4, 3)))[-1]]

    cpu = [np.empty_like(o) for o in res]
    c_f_gi, c_u_gi = np.empty_like(f_gi), np.empty_like(u_gi)
    dshape = np.empty((4, 3))
    detwei = np.empty(NGI)
    for e in range(NTHREADS):
        transform_to_physical(X[e], QUAD.weights, dshape, detwei)
        ele_val_at_quad(N_GI, f[e], c_f_gi[e])
        ele_vector_at_quad(N_GI, u[e], c_u_gi[e])
        shape_shape(N_GI, detwei, cpu[0][e])
        shape_dshape(N_GI, dshape, detwei, cpu[1][e])
        dshape_shape(N_GI, dshape, detwei, cpu[2][e])
        dshape_tensor_dshape(dshape, tensor[e], detwei, cpu[3][e])
        shape_vector_dot_dshape(N_GI, dshape, c_u_gi[e], detwei, cpu[4][e])
        shape_rhs(N_GI, c_f_gi[e], detwei, cpu[5][e])
        shape_vector_rhs(N_GI, c_u_gi[e], detwei, cpu[6][e])
    assert_parity(f_gi, c_f_gi)
    assert_parity(u_gi, c_u_gi)
    for g, c in zip(res, cpu):
        assert np.all(np.isfinite(c))
        assert_parity(g, c)


# --------------------------------------------------------------------------- solve6
def test_solve6_parity():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((NTHREADS, 6, 6)) * 10.0 ** rng.uniform(-4, 4, (NTHREADS, 6, 1))
    a[::17, 4] = 0.0          # singular systems
    a[5::23, :, 0] = 0.0
    b = rng.standard_normal((NTHREADS, 6))
    _, _, x, status = launch("solve6", a, b, np.zeros((NTHREADS, 6)),
                             np.zeros(NTHREADS, dtype=np.int64))
    c_x = np.empty_like(x)
    c_status = np.array([solve6(a[e].copy(), b[e].copy(), c_x[e]) for e in range(NTHREADS)])
    assert 0 < c_status.sum() < NTHREADS
    np.testing.assert_array_equal(status, c_status)
    assert_parity(x, c_x)


# --------------------------------------------------------------------------- eig3
def test_eig3_parity():
    rng = np.random.default_rng(3)
    A = np.empty((NTHREADS, 3, 3))
    for e in range(NTHREADS):
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        kind = e % 4
        lam = [rng.uniform(0.1, 10, 3), [1.0, 1.0, 2.0], [1.0, 2.0, 1e8], [3.0, 3.0, 3.0]][kind]
        A[e] = q @ np.diag(lam) @ q.T
        A[e] = 0.5 * (A[e] + A[e].T)
    runs = [launch(name, A, np.zeros((NTHREADS, 3)), np.zeros((NTHREADS, 3, 3)),
                   np.zeros(NTHREADS, dtype=np.int64))[1:]
            for name in ("eig3_jacobi", "eig3_closed_form")]
    evals, evecs, ret = (np.stack([r[k] for r in runs], axis=1) for k in range(3))
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
@pytest.mark.parametrize("method", [EIG_JACOBI, EIG_CLOSED_FORM])
def test_get_edge_lengths_parity(method):
    X, _ = random_tets(4, NTHREADS)
    X[3::10, :, 2] *= 1e-3    # flat elements
    X[11, 3] = X[11, 1]       # degenerate: status 1, NaN outputs
    res = launch("get_edge_lengths", X, method,
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
