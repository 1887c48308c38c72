"""Mesh files (dycore.mesh.read / write, mesh.file): gmsh 2.2 and 4.1 and VTU round trips of the
generated mesh, orientation repair, one test per bad-mesh error, the case's domain check and the
mesh.file configuration rule."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import meshio
import numpy as np
import pytest

from dycore import cases
from dycore.cases import mountainwave3d as mw
from dycore.config import load_config
from dycore.errors import ConfigError, MeshError
from dycore.mesh import (FaceTag, GridSpec, Mesh, boundary_faces, generate_terrain_following,
                         read_mesh, reverse_cuthill_mckee, shuffle, write_mesh)

PARAMS = mw.Parameters()


@pytest.fixture(scope="module")
def gen() -> Mesh:
    """The case's mesh, 4 x 4 x 3 cells, the generator's order (no renumbering)."""
    return mw.build_mesh(PARAMS, nx=4, ny=4, nz=3, dx_min=2000.0, dz_min=1000.0,
                         renumber="none")


def _canonical(mesh: Mesh):
    """Numbering-free description: sorted node coordinates of every tet / tagged face, volumes."""
    tet_xyz = np.sort(mesh.coords[mesh.tets].reshape(mesh.nele, -1).view(
        [("", float)] * 12).ravel())
    face_rows = np.concatenate([mesh.face_tags[:, None].astype(float),
                                np.sort(mesh.coords[mesh.faces].reshape(mesh.nfaces, 9), axis=1)],
                               axis=1)
    face_rows = face_rows[np.lexsort(face_rows.T[::-1])]
    return tet_xyz, face_rows, np.sort(mesh.signed_volumes())


def _assert_same_mesh(a: Mesh, b: Mesh, exact_numbering: bool) -> None:
    if exact_numbering:
        for name in ("coords", "tets", "faces", "face_tags", "face_ele"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        return
    assert (a.nnodes, a.nele, a.nfaces) == (b.nnodes, b.nele, b.nfaces)
    assert np.array_equal(np.unique(a.coords, axis=0), np.unique(b.coords, axis=0))
    ta, fa, va = _canonical(a)
    tb, fb, vb = _canonical(b)
    assert np.array_equal(ta, tb)
    assert np.array_equal(fa, fb)
    assert np.array_equal(va, vb)
    for tag in FaceTag:
        assert np.sum(a.face_tags == tag) == np.sum(b.face_tags == tag)


# ------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("version,binary", [("2.2", True), ("2.2", False), ("4.1", True),
                                            ("4.1", False)])
def test_msh_round_trip(tmp_path, gen, version, binary):
    path = write_mesh(gen, tmp_path / "box.msh", msh_version=version, binary=binary)
    head = path.read_bytes()[:40]
    assert head.startswith(b"$MeshFormat\n" + version.encode())
    back = read_mesh(path, renumber="none")
    # gmsh 2.2 keeps the node order; meshio's 4.1 writer groups nodes by entity
    _assert_same_mesh(back, gen, exact_numbering=(version == "2.2"))
    assert back.signed_volumes().min() > 0
    # the default renumbering is the generator's RCM
    _assert_same_mesh(read_mesh(path), reverse_cuthill_mckee(gen),
                      exact_numbering=(version == "2.2"))


def test_vtu_round_trip_with_face_tag_cell_data(tmp_path, gen):
    path = write_mesh(gen, tmp_path / "box.vtu")
    assert "face_tag" in meshio.read(path).cell_data
    _assert_same_mesh(read_mesh(path, renumber="none"), gen, exact_numbering=True)


def test_medit_round_trip_with_medit_ref(tmp_path, gen):
    path = tmp_path / "box.mesh"
    meshio.write(path, meshio.Mesh(gen.coords, [("tetra", gen.tets), ("triangle", gen.faces)],
                                   cell_data={"medit:ref": [np.zeros(gen.nele, int),
                                                            gen.face_tags.astype(int)]}))
    _assert_same_mesh(read_mesh(path, renumber="none"), gen, exact_numbering=True)


def test_inverted_tets_are_reoriented(tmp_path, gen):
    """Half the tets written with local nodes 1, 2 swapped (negative det J) come back positive,
    with the same faces and volumes."""
    tets = gen.tets.copy()
    tets[::2, 1], tets[::2, 2] = gen.tets[::2, 2], gen.tets[::2, 1]
    flipped = Mesh(gen.coords, tets, gen.faces, gen.face_tags, gen.face_ele)
    assert (flipped.signed_volumes() < 0).sum() == (gen.nele + 1) // 2
    back = read_mesh(write_mesh(flipped, tmp_path / "flipped.msh"), renumber="none")
    _assert_same_mesh(back, gen, exact_numbering=True)


def test_shuffled_file_gives_the_same_mesh(tmp_path, gen):
    path = write_mesh(shuffle(gen, seed=3), tmp_path / "shuffled.msh")
    _assert_same_mesh(read_mesh(path), gen, exact_numbering=False)


def test_unnamed_groups_use_face_tag_numbers(tmp_path, gen):
    path = tmp_path / "numbers.msh"
    cells = [("tetra", gen.tets)] + [("triangle", gen.faces)]
    phys = [np.full(gen.nele, 0), gen.face_tags.astype(int)]
    meshio.write(path, meshio.Mesh(gen.coords, cells, cell_data={
        "gmsh:physical": phys, "gmsh:geometrical": phys}), file_format="gmsh22")
    _assert_same_mesh(read_mesh(path, renumber="none"), gen, exact_numbering=True)


def test_boundary_faces_of_the_generated_mesh(gen):
    """The faces found from the tets are the generator's (same outward orientation, owners)."""
    b = boundary_faces(gen.tets)
    got = {tuple(f): e for f, e in zip(b.faces.tolist(), b.owner.tolist())}
    want = {tuple(f): e for f, e in zip(gen.faces.tolist(), gen.face_ele.tolist())}
    assert got == want
    assert b.faces.shape[0] == 4 * (4 * 4 + 4 * 3 + 4 * 3)


