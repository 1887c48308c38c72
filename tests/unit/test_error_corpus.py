"""The bad-input corpus of issue 12: every case a new user might try, with its exit status and
the key words of its message; 0 tracebacks and 0 silent accepts.

One row of :data:`CASES` per case, run in-process through ``dycore.cli.main`` in a fresh folder
(``run.yaml``, ``out.nc`` and the other files are relative names there). A case's ``config`` is
merged into :data:`BASE` (a dict), replaces it (a string: the file's raw text), or leaves no
``run.yaml`` (None). ``setup`` names files made first (:func:`_setup`). docs/errors.md has one
table row per case (same id, exit status, and the message line, ``…`` standing for a part that
varies by machine, ``<br>`` between lines); :func:`test_docs_table_agrees_with_the_corpus` keeps
the two in step and each case checks its printed lines against the row.
"""
from __future__ import annotations

import copy
import fcntl
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import netCDF4
import pytest
import yaml

from dycore import cli
from dycore.io.safety import lock_path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "errors.md"

#: the configuration every case starts from: 3 steps of 10 s on 2 x 2 x 2 cells
BASE = {"mesh": {"nx": 2, "ny": 2, "nz": 2},
        "time": {"dt": 10.0, "t_end": 30.0},
        "output": {"path": "out.nc", "output_interval": 10.0, "progress": False,
                   "checkpoint_interval": 10.0}}

RUN = ("run", "run.yaml")


@dataclass(frozen=True)
class Case:
    """One bad input: ``dycore ARGV`` with ``config`` as run.yaml and ``setup`` files present
    exits with ``exit`` and prints every one of ``words``."""

    id: str
    argv: tuple[str, ...]
    exit: int
    words: tuple[str, ...]
    config: dict | str | None = None     # None: BASE unchanged (see NO_FILE for no file)
    setup: tuple[str, ...] = ()


NO_FILE = "<no file>"


def c(id, overrides, exit, *words, argv=RUN, setup=()):
    """A configuration case: ``overrides`` merged into BASE, ``dycore run run.yaml``."""
    return Case(id, tuple(argv), exit, tuple(words), overrides, tuple(setup))


def a(id, argv, exit, *words, config=None, setup=()):
    """A command-line case with BASE (or ``config``) as run.yaml."""
    return Case(id, tuple(argv), exit, tuple(words), config, tuple(setup))


