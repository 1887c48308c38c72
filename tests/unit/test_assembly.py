"""Global matrices from the assembly vs an independent, vectorised NumPy/SciPy COO assembly.

The reference computes P1 element matrices from closed forms (mass vol(1+δ)/20, gradients from
the inverse of the 4×4 interpolation matrix) with no quadrature and no code from dycore.fem.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from tiny_mesh import tiny_mesh

from dycore.assembly.operators import build_mesh_operators
from dycore.assembly.sparsity import build_sparsity, second_order_pattern
from dycore.backend.cpu import CPUBackend
from dycore.backend.timers import StageTimers
from dycore.mesh import shuffle


def _reference_geometry(mesh):
    x = mesh.coords[mesh.tets]                                    # (nele,4,3)
    a = np.concatenate([np.ones((mesh.nele, 4, 1)), x], axis=2)   # N_i = c_i0 + c_i·x
    coef = np.linalg.inv(a)                                       # columns = shape functions
    grad = np.transpose(coef[:, 1:, :], (0, 2, 1))                # (nele,4,3)
    vol = np.abs(np.linalg.det(a)) / 6.0
    return vol, grad


def _coo(mesh, ele):
    r = np.repeat(mesh.tets, 4, axis=1).ravel()
    c = np.tile(mesh.tets, (1, 4)).ravel()
    return sp.coo_matrix((ele.ravel(), (r, c)), shape=(mesh.nnodes, mesh.nnodes)).tocsr()


def _ours(sparsity, values):
    n = sparsity.n
    return sp.csr_matrix((values, sparsity.indices, sparsity.indptr), shape=(n, n))


@pytest.fixture(scope="module")
def setup():
    mesh = tiny_mesh(4, 4, 3, 300.0)
    s = build_sparsity(mesh.tets, mesh.nnodes)
    b = CPUBackend()
    asm = b.assembler(mesh, s, StageTimers())
    return mesh, s, asm


def test_pattern_is_node_graph(setup):
    mesh, s, _ = setup
    ref = _coo(mesh, np.ones((mesh.nele, 4, 4)))
    ours = _ours(s, np.ones(s.nnz))
    assert (ref != 0).sum() == s.nnz
    assert abs(ref.astype(bool).astype(int) - ours.astype(bool).astype(int)).sum() == 0
    # lookup: every (e,i,j) points at the nonzero of (tets[e,i], tets[e,j])
    e = np.arange(mesh.nele)[:, None, None]
    rows = s.row_of[s.lookup]
    cols = s.indices[s.lookup]
    assert np.array_equal(rows, np.broadcast_to(mesh.tets[:, :, None], rows.shape))
    assert np.array_equal(cols, np.broadcast_to(mesh.tets[:, None, :], cols.shape))
    del e


def test_second_order_pattern_matches_product(setup):
    mesh, s, _ = setup
    indptr, indices = second_order_pattern(s)
    a = _ours(s, np.ones(s.nnz))
    a2 = (a @ a).tocsr()
    assert indices.size == a2.nnz


def test_tracer_matrix_and_rhs_match_reference(setup):
    mesh, s, asm = setup
    rng = np.random.default_rng(1)
    n = mesh.nnodes
    u = rng.standard_normal((n, 3))
    c_old = rng.standard_normal(n)
    src = rng.standard_normal(n)
    sigma = np.full(n, 0.01)           # constant: S = σ M exactly
    c_ref = np.full(n, 2.0)
    k = (3.0, 2.0, 0.5)
    dt_theta = 5.0
    values, rhs = asm.tracer("t", u, c_old, src, sigma, c_ref, k, dt_theta)
    vol, grad = _reference_geometry(mesh)
    eye = np.eye(4)
    mass = vol[:, None, None] * (1 + eye) / 20.0
    kten = np.einsum("eid,d,ejd->eij", grad, np.array(k), grad) * vol[:, None, None]
    # advection with linear u: ∫ N_i N_k u_k·∇N_j = Σ_k M_ik (u_k·∇N_j)
    ue = u[mesh.tets]
    adv = np.einsum("eik,ekd,ejd->eij", mass, ue, grad)
    L = adv + kten + 0.01 * mass
    ref = _coo(mesh, mass + dt_theta * L)
    ours = _ours(s, values)
    assert abs(ref - ours).max() <= 1e-12 * abs(ref).max()
    # rhs = M(src + σ c_ref) − L c_old
    fe = src[mesh.tets] + 0.01 * 2.0
    rhs_e = np.einsum("eij,ej->ei", mass, fe) - np.einsum("eij,ej->ei", L, c_old[mesh.tets])
    rhs_ref = np.bincount(mesh.tets.ravel(), rhs_e.ravel(), minlength=n)
    assert np.allclose(rhs, rhs_ref, rtol=0, atol=1e-12 * abs(rhs_ref).max())


def test_momentum_blocks_match_reference(setup):
    mesh, s, asm = setup
    rng = np.random.default_rng(2)
    n = mesh.nnodes
    u_nl = rng.standard_normal((n, 3))
    u_old = rng.standard_normal((n, 3))
    buoy = rng.standard_normal(n)
    p = rng.standard_normal(n)
    sigma = np.zeros(n)
    f = 1e-4
    nu = (4.0, 4.0, 1.0)
    values, rhs = asm.momentum(u_nl, u_old, buoy, p, sigma, (10.0, 0.0, 0.0), nu, f, 5.0)
    vol, grad = _reference_geometry(mesh)
    mass = vol[:, None, None] * (1 + np.eye(4)) / 20.0
    L = (np.einsum("eik,ekd,ejd->eij", mass, u_nl[mesh.tets], grad)
         + np.einsum("eid,d,ejd->eij", grad, np.array(nu), grad) * vol[:, None, None])
    ml = vol[:, None] / 4.0
    R = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 0]], float)
    blocks = (5.0 * (np.einsum("eij,ab->eijab", L, np.eye(3)) + f * np.einsum("eij,ab->eijab", mass, R))
              + np.einsum("ei,ij,ab->eijab", ml, np.eye(4), np.eye(3)))
    ours = values  # (nnz,3,3)
    ref = np.zeros_like(ours)
    np.add.at(ref, s.lookup.ravel(), blocks.reshape(-1, 3, 3))
    assert np.abs(ref - ours).max() <= 1e-12 * np.abs(ref).max()
    # rhs: −(L⊗I + f M⊗R) uⁿ + ∫N b ẑ + Cᵀp, (Cᵀp)_j = −∫N_j ∇p = −vol/4 ∇p
    ue = u_old[mesh.tets]
    r = -np.einsum("eij,ejb->eib", L, ue) - f * np.einsum("eij,ab,ejb->eia", mass, R, ue)
    r[:, :, 2] += np.einsum("eij,ej->ei", mass, buoy[mesh.tets])
    gradp = np.einsum("eid,ei->ed", grad, p[mesh.tets])
    r -= ml[:, :, None] * gradp[:, None, :]
    ref_rhs = np.zeros((n, 3))
    np.add.at(ref_rhs, mesh.tets.ravel(), r.reshape(-1, 3))
    assert np.abs(ref_rhs - rhs).max() <= 1e-11 * np.abs(ref_rhs).max()


def test_divergence_mass_and_projection_operators(setup):
    mesh, s, asm = setup
    ops = build_mesh_operators(mesh, CPUBackend(), asm, s, (3, 4, 5, 6), 1.0, StageTimers())
    vol, grad = _reference_geometry(mesh)
    ml_ref = np.bincount(mesh.tets.ravel(), np.repeat(vol / 4, 4), minlength=mesh.nnodes)
    assert np.allclose(ops.ml, ml_ref, rtol=1e-13)
    assert np.isclose(ops.ml.sum(), vol.sum(), rtol=1e-13)
    # C u = ∫ψ∇·u − ∫_{ground, lid} ψ u·n (the no-normal-flow term is omitted, docs/equations.md §3).
    # For u = (x + 2y, 3z, -y) (∇·u = 1) summing over ψ (partition of unity) gives
    # Σ_i (C u)_i = volume − ∫_{ground, lid} u·n, the face integral exact for linear u.
    x = mesh.coords
    u = np.stack([x[:, 0] + 2 * x[:, 1], 3 * x[:, 2], -x[:, 1]], axis=1)
    total = (ops.C @ u.ravel()).sum()
    nnf = np.isin(mesh.face_tags, [1, 2])
    fx = mesh.coords[mesh.faces[nnf]]
    an = 0.5 * np.cross(fx[:, 1] - fx[:, 0], fx[:, 2] - fx[:, 0])
    flux = np.einsum("fd,fd->", an, u[mesh.faces[nnf]].mean(axis=1))
    assert np.isclose(total, vol.sum() - flux, rtol=1e-11)
    # CMC is symmetric positive semi-definite, KMK annihilates constants
    P = ops.pressure_host
    assert abs(P - P.T).max() <= 1e-12 * abs(P).max()
    kmk1 = ops.kmk @ np.ones(mesh.nnodes)
    assert np.abs(kmk1).max() <= 1e-10 * abs(ops.kmk).max() * 10


def test_assembly_is_permutation_invariant(setup):
    """Shuffling nodes and elements permutes the assembled matrix and nothing else."""
    mesh, s, asm = setup
    m2 = shuffle(mesh, seed=3)
    s2 = build_sparsity(m2.tets, m2.nnodes)
    asm2 = CPUBackend().assembler(m2, s2, StageTimers())
    n = mesh.nnodes
    rng = np.random.default_rng(4)
    u = rng.standard_normal((n, 3))
    c = rng.standard_normal(n)
    z = np.zeros(n)
    # node_perm: new k is old perm[k]; recover it from coordinates
    order1 = np.lexsort(mesh.coords.T)
    order2 = np.lexsort(m2.coords.T)
    perm = np.empty(n, int)
    perm[order2] = order1                               # new index -> old index
    v1, r1 = asm.tracer("a", u, c, z, z, z, (1.0, 1.0, 1.0), 2.0)
    v2, r2 = asm2.tracer("a", u[perm], c[perm], z, z, z, (1.0, 1.0, 1.0), 2.0)
    A1 = _ours(s, v1.copy())
    A2 = _ours(s2, v2.copy())
    assert abs(A1[perm][:, perm] - A2).max() <= 1e-13 * abs(A1).max()
    assert np.allclose(r1[perm], r2, rtol=0, atol=1e-13 * np.abs(r1).max())


def test_assembler_checks_inputs_against_the_loop_spec(setup):
    """Built on a mesh or run with inputs that do not fit a loop's spec, the assembler names
    the loop and the parameter (and runs nothing)."""
    from types import SimpleNamespace

    mesh, s, asm = setup
    flat = SimpleNamespace(coords=mesh.coords[:, :2], tets=mesh.tets, nele=mesh.nele,
                           nnodes=mesh.nnodes)           # a Mesh refuses 2-D coordinates
    with pytest.raises(ValueError, match=r"loop tracer: input 'coords' has shape "
                                         rf"\({mesh.nnodes}, 2\), the spec wants "
                                         rf"\({mesh.nnodes}, 3\)"):
        CPUBackend().assembler(flat, s, StageTimers())
    n = mesh.nnodes
    good = dict(u_nl=np.zeros((n, 3)), c_old=np.zeros(n), src=np.zeros(n), sigma=np.zeros(n),
                c_ref=np.zeros(n), kdiag=(1.0, 1.0, 1.0), dt_theta=1.0)
    with pytest.raises(ValueError, match=r"loop tracer: input 'u_nl' has shape \(\d+, 2\)"):
        asm.tracer("theta", **dict(good, u_nl=np.zeros((n, 2))))
    with pytest.raises(ValueError, match=r"loop tracer: input 'c_old' has shape \(\d+,\)"):
        asm.tracer("theta", **dict(good, c_old=np.zeros(n + 1)))
    with pytest.raises(ValueError, match="loop momentum: input 'u_nl' missing"):
        asm._run("momentum", "momentum", {})


def test_the_pin_in_place_equals_the_product_it_was_written_as():
    """``_pin`` zeroes row and column ``node`` in place, puts 1 on the diagonal and drops
    explicit zeros: the entries of diag(d) A diag(d) + e eᵀ (d = 1 − e, SciPy's products and
    sum), value for value, in sorted order; a matrix without that diagonal entry is refused."""
    from dycore.assembly.operators import _pin
    rng = np.random.default_rng(7)
    a = sp.random(40, 40, density=0.2, random_state=3, format="csr")
    a = (a + a.T + sp.diags(rng.uniform(1.0, 2.0, 40))).tocsr()
    a.data[::7] = 0.0                                          # explicit zeros: dropped
    a.sort_indices()
    for node in (0, 17, 39):
        d = sp.diags(np.where(np.arange(40) == node, 0.0, 1.0))
        want = (d @ a @ d + sp.csr_matrix(([1.0], ([node], [node])), shape=a.shape)).tocsr()
        want.eliminate_zeros()
        want.sort_indices()
        got = a.copy()
        _pin(got, node)
        assert np.array_equal(got.indptr, want.indptr)
        assert np.array_equal(got.indices, want.indices)
        assert got.data.tobytes() == want.data.tobytes()
        assert got[node, node] == 1.0 and got[node].nnz == 1 and got[:, node].nnz == 1
    none = a.copy()
    _pin(none, -1)                                             # only the zeros dropped
    assert none.nnz == np.count_nonzero(a.data) and abs(none - a).max() == 0.0
    hollow = a.tolil()
    hollow[5, 5] = 0.0
    hollow = hollow.tocsr()
    hollow.eliminate_zeros()
    with pytest.raises(ValueError, match="pinned node 5: the matrix has no diagonal entry"):
        _pin(hollow, 5)
