"""mountainwave3D on a mesh read from a gmsh file (mesh.file) gives the fields of the generated
mesh: bit for bit when the file keeps the generator's numbering (gmsh 2.2, then the same RCM),
to round-off after mapping the nodes when the file's numbering differs (gmsh 4.1, shuffled; the
pressure then up to its constant)."""
from __future__ import annotations

import numpy as np
import pytest

from dycore import cases
from dycore import Simulation
from dycore.config import load_config
from dycore.mesh import shuffle, write_mesh

STEPS = 3
TINY = ("mesh: {nx: 4, ny: 4, nz: 3, dx_min: 2000.0, dz_min: 1000.0, renumber: %s}\n"
        "time: {dt: 10.0, t_end: 30.0}\nbackend: {name: cpu}\noutput: {progress: false}\n")


def _run(config_path) -> tuple[np.ndarray, dict]:
    sim = Simulation(load_config(config_path))
    assert sim.run(steps=STEPS) == STEPS
    return sim.mesh.coords.copy(), sim.host_fields()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The generated mesh (generator order, for the file) and the fields after STEPS steps."""
    folder = tmp_path_factory.mktemp("generated")
    (folder / "gen.yaml").write_text(TINY % "rcm")
    (folder / "none.yaml").write_text(TINY % "none")
    mesh = cases.build_config_mesh(load_config(folder / "none.yaml"))
    coords, fields = _run(folder / "gen.yaml")
    return mesh, coords, fields


def _file_config(folder, mesh_file) -> str:
    path = folder / "file.yaml"
    path.write_text(TINY.replace("nx: 4, ny: 4, nz: 3, dx_min: 2000.0, dz_min: 1000.0, ",
                                 f"file: {mesh_file}, ") % "rcm")
    return path


def test_imported_mesh_runs_bit_for_bit(tmp_path, generated):
    mesh, coords, fields = generated
    write_mesh(mesh, tmp_path / "box.msh", msh_version="2.2")
    got_coords, got = _run(_file_config(tmp_path, tmp_path / "box.msh"))
    assert np.array_equal(got_coords, coords)
    assert np.abs(fields["w"]).max() > 1e-3          # the mountain has started a wave
    for name, value in fields.items():
        assert np.array_equal(got[name], value), name


def test_renumbered_file_gives_the_same_fields(tmp_path, generated):
    mesh, coords, fields = generated
    write_mesh(shuffle(mesh, seed=5), tmp_path / "shuffled.msh", msh_version="4.1")
    got_coords, got = _run(_file_config(tmp_path, tmp_path / "shuffled.msh"))
    # node k of the generated run is node where[k] of the imported one (same coordinates)
    a = np.lexsort(coords.T[::-1])
    b = np.lexsort(got_coords.T[::-1])
    assert np.array_equal(coords[a], got_coords[b])
    where = np.empty_like(a)
    where[a] = b
    assert not np.array_equal(where, np.arange(where.size))      # really renumbered
    for name, value in fields.items():
        scale = max(float(np.abs(value).max()), 1e-30)
        err = float(np.abs(got[name][where] - value).max())
        if name == "p":
            # p is pinned to 0 at the first lid node of the numbering (argmax z): another
            # numbering pins another lid node, so p may differ by a constant
            shift = got["p"][where] - value
            err = float(np.abs(shift - shift.mean()).max())
        assert err <= 1e-12 * scale, (name, err, scale)
