# ---
# jupyter:
#   jupytext:
#     formats: py:percent
# ---

# %% [markdown]
# # Tutorial: the mountainwave3D case from Python
#
# A 10 m/s flow over a 400 m bell mountain in a stably stratified atmosphere starts lee waves.
# This script configures the case, steps it in memory, writes an output file, reads it back with
# xarray and plots the vertical velocity. It is a py-percent script: run it from the repository
# root with `python docs/tutorials/mountainwave3d.py`, or open it as a notebook (Jupytext, VS
# Code, PyCharm run the `# %%` cells one by one). The test suite
# (`tests/integration/test_tutorials.py`) runs it on a tiny mesh with `DYCORE_TUTORIAL_TINY=1`.
# Full size (`configs/mountainwave3d_small.yaml`, 28,800 tetrahedra, 60 steps) it takes about a
# minute on 2 cores.

# %%
import os
from pathlib import Path

import numpy as np

import dycore

TINY = os.environ.get("DYCORE_TUTORIAL_TINY") == "1"        # the test suite's tiny mesh
OUT = Path(os.environ.get("DYCORE_TUTORIAL_OUT", "output/tutorial"))
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## 1. Configuration
#
# `dycore.load_config` reads a YAML file and validates it (a wrong key or value is a
# `ConfigError` naming the key). Keyword overrides are dotted key paths; a section takes a dict.
# The command line does the same with `dycore run CONFIG --set time.t_end=600`.

# %%
overrides = {"time.t_end": 600.0,
             "output": {"path": str(OUT / "mountainwave3d.nc"), "output_interval": 300.0,
                        "progress": False, "sections": ["z=2000", "y=0"]}}
if TINY:
    overrides.update({"mesh": {"nx": 4, "ny": 4, "nz": 3}, "time.t_end": 30.0,
                      "output": {**overrides["output"], "output_interval": 10.0}})
cfg = dycore.load_config("configs/mountainwave3d_small.yaml", **overrides)
print(f"mesh {cfg.mesh.nx} x {cfg.mesh.ny} x {cfg.mesh.nz} cells, dt = {cfg.time.dt} s, "
      f"t_end = {cfg.time.t_end} s, {cfg.time.n_steps} steps")

# %% [markdown]
# ## 2. Stepping in memory
#
# `dycore.Simulation` builds the mesh, the operators and the initial state; `run` steps it and
# calls each callback after every step with the step's diagnostics (as in the output file).

# %%
sim = dycore.Simulation(cfg)
print(f"{sim.mesh.nnodes} nodes, {sim.mesh.nele} tetrahedra, backend {sim.backend.describe()}")
history = []
sim.run(callbacks=[lambda sim, diag: history.append(diag)])
for diag in history[:3] + history[-1:]:
    print(f"step {diag['step']:4d}  t = {diag['t']:6.0f} s  max|w| = {diag['max_abs_w']:.4f} m/s"
          f"  Picard iterations {diag['picard_iterations']}")
in_memory = sim.host_fields()

# %% [markdown]
# ## 3. A run with an output file
#
# `dycore.run_from_config` is what `dycore run` does: the same steps, plus a CF/UGRID netCDF
# file with a snapshot every `output.output_interval` and the diagnostics of every step. The
# `output.sections` above also write each plane (z = 2 km, y = 0) as a 2-D UGRID file beside it
# (`mountainwave3d.section_z2000m.nc`, ...), which uxarray, xugrid and ParaView read.

# %%
summary = dycore.run_from_config(cfg, overwrite=True)
print(summary.timers_table)
print(f"{summary.steps} steps, output {summary.output_path}")

# %% [markdown]
# ## 4. Reading the file with xarray
#
# `dycore.open_output` returns an `xarray.Dataset`: the fields on the mesh nodes (`nodes`),
# the mesh (`x`, `y`, `z`, `cell_nodes`) and the per-step diagnostics (`step`). The last
# snapshot equals the in-memory run's fields bit for bit: both ran the same steps on the CPU.

# %%
ds = dycore.open_output(summary.output_path, decode_times=False)
print(ds)
w_last = ds["w"].isel(time=-1).values
np.testing.assert_array_equal(w_last, in_memory["w"])
print(f"last snapshot t = {float(ds.time[-1]):g} s: max|w| = {np.abs(w_last).max():.4f} m/s, "
      f"equal to the in-memory run")
print("max|w| per step:", np.round(ds["max_abs_w"].values, 4))
ds.close()

# %% [markdown]
# ## 5. Plots
#
# `dycore plot FILE` from the shell; from Python `plot_w` draws a node field on the vertical
# plane y = 0 and a horizontal plane (here z = 2 km), with the terrain. Perturbations (w, p,
# theta_prime) get a symmetric colour scale, u (inflow plus perturbation) its own range.

# %%
from dycore.io.plot import plot_diagnostics, plot_w

for field in ("w", "u"):
    print("written:", plot_w(summary.output_path, OUT / f"mountainwave3d_{field}.png",
                             field=field, z_level=2000.0))
print("written:", plot_diagnostics(summary.output_path, OUT / "mountainwave3d_diagnostics.png"))

# %% [markdown]
# ## 6. A section file
#
# A section is a triangle mesh with the fields on its nodes (exact P1 interpolation of the 3-D
# fields): plain xarray and Matplotlib draw it (uxarray and xugrid read it as a UGRID mesh too).

# %%
import matplotlib.pyplot as plt
import xarray as xr

section = summary.output_path.with_name("mountainwave3d.section_z2000m.nc")
with xr.open_dataset(section, decode_times=False) as sec:
    fig, ax = plt.subplots(figsize=(7, 5))
    w = sec["w"].isel(time=-1).values
    lim = float(np.abs(w).max()) or 1.0
    art = ax.tripcolor(sec["x"].values / 1e3, sec["y"].values / 1e3, sec["face_nodes"].values, w,
                       shading="gouraud", cmap="RdBu_r", vmin=-lim, vmax=lim)
    fig.colorbar(art, ax=ax, label=f"w [{sec['w'].units}]")
    ax.set(xlabel="x [km]", ylabel="y [km]", aspect="equal",
           title=f"w on z = 2 km, t = {float(sec.time[-1]):g} s")
    fig.savefig(OUT / "mountainwave3d_section_w.png", dpi=100)
    print("written:", OUT / "mountainwave3d_section_w.png",
          f"({sec.sizes['nnodes']} nodes, {sec.sizes['nfaces']} triangles)")
