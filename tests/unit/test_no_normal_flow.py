"""The strong no-normal-flow condition (dycore.assembly.no_normal_flow), against dense NumPy.

Each operation is checked against an independent construction: the rotated system R A Rᵀ built
from dense matrices, its solution against the unrotated system with the constraint, the frames
against orthonormality, the analytic terrain normals against finite differences of the terrain.
"""
import numpy as np
import pytest
import scipy.sparse as sp

import dycore.cases.mountainwave3d as case
from dycore.assembly import no_normal_flow as nnf_mod
from dycore.assembly.operators import _projected_inverse_mass
from dycore.assembly.sparsity import build_sparsity
from dycore.mesh import FaceTag, GridSpec, generate_terrain_following

PARAMS = case.Parameters(lx=4000.0, ly=4000.0, lz=2000.0, h0=400.0, a=1000.0,
                         sponge_top_base=1500.0, sponge_lateral_width=500.0)


@pytest.fixture(scope="module")
def setup():
    spec = GridSpec(nx=4, ny=4, nz=3, lx=PARAMS.lx, ly=PARAMS.ly, lz=PARAMS.lz,
                    dx_min=900.0, dz_min=500.0)
    mesh = generate_terrain_following(spec, lambda x, y: case.terrain(PARAMS, x, y))
    s = build_sparsity(mesh.tets, mesh.nnodes)
    lateral = [FaceTag.WEST, FaceTag.EAST, FaceTag.SOUTH, FaceTag.NORTH]
    dir_nodes = mesh.tagged_nodes(lateral)
    nnf = nnf_mod.build_no_normal_flow(mesh, s, (FaceTag.GROUND, FaceTag.TOP), dir_nodes)
    return mesh, s, dir_nodes, nnf


def test_frames_are_orthonormal_right_handed_with_the_normal_first():
    n = np.random.default_rng(0).standard_normal((50, 3))
    f = nnf_mod.normal_frames(n)
    assert np.allclose(f @ f.transpose(0, 2, 1), np.eye(3), atol=1e-14)
    assert np.allclose(np.linalg.det(f), 1.0, atol=1e-14)
    assert np.allclose(f[:, 0], n / np.linalg.norm(n, axis=1)[:, None], atol=1e-15)


def test_rotated_nodes_normals_and_blocks(setup):
    mesh, s, dir_nodes, nnf = setup
    ground = mesh.tagged_nodes([FaceTag.GROUND])
    top = mesh.tagged_nodes([FaceTag.TOP])
    expect = np.setdiff1d(np.union1d(ground, top), dir_nodes)
    assert np.array_equal(nnf.nodes, expect) and expect.size > 0
    on_top = np.isin(nnf.nodes, top)
    assert np.array_equal(nnf.normals[on_top], np.tile([0.0, 0.0, 1.0], (on_top.sum(), 1)))
    assert np.all(nnf.normals[~on_top, 2] < -0.9)               # outward = down at the ground
    # every block of a rotated row or column, each once, diagonal positions right
    rot = np.zeros(s.n, bool)
    rot[nnf.nodes] = True
    want = np.flatnonzero(rot[s.row_of] | rot[s.indices])
    assert np.array_equal(np.sort(nnf.blk_pos), want)
    assert np.array_equal(s.row_of[nnf.diag_pos], nnf.nodes)
    assert np.array_equal(s.indices[nnf.diag_pos], nnf.nodes)


