"""The Simulation: build once (mesh → sparsity → operators), then step through the one time loop.

:meth:`Simulation.run` is :func:`dycore.timestepping.loop.run_loop`; output is a scheduled
callback (:mod:`dycore.timestepping.callbacks`). :func:`run_from_config` (``dycore run``) keeps
the restart bookkeeping and opens the writer; its callbacks write a snapshot every
``output.output_interval`` seconds (and at t=0 and the final time), diagnostics every
``output.diagnostics_every_steps`` steps (written with the next snapshot) and checkpoints, each
flushed to disk as it is written so a killed run keeps every finished record.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dycore import __version__
from dycore.assembly.operators import mesh_operator_arrays, mesh_operators_from_arrays
from dycore.assembly.sparsity import Sparsity, build_sparsity
from dycore.backend import select_backend
from dycore.diagnostics.norms import step_diagnostics
from dycore.backend.timers import StageTimers
from dycore.io.safety import guard_run, lock_taken_over
from dycore.mesh.mesh import Mesh
from dycore.physics.coefficients import build_coefficients
from dycore.physics.state import OUTPUT_FIELDS, State, TRACERS
from dycore.timestepping.continuity import RESTART_FREE_KEYS, _result_keys
from dycore.timestepping.picard import PicardStepper

__all__ = ["Simulation", "RunSummary", "run_from_config", "build_simulation",
           "no_normal_flow_setting", "config_mesh", "setup_cache_of"]

log = logging.getLogger("dycore")


@dataclass
class RunSummary:
    """What a finished run reports."""

    output_path: Path
    steps: int
    t: float
    wall_time: float
    timers_table: str
    last_diagnostics: dict
    backend: str
    split: dict | None = None          # RunSplit.as_dict: set-up, steps, output, total [s]
    split_text: str = ""               # the same as one line


def config_mesh(config, case, params, folder, clock):
    """(the configuration's mesh, whether it came from the set-up cache — None when the
    cache is not asked: off, or a mesh read from ``mesh.file``).

    Parameters: config (Config), case (module), params (its Parameters), folder (the set-up
    cache folder or None), clock (StageTimers: a row ``mesh generation``).

    A generated mesh is a pure function of the case, its parameters and the ``mesh``
    section (and of the code: the key covers ``dycore/mesh`` and ``cases/``), so it is
    cached under a key of those alone (:func:`dycore.io.setup_cache.mesh_cache`); a file
    is read each time (it may change under the same name)."""
    from dycore import cases
    from dycore.io.setup_cache import mesh_cache

    def build():
        with clock("mesh generation"):
            return cases.build_config_mesh(config, case, params)
    if folder is None or config.mesh.file is not None:
        return build(), None
    cache = mesh_cache(folder, config, params)

    def arrays_of(mesh):
        return {f.name: getattr(mesh, f.name) for f in dataclasses.fields(mesh)}
    arrays = cache.get("mesh", lambda: arrays_of(build()), clock, "mesh")
    return Mesh(**arrays), bool(cache.hits)


def setup_cache_of(config, params, mesh, backend, folder):
    """The SetupCache (:mod:`dycore.io.setup_cache`) of ``mesh`` and the configuration's
    settings that reach the mesh-only set-up, on ``backend``, in ``folder`` (None: off)."""
    from dycore.io.setup_cache import SetupCache

    cfg, m = config, mesh
    data = cfg.model_dump(mode="json")
    # what reaches the mesh-only set-up besides the mesh itself (hashed bit for bit)
    settings = {"case": data["case"]["name"],
                "stabilisation": data["physics"]["stabilisation"],
                "no_normal_flow": data["physics"]["no_normal_flow"],
                "pressure_preconditioner": data["solvers"]["pressure"]["preconditioner"],
                "backend": type(backend).__name__,
                "assembly": getattr(backend, "assembly", None),
                "strict": bool(getattr(backend, "strict", False)),
                "device": getattr(backend, "_device_name", lambda: "host")()}
    settings["case_parameters"] = (params.model_dump(mode="json")
                                   if hasattr(params, "model_dump")
                                   else repr(params))
    return SetupCache(folder, (m.coords, m.tets, m.faces, m.face_tags), settings)


def no_normal_flow_setting(config, case, params):
    """(face tags with the strong no-normal-flow condition — () when weak —, exact surface
    normals per tag: the case's ``ground_normals`` of its terrain, if it has one), the last two
    arguments of :func:`~dycore.assembly.operators.mesh_operator_arrays`.

    Parameters
    ----------
    config : Config; case : the case module; params : its Parameters
    """
    if config.physics.no_normal_flow == "weak":
        return (), None
    tags = tuple(getattr(case, "NO_NORMAL_FLOW_TAGS", ()))
    exact = getattr(case, "ground_normals", None)
    if exact is None:
        return tags, None
    from dycore.mesh import FaceTag
    return tags, {FaceTag.GROUND: lambda c: exact(params, c)}


class Simulation:
    """Everything a run needs, built once from a Config.

    Parameters
    ----------
    config : Config
    backend : a backend to use instead of the configured one
    setup_cache : True / None (default: on unless ``DYCORE_CACHE_DIR=off``), False (off), or a
        folder: where the mesh-only set-up (sparsity, operators, AMG hierarchy) is loaded from
        and stored (:mod:`dycore.io.setup_cache`)

    Attributes: config, case, params, mesh, backend, timers, setup_cache, sparsity, assembler,
    ops, coeffs, systems, stepper, state, last_diagnostics (of the last step; {} before one).
    """

    def __init__(self, config, backend=None, setup_cache=None):
        from dycore import cases

        self.config = config
        self.case = cases.load_case(config.case.name)
        self.params = config.case.build_parameters()
        host_clock = StageTimers()               # the backend (and its clock) comes next
        folder = self._cache_folder(setup_cache)
        self.mesh, mesh_hit = self._mesh(folder, host_clock)
        self.backend = backend if backend is not None else select_backend(config.backend)
        self.timers = StageTimers(self.backend.marker)
        for stage, row in host_clock.as_dict().items():
            self.timers.add(stage, row["total_ms"])
        self.setup_cache = self._setup_cache(folder)
        if mesh_hit is not None:
            (self.setup_cache.hits if mesh_hit else self.setup_cache.misses).append("mesh")

        def sparsity():
            with self.timers("sparsity and lookup tables"):
                return build_sparsity(self.mesh.tets, self.mesh.nnodes).as_arrays()
        self.sparsity = Sparsity.from_arrays(self.setup_cache.get("sparsity", sparsity,
                                                                  self.timers))
        self.assembler = self.backend.assembler(self.mesh, self.sparsity, self.timers)

        def operators():
            return mesh_operator_arrays(self.mesh, self.backend, self.assembler, self.sparsity,
                                        self.case.DIRICHLET_TAGS, config.physics.stabilisation,
                                        self.timers, *self._no_normal_flow())
        self.ops = mesh_operators_from_arrays(
            self.setup_cache.get("operators", operators, self.timers, "mesh operators"),
            self.backend, self.sparsity)
        self.coeffs = build_coefficients(self.case, self.params, self.mesh, config.physics,
                                         self.backend)
        self.systems = self._systems()
        self.stepper = PicardStepper(self.backend, self.assembler, self.ops, self.systems,
                                     self.coeffs, config.time, self.timers)
        self.state = State.from_fields(self.case.initial_state(self.params, self.mesh.coords),
                                       self.backend.to_device)
        self.last_diagnostics = {}        # of the last step taken

    @staticmethod
    def _cache_folder(choice):
        """The set-up cache folder of ``setup_cache`` (see :class:`Simulation`), or None."""
        from dycore.io.setup_cache import cache_directory

        if choice is None or choice is True:
            return cache_directory()
        return None if choice is False else choice

    def _mesh(self, folder, clock):
        """:func:`config_mesh` of this run."""
        return config_mesh(self.config, self.case, self.params, folder, clock)

    def _setup_cache(self, folder):
        """:func:`setup_cache_of` this run's mesh and configuration in ``folder``."""
        return setup_cache_of(self.config, self.params, self.mesh, self.backend, folder)

    def _no_normal_flow(self):
        """:func:`no_normal_flow_setting` of this run."""
        return no_normal_flow_setting(self.config, self.case, self.params)

    def _systems(self):
        """The linear systems: chosen here, by the simulation, from the backend's solver mode
        (our device kernels for ``device``, SciPy/PyAMG on the host otherwise) and, on the
        device, ``backend.reduction`` (``exact``: the GPU ranks' solvers over one rank,
        :mod:`dycore.parallel.one_gpu`, through :func:`dycore.exact_device_systems`; else the
        serial device solvers)."""
        if getattr(self.backend, "solver_mode", "host") == "device":
            if self.config.backend.reduction == "exact":    # the GPU ranks' solvers, one rank
                import dycore          # (the package root hands over dycore.parallel's builder)
                return dycore.exact_device_systems(
                    self.backend, self.mesh, self.sparsity, self.ops, self.config.solvers,
                    self.coeffs.f_cor != 0.0, self.setup_cache)
            from dycore.solvers.device import DeviceSystems
            return DeviceSystems(self.backend, self.sparsity, self.ops, self.config.solvers,
                                 self.timers, setup_cache=self.setup_cache,
                                 coriolis=self.coeffs.f_cor != 0.0)
        from dycore.solvers.systems import HostSystems
        return HostSystems(self.backend, self.sparsity, self.ops, self.config.solvers,
                           self.timers)

    def horizontal_spacing(self) -> float:
        """The smallest horizontal element extent [m] (:meth:`dycore.mesh.Mesh.
        min_horizontal_extent`: the Courant number's dx), from the set-up cache when it holds
        it (a gather over every element: 0.6 s on the 2.65 M-tet verify mesh, H200 host)."""
        def build():
            return {"dx": np.float64(self.mesh.min_horizontal_extent())}
        return float(self.setup_cache.get("courant-spacing", build, self.timers,
                                          "Courant spacing")["dx"])

    def step(self) -> dict:
        """One time step; returns its diagnostics."""
        with self.timers("step (total)"):
            info = self.stepper.step(self.state)   # ends with a device→host read of its scalars
        diag = self.last_diagnostics = step_diagnostics(info)
        log.debug("step to t = %g s: %d Picard iteration(s), solver iterations %s",
                  self.state.t, diag["picard_iterations"], info.iterations)
        return diag

    def run(self, until: float | None = None, *, steps: int | None = None,
            callbacks=(), stability: bool = True) -> int:
        """Step the state: the one time loop (:func:`dycore.timestepping.loop.run_loop`), with
        output, progress and anything else as callbacks (:mod:`dycore.timestepping.callbacks`).

        Parameters
        ----------
        until : model time [s] to reach: ``ceil((until - state.t) / time.dt)`` steps (none when
            ``until <= state.t``). Default, with ``steps`` also None: ``time.t_end``.
        steps : number of steps instead of ``until`` (give one of the two)
        callbacks : :class:`~dycore.timestepping.callbacks.Callback` objects with their
            schedules (``Snapshots(NetCDFWriter(path), TimeInterval(300))``, ``Progress()``,
            ...), or callables ``fn(sim, diag)`` called after every step with this Simulation
            and a copy of the step's diagnostics (``max_abs_w`` [m/s], ... as in the output
            file, plus ``step``, the step number since t = 0, and ``t`` [s]); one returning
            True stops the run after that step.
        stability : check every step (a :class:`~dycore.timestepping.callbacks.StabilityCheck`
            ahead of the callbacks, unless they hold one); False: no check

        Returns
        -------
        int : the steps taken.

        Raises
        ------
        ValueError for both or negative ``until``/``steps``; InstabilityError when a step's
        diagnostics are non-finite or max|w| exceeds ``stability.max_speed_factor`` x the inflow
        speed (as ``dycore run``); the stepper's own errors (SolverDivergedError, ...); a
        callback's errors (OutputError of a writer, ...).
        """
        import math

        from dycore.timestepping.callbacks import StabilityCheck
        from dycore.timestepping.loop import run_loop

        dt = self.config.time.dt
        if until is not None and steps is not None:
            raise ValueError("Simulation.run: give until= or steps=, not both")
        if steps is None:
            target = self.config.time.t_end if until is None else float(until)
            steps = max(0, math.ceil((target - self.state.t) / dt - 1e-9))
        elif steps < 0:
            raise ValueError(f"Simulation.run: steps must be >= 0 (got {steps})")
        callbacks = list(callbacks)
        if stability and not any(isinstance(cb, StabilityCheck) for cb in callbacks):
            callbacks.insert(0, StabilityCheck())
        return run_loop(self, int(steps), callbacks)

    def output_fields(self) -> dict:
        """Host copies of the output fields that a writer (thread) may keep:
        ``{name: (nnodes,) float64}`` for every name of ``OUTPUT_FIELDS``."""
        return _owned(self.host_fields())

    @staticmethod
    def agree(value):
        """The value every rank acts on: itself (one process; see the distributed run)."""
        return value

    def to_xarray(self):
        """The current state as an ``xarray.Dataset``: the output fields on the ``nodes``
        dimension (float64, units as in the output file), node coordinates ``x``, ``y``, ``z``
        [m], the connectivity ``cell_nodes`` (cells, 4) and the model time in ``attrs["t"]``
        [s].

        Raises
        ------
        ImportError when xarray is not installed.
        """
        import xarray as xr

        fields = self.host_fields()
        xyz = np.asarray(self.mesh.coords, dtype=float)
        data = {name: ("nodes", np.array(fields[name], dtype=float, copy=True))
                for name in OUTPUT_FIELDS}
        data["cell_nodes"] = (("cells", "four"), np.asarray(self.mesh.tets))
        return xr.Dataset(data, coords={"x": ("nodes", xyz[:, 0].copy()),
                                        "y": ("nodes", xyz[:, 1].copy()),
                                        "z": ("nodes", xyz[:, 2].copy())},
                          attrs={"t": float(self.state.t), "case": self.config.case.name})

    def host_fields(self) -> dict:
        return self.state.host_fields(self.backend.to_host)

    def load_state(self, fields: dict, t: float) -> None:
        """Set the state to host ``fields`` (names of ``OUTPUT_FIELDS``, (nnodes,) each) at
        model time ``t``, writing into the state's own arrays (never rebinding them: CUDA graphs
        captured by the stepper read them where they are)."""
        n = self.mesh.nnodes
        values = {name: np.asarray(fields[name], dtype=float) for name in OUTPUT_FIELDS}
        bad = [name for name, v in values.items() if v.shape != (n,)]
        if bad:
            raise ValueError(f"load_state: field(s) {', '.join(bad)} do not have shape ({n},)")
        dev, copy = self.backend.to_device, self.backend.ops.copy
        copy(self.state.u, dev(np.column_stack([values["u"], values["v"], values["w"]])))
        copy(self.state.p, dev(values["p"]))
        copy(self.state.theta_prime, dev(values["theta_prime"]))
        for name in TRACERS:
            copy(self.state.q[name], dev(values[name]))
        self.backend.synchronize()
        self.state.t = float(t)
        self.stepper.state_changed()          # which tracers are zero: decided anew


def build_simulation(config, backend=None) -> Simulation:
    """Build a :class:`Simulation` (mesh, backend, operators, initial state) from a Config."""
    return Simulation(config, backend)


def _portable_keys(keys: dict) -> dict:
    """``keys`` with every absolute path in a text value written as the output file's
    ``config`` attribute stores it (:func:`dycore.io.netcdf.portable_text`: relative to the
    working directory below it, else the file name), so ``mesh.file: /data/m.msh`` matches the
    file's ``m.msh`` (the mesh itself is compared bit for bit by :func:`check_restart_mesh`)."""
    from dycore.io.netcdf import portable_text

    return {key: portable_text(value) if isinstance(value, str) else value
            for key, value in keys.items()}


def check_restart_config(config, point) -> None:
    """Refuse a restart whose configuration differs from the file's ``config`` attribute in any
    key that changes the result (all but :data:`RESTART_FREE_KEYS`); ConfigError names them."""
    import yaml

    from dycore.config import Config
    from dycore.errors import ConfigError

    try:
        stored = Config.model_validate(yaml.safe_load(point.config_yaml) or {})
    except (yaml.YAMLError, ValueError, TypeError, ConfigError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{point.path}: cannot restart: its config attribute is not a "
                          f"configuration this dycore version reads ({first})") from None
    ours, theirs = _portable_keys(_result_keys(config)), _portable_keys(_result_keys(stored))
    differ = [key for key in sorted(set(ours) | set(theirs)) if ours.get(key) != theirs.get(key)]
    if differ:
        source = config.source_path if config.source_path is not None else "the run"
        items = "; ".join(f"{key} (file: {theirs.get(key)!r}, {source}: {ours.get(key)!r})"
                          for key in differ)
        raise ConfigError(f"{point.path}: cannot restart: the configuration differs from the "
                          f"file's (its config attribute) in {items}; only "
                          f"{' and '.join(RESTART_FREE_KEYS)} may differ")


def check_restart_mesh(mesh, point) -> None:
    """Refuse a restart whose mesh differs from the file's (node and cell counts, then the
    coordinates and the connectivity bit for bit); ConfigError says how."""
    import hashlib

    from dycore.errors import ConfigError

    def digest(a) -> str:
        return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:12]

    coords = np.asarray(mesh.coords, dtype=float)
    tets = np.asarray(mesh.tets, dtype=point.cell_nodes.dtype)
    problem = None
    if coords.shape != point.coords.shape or tets.shape != point.cell_nodes.shape:
        problem = (f"it has {coords.shape[0]} nodes and {tets.shape[0]} tetrahedra, the file "
                   f"{point.coords.shape[0]} nodes and {point.cell_nodes.shape[0]} tetrahedra")
    elif not np.array_equal(coords, point.coords):
        problem = (f"node coordinates differ (sha256 {digest(coords)} vs the file's "
                   f"{digest(point.coords)}; max |difference| = "
                   f"{np.abs(coords - point.coords).max():g} m)")
    elif not np.array_equal(tets, point.cell_nodes):
        problem = (f"connectivity differs (sha256 {digest(tets)} vs the file's "
                   f"{digest(point.cell_nodes)})")
    if problem:
        raise ConfigError(f"{point.path}: cannot restart: the mesh built from the configuration "
                          f"differs from the file's: {problem}")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve() or Path(a).samefile(b)
    except OSError:
        return False


