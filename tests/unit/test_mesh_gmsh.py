"""A mesh made by gmsh itself (its Python API, unstructured, with point and line elements and a
volume group) read through mesh.file: geometry, tags and outward normals checked against the box,
MSH 2.2 and 4.1 alike, and the case run on it keeps a uniform flow over flat ground uniform."""
from __future__ import annotations

import gmsh
import numpy as np
import pytest

from dycore.cases import mountainwave3d as mw
from dycore import Simulation
from dycore.config import load_config
from dycore.mesh import FaceTag, read_mesh

LX, LY, LZ = 6000.0, 4000.0, 3000.0
#: outward unit normal of every boundary tag of the box
NORMALS = {FaceTag.GROUND: (0, 0, -1), FaceTag.TOP: (0, 0, 1), FaceTag.WEST: (-1, 0, 0),
           FaceTag.EAST: (1, 0, 0), FaceTag.SOUTH: (0, -1, 0), FaceTag.NORTH: (0, 1, 0)}
AREAS = {FaceTag.GROUND: LX * LY, FaceTag.TOP: LX * LY, FaceTag.WEST: LY * LZ,
         FaceTag.EAST: LY * LZ, FaceTag.SOUTH: LX * LZ, FaceTag.NORTH: LX * LZ}


def _gmsh_box(path, version: float, size: float = 900.0) -> None:
    """The box [-LX/2, LX/2] x [-LY/2, LY/2] x [0, LZ] meshed by gmsh, groups named by face."""
    gmsh.initialize(["-noenv"], readConfigFiles=False)
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.model.add("box")
        vol = gmsh.model.occ.addBox(-LX / 2, -LY / 2, 0.0, LX, LY, LZ)
        gmsh.model.occ.synchronize()
        names = {}
        for _, tag in gmsh.model.getBoundary([(3, vol)], oriented=False):
            x0, y0, z0, x1, y1, z1 = gmsh.model.getBoundingBox(2, tag)
            c = np.array([x0 + x1, y0 + y1, z0 + z1]) / 2
            name = ("Ground" if z1 < 1 else "Top" if z0 > LZ - 1 else "West" if x1 < -LX / 2 + 1
                    else "East" if x0 > LX / 2 - 1 else "South" if c[1] < 0 else "North")
            names[name] = tag
        for name, tag in names.items():
            gmsh.model.addPhysicalGroup(2, [tag], name=name)
        gmsh.model.addPhysicalGroup(3, [vol], name="air")
        gmsh.option.setNumber("Mesh.MeshSizeMax", size)
        gmsh.model.mesh.generate(3)
        gmsh.option.setNumber("Mesh.MshFileVersion", version)
        gmsh.write(str(path))
    finally:
        gmsh.finalize()


@pytest.fixture(scope="module")
def gmsh_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gmsh")
    files = {}
    for version in (2.2, 4.1):
        files[version] = folder / f"box{version}.msh"
        _gmsh_box(files[version], version)
    return files


@pytest.mark.parametrize("version", [2.2, 4.1])
def test_gmsh_box_geometry_and_tags(gmsh_files, version):
    mesh = read_mesh(gmsh_files[version])
    mesh.check()
    assert mesh.nele > 100                                   # really unstructured, not a toy
    assert mesh.signed_volumes().min() > 0
    assert mesh.signed_volumes().sum() == pytest.approx(LX * LY * LZ, rel=1e-12)
    normals = mesh.face_normals()
    for tag, unit in NORMALS.items():
        sel = mesh.face_tags == tag
        area = np.linalg.norm(normals[sel], axis=1)
        assert area.sum() == pytest.approx(AREAS[tag], rel=1e-12), tag
        np.testing.assert_allclose(normals[sel] / area[:, None],
                                   np.broadcast_to(unit, (sel.sum(), 3)), atol=1e-12)
    # the divergence theorem on the closed boundary: the area vectors sum to zero
    assert np.abs(normals.sum(axis=0)).max() <= 1e-9 * LX * LY


def test_both_msh_versions_give_the_same_mesh(gmsh_files):
    a, b = read_mesh(gmsh_files[2.2]), read_mesh(gmsh_files[4.1])
    assert (a.nnodes, a.nele, a.nfaces) == (b.nnodes, b.nele, b.nfaces)
    np.testing.assert_array_equal(np.unique(a.coords, axis=0), np.unique(b.coords, axis=0))
    np.testing.assert_array_equal(np.sort(a.signed_volumes()), np.sort(b.signed_volumes()))


def test_case_runs_on_the_gmsh_mesh(gmsh_files, tmp_path):
    """Flat ground, uniform inflow: the flow stays (10, 0, 0) and p, theta' stay 0 to round-off
    on gmsh's unstructured mesh, through the case's domain check and two steps."""
    params = {"lx": LX, "ly": LY, "lz": LZ, "h0": 0.0, "sponge_top_base": 2000.0,
              "sponge_lateral_width": 1000.0}
    mw.check_mesh(mw.Parameters(**params), read_mesh(gmsh_files[4.1]), source="box4.1.msh")
    cfg = tmp_path / "gmsh.yaml"
    cfg.write_text(f"case: {{parameters: {params}}}\nmesh: {{file: {gmsh_files[4.1]}}}\n"
                   "time: {dt: 10.0, t_end: 20.0}\nbackend: {name: cpu}\n"
                   "output: {progress: false}\n")
    sim = Simulation(load_config(cfg))
    assert sim.run(steps=2) == 2
    f = sim.host_fields()
    assert np.abs(f["u"] - 10.0).max() < 1e-9
    assert max(np.abs(f["v"]).max(), np.abs(f["w"]).max()) < 1e-9
    assert np.abs(f["theta_prime"]).max() < 1e-9


def test_the_docs_gmsh_examples_make_meshes_the_case_reads(tmp_path, monkeypatch, caplog):
    """docs/mesh.md's gmsh box and its terrain lift, run as written, give meshes that mesh.file
    accepts: the box's exact volume, then the case's bell mountain on the ground nodes."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "mesh.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(blocks[0], "docs/mesh.md (box)", "exec"), scope)
    box = read_mesh(tmp_path / "box.msh")
    mw.check_mesh(mw.Parameters(), box, source="box.msh")
    assert box.signed_volumes().sum() == pytest.approx(60e3 * 60e3 * 16e3, rel=1e-12)
    exec(compile(blocks[1], "docs/mesh.md (hill)", "exec"), scope)
    hill = read_mesh(tmp_path / "hill.msh")
    caplog.clear()
    mw.check_mesh(mw.Parameters(), hill, source="hill.msh")
    assert "differs from the case's terrain" not in caplog.text
    ground = hill.tagged_nodes([FaceTag.GROUND])
    c = hill.coords[ground]
    np.testing.assert_allclose(c[:, 2], mw.terrain(mw.Parameters(), c[:, 0], c[:, 1]),
                               rtol=0, atol=1e-9)
    assert hill.coords[hill.tagged_nodes([FaceTag.TOP]), 2].min() == 16e3
    assert hill.nele == box.nele and hill.signed_volumes().min() > 0