def test_exact_ground_normals_replace_the_area_weighted_ones(setup):
    mesh, s, dir_nodes, nnf = setup
    exact = nnf_mod.build_no_normal_flow(
        mesh, s, (FaceTag.GROUND, FaceTag.TOP), dir_nodes,
        {FaceTag.GROUND: lambda c: case.ground_normals(PARAMS, c)})
    g = np.isin(exact.nodes, mesh.tagged_nodes([FaceTag.GROUND]))
    c = mesh.coords[exact.nodes[g]]
    n, on = case.ground_normals(PARAMS, c)
    assert on.all()
    assert np.allclose(exact.normals[g], n, atol=1e-15)
    assert np.array_equal(exact.normals[~g], nnf.normals[~g])
    # analytic normal against a central difference of the terrain: n ∝ (h_x, h_y, -1)
    e = 1e-3
    hx = (case.terrain(PARAMS, c[:, 0] + e, c[:, 1]) - case.terrain(PARAMS, c[:, 0] - e, c[:, 1])) / (2 * e)
    hy = (case.terrain(PARAMS, c[:, 0], c[:, 1] + e) - case.terrain(PARAMS, c[:, 0], c[:, 1] - e)) / (2 * e)
    fd = np.column_stack([hx, hy, -np.ones_like(hx)])
    fd /= np.linalg.norm(fd, axis=1)[:, None]
    assert np.abs(n - fd).max() < 1e-7
    # the summit (x = y = 0) has the vertical normal, which the area-weighted one does not need to
    summit = np.argmin(np.hypot(c[:, 0], c[:, 1]))
    assert np.hypot(c[summit, 0], c[summit, 1]) < 1e-9
    assert np.array_equal(n[summit], [0.0, 0.0, -1.0])


def _random_system(s, seed):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((s.nnz, 3, 3))
    diag = s.diagonal_positions()
    values[diag] += 20.0 * np.eye(3)                             # well conditioned
    rhs = rng.standard_normal((s.n, 3))
    u_old = rng.standard_normal((s.n, 3))
    return values, rhs, u_old


def _dense(values, s):
    return sp.bsr_matrix((values, s.indices, s.indptr), shape=(3 * s.n, 3 * s.n)).toarray()


def test_rotate_system_is_r_a_rt_with_constraint_rows(setup):
    mesh, s, _, nnf = setup
    values, rhs, u_old = _random_system(s, 1)
    dt = 7.0
    v, r = values.copy(), rhs.copy()
    nnf_mod.rotate_system(v, r, u_old, dt, nnf)
    R = np.eye(3 * s.n)
    for f, i in enumerate(nnf.nodes):
        R[3 * i:3 * i + 3, 3 * i:3 * i + 3] = nnf.frames[f]
    A = R @ _dense(values, s) @ R.T
    b = (R @ rhs.ravel()).copy()
    a_nn = A[3 * nnf.nodes, 3 * nnf.nodes].copy()
    for i, a in zip(nnf.nodes, a_nn):
        A[3 * i, :] = 0.0
        A[3 * i, 3 * i] = a
    b[3 * nnf.nodes] = a_nn * (-np.sum(nnf.normals * u_old[nnf.nodes], axis=1) / dt)
    got = _dense(v, s)
    assert np.abs(got - A).max() <= 1e-13 * np.abs(A).max()
    assert np.abs(r.ravel() - b).max() <= 1e-13 * np.abs(b).max()
    # blocks touching no rotated node are untouched, bit for bit
    other = np.setdiff1d(np.arange(s.nnz), nnf.blk_pos)
    assert np.array_equal(v[other], values[other])


def test_solution_satisfies_the_constraint_and_the_tangential_equations(setup):
    mesh, s, _, nnf = setup
    values, rhs, u_old = _random_system(s, 2)
    dt = 5.0
    v, r = values.copy(), rhs.copy()
    nnf_mod.rotate_system(v, r, u_old, dt, nnf)
    du = np.linalg.solve(_dense(v, s), r.ravel()).reshape(s.n, 3)
    nnf_mod.unrotate(du, nnf)
    u_star = u_old + dt * du
    assert np.abs(np.sum(nnf.normals * u_star[nnf.nodes], axis=1)).max() < 1e-12
    res = (_dense(values, s) @ du.ravel() - rhs.ravel()).reshape(s.n, 3)
    free = np.setdiff1d(np.arange(s.n), nnf.nodes)
    assert np.abs(res[free]).max() < 1e-10                       # unrotated rows hold
    t = nnf.frames[:, 1:, :]                                     # tangential rows hold
    assert np.abs(np.einsum("fab,fb->fa", t, res[nnf.nodes])).max() < 1e-10


