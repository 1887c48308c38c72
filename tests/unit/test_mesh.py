"""Mesh container, terrain-following generator and 1-D grading (dycore.mesh)."""
import numpy as np
import pytest

from dycore.errors import MeshError
from dycore.mesh import (
    FaceTag,
    GridSpec,
    Mesh,
    generate_terrain_following,
    graded_one_sided_nodes,
    graded_symmetric_nodes,
)

LX, LY, LZ = 60000.0, 50000.0, 16000.0


def bell(x, y, h0=400.0, a=1000.0):
    return h0 / (1.0 + (x * x + y * y) / (a * a)) ** 1.5


def small_spec(nx=8, ny=7, nz=5, dx_min=2000.0, dz_min=1000.0):
    return GridSpec(nx=nx, ny=ny, nz=nz, lx=LX, ly=LY, lz=LZ, dx_min=dx_min, dz_min=dz_min)


@pytest.fixture(scope="module")
def mesh_and_spec():
    spec = small_spec()
    return generate_terrain_following(spec, lambda x, y: bell(x, y, h0=1500.0, a=5000.0)), spec


def ref_tet_mesh(order=(0, 1, 2, 3)):
    coords = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    return Mesh(coords=coords, tets=np.array([order]), faces=np.zeros((0, 3)),
                face_tags=np.zeros(0), face_ele=np.zeros(0))


# ------------------------------------------------------------------------------- counts
@pytest.mark.parametrize("nx,ny,nz", [(1, 1, 1), (2, 3, 1), (3, 2, 4), (8, 7, 5)])
def test_counts_small(nx, ny, nz):
    spec = GridSpec(nx=nx, ny=ny, nz=nz, lx=LX, ly=LY, lz=LZ, dx_min=1000.0, dz_min=100.0)
    m = generate_terrain_following(spec, lambda x, y: bell(x, y, a=8000.0))
    assert m.nnodes == (nx + 1) * (ny + 1) * (nz + 1) == spec.nnodes
    assert m.nele == 6 * nx * ny * nz == spec.nele
    assert m.nfaces == 2 * (2 * nx * ny + 2 * nx * nz + 2 * ny * nz)
    assert m.coords.dtype == np.float64 and m.coords.shape == (m.nnodes, 3)
    assert m.tets.dtype == np.int32 and m.faces.dtype == np.int32
    assert m.face_tags.dtype == np.int8 and m.face_ele.dtype == np.int32


def test_counts_paper_size():
    spec = GridSpec(nx=48, ny=48, nz=40, lx=60000.0, ly=60000.0, lz=16000.0,
                    dx_min=250.0, dz_min=150.0)
    m = generate_terrain_following(spec, bell)
    assert (m.nnodes, m.nele) == (98441, 552960)
    assert m.nfaces == 2 * (2 * 48 * 48 + 2 * 48 * 40 + 2 * 48 * 40) == 24576
    assert m.signed_volumes().min() > 0.0


# ------------------------------------------------------------------------------ volumes
def test_volumes_positive_and_total(mesh_and_spec):
    m, spec = mesh_and_spec
    vol = m.signed_volumes()
    assert vol.min() > 0.0
    # independent volume of the piecewise-linear terrain on the Kuhn ground triangulation:
    # each column (i,j) is split along the diagonal (i,j)-(i+1,j+1)
    x, y = spec.x_nodes(), spec.y_nodes()
    X, Y = np.meshgrid(x, y)
    h = bell(X, Y, h0=1500.0, a=5000.0)
    area = np.outer(np.diff(y), np.diff(x))
    h00, h10, h01, h11 = h[:-1, :-1], h[:-1, 1:], h[1:, :-1], h[1:, 1:]
    v_terrain = np.sum(area / 6.0 * ((h00 + h10 + h11) + (h00 + h01 + h11)))
    expected = LX * LY * LZ - v_terrain
    assert vol.sum() == pytest.approx(expected, rel=1e-12)
    # the same from the ground faces: projected area (outward normal z < 0) times mean height
    g = m.face_tags == FaceTag.GROUND
    nz_area = m.face_normals()[g, 2]
    assert np.all(nz_area < 0)
    v2 = np.sum(-nz_area * m.coords[m.faces[g], 2].mean(axis=1))
    assert v2 == pytest.approx(v_terrain, rel=1e-12)
    assert v_terrain > 1e10  # the mountain is really there (h0=1.5 km, a=5 km)