CASES: list[Case] = [
    # ------------------------------------------------------------------ the file itself
    a("file-missing", RUN, 2, "run.yaml: configuration file not found", config=NO_FILE),
    a("file-is-a-folder", RUN, 2, "run.yaml: cannot read configuration file",
      config=NO_FILE, setup=("yaml-folder",)),
    a("file-not-utf8", RUN, 2, "run.yaml: cannot read configuration file", "utf-8",
      config="mesh: {nx: \udcff}\n"),
    a("file-bad-yaml", RUN, 2, "run.yaml: line 2, column 1: invalid YAML",
      config="mesh: {nx: 2\n"),
    a("file-bad-indent", RUN, 2, "run.yaml: line", "invalid YAML",
      config="mesh:\n  nx: 2\n ny: 2\n"),
    a("file-tab-indent", RUN, 2, "run.yaml: line 2", "invalid YAML", config="mesh:\n\tnx: 2\n"),
    a("file-duplicate-key", RUN, 2, "duplicate key 'nx'", config="mesh: {nx: 2, nx: 3}\n"),
    a("file-a-list", RUN, 2, "run.yaml: expected a mapping of sections", "got list",
      config="- mesh\n- time\n"),
    a("file-a-string", RUN, 2, "run.yaml: expected a mapping of sections", "got str",
      config="mountainwave\n"),
    a("file-a-number", RUN, 2, "run.yaml: expected a mapping of sections", "got int",
      config="42\n"),
    a("file-empty", ("config", "run.yaml"), 0, "notice: run.yaml is empty", "every key takes "
      "its default", config=""),
    a("file-only-comments", ("config", "run.yaml"), 0, "notice: run.yaml is empty",
      config="# nothing here\n"),
    c("section-unknown", {"meshh": {"nx": 2}}, 2, "run.yaml: meshh: unknown key",
      "expected one of case, mesh, physics, time, solvers, backend, output, stability"),
    c("section-not-mapping", {"mesh": 5}, 2, "run.yaml: mesh: expected a mapping of keys"),
    c("section-a-list", {"time": [10, 30]}, 2, "run.yaml: time: expected a mapping of keys"),
    c("section-null", {"physics": None}, 2, "run.yaml: physics: expected a mapping of keys"),
    # -------------------------------------------------------------------------- case
    c("case-unknown", {"case": {"name": "nosuchcase"}}, 2, "run.yaml: case.name",
      "nosuchcase"),
    c("case-name-number", {"case": {"name": 5}}, 2, "run.yaml: case.name",
      "expected a valid string"),
    c("case-param-unknown", {"case": {"parameters": {"mountain_height": 400}}}, 2,
      "case.parameters.mountain_height: unknown parameter of case mountainwave3d",
      "expected one of"),
    c("case-param-nan", {"case": {"parameters": {"u0": float("nan")}}}, 2,
      "case.parameters.u0: expected a finite number (got nan)"),
    c("case-param-type", {"case": {"parameters": {"h0": "high"}}}, 2,
      "case.parameters.h0", "expected a valid number"),
    c("case-params-not-mapping", {"case": {"parameters": [1, 2]}}, 2,
      "case.parameters: expected a mapping of keys"),
    c("case-param-bool", {"case": {"parameters": {"u0": True}}}, 2, "case.parameters.u0",
      "expected a number, not true"),
    c("case-key-unknown", {"case": {"nmae": "x"}}, 2, "case.nmae: unknown key",
      "expected one of name, parameters"),
    # -------------------------------------------------------------------------- mesh
    c("mesh-key-unknown", {"mesh": {"nxx": 3}}, 2, "run.yaml: mesh.nxx: unknown key",
      "expected one of"),
    c("mesh-nx-text", {"mesh": {"nx": "abc"}}, 2, "mesh.nx", "expected a valid integer"),
    c("mesh-nx-fraction", {"mesh": {"nx": 2.5}}, 2, "mesh.nx",
      "expected a valid integer, got a number with a fractional part"),
    c("mesh-nx-zero", {"mesh": {"nx": 0}}, 2, "mesh.nx: expected greater than or equal to 1"),
    c("mesh-nz-negative", {"mesh": {"nz": -3}}, 2, "mesh.nz",
      "expected greater than or equal to 1 (got -3)"),
    c("mesh-nx-bool", {"mesh": {"nx": True}}, 2, "mesh.nx: expected a number, not true"),
    c("mesh-dx-zero", {"mesh": {"dx_min": 0}}, 2, "mesh.dx_min: expected greater than 0"),
    c("mesh-dz-negative", {"mesh": {"dz_min": -1}}, 2, "mesh.dz_min: expected greater than 0"),
    c("mesh-renumber", {"mesh": {"renumber": "metis"}}, 2, "mesh.renumber",
      "expected 'none' or 'rcm'"),
    c("mesh-split", {"mesh": {"split": "freudenthal"}}, 2, "mesh.split",
      "expected 'mirror_y', 'kuhn' or 'symmetric_y'"),
    c("mesh-seed-negative", {"mesh": {"seed": -1}}, 2, "mesh.seed",
      "expected greater than or equal to 0"),
    c("mesh-core-alone", {"mesh": {"core_x": [-5000, 5000]}}, 2, "mesh.core_y_half",
      "core_x, core_y_half, core_dx go together"),
    c("mesh-core-reversed", {"mesh": {"core_x": [5000, -5000], "core_y_half": 5000,
                                      "core_dx": 500}}, 2, "mesh.core_x",
      "expected [x_lo, x_hi] with x_lo < x_hi"),
    c("mesh-too-fine-for-domain", {"mesh": {"nx": 500, "ny": 500, "nz": 200}}, 2,
      "mesh.dx_min: expected at most case.parameters.lx / mesh.nx = 60000 m / 500 = 120 m",
      "mesh.dz_min"),
    c("mesh-too-large-for-memory", {"mesh": {"nx": 500, "ny": 500, "nz": 200, "dx_min": 100,
                                             "dz_min": 50}}, 2,
      "mesh.nx, mesh.ny, mesh.nz = 500 x 500 x 200", "300,000,000 tetrahedra need about 1.1 TB",
      "available on this machine; use fewer cells"),
    # ----------------------------------------------------------------------- physics
    c("physics-key-unknown", {"physics": {"viscosity": 5}}, 2, "physics.viscosity: unknown key"),
    c("physics-nu-negative", {"physics": {"nu_h": -1}}, 2, "physics.nu_h",
      "expected greater than or equal to 0"),
    c("physics-nu-inf", {"physics": {"nu_h": float("inf")}}, 2,
      "physics.nu_h: expected a finite number (got inf)"),
    c("physics-coriolis-nan", {"physics": {"coriolis_f": float("nan")}}, 2,
      "physics.coriolis_f: expected a finite number (got nan)"),
    c("physics-kappa-text", {"physics": {"kappa_v": "a lot"}}, 2, "physics.kappa_v",
      "expected a valid number"),
    c("physics-stabilisation-negative", {"physics": {"stabilisation": -1}}, 2,
      "physics.stabilisation", "expected greater than or equal to 0"),
    # -------------------------------------------------------------------------- time
    c("time-dt-zero", {"time": {"dt": 0}}, 2, "time.dt: expected greater than 0 (got 0)"),
    c("time-dt-negative", {"time": {"dt": -10}}, 2, "time.dt: expected greater than 0"),
    c("time-dt-inf", {"time": {"dt": float("inf")}}, 2, "time.dt: expected a finite number"),
    c("time-dt-text", {"time": {"dt": "10 s"}}, 2, "time.dt", "expected a valid number"),
    c("time-dt-bool", {"time": {"dt": True}}, 2, "time.dt: expected a number, not true"),
    c("time-dt-tiny", {"time": {"dt": 1e-320}}, 2, "time.dt: expected a time step that divides "
      "t_end = 30 s into a finite number of steps"),
    c("time-dt-above-t-end", {"time": {"dt": 60}}, 2, "time.dt: expected at most t_end = 30 s"),
    c("time-t-end-inf", {"time": {"t_end": float("inf")}}, 2,
      "time.t_end: expected a finite number (got inf)"),
    c("time-t-end-zero", {"time": {"t_end": 0}}, 2, "time.t_end: expected greater than 0"),
    c("time-theta-low", {"time": {"theta": 0.3}}, 2, "time.theta",
      "expected greater than or equal to 0.5"),
    c("time-theta-high", {"time": {"theta": 1.5}}, 2, "time.theta",
      "expected less than or equal to 1"),
    c("time-picard-zero", {"time": {"nonlinear_iterations": 0}}, 2, "time.nonlinear_iterations",
      "expected greater than or equal to 1"),
    c("time-relaxation-high", {"time": {"relaxation": 2}}, 2, "time.relaxation",
      "expected less than or equal to 1"),
    c("time-tolerance-negative", {"time": {"picard_tolerance": -1e-3}}, 2,
      "time.picard_tolerance", "expected greater than or equal to 0"),
    # ----------------------------------------------------------------------- solvers
    c("solvers-system-unknown", {"solvers": {"energy": {"rtol": 1e-8}}}, 2,
      "solvers.energy: unknown key", "expected one of pressure, momentum, tracer"),
    c("solvers-not-mapping", {"solvers": {"pressure": 5}}, 2, "solvers.pressure",
      "expected a mapping of keys"),
    c("solvers-pressure-gmres", {"solvers": {"pressure": {"method": "gmres"}}}, 2,
      "solvers.pressure.method: expected 'cg', 'direct' or 'auto' (the pressure system is "
      "SPD)"),
    c("solvers-tracer-direct", {"solvers": {"tracer": {"method": "direct"}}}, 2,
      "solvers.tracer.method", "direct and auto are for the constant pressure matrix only"),
    c("solvers-momentum-amg", {"solvers": {"momentum": {"preconditioner": "amg"}}}, 2,
      "solvers.momentum.preconditioner", "amg is for the pressure system only"),
    c("solvers-pressure-float32-jacobi",
      {"solvers": {"pressure": {"preconditioner": "jacobi", "precision": "float32"}}}, 2,
      "solvers.pressure.precision: float32 needs preconditioner amg"),
    c("solvers-momentum-float32", {"solvers": {"momentum": {"precision": "float32"}}}, 2,
      "solvers.momentum.precision: expected float64 (float32 is for the pressure AMG levels)"),
    c("solvers-method-unknown", {"solvers": {"tracer": {"method": "lu"}}}, 2,
      "solvers.tracer.method", "expected 'cg', 'gmres', 'bicgstab', 'direct' or 'auto'"),
    c("solvers-rtol-zero", {"solvers": {"pressure": {"rtol": 0}}}, 2, "solvers.pressure.rtol",
      "expected greater than 0"),
    c("solvers-rtol-above-one", {"solvers": {"pressure": {"rtol": 1.5}}}, 2,
      "solvers.pressure.rtol", "expected less than 1"),
    c("solvers-max-iterations-zero", {"solvers": {"momentum": {"max_iterations": 0}}}, 2,
      "solvers.momentum.max_iterations", "expected greater than or equal to 1"),
    c("solvers-restart-zero", {"solvers": {"momentum": {"restart": 0}}}, 2,
      "solvers.momentum.restart", "expected greater than or equal to 1"),
    c("solvers-atol-negative", {"solvers": {"tracer": {"atol": -1}}}, 2, "solvers.tracer.atol",
      "expected greater than or equal to 0"),
    c("solvers-key-unknown", {"solvers": {"pressure": {"tolerance": 1e-8}}}, 2,
      "solvers.pressure.tolerance: unknown key", "expected one of method, preconditioner"),
    # ----------------------------------------------------------------------- backend
    c("backend-name", {"backend": {"name": "tpu"}}, 2, "backend.name",
      "expected 'cpu', 'gpu' or 'auto'"),
    c("backend-solver-mode", {"backend": {"solver_mode": "both"}}, 2, "backend.solver_mode",
      "expected 'host' or 'device'"),
    c("backend-assembly", {"backend": {"assembly": "fast"}}, 2, "backend.assembly",
      "expected 'atomic' or 'deterministic'"),
    c("backend-threads-negative", {"backend": {"threads": -1}}, 2, "backend.threads",
      "expected greater than or equal to 0"),
    c("backend-strict-text", {"backend": {"strict": "maybe"}}, 2, "backend.strict",
      "expected a valid boolean"),
    c("backend-device-on-cpu", {"backend": {"solver_mode": "device"}}, 2,
      "backend.solver_mode: 'device' (solvers on the GPU) needs backend.name 'gpu' or 'auto', "
      "but backend.name is 'cpu'"),
    c("backend-threads-too-many", {"backend": {"threads": 9999}}, 0,
      "notice: backend.threads = 9999 is more than the", "threads numba can use"),
    c("backend-gpu-keys-on-cpu", {"backend": {"assembly": "deterministic", "strict": True}}, 0,
      "notice: backend.assembly = deterministic, backend.strict = true: GPU setting(s), "
      "ignored with backend.name = cpu"),
    # ------------------------------------------------------------------------ output
    c("output-path-empty", {"output": {"path": ""}}, 2, "output.path", "a non-empty path"),
    c("output-path-number", {"output": {"path": 5}}, 2, "output.path",
      "expected a valid string"),
    c("output-path-placeholder", {"output": {"path": "{name}.nc"}}, 2, "output.path",
      "placeholders only from {case}, {config}; unknown {name}"),
    c("output-path-brace", {"output": {"path": "{case.nc"}}, 2, "output.path",
      "a path with valid {} placeholders"),
    c("output-sections-bad", {"output": {"sections": ["z:1000"]}}, 2, "output.sections",
      "expected a plane AXIS=LEVEL [m] such as z=3000 or y=0, not 'z:1000'"),
    c("output-sections-twice", {"output": {"sections": ["z=1000", "z = 1000.0"]}}, 2,
      "output.sections", "each section at most once"),
    c("output-sections-outside", {"output": {"sections": ["z=-500"]}}, 1,
      "output.sections: the plane z = -500 m does not cut the mesh (z from"),
    c("output-sections-exist", {"output": {"sections": ["z=1000"]}}, 1,
      "out.section_z1000m.nc: section file(s) of output.sections exist; pass --overwrite",
      setup=("section-file",)),
    c("output-formats-no-netcdf", {"output": {"formats": ["xdmf"]}}, 2, "output.formats",
      "expected a list that contains netcdf"),
    c("output-formats-unknown", {"output": {"formats": ["netcdf", "vtu"]}}, 2,
      "output.formats.1: expected 'netcdf' or 'xdmf' (got 'vtu')"),
    c("output-formats-twice", {"output": {"formats": ["netcdf", "netcdf"]}}, 2,
      "output.formats", "each format at most once"),
    c("output-formats-string", {"output": {"formats": "netcdf"}}, 2, "output.formats",
      "expected a valid list"),
    c("output-interval-zero", {"output": {"output_interval": 0}}, 2, "output.output_interval",
      "expected greater than 0"),
    c("output-diagnostics-zero", {"output": {"diagnostics_every": 0}}, 2,
      "output.diagnostics_every", "expected greater than or equal to 1"),
    c("output-checkpoint-between-steps", {"output": {"checkpoint_interval": 15}}, 2,
      "output.checkpoint_interval: expected 0 (off) or a whole multiple of time.dt = 10 s "
      "(got 15.0)"),
    c("output-checkpoint-negative", {"output": {"checkpoint_interval": -10}}, 2,
      "output.checkpoint_interval", "expected greater than or equal to 0"),
    c("output-exists", {}, 1, "out.nc: output file exists; pass --overwrite",
      setup=("prev",)),
    c("output-xdmf-exists", {"output": {"formats": ["netcdf", "xdmf"]}}, 1,
      "out.xdmf and out_xdmf: XDMF output exists; pass --overwrite", setup=("xdmf",)),
    c("output-checkpoint-exists", {}, 1, "out.checkpoint.nc: checkpoint file exists",
      "pass --overwrite", setup=("checkpoint-only",)),
    c("output-path-directory", {"output": {"path": "outdir"}}, 1,
      "outdir: output.path (--output) is a directory", setup=("outdir",)),
    c("output-path-under-a-file", {"output": {"path": "notes.txt/out.nc"}}, 1,
      "notes.txt/out.nc: output.path (--output) cannot be created: notes.txt is a file, not a "
      "folder", setup=("notes",)),
    # --------------------------------------------------------------------- stability
    c("stability-factor-below-one", {"stability": {"max_speed_factor": 0.5}}, 2,
      "stability.max_speed_factor: expected 0 (off) or more than 1"),
    c("stability-factor-negative", {"stability": {"max_speed_factor": -1}}, 2,
      "stability.max_speed_factor", "expected greater than or equal to 0"),
    c("stability-key-unknown", {"stability": {"max_w": 50}}, 2,
      "stability.max_w: unknown key", "expected one of max_speed_factor"),
    c("stability-blow-up", {"mesh": {"nx": 4, "ny": 4, "nz": 3},
                            "time": {"dt": 500.0, "t_end": 3000.0},
                            "output": {"checkpoint_interval": 0}}, 1,
      "warning: advective Courant number u0 * time.dt / dx = 10 m/s * 500 s / 250 m = 20.00 > 1",
      "unstable run at step", "exceeds stability.max_speed_factor x inflow speed = 10 x 10 m/s "
      "= 100 m/s; stopped. out.nc keeps the snapshots up to t = ", "try a smaller time.dt"),
    c("stability-exceeded", {"stability": {"max_speed_factor": 1.005}}, 1,
      "unstable run at step 1 (t = 10 s): max|u|", "exceeds stability.max_speed_factor x "
      "inflow speed = 1.005 x 10 m/s", "out.nc keeps the snapshots up to t = 0 s"),
    # ------------------------------------------------------------------ run flags
    a("flag-steps-zero", RUN + ("--steps", "0"), 2, "argument --steps: expected a positive "
      "integer, got '0'"),
    a("flag-steps-text", RUN + ("--steps", "ten"), 2, "argument --steps", "got 'ten'"),
    a("flag-steps-negative", RUN + ("--steps", "-5"), 2, "argument --steps",
      "expected a positive integer, got '-5'"),
    a("flag-t-end-inf", RUN + ("--t-end", "inf"), 2,
      "argument --t-end: expected a positive finite number, got 'inf'"),
    a("flag-t-end-nan", RUN + ("--t-end", "nan"), 2, "argument --t-end", "got 'nan'"),
    a("flag-t-end-negative", RUN + ("--t-end", "-10"), 2, "argument --t-end", "got '-10'"),
    a("flag-t-end-below-dt", RUN + ("--t-end", "5"), 2,
      "--t-end: expected at least time.dt = 10 s of run.yaml (got 5)"),
    a("flag-backend", RUN + ("--backend", "tpu"), 2, "argument --backend: invalid choice: "
      "'tpu'"),
    a("flag-solver-mode", RUN + ("--solver-mode", "device"), 2,
      "backend.solver_mode: 'device' (solvers on the GPU) needs backend.name 'gpu' or 'auto'"),
    a("flag-assembly", RUN + ("--assembly", "fast"), 2, "argument --assembly: invalid choice"),
    a("flag-unknown", RUN + ("--frobnicate",), 2, "unrecognized arguments: --frobnicate"),
    a("flag-output-empty", RUN + ("--output", ""), 2, "output.path", "a non-empty path"),
    a("flag-output-directory", RUN + ("--output", "outdir"), 1,
      "outdir: output.path (--output) is a directory", setup=("outdir",)),
    a("flag-output-proc", RUN + ("--output", "/proc/x.nc"), 1,
      "/proc/x.nc: output.path (--output) cannot be created: no file can be written in /proc"),
    a("flag-set-no-equals", RUN + ("--set", "time.dt"), 2,
      "argument --set: expected KEY.PATH=VALUE such as time.dt=5 (got 'time.dt')"),
    a("flag-set-unknown-key", RUN + ("--set", "mesh.bogus=3"), 2,
      "--set mesh.bogus: unknown key; expected one of file, nx"),
    a("flag-set-bad-value", RUN + ("--set", "time.dt=-1"), 2,
      "--set time.dt: expected greater than 0 (got -1)"),
    a("flag-set-twice", RUN + ("--set", "time.dt=5", "--set", "time.dt=6"), 2,
      "--set time.dt: given more than once"),
    a("flag-set-and-flag", RUN + ("--set", "time.t_end=20", "--t-end", "30"), 2,
      "--set time.t_end: also set by --t-end; give one of them"),
    a("flag-verbose-and-quiet", RUN + ("-v", "-q"), 2,
      "argument -q/--quiet: not allowed with argument -v/--verbose"),
    a("flag-verbose-before-quiet-after", ("-v",) + RUN + ("-q",), 2,
      "-v/--verbose and -q/--quiet: give one of them"),
    a("flag-log-file-directory", RUN + ("--log-file", "outdir"), 1,
      "--log-file outdir: cannot open the log file for appending (Is a directory)",
      setup=("outdir",)),
    a("config-two-modes", ("config", "run.yaml", "--schema"), 2,
      "give one of CONFIG, --reference, --schema (got CONFIG and --schema)"),
    a("config-set-without-config", ("config", "--set", "time.dt=5"), 2,
      "--set time.dt: needs CONFIG (the file it overrides)"),
    a("command-missing", (), 2, "the following arguments are required: COMMAND"),
    a("command-unknown", ("fly",), 2, "argument COMMAND: invalid choice: 'fly'"),
    a("run-no-config", ("run",), 2, "the following arguments are required: CONFIG"),
    # --------------------------------------------------------------------- restart
    a("restart-missing-file", RUN + ("--restart", "absent.nc", "--output", "new.nc"), 1,
      "absent.nc: cannot open restart file"),
    a("restart-not-netcdf", RUN + ("--restart", "notes.txt", "--output", "new.nc"), 1,
      "notes.txt: cannot open restart file", setup=("notes",)),
    a("restart-foreign-netcdf", RUN + ("--restart", "foreign.nc", "--output", "new.nc"), 1,
      "foreign.nc: not a dycore output file (no x, y, z, cell_nodes", "cannot restart from it",
      setup=("foreign",)),
    a("restart-time-negative", RUN + ("--restart", "out.nc@-5"), 2, "argument --restart",
      "expected FILE@TIME with a finite TIME >= 0 [s], got 'out.nc@-5'"),
    a("restart-time-inf", RUN + ("--restart", "out.nc@inf"), 2, "argument --restart",
      "got 'out.nc@inf'"),
    a("restart-time-not-in-file", RUN + ("--restart", "out.nc@1000"), 2,
      "--restart out.nc@1000: no snapshot within time.dt / 2 = 5 s of t = 1000 s; the file's "
      "snapshots: 0, 10, 20, 30 s", setup=("prev",)),
    a("restart-other-file-no-output", RUN + ("--restart", "other.nc"), 2,
      "--restart other.nc: output.path of run.yaml is out.nc, not the restart file; pass "
      "--output other.nc", setup=("other",)),
    a("restart-at-t-end", RUN + ("--restart", "out.nc"), 2,
      "--restart out.nc: its snapshot at t = 30 s (step 3) is at or after time.t_end = 30 s; "
      "pass a later --t-end", setup=("prev",)),
    a("restart-discards-later", RUN + ("--restart", "out.nc@10"), 1,
      "out.nc: restarting from t = 10 s would discard the file's 2 later snapshot(s); pass "
      "--overwrite", setup=("prev",)),
    a("restart-config-differs", RUN + ("--restart", "out.nc", "--t-end", "60"), 2,
      "out.nc: cannot restart: the configuration differs from the file's (its config "
      "attribute) in time.dt (file: 10.0, run.yaml: 5.0)",
      config={"time": {"dt": 5.0}}, setup=("prev",)),
    a("restart-mesh-differs", RUN + ("--restart", "out.nc", "--t-end", "60"), 2,
      "in mesh.nx (file: 2, run.yaml: 4)", config={"mesh": {"nx": 4}}, setup=("prev",)),
    a("restart-snapshot-incomplete", RUN + ("--restart", "out.nc@30", "--t-end", "60"), 1,
      "out.nc: the snapshot at t = 30 s is incomplete (NaN values", "restart from an earlier one",
      setup=("prev-cut",)),
    a("restart-no-complete-snapshot", RUN + ("--restart", "out.nc", "--t-end", "60"), 1,
      "out.nc: holds no complete snapshot to restart from", setup=("prev-blank",)),
    a("restart-mesh-coordinates-differ", RUN + ("--restart", "out.nc", "--t-end", "60"), 2,
      "out.nc: cannot restart: the mesh built from the configuration differs from the file's: "
      "node coordinates differ", "max |difference| = 1 m", setup=("prev-moved",)),
    a("restart-output-unreadable", RUN + ("--restart", "out.nc", "--t-end", "60"), 1,
      "notice: out.nc: cannot open restart file", "restarting from its checkpoint "
      "out.checkpoint.nc (t = 30 s, step 3)", "pass --overwrite to start out.nc anew from the "
      "checkpoint", setup=("prev-corrupt",)),
    a("restart-into-checkpoint", RUN + ("--restart", "out.checkpoint.nc", "--output",
                                        "out.checkpoint.nc", "--t-end", "60"), 2,
      "out.checkpoint.nc: output.path (--output) is a checkpoint; the run's output is out.nc",
      setup=("prev",)),
    # ----------------------------------------------- data safety (issue 25): no file lost
    a("output-locked", RUN + ("--overwrite",), 1, "out.nc: output file is being written by "
      "another dycore run (process 4242 on otherhost", "wait for it to end",
      setup=("prev", "locked")),
    a("output-is-config", RUN + ("--output", "run.yaml", "--overwrite"), 1,
      "run.yaml: output.path (--output) is the configuration file; writing it would destroy "
      "the input"),
    a("output-is-mesh-file", RUN + ("--overwrite",), 1,
      "mesh.msh: output.path (--output) is mesh.file (the mesh)",
      config="mesh: {file: mesh.msh}\noutput: {path: mesh.msh, progress: false}\n"),
    a("flag-overwrite-abbreviated", RUN + ("--over",), 2,
      "--over: abbreviated --overwrite; write the flag in full"),
    a("restart-damaged", RUN + ("--restart", "out.nc", "--t-end", "60"), 1,
      "notice: out.nc: damaged data (checksum mismatch or undecodable chunk) in variable w, "
      "record 1 (t = 10 s); cannot restart from it; restarting from its checkpoint",
      "pass --overwrite to start out.nc anew from the checkpoint", setup=("prev-damaged",)),
    a("restart-damaged-no-checkpoint", RUN + ("--restart", "out.nc", "--t-end", "60"), 1,
      "out.nc: damaged data (checksum mismatch or undecodable chunk) in variable w, record 1 "
      "(t = 10 s); cannot restart from it", setup=("prev-damaged-alone",)),
    a("restart-output-other-config", RUN + ("--restart", "out.nc", "--t-end", "60"), 2,
      "out.nc: cannot append the restart from out.checkpoint.nc to it: the file was written "
      "with another configuration: physics.nu_h (file: 123.0, run.yaml: 5.0)",
      setup=("prev-other-config",)),
    a("restart-output-gap", RUN + ("--restart", "out.nc", "--t-end", "60"), 1,
      "out.nc: cannot append the restart from out.checkpoint.nc (t = 30 s, step 3) to it: the "
      "file ends at t = 0 s (step 0), 30 s before it, more than its output.output_interval = "
      "10 s", setup=("prev-gap",)),
    a("restart-directory", RUN + ("--restart", "outdir", "--output", "new.nc"), 2,
      "--restart outdir: is a directory; expected an output file", setup=("outdir",)),
    a("file-alias-bomb", RUN, 2, "run.yaml: the YAML expands to more than 100,000 values",
      config="".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
                     for p, c in zip("abcdefgh", "bcdefghi")).join(
                         ["a: &a [x, x, x, x, x, x, x, x, x]\n", "mesh: {nx: *i}\n"])),
    a("file-recursive-alias", RUN, 2, "run.yaml: line 1, column 7: an alias refers to a "
      "collection that contains it (recursive)", config="mesh: &a {nx: [*a]}\n"),
    a("verify-json-is-input", ("verify", "out.nc", "--json", "out.nc"), 1,
      "out.nc: --json is FILE (the output file read); writing it would destroy the input",
      setup=("prev",)),
    a("verify-json-exists", ("verify", "out.nc", "--json", "notes.txt"), 1,
      "notes.txt: --json file exists; pass --overwrite to replace it", setup=("prev", "notes")),
    a("verify-png-format", ("verify", "out.nc", "--png", "x.xyz"), 2,
      "--png x.xyz: unknown image format '.xyz'", setup=("prev",)),
    a("verify-only-t0", ("verify", "out.nc"), 1, "out.nc: w is 0 at every node in the "
      "snapshot(s) used (t = 0 s)", setup=("prev-t0",)),
    a("plot-png-format", ("plot", "out.nc", "--png", "x.xyz"), 2,
      "--png x.xyz: unknown image format '.xyz'", setup=("prev",)),
    a("plot-png-is-input", ("plot", "out.nc", "--png", "link.png"), 1,
      "link.png: --png is FILE (the output file read) (= out.nc)", setup=("prev", "hardlink")),
    a("export-input-damaged", ("export", "out.nc", "--xdmf"), 1,
      "out.nc: cannot read w, record 1 (t = 10 s) of the output file",
      setup=("prev-damaged-alone",)),
    a("mesh-out-is-config", ("mesh", "run.yaml", "--out", "run.yaml", "--overwrite"), 1,
      "run.yaml: --out is CONFIG (the configuration file)"),
    a("mesh-out-directory", ("mesh", "run.yaml", "--out", "outdir"), 1,
      "outdir: --out is a directory; expected a file name such as outdir/run.msh",
      setup=("outdir",)),
    # ------------------------------------------------------------ plot, export, verify
    a("plot-missing-file", ("plot", "absent.nc"), 1, "absent.nc: cannot open output file"),
    a("plot-not-netcdf", ("plot", "notes.txt"), 1, "notes.txt: cannot open output file",
      setup=("notes",)),
    a("plot-field-unknown", ("plot", "out.nc", "--field", "vorticity"), 1,
      "--field 'vorticity': expected one of u, v, w, p", setup=("prev",)),
    a("plot-time-text", ("plot", "out.nc", "--time", "noon"), 2,
      "argument --time: expected a number, got 'noon'"),
    a("plot-xlim-one-value", ("plot", "out.nc", "--xlim", "5"), 2,
      "argument --xlim: expected 2 arguments"),
    a("plot-png-unwritable", ("plot", "out.nc", "--png", "/proc/w.png"), 1,
      "/proc/w.png: cannot write the plot", setup=("prev",)),
    a("export-no-format", ("export", "out.nc"), 2,
      "one of the arguments --xdmf is required"),
    a("export-missing-file", ("export", "absent.nc", "--xdmf"), 1, "absent.nc: cannot open"),
    a("export-exists", ("export", "out.nc", "--xdmf"), 1, "XDMF output exists",
      "pass --overwrite", setup=("prev", "xdmf")),
    a("verify-missing-file", ("verify", "absent.nc"), 1, "absent.nc: cannot open"),
    a("verify-not-netcdf", ("verify", "notes.txt"), 1, "notes.txt: cannot open",
      setup=("notes",)),
    a("verify-t-start-nan", ("verify", "out.nc", "--t-start", "nan"), 2,
      "argument --t-start: expected a finite number, got 'nan'", setup=("prev",)),
    a("plot-time-nan", ("plot", "out.nc", "--time", "nan"), 2,
      "argument --time: expected a finite number, got 'nan'", setup=("prev",)),
    a("plot-xlim-reversed", ("plot", "out.nc", "--xlim", "10", "0"), 2,
      "--xlim: expected X0 < X1 [m] (got 10 0)", setup=("prev",)),
    a("plot-z-level-above-top", ("plot", "out.nc", "--z-level", "99999"), 1, "z = 99999 m",
      setup=("prev",)),
    a("export-out-unwritable", ("export", "out.nc", "--xdmf", "--out", "/proc/x.xdmf"), 1,
      "/proc/x.xdmf", setup=("prev",)),
    a("bench-parts-unknown", ("bench", "--parts", "kernals"), 2, "--parts", "kernals"),
    a("bench-mesh-malformed", ("bench", "--mesh", "4,4"), 2,
      "--mesh: mesh size '4,4': expected three positive integers NX,NY,NZ"),
    a("bench-sizes-malformed", ("bench", "--sizes", "4x4"), 2,
      "--sizes: mesh size '4x4': expected three positive integers NX,NY,NZ"),
    a("validate-missing-file", ("validate", "absent.yaml"), 2,
      "absent.yaml: configuration file not found"),
    a("verify-t-start-text", ("verify", "out.nc", "--t-start", "late"), 2,
      "argument --t-start: expected a number, got 'late'"),
    a("verify-json-unwritable", ("verify", "out.nc", "--json", "/proc/v.json"), 1,
      "/proc/v.json: --json cannot be created: no file can be written in /proc",
      setup=("prev",)),
    a("verify-png-directory", ("verify", "out.nc", "--png", "outdir"), 1,
      "outdir: --png is a directory", setup=("prev", "outdir")),
    a("verify-no-file", ("verify",), 2, "give either FILE or --convergence CONFIG"),
    a("verify-convergence-levels", ("verify", "--convergence", "run.yaml", "--levels", "2"), 2,
      "--levels: expected at least 3 meshes to fit an order (got 2)"),
    c("schar-mirror-split-odd-ny", {"case": {"name": "schar"},
                                    "mesh": {"ny": 1, "split": "mirror_y"}}, 1,
      "mesh.ny = 1: split mirror_y needs an even number of cells across the schar channel"),
    a("mesh-missing-config", ("mesh", "absent.yaml"), 2,
      "absent.yaml: configuration file not found"),
    a("mesh-out-exists", ("mesh", "run.yaml", "--out", "notes.txt"), 1,
      "notes.txt: file exists; pass --overwrite", setup=("notes",)),
    a("mesh-msh-version", ("mesh", "run.yaml", "--msh-version", "3"), 2,
      "argument --msh-version: invalid choice: '3'"),
    a("config-missing-file", ("config", "absent.yaml"), 2,
      "absent.yaml: configuration file not found"),
    a("config-and-reference", ("config", "run.yaml", "--reference"), 2,
      "give one of CONFIG, --reference, --schema (got CONFIG and --reference)"),
    a("validate-tolerance-negative", ("validate", "run.yaml", "--tolerance", "-1"), 2,
      "--tolerance: expected a number >= 0, got -1.0"),
    a("bench-block-size", ("bench", "--block", "100"), 2,
      "argument --block: expected a multiple of 32 from 32 to 256, got '100'"),
]


