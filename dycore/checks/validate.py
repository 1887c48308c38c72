"""``dycore validate``: the GPU backend against the CPU path on one configuration (docs/equations.md §6–§7).

Two :class:`~dycore.timestepping.simulation.Simulation` objects are built from the same
configuration and mesh: one on the CPU (``@njit``, deterministic order) and one on the GPU
backend with ``solver_mode = host`` (SciPy/PyAMG solves on both sides, so only the assembly
kernels differ). Then

1. every assembly kernel output is compared once on the initial state plus a smooth perturbation
   (:func:`dycore.checks.operators.state_inputs`: at rest-in-balance the momentum rhs is pure
   cancellation), for the tracer matrix and rhs of θ' and q_v, momentum BCSR matrix and rhs,
   C, K_p and lumped mass:
   number of differing entries,
   max |Δ|, max |Δ| / max |CPU|, max distance in ulp (difference of the order-preserving
   ``np.int64`` views of the float64 bit patterns);
2. both are stepped to the end time in lockstep (the CPU simulation's run loop, with the
   :class:`~dycore.timestepping.callbacks.Lockstep` callback stepping the GPU one); at t = 0, at every output time (``output.output_interval``)
   and at the last step the max |GPU − CPU| of each field (u, v, w, p, theta_prime, q_v, q_c, q_r)
   is recorded;
3. the SHA-256 of each final GPU field (bytes of the float64 array) is recorded; with
   ``repeat_gpu`` a second GPU run is made and its hashes compared (run-to-run reproducibility);
4. a text and a JSON report, a netCDF file of the GPU − CPU fields at the last time and a PNG of
   |Δw| on the plane y = 0 are written into the output folder (netCDF and PNG are skipped, with a
   note in the report, where netCDF4 / Matplotlib are not installed, e.g. the GPU machine).

GPU mode: ``backend.assembly`` and ``backend.strict`` are taken from the configuration when the
file (or an override) sets them; when it does not, validate uses ``deterministic`` assembly and
``strict = true`` -- the mode in which the GPU must equal the CPU bitwise (docs/equations.md §6).

Tolerance (relative): the check fails when, for some field at some compared time or for some
kernel output, ``max|Δ| > tolerance · max|CPU value|`` (``max|Δ| > tolerance`` where the CPU
value is all zero). Default: ``0.0`` (bitwise) for deterministic + strict, else ``1e-10``. In
deterministic mode a ``repeat_gpu`` hash mismatch fails too.
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dycore.checks.common import compare_arrays, with_backend
from dycore.physics.state import OUTPUT_FIELDS

__all__ = ["validate", "ValidationResult", "compare_arrays", "field_hashes", "gpu_mode",
           "gpu_mode_defaults", "default_tolerance"]

log = logging.getLogger("dycore")

DEFAULT_RELATIVE_TOLERANCE = 1e-10


# ---------------------------------------------------------------------------- comparisons
def field_hashes(fields: dict) -> dict:
    """{name: SHA-256 hex digest of the float64 bytes of the field} (C order)."""
    return {k: hashlib.sha256(np.ascontiguousarray(v, dtype=np.float64).tobytes()).hexdigest()
            for k, v in fields.items()}


def _exceeds(stats: dict, tolerance: float) -> bool:
    """True when the relative difference is above ``tolerance`` or NaN (NaN on one side)."""
    return not stats["max_rel"] <= tolerance


# ------------------------------------------------------------------------------- set-up
def gpu_mode(config) -> tuple[str, bool]:
    """(assembly, strict) for the GPU side: the configuration's when set there, else
    ("deterministic", True) -- see :func:`gpu_mode_defaults` for which were defaulted."""
    b = config.backend
    given = b.model_fields_set
    assembly = b.assembly if "assembly" in given else "deterministic"
    strict = b.strict if "strict" in given else True
    return assembly, bool(strict)


def gpu_mode_defaults(config, assembly=None, strict=None) -> list[str]:
    """One line for each GPU-mode key that validate chooses itself (not in the configuration
    and not given as an argument), so the report says so instead of defaulting silently."""
    given = config.backend.model_fields_set
    out = []
    if assembly is None and "assembly" not in given:
        out.append("backend.assembly not set: validating with deterministic assembly "
                   "(--assembly or backend.assembly to choose)")
    if strict is None and "strict" not in given:
        out.append("backend.strict not set: validating in strict FP (bitwise) mode "
                   "(--strict/--no-strict or backend.strict to choose)")
    return out


def default_tolerance(assembly: str, strict: bool) -> float:
    """0.0 (bitwise) for deterministic + strict, else :data:`DEFAULT_RELATIVE_TOLERANCE`."""
    return 0.0 if (assembly == "deterministic" and strict) else DEFAULT_RELATIVE_TOLERANCE


def _initial_kernel_outputs(sim) -> dict:
    """Every assembly operator's output (:func:`dycore.checks.operators.operator_outputs`:
    one call per loop of the assembly table, so a new operator cannot be missing here) on the
    smoothly perturbed initial state (:func:`dycore.checks.operators.state_inputs`), as host
    arrays named ``tracer theta_prime matrix``, ``momentum rhs``, ``divergence C``, ..."""
    from dycore.checks.operators import operator_outputs, state_inputs
    return operator_outputs(sim.assembler, state_inputs(sim))


# ------------------------------------------------------------------------------ result
@dataclass
class ValidationResult:
    """What :func:`validate` found (also written as JSON).

    Attributes
    ----------
    passed : bool; message : one line (the first failure, or a summary)
    assembly, strict, tolerance : the GPU mode and the relative tolerance used
    steps : int; t : float — model time reached [s]
    kernels : {kernel output name: :func:`compare_arrays` dict}
    fields : list of {"step", "t", "max_abs": {field: float}, "max_rel": {field: float}}
    final : {field: compare_arrays dict} at the last time
    gpu_hashes : {field: sha256}; repeat_hashes : second GPU run's hashes or None
    files : {kind: path} written; notes : list of str
    """

    passed: bool
    message: str
    assembly: str
    strict: bool
    tolerance: float
    steps: int
    t: float
    backend: str
    kernels: dict
    fields: list
    final: dict
    gpu_hashes: dict
    repeat_hashes: dict | None = None
    files: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    wall_time: float = 0.0

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["files"] = {k: str(v) for k, v in self.files.items()}
        return d

    def text(self) -> str:
        """The human-readable report."""
        L = [f"dycore validate: {'PASSED' if self.passed else 'FAILED'} -- {self.message}",
             f"GPU: {self.backend}", f"assembly {self.assembly}, strict {self.strict}, "
             f"relative tolerance {self.tolerance:g}; {self.steps} steps to t = {self.t:g} s "
             f"({self.wall_time:.1f} s wall)", "",
             "assembly kernels on the perturbed initial state (GPU vs CPU):",
             f"  {'output':28s} {'entries':>9s} {'differ':>8s} {'max|d|':>10s} "
             f"{'max rel':>10s} {'max ulp':>8s}"]
        for k, s in self.kernels.items():
            L.append(f"  {k:28s} {s['entries']:9d} {s['n_differ']:8d} {s['max_abs']:10.3e} "
                     f"{s['max_rel']:10.3e} {s['max_ulp']:8d}")
        L += ["", "max |GPU - CPU| per field at the compared times:",
              "  " + f"{'step':>5s} {'t [s]':>9s} " + " ".join(f"{f:>11s}" for f in OUTPUT_FIELDS)]
        for rec in self.fields:
            L.append("  " + f"{rec['step']:5d} {rec['t']:9g} "
                     + " ".join(f"{rec['max_abs'][f]:11.3e}" for f in OUTPUT_FIELDS))
        L += ["", "final GPU fields (SHA-256):"]
        for k, h in self.gpu_hashes.items():
            same = ""
            if self.repeat_hashes is not None:
                same = "  repeat: " + ("same" if self.repeat_hashes.get(k) == h else "DIFFERENT")
            L.append(f"  {k:12s} {h}{same}")
        if self.files:
            L += ["", "files:"] + [f"  {k}: {v}" for k, v in self.files.items()]
        if self.notes:
            L += ["", "notes:"] + [f"  {n}" for n in self.notes]
        return "\n".join(L) + "\n"


# --------------------------------------------------------------------------------- run
def _write_netcdf(path, sim, t, diff, config_yaml):
    from dycore import __version__
    from dycore.io.netcdf import SnapshotWriter
    with SnapshotWriter(path, sim.mesh, config_yaml=config_yaml, version=__version__,
                        title="dycore validate: GPU - CPU fields",
                        picard_iterations=sim.config.time.nonlinear_iterations) as writer:
        writer.write_snapshot(t, diff)


def _write_png(path, mesh, dw, t):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.tri import Triangulation

    from dycore.io.plot import plane_section

    sec = plane_section(mesh.coords, mesh.tets, np.abs(dw), axis=1, level=0.0)
    fig = Figure(figsize=(10, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    if len(sec.triangles):
        tri = Triangulation(sec.points[:, 0] * 1e-3, sec.points[:, 1] * 1e-3, sec.triangles)
        vmax = float(np.max(sec.values)) if np.max(sec.values) > 0 else 1e-300
        im = ax.tripcolor(tri, sec.values, shading="gouraud", cmap="viridis", vmin=0.0,
                          vmax=vmax, rasterized=True)
        fig.colorbar(im, ax=ax, label="|w_GPU - w_CPU| [m/s]")
    ax.set_xlabel("x [km]")
    ax.set_ylabel("z [km]")
    ax.set_title(f"|Δw| on y = 0, t = {t:g} s (max {float(np.max(np.abs(dw))):.3e} m/s)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def validate(config, *, steps: int | None = None, output_dir: str | Path = "output/validate",
             tolerance: float | None = None, repeat_gpu: bool = False,
             assembly: str | None = None, strict: bool | None = None) -> ValidationResult:
    """Compare the GPU backend with the CPU path on ``config`` (see the module docstring).

    Parameters
    ----------
    config : Config
        The run configuration (``time.t_end`` already overridden if wanted).
    steps : int, optional
        Stop after this many steps (default: ``time.n_steps``).
    output_dir : str or Path
        Folder for ``validate_report.txt``, ``validate_report.json``, ``validate_diff.nc`` and
        ``validate_dw.png`` (created).
    tolerance : float, optional
        Relative tolerance (default :func:`default_tolerance` of the GPU mode).
    repeat_gpu : bool
        Run the GPU side a second time and compare the final-field hashes.
    assembly, strict : optional
        Override the GPU mode chosen by :func:`gpu_mode`.

    Returns
    -------
    ValidationResult (``passed`` False when a tolerance or a reproducibility check fails).

    Raises
    ------
    BackendUnavailableError when no GPU (or simulator) is usable; other DycoreError subclasses
    from building or stepping the simulations; OutputError when the report cannot be written.
    """
    from dycore.errors import OutputError
    from dycore.timestepping.callbacks import Callback, Lockstep
    from dycore.timestepping.schedules import AtEnd, IterationInterval, snapshot_every
    from dycore.timestepping.simulation import build_simulation

    wall0 = time.perf_counter()
    out_dir = Path(output_dir)
    a_cfg, s_cfg = gpu_mode(config)
    defaulted = gpu_mode_defaults(config, assembly, strict)
    for line in defaulted:
        log.info("validate: %s", line)
    assembly = a_cfg if assembly is None else assembly
    strict = s_cfg if strict is None else bool(strict)
    tol = default_tolerance(assembly, strict) if tolerance is None else float(tolerance)
    cpu_cfg = with_backend(config, name="cpu")
    gpu_cfg = with_backend(config, name="gpu", solver_mode="host", assembly=assembly,
                            strict=strict)
    n_steps = config.time.n_steps if steps is None else min(steps, config.time.n_steps)
    every = snapshot_every(config.output.output_interval, config.time.dt)

    cpu = build_simulation(cpu_cfg)
    gpu = build_simulation(gpu_cfg)
    failures = []
    kernels = {}
    ko_c, ko_g = _initial_kernel_outputs(cpu), _initial_kernel_outputs(gpu)
    for k in ko_c:
        kernels[k] = compare_arrays(ko_c[k], ko_g[k])
        if _exceeds(kernels[k], tol):
            failures.append(f"kernel output '{k}' differs (max rel {kernels[k]['max_rel']:.3e}, "
                            f"{kernels[k]['n_differ']} entries) > tolerance {tol:g}")

    records = []

    def record(step):
        fc, fg = cpu.host_fields(), gpu.host_fields()
        stats = {f: compare_arrays(fc[f], fg[f]) for f in OUTPUT_FIELDS}
        records.append({"step": step, "t": cpu.state.t,
                        "max_abs": {f: s["max_abs"] for f, s in stats.items()},
                        "max_rel": {f: s["max_rel"] for f, s in stats.items()}})
        log.info("validate: step %d, t = %g s, %.0f s wall: max|GPU - CPU| %s", step, cpu.state.t,
                 time.perf_counter() - wall0,
                 "  ".join(f"{f} {s['max_abs']:.3e}" for f, s in stats.items()))
        for f, s in stats.items():
            if _exceeds(s, tol):
                failures.append(f"field {f} differs by {s['max_abs']:.3e} (relative "
                                f"{s['max_rel']:.3e}) at t = {cpu.state.t:g} s > tolerance "
                                f"{tol:g}")
        return fc, fg, stats

    last = {}

    class Compare(Callback):
        """Compare the two simulations at the start and the scheduled steps."""
        schedule = IterationInterval(every) | AtEnd()

        def initialize(self, sim, step):
            self(sim, step)

        def __call__(self, sim, step):
            last["fc"], last["fg"], last["final"] = record(step.k)

    cpu.run(steps=n_steps, callbacks=[Lockstep(gpu), Compare()], stability=False)
    fc, fg, final = last["fc"], last["fg"], last["final"]
    hashes = field_hashes(fg)

    repeat = None
    if repeat_gpu:
        again = build_simulation(gpu_cfg)
        again.run(steps=n_steps, stability=False)
        repeat = field_hashes(again.host_fields())
        if repeat != hashes:
            bad = [k for k in hashes if repeat[k] != hashes[k]]
            msg = f"GPU run-to-run hashes differ for {', '.join(bad)}"
            if assembly == "deterministic":
                failures.append(msg + " (deterministic assembly must reproduce bitwise)")

    result = ValidationResult(
        passed=not failures,
        message=failures[0] if failures else (
            f"GPU equals CPU within relative tolerance {tol:g} "
            f"({'bitwise' if tol == 0.0 else 'round-off'}) after {n_steps} steps"),
        assembly=assembly, strict=strict, tolerance=tol, steps=n_steps, t=cpu.state.t,
        backend=gpu.backend.describe(), kernels=kernels, fields=records,
        final={f: s for f, s in final.items()}, gpu_hashes=hashes, repeat_hashes=repeat)
    result.notes.extend(defaulted)
    if len(failures) > 1:
        result.notes.append(f"{len(failures)} checks failed:")
        result.notes.extend(failures)
    if repeat is not None and repeat != hashes and assembly != "deterministic":
        result.notes.append("GPU run-to-run hashes differ (expected with atomic assembly)")

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot create the output folder ({exc})") from None
    diff = {f: fg[f] - fc[f] for f in OUTPUT_FIELDS}
    nc = out_dir / "validate_diff.nc"
    try:
        _write_netcdf(nc, cpu, cpu.state.t, diff, gpu_cfg.resolved_yaml())
        result.files["netcdf"] = nc
    except OutputError as exc:
        result.notes.append(f"netCDF of the differences not written: {exc}")
    png = out_dir / "validate_dw.png"
    try:
        _write_png(png, cpu.mesh, diff["w"], cpu.state.t)
        result.files["png"] = png
    except ImportError as exc:
        result.notes.append(f"PNG of |dw| not written: {exc}")
    except OSError as exc:
        raise OutputError(f"{png}: cannot write the plot ({exc})") from None
    result.wall_time = time.perf_counter() - wall0
    txt, js = out_dir / "validate_report.txt", out_dir / "validate_report.json"
    result.files["text"], result.files["json"] = txt, js
    try:
        txt.write_text(result.text(), encoding="utf-8")
        js.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write the report ({exc})") from None
    return result