def test_reference_tet_volume():
    assert ref_tet_mesh().signed_volumes()[0] == pytest.approx(1.0 / 6.0, abs=1e-16)
    assert ref_tet_mesh((0, 2, 1, 3)).signed_volumes()[0] == pytest.approx(-1.0 / 6.0)


# ------------------------------------------------------------------- conformity / faces
def test_conformity(mesh_and_spec):
    m, spec = mesh_and_spec
    local = np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])
    allf = np.sort(m.tets[:, local].reshape(-1, 3), axis=1)
    uniq, counts = np.unique(allf, axis=0, return_counts=True)
    assert set(np.unique(counts)) == {1, 2}
    once = uniq[counts == 1]
    assert once.shape[0] == m.nfaces == 4 * (spec.nx * spec.ny + spec.nx * spec.nz
                                             + spec.ny * spec.nz)
    bnd = np.unique(np.sort(m.faces, axis=1), axis=0)
    assert bnd.shape[0] == m.nfaces  # no duplicates
    np.testing.assert_array_equal(bnd, once)
    # Euler characteristic of a ball: V - E + F - T = 1
    edges = np.unique(np.sort(m.tets[:, [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]]
                              .reshape(-1, 2), axis=1), axis=0)
    assert m.nnodes - edges.shape[0] + uniq.shape[0] - m.nele == 1


def test_outward_normals_and_owner(mesh_and_spec):
    m, _ = mesh_and_spec
    owner = m.tets[m.face_ele]
    assert np.all((m.faces[:, :, None] == owner[:, None, :]).any(axis=2))
    n = m.face_normals()
    d = m.coords[m.faces].mean(axis=1) - m.coords[owner].mean(axis=1)
    assert np.all(np.einsum("ij,ij->i", n, d) > 0)
    unit = n / np.linalg.norm(n, axis=1)[:, None]
    expect = {FaceTag.TOP: (0, 0, 1), FaceTag.WEST: (-1, 0, 0), FaceTag.EAST: (1, 0, 0),
              FaceTag.SOUTH: (0, -1, 0), FaceTag.NORTH: (0, 1, 0)}
    for tag, v in expect.items():
        np.testing.assert_allclose(unit[m.face_tags == tag], np.broadcast_to(v, (
            int(np.sum(m.face_tags == tag)), 3)), atol=1e-14)
    assert np.all(unit[m.face_tags == FaceTag.GROUND, 2] < -0.5)


def test_tags_by_position(mesh_and_spec):
    m, spec = mesh_and_spec
    fx = m.coords[m.faces]   # (nfaces, 3, 3)
    t = m.face_tags
    h = bell(fx[..., 0], fx[..., 1], h0=1500.0, a=5000.0)
    assert np.all(fx[t == FaceTag.GROUND, :, 2] == h[t == FaceTag.GROUND])
    assert np.all(fx[t == FaceTag.TOP, :, 2] == LZ)
    assert np.all(fx[t == FaceTag.WEST, :, 0] == -LX / 2)
    assert np.all(fx[t == FaceTag.EAST, :, 0] == LX / 2)
    assert np.all(fx[t == FaceTag.SOUTH, :, 1] == -LY / 2)
    assert np.all(fx[t == FaceTag.NORTH, :, 1] == LY / 2)
    counts = {tag: int(np.sum(t == tag)) for tag in FaceTag}
    nx, ny, nz = spec.nx, spec.ny, spec.nz
    assert counts == {FaceTag.GROUND: 2 * nx * ny, FaceTag.TOP: 2 * nx * ny,
                      FaceTag.WEST: 2 * ny * nz, FaceTag.EAST: 2 * ny * nz,
                      FaceTag.SOUTH: 2 * nx * nz, FaceTag.NORTH: 2 * nx * nz}


