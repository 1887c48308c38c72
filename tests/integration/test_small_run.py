"""A short run of the small case end to end through the CLI: physics sanity and the output file.

Asserts numbers a mountain-wave run must show after a few steps: no NaN, the projected velocity
nearly divergence-free, vertical motion concentrated over the mountain, inflow kept at the lateral
boundaries, every documented output name present with its units.
"""
import subprocess
import sys
from pathlib import Path

import netCDF4
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_output(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "small.nc"
    cmd = [sys.executable, "-m", "dycore", "run", str(ROOT / "configs" / "mountainwave3d_small.yaml"),
           "--steps", "4", "--output", str(out), "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


def test_run_prints_timer_table(run_output):
    _, stdout = run_output
    for stage in ("solve pressure", "integrate momentum", "assemble momentum", "output"):
        assert stage in stdout


def test_output_names_units_and_ugrid(run_output):
    path, _ = run_output
    with netCDF4.Dataset(path) as ds:
        assert ds.dimensions["time"].isunlimited()
        nn, nc = len(ds.dimensions["nodes"]), len(ds.dimensions["cells"])
        assert (nn, nc) == (5733, 28800)
        for name, unit in (("u", "m s-1"), ("v", "m s-1"), ("w", "m s-1"), ("p", "m2 s-2"),
                           ("theta_prime", "K"), ("q_v", "kg kg-1"), ("q_c", "kg kg-1"),
                           ("q_r", "kg kg-1"), ("x", "m"), ("y", "m"), ("z", "m")):
            assert ds[name].units == unit, name
        assert ds["cell_nodes"].shape == (nc, 4)
        assert int(ds["cell_nodes"][:].min()) == 0 and int(ds["cell_nodes"][:].max()) == nn - 1
        assert ds["mesh"].cf_role == "mesh_topology" and int(ds["mesh"].topology_dimension) == 3
        assert "UGRID-1.0" in ds.Conventions and "mountainwave3d" in ds.config
        assert ds.dycore_version
        assert len(ds.dimensions["time"]) == 2                  # t = 0 and the final step
        assert np.allclose(ds["time"][:], [0.0, 40.0])


def test_physics_after_four_steps(run_output):
    path, _ = run_output
    with netCDF4.Dataset(path) as ds:
        x, y, z = (ds[k][:] for k in ("x", "y", "z"))
        u, w = ds["u"][-1], ds["w"][-1]
        th = ds["theta_prime"][-1]
        div = ds["max_abs_div_u"][:]
        kinetic = ds["kinetic_energy"][:]
    for f in (u, w, th):
        assert np.all(np.isfinite(f))
    # vertical motion is forced by the mountain: largest within a few km of it, O(U h0 / a)
    near = (np.abs(x) < 3000) & (np.abs(y) < 3000) & (z < 2000)
    far = (np.abs(x) > 20000) | (np.abs(y) > 20000)
    assert 0.2 < np.abs(w[near]).max() < 10.0
    assert np.abs(w[far]).max() < 0.2 * np.abs(w[near]).max()
    # lateral Dirichlet inflow is kept exactly; θ' stays a small perturbation
    edge = np.isclose(np.abs(x), 30000) | np.isclose(np.abs(y), 30000)
    assert np.all(u[edge] == 10.0) and np.all(w[edge] == 0.0)
    assert np.abs(th).max() < 2.0
    # the projection keeps the weak divergence small and decreasing from the impulsive start
    assert div[-1] < div[0] and div[-1] < 0.02
    # kinetic energy ½∫|u|² stays close to the uniform-flow value U²/2·V
    assert np.allclose(kinetic, kinetic[0], rtol=1e-3)