# ------------------------------------------------------------------------------- bad meshes
def _write(path, points, cells, names=None, phys=None):
    cell_data = {} if phys is None else {"gmsh:physical": phys, "gmsh:geometrical": phys}
    meshio.write(path, meshio.Mesh(points, cells, cell_data=cell_data,
                                   field_data=names or {}), file_format="gmsh22")
    return path


def _named(gen):
    return {t.name.lower(): np.array([int(t), 2]) for t in FaceTag}


def test_missing_file(tmp_path):
    with pytest.raises(MeshError, match=r"nowhere\.msh: mesh file \(mesh.file\) not found"):
        read_mesh(tmp_path / "nowhere.msh")


def test_unparsable_file(tmp_path):
    path = tmp_path / "garbage.msh"
    path.write_text("$MeshFormat\nthis is not a mesh\n")
    with pytest.raises(MeshError, match=r"garbage\.msh: cannot read the mesh file with meshio"):
        read_mesh(path)
    odd = tmp_path / "mesh.unknownext"
    odd.write_text("1 2 3\n")
    with pytest.raises(MeshError, match=r"mesh\.unknownext: cannot read the mesh file"):
        read_mesh(odd)


def test_non_tetrahedral_cells(tmp_path):
    pts = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                    [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], dtype=float)
    path = _write(tmp_path / "hex.msh", pts, [("hexahedron", np.arange(8)[None])])
    with pytest.raises(MeshError, match=r"hex\.msh: holds 1 'hexahedron' cell\(s\); dycore "
                                        r"reads 4-node tetrahedra"):
        read_mesh(path)
    path = _write(tmp_path / "tri.msh", pts, [("triangle", np.array([[0, 1, 2]]))])
    with pytest.raises(MeshError, match=r"tri\.msh: holds no tetrahedra"):
        read_mesh(path)


def test_unused_node(tmp_path, gen):
    pts = np.vstack([gen.coords, [[1.0, 2.0, 3.0]]])
    path = _write(tmp_path / "extra.msh", pts, [("tetra", gen.tets), ("triangle", gen.faces)],
                  _named(gen), [np.zeros(gen.nele, int), gen.face_tags.astype(int)])
    with pytest.raises(MeshError, match=rf"extra\.msh: node {gen.nnodes} at \(1, 2, 3\) "
                                        r"belongs to no tetrahedron \(1 unused node"):
        read_mesh(path)


def test_degenerate_tet(tmp_path, gen):
    tets = gen.tets.copy()
    tets[5, 3] = tets[5, 0]                       # two equal nodes: zero volume
    path = _write(tmp_path / "flat.msh", gen.coords, [("tetra", tets), ("triangle", gen.faces)],
                  _named(gen), [np.zeros(gen.nele, int), gen.face_tags.astype(int)])
    with pytest.raises(MeshError, match=r"flat\.msh: tetrahedron 5 has zero volume \(signed "
                                        r"volume 0 m\^3; 1 degenerate"):
        read_mesh(path)