def test_gal_chen_coordinate(mesh_and_spec):
    m, spec = mesh_and_spec
    c = m.coords.reshape(spec.nz + 1, spec.ny + 1, spec.nx + 1, 3)
    h = bell(c[0, :, :, 0], c[0, :, :, 1], h0=1500.0, a=5000.0)
    zeta = spec.zeta_nodes()
    expect = h[None] + zeta[:, None, None] * (LZ - h[None]) / LZ
    np.testing.assert_allclose(c[..., 2], expect, rtol=0, atol=1e-9)
    assert np.all(np.diff(c[..., 2], axis=0) > 0)


# ------------------------------------------------------------------------------ grading
def test_grading_even_symmetric():
    x = graded_symmetric_nodes(48, 60000.0, 250.0)
    d = np.diff(x)
    assert x[0] == -30000.0 and x[-1] == 30000.0 and x[24] == 0.0
    np.testing.assert_array_equal(x, -x[::-1])
    assert d[23] == pytest.approx(250.0, rel=1e-12) and d[24] == pytest.approx(250.0, rel=1e-12)
    assert d.min() == pytest.approx(250.0, rel=1e-12)
    assert np.all(np.diff(d[24:]) > 0) and np.all(np.diff(d[:24]) < 0)
    ratio = d[25:] / d[24:-1]
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)
    assert ratio[0] == pytest.approx(1.12106, abs=1e-5)
    assert d.max() == pytest.approx(250.0 * ratio[0] ** 23, rel=1e-10)


def test_grading_odd_symmetric():
    x = graded_symmetric_nodes(7, 7000.0, 500.0)
    d = np.diff(x)
    assert x[0] == -3500.0 and x[-1] == 3500.0
    assert d[3] == pytest.approx(500.0) and x[3] == pytest.approx(-250.0)
    assert np.all(d[4:] > 500.0) and np.all(np.diff(d[3:]) > 0)
    assert d.sum() == pytest.approx(7000.0, rel=1e-15)
    np.testing.assert_allclose(d, d[::-1], rtol=1e-13)


def test_grading_uniform_limits():
    np.testing.assert_allclose(graded_symmetric_nodes(10, 1000.0, 100.0),
                               np.linspace(-500, 500, 11), atol=1e-9)
    np.testing.assert_array_equal(graded_symmetric_nodes(2, 1000.0, 10.0), [-500, 0, 500])
    np.testing.assert_array_equal(graded_symmetric_nodes(1, 1000.0, 10.0), [-500, 500])
    np.testing.assert_array_equal(graded_one_sided_nodes(1, 16000.0, 10.0), [0, 16000])


def test_grading_vertical():
    z = graded_one_sided_nodes(40, 16000.0, 150.0)
    d = np.diff(z)
    assert z[0] == 0.0 and z[-1] == 16000.0
    assert d[0] == pytest.approx(150.0, rel=1e-12) and d.min() == d[0]
    assert np.all(np.diff(d) > 0)
    np.testing.assert_allclose(d[1:] / d[:-1], d[1] / d[0], rtol=1e-12)
    assert d[-1] == pytest.approx(830.477, abs=1e-3)