def _owned(fields: dict) -> dict:
    """Host copies the writer thread may keep: on the CPU backend ``host_fields`` returns
    views of the state, which the next step overwrites in place."""
    return {name: np.array(values, copy=True) for name, values in fields.items()}


@guard_run       # outputs that are inputs refused; the output locked for the whole run
def run_from_config(config, *, max_steps: int | None = None, progress: bool | None = None,
                    writer_factory=None, overwrite: bool = False,
                    restart: str | Path | None = None,
                    restart_at: float | None = None) -> RunSummary:
    """Run the configured case to ``time.t_end`` (or ``max_steps`` steps) with output.

    Every ``output.checkpoint_interval`` the state replaces the checkpoint
    (:func:`dycore.io.restart.write_checkpoint`, atomically). Before anything is built: backend
    settings, a memory estimate of the mesh and the output path are checked
    (:func:`dycore.preflight.check_before_build`). Before the first step: a
    warning when the advective Courant number exceeds 1. After every step: the stability watch
    (``stability.max_speed_factor``); a run that fails it stops with InstabilityError, and the
    output file keeps every snapshot before the failing one and the failing step's diagnostics.

    Parameters
    ----------
    config : Config; max_steps : int or None
    progress : show progress: a tqdm bar on a terminal, log lines otherwise
        (:class:`~dycore.timestepping.progress.Progress`; default: ``output.progress``)
    overwrite : replace an existing output file (else OutputError); with ``restart`` into the
        same file: allow discarding the file's snapshots after the restart time
    restart : output file of an earlier (or killed) run, or its checkpoint, to continue from;
        its snapshot at ``restart_at`` (nearest stored time within time.dt / 2), else its last
        complete one (:func:`dycore.io.restart.find_restart`: the checkpoint when it is later or
        the file cannot be read). A checkpoint continues its own output file.
        The configuration must match the file's ``config`` attribute in every key but
        :data:`RESTART_FREE_KEYS`, the mesh must match the file's. When ``config.output_path``
        is ``restart`` the run appends to it (later records are blanked and written over), else
        it writes a new file that starts with the restart snapshot. ``max_steps`` then counts
        the steps after the restart; the step numbers continue the file's.

    Raises
    ------
    DycoreError subclasses (ConfigError, MeshError, SolverDivergedError, OutputError,
    InstabilityError, ...); OutputError also when another process holds the output's lock or
    an output is one of the run's inputs (:func:`dycore.io.safety.guard_run`).
    """
    from dycore.io.background import BackgroundWriter
    from dycore.io.netcdf import SnapshotWriter
    from dycore.io.followers import attach_followers
    from dycore.timestepping.callbacks import (Checkpoints, Diagnostics, Progress,
                                               Snapshots, StabilityCheck)
    from dycore.timestepping.loop import run_loop
    from dycore.timestepping.run_split import RunSplit
    from dycore.timestepping.schedules import AtEnd, IterationInterval, snapshot_every
    from dycore.preflight import (check_before_build, courant_number, inflow_speed,
                                  notice_backend_fallback)

    from dycore.errors import ConfigError, OutputError
    from dycore.io.restart import (checkpoint_path, find_restart, rewrite_output,
                                   snapshots_upto)

    wall0 = time.perf_counter()
    path = Path(config.output_path)
    point, append = None, False
    if restart is not None:
        point = find_restart(restart, restart_at, dt=config.time.dt)
        check_restart_config(config, point)
        keep, later = point.index + 1, point.later
        append = _same_file(path, point.checkpoint_of or point.path)
        if point.checkpoint_of is not None and _same_file(path, point.path):
            raise ConfigError(f"{path}: output.path (--output) is a checkpoint; the run's output "
                              f"is {point.checkpoint_of} (pass --output "
                              f"{point.checkpoint_of}, or another new file)")
        if point.step >= config.time.n_steps:
            raise ConfigError(f"--restart {point.path}: its snapshot at t = {point.t:g} s (step "
                              f"{point.step}) is at or after time.t_end = "
                              f"{config.time.t_end:g} s; pass a later --t-end")
        if append and point.checkpoint_of is not None:   # continue the checkpoint's output
            if not path.exists():
                append = False
            else:
                try:
                    keep, later = snapshots_upto(path, point.step, dt=config.time.dt)
                except OutputError as exc:
                    if not overwrite:
                        raise OutputError(
                            f"{exc}; pass --overwrite to start {path} anew from the checkpoint "
                            f"{point.path} (t = {point.t:g} s; the snapshots before it are "
                            "lost), or write a new file with --output") from None
                    append = False
            if append:          # the file's own configuration and time continuity
                from dycore.timestepping.continuity import check_append_target
                append = check_append_target(config, path, point, overwrite=overwrite)
        if append and later and not overwrite:
            raise OutputError(f"{path}: restarting from t = {point.t:g} s would discard the "
                              f"file's {later} later snapshot(s); pass --overwrite to "
                              "discard them, or start a new file with --output")
    check_before_build(config, path, overwrite=overwrite or append)
    if point is None and overwrite:     # a new run: an earlier run's checkpoint is stale
        checkpoint_path(path).unlink(missing_ok=True)
    sim = build_simulation(config)
    k0 = 0
    if point is not None:
        check_restart_mesh(sim.mesh, point)
        sim.load_state(point.fields, point.t)           # in place, before the first step
        k0 = point.step
        log.info("restart from %s at t = %g s (step %d); %s", point.path, point.t, k0,
                 f"appending to {path}" if append else f"writing {path}")
    log.info("backend: %s", sim.backend.describe())
    notice_backend_fallback(config, sim.backend)
    tc, oc = config.time, config.output
    u_ref = inflow_speed(sim.params)
    courant = courant_number(u_ref, tc.dt, spacing=sim.horizontal_spacing())
    if courant > 1.0:
        log.warning("warning: advective Courant number u0 * time.dt / dx = %.3g m/s * %g s / "
                    "%.4g m = %.2f > 1; the run may become unstable (reduce time.dt)",
                    u_ref, tc.dt, u_ref * tc.dt / courant, courant)
    n_steps = tc.n_steps
    if max_steps is not None:
        n_steps = min(n_steps, k0 + max_steps)
    every = snapshot_every(oc.output_interval, tc.dt)
    show = oc.progress if progress is None else progress

    if append:
        kept = dict(keep_snapshots=keep, keep_steps_upto=k0,
                    config_yaml=config.resolved_yaml(), version=__version__)
        dead = lock_taken_over(path)       # its writer was killed: HDF5 may have left metadata
        if dead is not None:               # that reads but does not extend; copy, then append
            log.warning("warning: %s was left by a run that did not end (pid %s); rewriting "
                        "its first %d snapshot(s) into a fresh file to continue it", path,
                        dead.get("pid"), keep)
            rewrite_output(path, keep_snapshots=keep, keep_steps_upto=k0)
        try:
            writer = SnapshotWriter.append(path, **kept)
        except OutputError as exc:         # readable, not writable in place: copy, then append
            log.warning("warning: %s; rewriting its first %d snapshot(s) into a fresh file to "
                        "continue it", exc, keep)
            rewrite_output(path, keep_snapshots=keep, keep_steps_upto=k0)
            writer = SnapshotWriter.append(path, **kept)
    else:
        writer = SnapshotWriter(path, sim.mesh, config_yaml=config.resolved_yaml(),
                                version=__version__, title=f"dycore {config.case.name}",
                                picard_iterations=tc.nonlinear_iterations)
    writer = attach_followers(writer, config, sim.mesh, kept=writer._n_time if append else 0)
    split = RunSplit(wall0)
    split.setup_done()
    # every write runs on the writer thread, in order (dycore.io.background); the per-step
    # diagnostics wait in memory and go out with the snapshot (or checkpoint) that follows them
    out = BackgroundWriter()
    snapshots = Snapshots(writer, IterationInterval(every) | AtEnd(), initial=not append,
                          submit=out.submit)

    def unstable(step, problem: str) -> str:
        hint = "try a smaller time.dt; " if courant > 1.0 else ""
        return (f"unstable run at step {step.k} (t = {step.t:g} s): {problem}; stopped. {path} "
                f"keeps the snapshots up to t = {snapshots.last_t:g} s ({hint}Courant number "
                f"{courant:.2g})")

    callbacks = [StabilityCheck(describe=unstable),
                 Diagnostics(writer, IterationInterval(oc.diagnostics_every_steps) | AtEnd(),
                             submit=out.submit),
                 snapshots]
    if config.checkpoint_steps > 0:     # after the snapshot: the output holds every step before
        callbacks.append(Checkpoints(checkpoint_path(path),
                                     IterationInterval(config.checkpoint_steps), output=path,
                                     submit=out.submit))
    callbacks.append(Progress(show))    # a bar on a terminal (or in Jupyter), else log lines
    with writer, out:
        run_loop(sim, n_steps - k0, callbacks, k0=k0, split=split)
        with split.output():
            out.drain()
        sim.timers.add("output (writer thread, overlapped)", 1e3 * out.busy_s)
        split.add_to(sim.timers)
        table = sim.timers.table(f"stage timers ({sim.backend.describe()}, {sim.mesh.nele} "
                                 f"tetrahedra, {sim.mesh.nnodes} nodes, {n_steps - k0} steps)")
        out.submit(writer.write_timers, sim.timers.as_dict(), table)
    if append:        # ended before the records its restart blanked: no NaN records left
        from dycore.io.restart import drop_blank_records
        drop_blank_records(path)
    return RunSummary(output_path=path, steps=n_steps - k0, t=sim.state.t,
                      wall_time=time.perf_counter() - wall0, timers_table=table,
                      last_diagnostics=sim.last_diagnostics, backend=sim.backend.describe(),
                      split=split.as_dict(n_steps - k0), split_text=split.summary(n_steps - k0))
