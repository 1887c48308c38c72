"""Every tutorial in docs/tutorials/ runs (issue 23): a py-percent script executed from the
repository root on a tiny mesh (``DYCORE_TUTORIAL_TINY=1``), writing into a temporary folder.
The mountainwave3D tutorial checks inside itself that its file run equals its in-memory run bit
for bit; here its outputs are checked too."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import netCDF4
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
TUTORIALS = sorted((REPO / "docs" / "tutorials").glob("*.py"))


def test_there_is_a_tutorial_per_case():
    from dycore.cases import available_cases

    assert {p.stem for p in TUTORIALS} >= set(available_cases())


@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs(script, tmp_path):
    text = script.read_text(encoding="utf-8")
    assert text.count("\n# %%") >= 5 and "# %% [markdown]" in text      # py-percent cells
    env = {**os.environ, "DYCORE_TUTORIAL_TINY": "1", "DYCORE_TUTORIAL_OUT": str(tmp_path),
           "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    files = sorted(p.name for p in tmp_path.iterdir())
    assert any(name.endswith(".nc") for name in files), files
    assert sum(name.endswith(".png") for name in files) >= 2, files
    if script.stem == "mountainwave3d":
        assert "equal to the in-memory run" in proc.stdout
        assert (tmp_path / "mountainwave3d.section_z2000m.nc").is_file()
        assert (tmp_path / "mountainwave3d_section_w.png").is_file()
        with netCDF4.Dataset(tmp_path / "mountainwave3d.nc") as ds:
            assert ds["time"][:].tolist() == [0.0, 10.0, 20.0, 30.0]
            assert np.isfinite(ds["w"][:]).all() and np.abs(ds["w"][-1]).max() > 0.0