# ------------------------------------------------------------------------------ running
@pytest.fixture(scope="module")
def previous_run(tmp_path_factory) -> Path:
    """The folder of a finished BASE run: out.nc (t = 0 ... 30 s) and out.checkpoint.nc."""
    folder = tmp_path_factory.mktemp("previous")
    (folder / "run.yaml").write_text(yaml.safe_dump(BASE))
    status = cli.main(["run", str(folder / "run.yaml"), "--output", str(folder / "out.nc")])
    assert status == 0
    return folder


def _setup(names, folder: Path, previous: Path) -> None:
    for name in names:
        if name in ("prev", "other", "checkpoint-only"):
            shutil.copy(previous / "out.checkpoint.nc", folder / "out.checkpoint.nc")
            if name != "checkpoint-only":
                shutil.copy(previous / "out.nc", folder / ("other.nc" if name == "other"
                                                           else "out.nc"))
        elif name.startswith("prev-"):
            shutil.copy(previous / "out.nc", folder / "out.nc")
            if name in ("prev-corrupt", "prev-damaged", "prev-other-config", "prev-gap"):
                shutil.copy(previous / "out.checkpoint.nc", folder / "out.checkpoint.nc")
            if name.startswith("prev-damaged"):       # one chunk's bytes, checksum now fails
                damage_chunk(folder / "out.nc", "w", 1)
                continue
            if name == "prev-corrupt":               # HDF5's superblock overwritten
                data = (folder / "out.nc").read_bytes()
                (folder / "out.nc").write_bytes(b"\0" * 64 + data[64:])
                continue
            with netCDF4.Dataset(folder / "out.nc", "a") as ds:
                if name == "prev-cut":               # a record cut short by a kill
                    ds["q_r"][3, 0] = float("nan")
                elif name == "prev-blank":           # no record complete
                    ds["u"][:, 0] = float("nan")
                elif name == "prev-moved":           # not the mesh the configuration builds
                    ds["x"][0] = ds["x"][0] + 1.0
                elif name == "prev-other-config":    # a leftover of another run: nu_h 123
                    ds["time"][2:] = float("nan")
                    cfg = yaml.safe_load(ds.getncattr("config"))
                    cfg["physics"]["nu_h"] = 123.0
                    ds.setncattr("config", yaml.safe_dump(cfg))
                elif name == "prev-gap":             # stopped at t = 0, checkpoint at 30 s
                    ds["time"][1:] = float("nan")
                elif name == "prev-t0":              # only the initial snapshot
                    ds["time"][1:] = float("nan")
                    ds["w"][1:, :] = float("nan")
        elif name == "locked":                      # another run holds out.nc
            fd = os.open(lock_path(folder / "out.nc"), os.O_RDWR | os.O_CREAT)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, json.dumps({"pid": 4242, "host": "otherhost", "command":
                                     "dycore run run.yaml", "started": "2026-11-26T06:00:00"
                                     "+00:00"}).encode())
            HELD_LOCKS.append(fd)
        elif name == "hardlink":                    # another name of out.nc
            os.link(folder / "out.nc", folder / "link.png")
        elif name == "notes":
            (folder / "notes.txt").write_text("not a netCDF file\n")
        elif name == "section-file":
            (folder / "out.section_z1000m.nc").write_text("")
        elif name == "outdir":
            (folder / "outdir").mkdir()
        elif name == "yaml-folder":
            (folder / "run.yaml").mkdir()
        elif name == "xdmf":
            (folder / "out.xdmf").write_text("")
            (folder / "out_xdmf").mkdir()
        elif name == "foreign":
            with netCDF4.Dataset(folder / "foreign.nc", "w") as ds:
                ds.createDimension("n", 3)
                ds.createVariable("t2m", "f8", ("n",))[:] = [1.0, 2.0, 3.0]
        else:
            raise AssertionError(f"unknown setup {name!r}")