def test_unrotate_inverts_rotation_and_remove_normal_projects(setup):
    _, s, _, nnf = setup
    x = np.random.default_rng(3).standard_normal((s.n, 3))
    rot = x.copy()
    rot[nnf.nodes] = np.einsum("fab,fb->fa", nnf.frames, x[nnf.nodes])
    nnf_mod.unrotate(rot, nnf)
    assert np.allclose(rot, x, atol=1e-14)
    y = x.copy()
    nnf_mod.remove_normal(y, nnf)
    n = nnf.normals
    assert np.abs(np.sum(n * y[nnf.nodes], axis=1)).max() < 1e-15
    t = nnf.frames[:, 1:, :]
    assert np.allclose(np.einsum("fab,fb->fa", t, y[nnf.nodes]),
                       np.einsum("fab,fb->fa", t, x[nnf.nodes]), atol=1e-15)
    free = np.setdiff1d(np.arange(s.n), nnf.nodes)
    assert np.array_equal(y[free], x[free])


def test_projected_inverse_mass_is_symmetric_and_removes_the_normal(setup):
    _, s, dir_nodes, nnf = setup
    ml = np.random.default_rng(4).uniform(1.0, 2.0, s.n)
    ml_inv = np.repeat((1.0 / ml)[:, None], 3, axis=1)
    ml_inv[dir_nodes] = 0.0
    d = _projected_inverse_mass(ml_inv, nnf)
    assert abs(d - d.T).max() < 1e-16
    x = np.random.default_rng(5).standard_normal((s.n, 3))
    y = (d @ x.ravel()).reshape(s.n, 3)
    assert np.abs(np.sum(nnf.normals * y[nnf.nodes], axis=1)).max() < 1e-15
    expect = x * ml_inv
    nnf_mod.remove_normal(expect, nnf)
    assert np.allclose(y, expect, rtol=1e-14, atol=1e-16)


def test_localise_keeps_frames_and_rebuilds_blocks(setup):
    """A rank's copy: the nodes it holds, renumbered, with the same frames and its own blocks."""
    mesh, s, dir_nodes, nnf = setup
    rng = np.random.default_rng(6)
    tets = mesh.tets[rng.choice(mesh.nele, size=mesh.nele // 2, replace=False)]
    held = np.unique(tets)                                 # a rank's nodes: those of its tets
    g2l = np.full(s.n, -1, np.int64)
    perm = rng.permutation(held.size)
    g2l[held] = perm
    local_tets = g2l[tets]
    lsp = build_sparsity(local_tets, held.size)
    flat = nnf_mod.NoNormalFlow(**{**nnf.__dict__, "frames": nnf.frames.reshape(-1)})
    loc = nnf_mod.localise(flat, g2l, lsp)
    kept = np.isin(nnf.nodes, held)
    assert np.array_equal(np.sort(loc.nodes), np.sort(g2l[nnf.nodes[kept]]))
    assert np.all(np.diff(loc.nodes) > 0)
    l2g = np.empty(held.size, np.int64)
    l2g[perm] = held
    back = {int(g): f for f, g in enumerate(nnf.nodes)}
    for f, i in enumerate(loc.nodes):
        assert np.array_equal(loc.frames[f], nnf.frames[back[int(l2g[i])]])
    assert np.array_equal(lsp.row_of[loc.diag_pos], loc.nodes)


def test_faces_whose_normals_cancel_are_a_mesh_error_naming_node_and_tags():
    """One tetrahedron whose face (0, 1, 2) is tagged twice, once each way round: the summed
    normals of nodes 0, 1, 2 cancel, which is a MeshError naming the node, its coordinates and
    the tags (not a traceback from deep inside)."""
    from dycore.errors import MeshError
    from dycore.mesh.mesh import Mesh
    coords = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    tets = np.array([[0, 1, 2, 3]])
    faces = np.array([[0, 1, 2], [0, 2, 1]])
    mesh = Mesh(coords=coords, tets=tets, faces=faces, face_tags=np.array([7, 7]),
                face_ele=np.array([0, 0]))
    with pytest.raises(MeshError, match=r"node 0 \(at \[0\.0, 0\.0, 0\.0\] m\).*\[7\].*"
                                        r"no_normal_flow\) cancel"):
        nnf_mod.build_no_normal_flow(mesh, build_sparsity(tets, 4), [7], np.zeros(0, np.int64))