def test_generated_spacing_matches_spec():
    spec = GridSpec(nx=12, ny=10, nz=6, lx=LX, ly=LY, lz=LZ, dx_min=1000.0, dz_min=200.0)
    m = generate_terrain_following(spec, lambda x, y: np.zeros_like(x))
    xs = np.unique(m.coords[:, 0])
    ys = np.unique(m.coords[:, 1])
    zs = np.unique(m.coords[:, 2])
    assert xs.size == 13 and ys.size == 11 and zs.size == 7
    assert np.diff(xs).min() == pytest.approx(1000.0) and np.diff(ys).min() == pytest.approx(1000.0)
    assert zs[1] - zs[0] == pytest.approx(200.0)
    assert m.signed_volumes().sum() == pytest.approx(LX * LY * LZ, rel=1e-13)


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("kw,field", [
    (dict(nx=0), "nx"), (dict(ny=-3), "ny"), (dict(nz=2.5), "nz"), (dict(nx=True), "nx"),
    (dict(lx=-1.0), "lx"), (dict(lz=float("nan")), "lz"), (dict(dz_min=0.0), "dz_min"),
    (dict(dx_min=8000.0), "dx_min"), (dict(nz=20, dz_min=1000.0), "dz_min"),
])
def test_gridspec_validation(kw, field):
    args = dict(nx=8, ny=7, nz=5, lx=LX, ly=LY, lz=LZ, dx_min=2000.0, dz_min=1000.0)
    args.update(kw)
    with pytest.raises(MeshError, match=field):
        GridSpec(**args)


def test_grading_impossible_names_field():
    with pytest.raises(MeshError, match=r"dx_min.*exceeds.*lx"):
        GridSpec(nx=48, ny=48, nz=40, lx=60000.0, ly=60000.0, lz=16000.0,
                 dx_min=1300.0, dz_min=100.0)


def test_terrain_errors():
    spec = small_spec()
    with pytest.raises(MeshError, match="lid"):
        generate_terrain_following(spec, lambda x, y: np.full_like(x, LZ))
    with pytest.raises(MeshError, match="not finite"):
        generate_terrain_following(spec, lambda x, y: np.where(x > 0, np.nan, 0.0))
    with pytest.raises(MeshError, match="GridSpec"):
        generate_terrain_following((8, 7, 5), bell)
    m = generate_terrain_following(spec, lambda x, y: 0.0)   # scalar broadcasts
    assert m.coords[:, 2].min() == 0.0


# ------------------------------------------------------------------------- Mesh.check
def _replace(m, **kw):
    d = dict(coords=m.coords, tets=m.tets, faces=m.faces, face_tags=m.face_tags,
             face_ele=m.face_ele)
    d.update(kw)
    return Mesh(**d)


def test_check_inverted_names_element(mesh_and_spec):
    m, _ = mesh_and_spec
    m.check()
    tets = m.tets.copy()
    tets[17, [1, 2]] = tets[17, [2, 1]]
    tets[40, [0, 3]] = tets[40, [3, 0]]
    with pytest.raises(MeshError, match=r"element 17 is inverted.*2 bad element"):
        _replace(m, tets=tets).check()


def test_check_zero_volume(mesh_and_spec):
    m, _ = mesh_and_spec
    tets = m.tets.copy()
    tets[5, 3] = tets[5, 0]
    with pytest.raises(MeshError, match="element 5 is zero-volume"):
        _replace(m, tets=tets).check()


def test_check_bad_indices_and_faces(mesh_and_spec):
    m, _ = mesh_and_spec
    tets = m.tets.copy()
    tets[3, 2] = m.nnodes
    with pytest.raises(MeshError, match=r"tets\[3\]"):
        _replace(m, tets=tets).check()
    fe = m.face_ele.copy()
    fe[0] = -1
    with pytest.raises(MeshError, match=r"face_ele\[0\]"):
        _replace(m, face_ele=fe).check()
    faces = m.faces.copy()
    faces[9, [1, 2]] = faces[9, [2, 1]]
    with pytest.raises(MeshError, match="face 9 .*inward"):
        _replace(m, faces=faces).check()
    fe = m.face_ele.copy()
    fe[4] = fe[4] + 1 if fe[4] + 1 != fe[5] else fe[4] + 2
    with pytest.raises(MeshError, match="face 4 "):
        _replace(m, face_ele=fe).check()
    tags = m.face_tags.copy()
    tags[2] = 9
    with pytest.raises(MeshError, match="face 2 has unknown tag 9"):
        _replace(m, face_tags=tags).check()
    with pytest.raises(MeshError, match="shape"):
        _replace(m, tets=m.tets[:, :3])