#: lock file descriptors a case's setup holds (closed after the case)
HELD_LOCKS: list[int] = []


def damage_chunk(path: Path, variable: str, record: int) -> None:
    """Overwrite up to 32 bytes inside the stored chunk of ``variable``'s ``record`` (its
    Fletcher-32 checksum then fails; nothing outside the chunk changes), as a disk or a copy
    might."""
    import h5py

    with h5py.File(path, "r") as f:
        info = f[variable].id.get_chunk_info_by_coord((record, 0))
    n = min(32, info.size - 4)                      # the checksum: the chunk's last 4 bytes
    with open(path, "r+b") as f:
        f.seek(info.byte_offset)
        old = f.read(n)
        f.seek(info.byte_offset)
        f.write(bytes(b ^ 0x5A for b in old))       # every byte changed


def _config_text(case: Case) -> str | None:
    if case.config == NO_FILE:
        return None
    if isinstance(case.config, str):
        return case.config
    data = copy.deepcopy(BASE)
    for section, values in (case.config or {}).items():
        if isinstance(values, dict) and isinstance(data.get(section), dict):
            data[section].update(values)
        else:
            data[section] = values
    return yaml.safe_dump(data, allow_unicode=True)


def run_case(case: Case, folder: Path, previous: Path, capsys, monkeypatch) -> tuple[int, str]:
    """Run ``case`` in ``folder`` (the working directory); return (exit status, stderr)."""
    monkeypatch.chdir(folder)
    _setup(case.setup, folder, previous)
    text = _config_text(case)
    if text is not None:
        (folder / "run.yaml").write_bytes(text.encode("utf-8", "surrogateescape"))
    capsys.readouterr()
    try:
        status = cli.main(list(case.argv))
    except SystemExit as exc:            # argparse usage errors
        status = exc.code
    finally:
        while HELD_LOCKS:
            os.close(HELD_LOCKS.pop())
    return status, capsys.readouterr().err


