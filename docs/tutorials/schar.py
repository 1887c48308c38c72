# ---
# jupyter:
#   jupytext:
#     formats: py:percent
# ---

# %% [markdown]
# # Tutorial: the Schär mountain from Python
#
# The second standard case (Schär et al. 2002): a 10 m/s flow over a 250 m mountain with 4 km
# ripples under a 5 km envelope, in a channel with free-slip side walls, so the flow does not
# depend on y. This script runs the tiny configuration, checks that w is the same on every
# y-row of nodes, compares w with the steady linear solution of the case and draws both. Run
# it from the repository root with `python docs/tutorials/schar.py`, or open it as a notebook
# (Jupytext, VS Code). The test suite (`tests/integration/test_tutorials.py`) runs it with
# `DYCORE_TUTORIAL_TINY=1` (3 steps). Full size here means `configs/schar_tiny.yaml` to
# t = 300 s (8,000 tetrahedra, about a minute on 2 cores); the verification itself runs
# `configs/schar.yaml` on a GPU (docs/verify.md).

# %%
import os
from pathlib import Path

import numpy as np

import dycore

TINY = os.environ.get("DYCORE_TUTORIAL_TINY") == "1"        # the test suite's few steps
OUT = Path(os.environ.get("DYCORE_TUTORIAL_OUT", "output/tutorial"))
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## 1. Configuration
#
# The case is chosen by `case.name: schar`; its parameters (h0, a, lambda, the channel width
# `ly`, the sponges) sit under `case.parameters` with units in `dycore config --reference`.

# %%
overrides = {"output": {"path": str(OUT / "schar.nc"), "output_interval": 100.0,
                        "progress": False}}
if TINY:
    overrides.update({"time.t_end": 30.0,
                      "output": {**overrides["output"], "output_interval": 10.0}})
cfg = dycore.load_config("configs/schar_tiny.yaml", **overrides)
print(f"case {cfg.case.name}: mesh {cfg.mesh.nx} x {cfg.mesh.ny} x {cfg.mesh.nz} cells "
      f"(split {cfg.mesh.split}), dt = {cfg.time.dt} s, {cfg.time.n_steps} steps")

# %% [markdown]
# ## 2. A run with an output file
#
# `dycore.run_from_config` is what `dycore run` does: the steps, a CF/UGRID netCDF file with a
# snapshot every `output.output_interval`, and the per-step diagnostics.

# %%
summary = dycore.run_from_config(cfg, overwrite=True)
print(summary.split_text)
print(f"{summary.steps} steps, output {summary.output_path}")

# %% [markdown]
# ## 3. No dependence on y
#
# The mesh is mirror-symmetric in every cell (`mesh.split: symmetric_y`) and the side walls are
# free-slip, so w at the nodes with the same (x, z) must agree on every y-row to round-off.

# %%
ds = dycore.open_output(summary.output_path, decode_times=False)
x, y, z = ds["x"].values, ds["y"].values, ds["z"].values
w = ds["w"].isel(time=-1).values
key = np.round(x, 3) + 1j * np.round(z, 3)            # nodes with the same (x, z)
_, group = np.unique(key, return_inverse=True)
high = np.full(group.max() + 1, -np.inf)
np.maximum.at(high, group, w)
low = np.full(group.max() + 1, np.inf)
np.minimum.at(low, group, w)
spread = float((high - low).max())
scale = float(np.abs(w).max())
print(f"max|w| = {scale:.4f} m/s; largest spread of w over y at one (x, z): {spread:.2e} m/s "
      f"({spread / scale:.1e} relative)")
assert spread <= 1e-10 * scale + 1e-15

# %% [markdown]
# ## 4. The steady linear solution
#
# `case.linear_reference(params)` is the Fourier integral of Schär et al. over the terrain's
# spectrum (non-hydrostatic, radiation upward). At the ground it gives w = U dh/dx; aloft the
# ripples decay and the envelope's waves tilt upstream. A short run on this coarse mesh is far
# from steady: `dycore verify FILE` makes the full comparison on a finished run.

# %%
from dycore import cases

case = cases.load_case(cfg.case.name)
params = cfg.case.build_parameters()
ref = case.linear_reference(params)
xs = np.linspace(-20e3, 20e3, 401)
zs = np.array([0.0, 2000.0, 4000.0, 6000.0])
w_lin = ref.section(xs, zs)
dhdx = case.terrain_dhdx(params, xs)
print(f"ground: max|w_lin - U dh/dx| = {np.abs(w_lin[0] - params.u0 * dhdx).max():.2e} m/s")
for zi, row in zip(zs, w_lin):
    print(f"z = {zi / 1e3:3.0f} km: linear theory max|w| = {np.abs(row).max():.3f} m/s")

# %% [markdown]
# ## 5. Plots
#
# `dycore plot FILE` from the shell; from Python `plot_w` draws the model's w on y = 0; the
# linear solution is drawn beside it with Matplotlib.

# %%
import matplotlib.pyplot as plt

from dycore.io.plot import plot_w

print("written:", plot_w(summary.output_path, OUT / "schar_w.png", field="w", z_level=2000.0))
zz = np.linspace(0.0, 10e3, 101)
fig, ax = plt.subplots(figsize=(8, 4))
lim = float(np.abs(w_lin).max()) or 1.0
art = ax.pcolormesh(xs / 1e3, zz / 1e3, ref.section(xs, zz), cmap="RdBu_r", vmin=-lim,
                    vmax=lim, shading="auto")
ax.fill_between(xs / 1e3, 0.0, ref.terrain(xs) / 1e3, color="0.5")
fig.colorbar(art, ax=ax, label="w [m/s]")
ax.set(xlabel="x [km]", ylabel="z [km]", title="steady linear solution (Schär et al. 2002)")
fig.savefig(OUT / "schar_linear_w.png", dpi=100)
print("written:", OUT / "schar_linear_w.png")
ds.close()