# ----------------------------------------------------------------------------- permuted
def test_permuted_definition_and_roundtrip(mesh_and_spec):
    m, _ = mesh_and_spec
    rng = np.random.default_rng(3)
    pn, pe = rng.permutation(m.nnodes), rng.permutation(m.nele)
    p = m.permuted(pn, pe)
    np.testing.assert_array_equal(p.coords, m.coords[pn])
    # new element k has the coordinates of old element pe[k], local order kept
    np.testing.assert_array_equal(p.coords[p.tets], m.coords[m.tets[pe]])
    np.testing.assert_array_equal(p.coords[p.faces], m.coords[m.faces])
    np.testing.assert_array_equal(p.coords[p.tets[p.face_ele]], m.coords[m.tets[m.face_ele]])
    p.check()
    back = p.permuted(np.argsort(pn), np.argsort(pe))
    for name in ("coords", "tets", "faces", "face_tags", "face_ele"):
        np.testing.assert_array_equal(getattr(back, name), getattr(m, name))
    with pytest.raises(MeshError, match="node_perm"):
        m.permuted(np.zeros(m.nnodes, dtype=int), pe)
    with pytest.raises(MeshError, match="ele_perm"):
        m.permuted(pn, pe[:-1])


# ------------------------------------------------------------ mirror-symmetric split (y = 0)
def _interior_faces_shared_twice(m):
    local = np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])
    allf = np.sort(m.tets[:, local].reshape(-1, 3), axis=1)
    uniq, counts = np.unique(allf, axis=0, return_counts=True)
    bnd = np.unique(np.sort(m.faces, axis=1), axis=0)
    return set(np.unique(counts)) == {1, 2} and np.array_equal(uniq[counts == 1], bnd)


def _tet_keys(coords, tets):
    """Each tet as the sorted tuple of its (rounded) node coordinates: a set key."""
    pts = np.round(coords[tets], 6)                                  # (nele, 4, 3)
    return {tuple(sorted(map(tuple, t))) for t in pts.tolist()}


@pytest.fixture(scope="module")
def mirrored_mesh():
    spec = GridSpec(nx=6, ny=8, nz=3, lx=LX, ly=LY, lz=LZ, dx_min=4000.0, dz_min=2000.0)
    assert spec.split == "mirror_y" and spec.mirrored
    # terrain symmetric in y but not in x, centred off the axis in x
    m = generate_terrain_following(spec, lambda x, y: bell(x - 3000.0, y, h0=1500.0, a=8000.0))
    return m, spec


def test_mirror_split_every_tet_has_a_mirror_image(mirrored_mesh):
    m, _ = mirrored_mesh
    keys = _tet_keys(m.coords, m.tets)
    assert len(keys) == m.nele
    reflected = m.coords * np.array([1.0, -1.0, 1.0])
    assert _tet_keys(reflected, m.tets) == keys
    # the plain Kuhn split of the same grid is not mirror-symmetric
    spec_k = GridSpec(nx=6, ny=8, nz=3, lx=LX, ly=LY, lz=LZ, dx_min=4000.0, dz_min=2000.0,
                      split="kuhn")
    k = generate_terrain_following(spec_k, lambda x, y: bell(x - 3000.0, y, h0=1500.0, a=8000.0))
    kk = _tet_keys(k.coords, k.tets)
    assert len(kk & _tet_keys(k.coords * np.array([1.0, -1.0, 1.0]), k.tets)) < m.nele // 2