# --------------------------------------------------------------------------- the docs
def _unquote(cell: str) -> str:
    cell = cell.strip().replace("\\|", "|")
    match = re.fullmatch(r"(`+) ?(.*?) ?\1", cell)
    return match.group(2) if match else cell


def docs_table() -> dict[str, tuple[int, str]]:
    """The rows of the "Cases" table of docs/errors.md: id -> (exit status, message lines
    joined by ``<br>``)."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("\n## Cases\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = re.split(r"(?<!\\)\|", line)[1:-1]
        if len(cells) != 4 or not cells[0].strip().startswith("`"):
            continue
        case_id = _unquote(cells[0])
        assert case_id not in rows, f"docs/errors.md: case {case_id} listed twice"
        rows[case_id] = (int(cells[2].strip()),
                         "<br>".join(_unquote(part) for part in cells[3].split("<br>")))
    return rows


def _matches(pattern: str, line: str) -> bool:
    """``line`` equals ``pattern`` where each ``…`` of the pattern stands for any text."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("…"))), line) is not None


def test_the_corpus_is_large_and_unique():
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 90
    assert all(case.exit != 0 or any("notice:" in w for w in case.words) for case in CASES)


def test_docs_table_agrees_with_the_corpus():
    """One docs row per case, same exit status, every key word in the documented message."""
    rows = docs_table()
    assert sorted(rows) == sorted(case.id for case in CASES)
    for case in CASES:
        status, message = rows[case.id]
        assert status == case.exit, case.id
        for word in case.words:
            assert word in message, (case.id, word)


#: the cases that run steps or draw (a few seconds each): the `slow` lane
SLOW = {"backend-gpu-keys-on-cpu", "backend-threads-too-many", "plot-png-unwritable",
        "stability-blow-up", "stability-exceeded"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c.id in SLOW else c
                                  for c in CASES], ids=lambda case: case.id)
def test_bad_input(case, tmp_path, previous_run, capsys, monkeypatch):
    status, err = run_case(case, tmp_path, previous_run, capsys, monkeypatch)
    assert "Traceback" not in err
    assert status == case.exit, err
    for word in case.words:
        assert word in err, (word, err)
    for documented in docs_table()[case.id][1].split("<br>"):     # every documented line
        assert any(_matches(documented, line) for line in err.splitlines()), (documented, err)


def test_the_slow_lane_names_cases_that_exist():
    assert SLOW <= {case.id for case in CASES}
