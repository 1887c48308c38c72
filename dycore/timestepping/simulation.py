"""The Simulation owns the loop: build once (mesh → sparsity → operators), step, diagnose, write.

Output is a scheduled callback: a snapshot every ``output.output_interval`` seconds (and at t=0 and
the final time), diagnostics every ``output.diagnostics_every`` steps, each flushed to disk as it
is written so a killed run keeps every finished record.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dycore import __version__
from dycore.assembly.operators import build_mesh_operators
from dycore.assembly.sparsity import build_sparsity
from dycore.backend import select_backend
from dycore.diagnostics.norms import step_diagnostics
from dycore.diagnostics.timers import StageTimers
from dycore.physics.coefficients import build_coefficients
from dycore.physics.state import State, TRACERS
from dycore.timestepping.picard import PicardStepper

__all__ = ["Simulation", "RunSummary", "run_from_config", "build_simulation"]

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


class Simulation:
    """Everything a run needs, built once from a Config.

    Attributes: config, case, params, mesh, backend, timers, sparsity, assembler, ops,
    coeffs, systems, stepper, state.
    """

    def __init__(self, config, backend=None):
        import cases

        self.config = config
        self.timers = StageTimers()
        self.case = cases.load_case(config.case.name)
        self.params = config.case.build_parameters()
        with self.timers("mesh generation"):
            self.mesh = cases.build_config_mesh(config, self.case, self.params)
        self.backend = backend if backend is not None else select_backend(config.backend)
        self.timers = StageTimers(self.backend.marker)
        with self.timers("sparsity and lookup tables"):
            self.sparsity = build_sparsity(self.mesh.tets, self.mesh.nnodes)
        self.assembler = self.backend.assembler(self.mesh, self.sparsity, self.timers)
        self.ops = build_mesh_operators(self.mesh, self.backend, self.assembler, self.sparsity,
                                        self.case.DIRICHLET_TAGS, config.physics.stabilisation,
                                        self.timers)
        self.coeffs = build_coefficients(self.case, self.params, self.mesh, config.physics,
                                         self.backend)
        self.systems = self._systems()
        self.stepper = PicardStepper(self.backend, self.assembler, self.ops, self.systems,
                                     self.coeffs, config.time, self.timers)
        init = self.case.initial_state(self.params, self.mesh.coords)
        dev = self.backend.to_device
        self.state = State(u=dev(np.asarray(init["u"], float)), p=dev(np.asarray(init["p"], float)),
                           theta_prime=dev(np.asarray(init["theta_prime"], float)),
                           q={k: dev(np.asarray(init[k], float)) for k in TRACERS})

    def _systems(self):
        if getattr(self.backend, "solver_mode", "host") == "device":
            return self.backend.device_systems(self.sparsity, self.ops, self.config.solvers,
                                               self.timers)
        from dycore.solvers.systems import HostSystems
        return HostSystems(self.backend, self.sparsity, self.ops, self.config.solvers,
                           self.timers)

    def step(self) -> dict:
        """One time step; returns its diagnostics."""
        with self.timers("step (total)"):
            info = self.stepper.step(self.state)   # ends with a device→host read of its scalars
        return step_diagnostics(info)

    def host_fields(self) -> dict:
        return self.state.host_fields(self.backend.to_host)


def build_simulation(config, backend=None) -> Simulation:
    """Build a :class:`Simulation` (mesh, backend, operators, initial state) from a Config."""
    return Simulation(config, backend)


def run_from_config(config, *, max_steps: int | None = None, progress: bool | None = None,
                    writer_factory=None, overwrite: bool = False) -> RunSummary:
    """Run the configured case to ``time.t_end`` (or ``max_steps`` steps) with output.

    Before anything is built: backend settings, a memory estimate of the mesh and the output
    path are checked (:func:`dycore.preflight.check_before_build`). Before the first step: a
    warning when the advective Courant number exceeds 1. After every step: the stability watch
    (``stability.max_speed_factor``); a run that fails it stops with InstabilityError, and the
    output file keeps every snapshot before the failing one and the failing step's diagnostics.

    Parameters
    ----------
    config : Config; max_steps : int or None; progress : show a tqdm bar (default: config)
    overwrite : replace an existing output file (else OutputError)

    Raises
    ------
    DycoreError subclasses (ConfigError, MeshError, SolverDivergedError, OutputError,
    InstabilityError, ...).
    """
    from tqdm import tqdm

    from dycore.errors import InstabilityError
    from dycore.io.netcdf import SnapshotWriter
    from dycore.preflight import (StabilityWatch, check_before_build, courant_number,
                                  inflow_speed, notice_backend_fallback)

    wall0 = time.perf_counter()
    path = Path(config.output_path)
    check_before_build(config, path, overwrite=overwrite)
    sim = build_simulation(config)
    log.info("backend: %s", sim.backend.describe())
    notice_backend_fallback(config, sim.backend)
    tc, oc = config.time, config.output
    u_ref = inflow_speed(sim.params)
    courant = courant_number(u_ref, tc.dt, sim.mesh.coords)
    if courant > 1.0:
        log.warning("warning: advective Courant number u0 * time.dt / dx = %.3g m/s * %g s / "
                    "%.4g m = %.2f > 1; the run may become unstable (reduce time.dt)",
                    u_ref, tc.dt, u_ref * tc.dt / courant, courant)
    watch = StabilityWatch(config.stability.max_speed_factor, u_ref)
    n_steps = tc.n_steps
    if max_steps is not None:
        n_steps = min(n_steps, max_steps)
    every = max(1, int(round(oc.output_interval / tc.dt)))
    show = oc.progress if progress is None else progress
    diag = {}
    last_snapshot = sim.state.t

    def unstable(k: int, problem: str) -> InstabilityError:
        hint = "try a smaller time.dt; " if courant > 1.0 else ""
        return InstabilityError(
            f"unstable run at step {k} (t = {sim.state.t:g} s): {problem}; stopped. {path} "
            f"keeps the snapshots up to t = {last_snapshot:g} s ({hint}Courant number "
            f"{courant:.2g})")

    with SnapshotWriter(path, sim.mesh, config_yaml=config.resolved_yaml(), version=__version__,
                        title=f"dycore {config.case.name}") as writer:
        with sim.timers("output"):
            writer.write_snapshot(sim.state.t, sim.host_fields())
        bar = tqdm(total=n_steps, disable=not show, unit="step", desc=config.case.name)
        try:
            for k in range(1, n_steps + 1):
                diag = sim.step()
                problem = watch.step_problem(diag)
                if problem or k % oc.diagnostics_every == 0 or k == n_steps:
                    with sim.timers("output"):
                        writer.write_diagnostics(k, sim.state.t, diag)
                if problem:
                    raise unstable(k, problem)
                if k % every == 0 or k == n_steps:
                    fields = sim.host_fields()
                    problem = watch.fields_problem(fields)
                    if problem:
                        raise unstable(k, problem)
                    with sim.timers("output"):
                        writer.write_snapshot(sim.state.t, fields)
                    last_snapshot = sim.state.t
                bar.set_postfix(t=f"{sim.state.t:.0f}s", w=f"{diag['max_abs_w']:.3f}")
                bar.update(1)
        finally:
            bar.close()
        table = sim.timers.table(f"stage timers ({sim.backend.describe()}, {sim.mesh.nele} "
                                 f"tetrahedra, {sim.mesh.nnodes} nodes, {n_steps} steps)")
        writer.write_timers(sim.timers.as_dict(), table)
    return RunSummary(output_path=path, steps=n_steps, t=sim.state.t,
                      wall_time=time.perf_counter() - wall0, timers_table=table,
                      last_diagnostics=diag, backend=sim.backend.describe())