def test_overlapping_tets_cannot_be_fixed(tmp_path):
    """Two tets on the same side of their shared face: reorienting cannot repair a fold."""
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0.2, 0.2, 2.0]], dtype=float)
    path = _write(tmp_path / "fold.msh", pts, [("tetra", np.array([[0, 1, 2, 3], [0, 2, 1, 4]]))])
    with pytest.raises(MeshError, match=r"fold\.msh: tetrahedra 0 and 1 lie on the same side of "
                                        r"their shared face \(nodes \[0, 1, 2\]\)"):
        read_mesh(path)


def test_face_shared_by_three_tets(tmp_path):
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, -1], [0.3, 0.3, 1.0]],
                   dtype=float)
    tets = np.array([[0, 1, 2, 3], [0, 2, 1, 4], [0, 1, 2, 5]])
    path = _write(tmp_path / "three.msh", pts, [("tetra", tets)])
    with pytest.raises(MeshError, match=r"three\.msh: the face with nodes \[0, 1, 2\] is shared "
                                        r"by 3 tetrahedra \[0, 1, 2\]"):
        read_mesh(path)


def test_missing_tags(tmp_path, gen):
    keep = gen.face_tags != FaceTag.NORTH
    path = _write(tmp_path / "nonorth.msh", gen.coords,
                  [("tetra", gen.tets), ("triangle", gen.faces[keep])], _named(gen),
                  [np.zeros(gen.nele, int), gen.face_tags[keep].astype(int)])
    n_north = int((~keep).sum())
    with pytest.raises(MeshError, match=rf"nonorth\.msh: the boundary face of tetrahedron \d+ "
                                        rf".* has no tag; {n_north} of {gen.nfaces} boundary "
                                        r"faces are untagged"):
        read_mesh(path)
    path = _write(tmp_path / "notags.msh", gen.coords, [("tetra", gen.tets)])
    with pytest.raises(MeshError, match=r"has no triangles in a named physical group"):
        read_mesh(path)


def test_unknown_group_name(tmp_path, gen):
    names = _named(gen)
    names["nord"] = names.pop("north")
    path = _write(tmp_path / "nord.msh", gen.coords, [("tetra", gen.tets), ("triangle", gen.faces)],
                  names, [np.zeros(gen.nele, int), gen.face_tags.astype(int)])
    with pytest.raises(MeshError, match=r"nord\.msh: the boundary triangles' physical group "
                                        r"'nord' \(id 6\) is not a boundary name; expected one "
                                        r"of ground, top, west, east, south, north"):
        read_mesh(path)
    path = _write(tmp_path / "id9.msh", gen.coords, [("tetra", gen.tets), ("triangle", gen.faces)],
                  None, [np.zeros(gen.nele, int), np.where(gen.face_tags == 6, 9, gen.face_tags)])
    with pytest.raises(MeshError, match=r"physical group 9 \(gmsh:physical\) has no name"):
        read_mesh(path)


def test_tagged_triangle_not_on_the_boundary(tmp_path, gen):
    interior = np.sort(gen.tets[np.flatnonzero(~np.isin(np.arange(gen.nele), gen.face_ele))[0],
                                :3])
    faces = np.vstack([gen.faces, interior])
    tags = np.append(gen.face_tags, int(FaceTag.TOP)).astype(int)
    path = _write(tmp_path / "inner.msh", gen.coords, [("tetra", gen.tets), ("triangle", faces)],
                  _named(gen), [np.zeros(gen.nele, int), tags])
    with pytest.raises(MeshError, match=rf"inner\.msh: triangle {gen.nfaces} \(group 'top', "
                                        r"nodes .*\) is not a boundary face of the tetrahedra"):
        read_mesh(path)


def test_face_in_two_groups(tmp_path, gen):
    faces = np.vstack([gen.faces, gen.faces[:1]])
    tags = np.append(gen.face_tags, int(FaceTag.TOP)).astype(int)
    assert gen.face_tags[0] == FaceTag.GROUND
    path = _write(tmp_path / "twice.msh", gen.coords, [("tetra", gen.tets), ("triangle", faces)],
                  _named(gen), [np.zeros(gen.nele, int), tags])
    with pytest.raises(MeshError, match=r"twice\.msh: the boundary face with nodes .* is in two "
                                        r"groups, 'top' and 'ground'"):
        read_mesh(path)


# --------------------------------------------------------------------- the case's domain check
def test_case_check_accepts_the_generated_mesh(gen, caplog):
    mw.check_mesh(PARAMS, gen, source="gen.msh")
    assert "notice" not in caplog.text


def test_case_check_rejects_a_shifted_box(gen):
    moved = Mesh(gen.coords + [30000.0, 0.0, 0.0], gen.tets, gen.faces, gen.face_tags,
                 gen.face_ele)
    with pytest.raises(MeshError, match=r"moved\.msh: node \d+ at .* of a west face is off the "
                                        r"plane x = -lx/2 = -30000 m; the case's domain is "
                                        r"lx = 60000 m"):
        mw.check_mesh(PARAMS, moved, source="moved.msh")