def test_mirror_split_conforming_positive_checked(mirrored_mesh):
    m, spec = mirrored_mesh
    m.check()
    assert m.signed_volumes().min() > 0.0
    assert _interior_faces_shared_twice(m)
    assert m.nfaces == 4 * (spec.nx * spec.ny + spec.nx * spec.nz + spec.ny * spec.nz)
    # the boundary faces are the same surfaces, outward, tagged by position
    n = m.face_normals()
    d = m.coords[m.faces].mean(axis=1) - m.coords[m.tets[m.face_ele]].mean(axis=1)
    assert np.all(np.einsum("ij,ij->i", n, d) > 0)
    c = m.coords[m.faces].mean(axis=1)
    assert np.all(c[m.face_tags == FaceTag.SOUTH, 1] == -LY / 2)
    assert np.all(c[m.face_tags == FaceTag.NORTH, 1] == LY / 2)
    # element 6c + t mirrors element 6c' + t, c' the cell (i, ny-1-j, k)
    nx, ny, nz = spec.nx, spec.ny, spec.nz
    kk, jj, ii = np.indices((nz, ny, nx))
    c1 = (ii + nx * (jj + ny * kk)).ravel()
    c2 = (ii + nx * (ny - 1 - jj + ny * kk)).ravel()
    e1 = (6 * c1[:, None] + np.arange(6)).ravel()
    e2 = (6 * c2[:, None] + np.arange(6)).ravel()
    a = np.sort(m.coords[m.tets[e1]] * [1.0, -1.0, 1.0], axis=1)
    b = np.sort(m.coords[m.tets[e2]], axis=1)
    np.testing.assert_array_equal(np.sort(a.view("f8,f8,f8"), axis=1),
                                  np.sort(b.view("f8,f8,f8"), axis=1))


@pytest.mark.slow
def test_mirror_split_paper_size_is_conforming():
    spec = GridSpec(nx=48, ny=48, nz=40, lx=60000.0, ly=60000.0, lz=16000.0,
                    dx_min=250.0, dz_min=125.0)
    m = generate_terrain_following(spec, bell)                # checked inside
    assert (m.nnodes, m.nele, m.nfaces) == (98441, 552960, 24576)
    assert _interior_faces_shared_twice(m)
    assert m.signed_volumes().min() > 0.0


def test_odd_ny_falls_back_to_kuhn_with_a_warning(caplog):
    spec = GridSpec(nx=4, ny=5, nz=2, lx=LX, ly=LY, lz=LZ, dx_min=4000.0, dz_min=2000.0)
    assert not spec.mirrored
    with caplog.at_level("WARNING", logger="dycore"):
        m = generate_terrain_following(spec, bell)
    assert "odd" in caplog.text and "Kuhn" in caplog.text
    k = generate_terrain_following(
        GridSpec(nx=4, ny=5, nz=2, lx=LX, ly=LY, lz=LZ, dx_min=4000.0, dz_min=2000.0,
                 split="kuhn"), bell)
    np.testing.assert_array_equal(m.tets, k.tets)
    with pytest.raises(MeshError, match="split"):
        GridSpec(nx=4, ny=4, nz=2, lx=LX, ly=LY, lz=LZ, dx_min=4000.0, dz_min=2000.0,
                 split="delaunay")


# ------------------------------------------------------------------------- core grading
def test_core_graded_nodes_uniform_core_and_graded_outside():
    from dycore.mesh.generate import core_graded_nodes
    x = core_graded_nodes(88, -30000.0, 30000.0, -8000.0, 20000.0, 400.0)
    assert x.size == 89 and x[0] == -30000.0 and x[-1] == 30000.0
    d = np.diff(x)
    core = (x[:-1] >= -8000.0 - 1e-9) & (x[1:] <= 20000.0 + 1e-9)
    assert core.sum() == 70
    np.testing.assert_allclose(d[core], 400.0, rtol=1e-12)
    assert np.any(np.isclose(x, -8000.0, rtol=0, atol=1e-9))
    assert np.any(np.isclose(x, 20000.0, rtol=0, atol=1e-9))
    # outside: from the core spacing, growing away from the core
    assert np.all(d[~core] >= 400.0 * (1 - 1e-12)) and np.all(np.diff(d[x[1:] <= -8000.0]) < 0)
    assert np.all(np.diff(d[x[:-1] >= 20000.0]) > 0)
    y = core_graded_nodes(76, -30000.0, 30000.0, -12000.0, 12000.0, 400.0)
    np.testing.assert_array_equal(y, -y[::-1])               # exactly symmetric, node at 0
    assert y[38] == 0.0
    z = core_graded_nodes(56, 0.0, 16000.0, 0.0, 10000.0, 200.0)
    np.testing.assert_allclose(np.diff(z)[:50], 200.0, rtol=1e-12)
    assert np.all(np.diff(z)[51:] > 200.0) and z[-1] == 16000.0
    with pytest.raises(MeshError, match=r"GridSpec.nx = 60 does not fit"):
        core_graded_nodes(60, -30000.0, 30000.0, -8000.0, 20000.0, 400.0, "GridSpec.nx")
    with pytest.raises(MeshError, match="even"):
        core_graded_nodes(75, -30000.0, 30000.0, -12000.0, 12000.0, 400.0)


