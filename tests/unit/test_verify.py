"""`dycore verify` on a synthetic output whose w is the linear-theory w at the nodes."""
import json
import types

import numpy as np
import pytest

from dycore import __version__, cli
from dycore.checks import verify as verify_mod
from dycore.cases.mountainwave3d.linear_theory import BellMountainWaves
from dycore.diagnostics.p1_sample import P1Locator
from dycore.io.netcdf import SnapshotWriter

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_lt_helpers", Path(__file__).with_name("test_linear_theory.py"))
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
box_mesh = _helpers.box_mesh

#: a cheaper synthesis grid than the command's default (same for the file and the reference)
GRID = {"length": 1_024_000.0, "length_y": 128_000.0, "dx": 250.0}
H = np.array([500.0, 500.0, 500.0])         # cell sizes of the synthetic mesh in x, y, z [m]


def _plane_hessian(theory, z, x, y):
    """d_a d_b w on the plane z (rows y, columns x), spectrally: d_a multiplies w_hat by i k_a
    with k_z = m."""
    k, l, _ = theory.wavenumbers()
    kvec = (k + 0 * l, l + 0 * k, theory.m())
    ix, iy = theory._indices(x, "x"), theory._indices(y, "y")
    w_hat = theory.w_hat(z)
    hess = np.empty((len(y), len(x), 3, 3))
    for a in range(3):
        for b in range(a, 3):
            grid = np.fft.irfft2(-kvec[a] * kvec[b] * w_hat,
                                 s=(theory.npts_y, theory.npts)) / theory.dx ** 2
            hess[:, :, a, b] = hess[:, :, b, a] = grid[np.ix_(iy, ix)]
    return hess


def synthetic_mesh(path):
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        coords = np.column_stack([ds.variables[c][:] for c in "xyz"])
        return coords, np.asarray(ds.variables["cell_nodes"][:], dtype=np.int64)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    xs = np.arange(-21_000.0, 21_001.0, H[0])
    ys = np.arange(-21_000.0, 21_001.0, H[1])
    zs = np.arange(500.0, 9_501.0, H[2])
    coords, tets = box_mesh(xs, ys, zs)
    theory = BellMountainWaves(**GRID)
    w = np.empty(len(coords))
    plane_index = {z: theory.plane(z, xs, ys) for z in zs}          # (len(ys), len(xs))
    ix = np.round((coords[:, 0] - xs[0]) / H[0]).astype(int)
    iy = np.round((coords[:, 1] - ys[0]) / H[1]).astype(int)
    for z, plane in plane_index.items():
        at = coords[:, 2] == z
        w[at] = plane[iy[at], ix[at]]
    path = tmp_path_factory.mktemp("verify") / "synthetic.nc"
    mesh = types.SimpleNamespace(coords=coords, tets=tets)
    with SnapshotWriter(path, mesh, config_yaml="case:\n  name: mountainwave3d\n",
                        version=__version__) as writer:
        writer.write_snapshot(6000.0, {"w": w})
        writer.write_snapshot(7000.0, {"w": w})
    return path, theory


@pytest.mark.slow
def test_verify_of_linear_theory_itself_is_exact_up_to_p1_interpolation(synthetic, tmp_path,
                                                                        monkeypatch, capsys):
    """Error model: for a tetrahedron with vertices v_i holding p with barycentric weights
    lambda_i, Taylor expansion about p (sum_i lambda_i (v_i - p) = 0) gives the P1 error
    w(p) - sum_i lambda_i w(v_i) = -1/2 sum_i lambda_i d_i^T H d_i + O(h^3), d_i = v_i - p,
    H the Hessian of w (exact for quadratics). On the planes it is evaluated point by point
    with the spectral Hessian and the located tetrahedra; the measured nRMS must stay within
    1.5 x this estimate (the O(h^3) rest) and the estimate itself is a few per cent."""
    path, theory = synthetic
    monkeypatch.setattr(verify_mod, "THEORY_GRID", GRID)
    out_json, out_png = tmp_path / "v.json", tmp_path / "v.png"
    assert cli.main(["verify", str(path), "--json", str(out_json), "--png", str(out_png)]) == 0
    text = capsys.readouterr().out
    assert "time mean over 2 snapshot(s), t = 6000-7000 s" in text
    report = json.loads(out_json.read_text())
    assert out_png.stat().st_size > 10_000

    row = report["metrics"]["section 1-9 km"]
    assert row["nrms"] < 0.05 and row["corr"] > 0.999
    xy = verify_mod.PLANE_XY
    coords, cells = synthetic_mesh(path)
    px, py = np.meshgrid(xy, xy)
    for lev in verify_mod.PLANE_LEVELS:
        name = f"plane {lev / 1e3:g} km"
        ref = theory.plane(lev, xy, xy)
        pts = np.column_stack([px.ravel(), py.ravel(), np.full(px.size, lev)])
        loc = P1Locator(coords, cells, pts)
        d = coords[cells[loc.cell]] - pts[:, None, :]                       # (n, 4, 3)
        hess = _plane_hessian(theory, lev, xy, xy).reshape(-1, 3, 3)
        quad = 0.5 * np.einsum("pi,pia,pab,pib->p", loc.weights, d, hess, d)
        estimate = np.linalg.norm(quad) / np.linalg.norm(ref)
        row = report["metrics"][name]
        print(name, "nRMS", row["nrms"], "estimate", estimate, "corr", row["corr"])
        assert row["nrms"] <= 1.5 * estimate + 1e-6
        assert row["nrms"] < 0.05 and row["corr"] > 0.998
        assert 0.95 < row["max_ratio"] < 1.05 and 0.95 < row["min_ratio"] < 1.05
        # the Kuhn split is not mirror-symmetric in y: its P1 error is partly odd in y
        assert report["antisymmetric_ratio"][name]["model"] < estimate
    assert report["summit"]["x"] == 0 and report["summit"]["y"] == 0


@pytest.mark.slow
def test_verify_falls_back_to_the_last_snapshot(synthetic, monkeypatch):
    path, _ = synthetic
    monkeypatch.setattr(verify_mod, "THEORY_GRID", GRID)
    result = verify_mod.verify(path, t_start=1e6, keep_fields=False)
    assert "using the last snapshot only" in result.note and result.times == [7000.0]


@pytest.mark.slow
def test_half_width_restricts_every_metric_to_the_window(synthetic, tmp_path, monkeypatch,
                                                         capsys):
    path, _ = synthetic
    monkeypatch.setattr(verify_mod, "THEORY_GRID", GRID)
    out = tmp_path / "v8.json"
    assert cli.main(["verify", str(path), "--half-width", "8000", "--json", str(out)]) == 0
    assert "metrics over |x| <= 8 km" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["half_width"] == 8000.0
    n = int(np.sum(np.abs(verify_mod.PLANE_XY) <= 8000.0))          # 65 columns / rows
    assert n == 65
    assert report["metrics"]["plane 4 km"]["points"] == n * n
    assert report["metrics"]["section 1-9 km"]["points"] == n * len(verify_mod.SECTION_Z)
    assert cli.main(["verify", str(path), "--half-width", "0"]) == 2
    assert "--half-width: expected a width in (0, 20000] m (got 0)" in capsys.readouterr().err
