"""The device solvers' building blocks, exercised with NumPy/SciPy standing in for CuPy."""
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from dycore.assembly.sparsity import build_sparsity
from dycore.mesh import GridSpec, generate_terrain_following
from dycore.solvers.device import DeviceAMG, bcsr_to_csr_permutation


def _mesh():
    spec = GridSpec(nx=6, ny=6, nz=4, lx=6000.0, ly=6000.0, lz=3000.0, dx_min=800.0, dz_min=400.0)
    return generate_terrain_following(spec, lambda x, y: 0.0 * x)


def test_bcsr_expansion_equals_scipy_bsr():
    mesh = _mesh()
    s = build_sparsity(mesh.tets, mesh.nnodes)
    v = np.random.default_rng(0).standard_normal((s.nnz, 3, 3))
    n3 = 3 * s.n
    ref = sp.bsr_matrix((v, s.indices, s.indptr), shape=(n3, n3)).tocsr()
    ip, ix, perm = bcsr_to_csr_permutation(s.indptr, s.indices)
    ours = sp.csr_matrix((v.reshape(-1)[perm], ix, ip), shape=(n3, n3))
    assert abs(ref - ours).max() == 0.0
    assert np.all(np.diff(ix[ip[0]:ip[1]]) > 0)          # sorted columns in a row


def test_device_amg_vcycle_preconditions_cg():
    """The V-cycle is a good SPD preconditioner: CG converges in far fewer iterations."""
    mesh = _mesh()
    s = build_sparsity(mesh.tets, mesh.nnodes)
    # graph Laplacian + small shift: SPD, AMG-friendly, independent of dycore's operators
    a = sp.csr_matrix((-np.ones(s.nnz), s.indices, s.indptr), shape=(s.n, s.n))
    a = a - sp.diags(a.diagonal()) + sp.diags(-(a.sum(axis=1).A1 - a.diagonal()) + 1e-3)
    amg = DeviceAMG(a.tocsr(), np, sp.csr_matrix)
    b = np.random.default_rng(1).standard_normal(s.n)
    its = {"amg": 0, "none": 0}

    def count(key):
        def cb(_):
            its[key] += 1
        return cb
    m = spla.LinearOperator(a.shape, matvec=amg, dtype=float)
    x, info = spla.cg(a, b, rtol=1e-10, M=m, callback=count("amg"), maxiter=500)
    assert info == 0 and np.linalg.norm(a @ x - b) <= 1e-9 * np.linalg.norm(b)
    _, info = spla.cg(a, b, rtol=1e-10, callback=count("none"), maxiter=5000)
    assert its["amg"] * 3 < its["none"], its