def test_case_check_needs_every_tag(gen):
    tags = np.where(gen.face_tags == FaceTag.TOP, int(FaceTag.GROUND), gen.face_tags)
    no_top = Mesh(gen.coords, gen.tets, gen.faces, tags, gen.face_ele)
    with pytest.raises(MeshError, match=r"no boundary face is tagged top"):
        mw.check_mesh(PARAMS, no_top, source="x.msh")


def test_case_check_announces_a_different_terrain(caplog):
    flat = mw.build_mesh(PARAMS.model_copy(update={"h0": 0.0}), nx=4, ny=4, nz=3,
                         dx_min=2000.0, dz_min=1000.0)
    mw.check_mesh(PARAMS, flat, source="flat.msh")
    assert "flat.msh: the ground differs from the case's terrain (h0 = 400 m" in caplog.text


# ------------------------------------------------------------------------ configuration rule
def test_config_mesh_file_excludes_generator_keys(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("mesh: {file: box.msh, nx: 4, dz_min: 100.0}\n")
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert "mesh.nx: expected no value with mesh.file" in str(err.value)
    assert "mesh.dz_min: expected no value with mesh.file" in str(err.value)
    cfg.write_text("mesh: {file: box.msh, renumber: none, shuffle: true, seed: 2}\n")
    c = load_config(cfg)
    assert (c.mesh.file, c.mesh.renumber, c.mesh.shuffle) == ("box.msh", "none", True)
    # a resolved configuration (every key written out) loads back
    assert load_config(cfg).model_validate(c.model_dump()).mesh.file == "box.msh"


def test_build_config_mesh_reads_the_file(tmp_path, gen, monkeypatch):
    write_mesh(gen, tmp_path / "box.msh")
    cfg = tmp_path / "run.yaml"
    cfg.write_text("mesh: {file: box.msh}\n")
    monkeypatch.chdir(tmp_path)                     # mesh.file is relative to the working dir
    _assert_same_mesh(cases.build_config_mesh(load_config(cfg)), reverse_cuthill_mckee(gen),
                      exact_numbering=True)


@pytest.mark.slow
def test_dycore_run_reports_a_bad_mesh_in_one_line(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("mesh: {file: missing.msh}\ntime: {dt: 10, t_end: 10}\n"
                   "output: {path: out.nc, progress: false}\n")
    proc = subprocess.run([sys.executable, "-m", "dycore", "run", str(cfg)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env=_env())
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if "missing.msh" in line]
    assert errors == ["dycore: error: missing.msh: mesh file (mesh.file) not found"], proc.stderr
    assert "Traceback" not in proc.stderr


def _env():
    import os

    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_flat_terrain_generator_mesh_reads_back(tmp_path):
    """A mesh not from the case (flat, plain Kuhn split, odd ny) through gmsh 4.1 binary."""
    spec = GridSpec(nx=3, ny=3, nz=2, lx=6e3, ly=6e3, lz=2e3, dx_min=2e3, dz_min=1e3,
                    split="kuhn")
    m = generate_terrain_following(spec, lambda x, y: np.zeros_like(x))
    back = read_mesh(write_mesh(m, tmp_path / "flat.msh", msh_version="4.1"))
    _assert_same_mesh(back, m, exact_numbering=False)
    assert back.signed_volumes().sum() == pytest.approx(6e3 * 6e3 * 2e3, rel=1e-12)


def test_dycore_mesh_writes_the_configured_mesh(tmp_path, capsys):
    from dycore.cli import main

    cfg = tmp_path / "run.yaml"
    cfg.write_text("mesh: {nx: 4, ny: 4, nz: 3, dx_min: 2000.0, dz_min: 1000.0}\n")
    out = tmp_path / "run.msh"
    assert main(["mesh", str(cfg), "--out", str(out)]) == 0
    assert "mesh: 100 nodes, 288 tetrahedra, 160 boundary faces (ground 32, top 32, west 24" \
        in capsys.readouterr().out
    want = cases.build_config_mesh(load_config(cfg))
    _assert_same_mesh(read_mesh(out, renumber="none"), want, exact_numbering=False)
    assert main(["mesh", str(cfg), "--out", str(out)]) == 1             # exists: refused
    assert "run.msh: file exists; pass --overwrite" in capsys.readouterr().err
    assert main(["mesh", str(cfg), "--out", str(out), "--msh-version", "4.1",
                 "--overwrite"]) == 0
    assert out.read_bytes().startswith(b"$MeshFormat\n4.1")