@pytest.mark.slow
def test_gridspec_core_mesh():
    spec = GridSpec(nx=30, ny=24, nz=14, lx=LX, ly=LY, lz=LZ, dx_min=250.0, dz_min=125.0,
                    core_x=(-8000.0, 12000.0), core_y_half=8000.0, core_dx=1000.0,
                    core_z_top=10000.0, dz_core=1000.0)
    m = generate_terrain_following(spec, bell)
    xs, ys = np.unique(m.coords[:, 0]), np.unique(m.coords[:, 1])
    dx = np.diff(xs)[(xs[:-1] >= -8000.0 - 1e-9) & (xs[1:] <= 12000.0 + 1e-9)]
    assert dx.size == 20 and np.allclose(dx, 1000.0, rtol=1e-12)
    np.testing.assert_array_equal(ys, -ys[::-1])
    np.testing.assert_allclose(np.diff(spec.zeta_nodes())[:10], 1000.0, rtol=1e-12)
    assert _interior_faces_shared_twice(m)
    keys = _tet_keys(m.coords, m.tets)
    assert _tet_keys(m.coords * np.array([1.0, -1.0, 1.0]), m.tets) == keys
    base = dict(nx=30, ny=24, nz=14, lx=LX, ly=LY, lz=LZ, dx_min=250.0, dz_min=125.0)
    with pytest.raises(MeshError, match="core_y_half"):
        GridSpec(**base, core_x=(-8000.0, 12000.0), core_dx=1000.0)
    with pytest.raises(MeshError, match="dz_core"):
        GridSpec(**base, core_z_top=10000.0)
    with pytest.raises(MeshError, match="inside the domain"):
        GridSpec(**base, core_x=(-8000.0, 40000.0), core_y_half=8000.0, core_dx=1000.0)
    with pytest.raises(MeshError, match="GridSpec.nz"):
        GridSpec(**base, core_z_top=15000.0, dz_core=500.0)


def test_signed_volumes_are_the_numpy_determinant(mesh_and_spec):
    """Mesh.signed_volumes (one @njit pass, which also gives check its scales) is the NumPy
    expression det([x1 − x0, x2 − x0, x3 − x0]) / 6, bit for bit, inverted elements included."""
    m = mesh_and_spec[0]
    tets = m.tets.copy()
    tets[::7, [1, 2]] = tets[::7, [2, 1]]                  # every 7th element inverted
    m2 = Mesh(coords=m.coords, tets=tets, faces=m.faces, face_tags=m.face_tags,
              face_ele=m.face_ele)
    x = m2.coords[m2.tets]
    e = x[:, 1:, :] - x[:, :1, :]
    det = (e[:, 0, 0] * (e[:, 1, 1] * e[:, 2, 2] - e[:, 1, 2] * e[:, 2, 1])
           - e[:, 0, 1] * (e[:, 1, 0] * e[:, 2, 2] - e[:, 1, 2] * e[:, 2, 0])
           + e[:, 0, 2] * (e[:, 1, 0] * e[:, 2, 1] - e[:, 1, 1] * e[:, 2, 0]))
    got = m2.signed_volumes()
    assert got.dtype == np.float64 and np.array_equal(got, det / 6.0)
    assert np.all(got[::7] < 0.0) and np.all(np.delete(got, np.s_[::7]) > 0.0)
