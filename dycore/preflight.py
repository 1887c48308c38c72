"""Checks a run makes before its expensive part, and the stability watch of its time loop.

Before the mesh is built (:func:`check_before_build`): the output path can be created and does not
silently replace a file, the mesh fits in memory (an estimate), and no backend setting would be
silently ignored. After the mesh is built, before the first step: a warning when the advective
Courant number is above 1 (:func:`courant_number`). After every step: :class:`StabilityWatch`.

Problems are raised as :class:`~dycore.errors.DycoreError` naming the key, flag or file; notices
and warnings are one line each on the ``dycore`` logger (the CLI prints them on stderr).
docs/errors.md lists every case with its message.
"""
from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import numpy as np

from dycore.errors import ConfigError, OutputError
from dycore.io.safety import check_output_path   # re-exported: one of the checks before a run

__all__ = ["check_before_build", "check_output_path", "check_checkpoint_path", "check_memory",
           "check_backend_settings", "notice_threads",
           "notice_backend_fallback", "estimate_run_memory", "available_memory",
           "inflow_speed", "courant_number", "StabilityWatch",
           "BYTES_PER_TETRAHEDRON", "BASE_BYTES"]

log = logging.getLogger("dycore")

#: peak resident memory of a CPU run (host solvers, AMG hierarchy) per tetrahedron [bytes], and
#: its fixed part: measured with ``ru_maxrss`` after two steps of 3,600 to 288,000 tetrahedra
#: (3.1-3.2 KiB per tetrahedron above ~250 MB), rounded up
BYTES_PER_TETRAHEDRON = 3_500
BASE_BYTES = 300_000_000


def _where(config) -> str:
    """``"<file>: "`` for a configuration loaded from a file, else ``""``."""
    return f"{config.source_path}: " if config.source_path is not None else ""


def _yaml(value) -> str:
    """A setting as the YAML file writes it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _size(nbytes: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes / 1e6:.2f} MB"


# --------------------------------------------------------------------------------- memory
def estimate_run_memory(n_tetrahedra: int) -> int:
    """Rough peak memory of a run [bytes]: :data:`BASE_BYTES` + :data:`BYTES_PER_TETRAHEDRON`
    per tetrahedron (mesh, sparsity and lookup tables, matrices, AMG hierarchy, fields)."""
    return BASE_BYTES + BYTES_PER_TETRAHEDRON * int(n_tetrahedra)


def available_memory() -> int | None:
    """Memory available to a new run [bytes], or None when it cannot be found.

    psutil's ``available`` when psutil is installed, else ``MemAvailable`` of /proc/meminfo
    (free + reclaimable cache), else ``os.sysconf`` free pages.
    """
    try:
        import psutil
        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(config, available: int | None = None) -> None:
    """Refuse a mesh whose estimated memory exceeds the memory available on this machine.

    Parameters
    ----------
    config : Config
    available : bytes available (default: :func:`available_memory`); None skips the check

    Raises
    ------
    ConfigError naming ``mesh.nx``, ``mesh.ny``, ``mesh.nz``, with the estimate and its basis.
    No estimate with ``mesh.file`` (its size is known only once it is read).
    """
    available = available_memory() if available is None else available
    m = config.mesh
    if getattr(m, "file", None) is not None:
        return
    n_tets = (20 if m.split == "symmetric_y" else 6) * m.nx * m.ny * m.nz
    need = estimate_run_memory(n_tets)
    if available is not None and need > available:
        raise ConfigError(
            f"{_where(config)}mesh.nx, mesh.ny, mesh.nz = {m.nx} x {m.ny} x {m.nz}: "
            f"{n_tets:,} tetrahedra need about {_size(need)} of memory (estimate: "
            f"{_size(BASE_BYTES)} + {BYTES_PER_TETRAHEDRON:,} bytes per tetrahedron), but "
            f"{_size(available)} is available on this machine; use fewer cells")


# -------------------------------------------------------------------------------- backend
def check_backend_settings(config) -> None:
    """Refuse or announce backend settings that ``backend.name`` would silently ignore.

    ``solver_mode: device`` with ``name: cpu`` is an error (the user asked for GPU solvers);
    ``assembly`` / ``strict`` set to a value other than their default with ``name: cpu``
    (a shipped file that spells out ``assembly: atomic`` gets none) and ``threads`` above the
    cores numba can use are one-line notices (``dycore validate`` does use assembly and strict for its
    GPU side, so a shared file may carry them).

    Raises
    ------
    ConfigError for ``backend.solver_mode: device`` with ``backend.name: cpu``.
    """
    b = config.backend
    if b.name == "cpu" and b.solver_mode == "device":
        raise ConfigError(
            f"{_where(config)}backend.solver_mode: 'device' (solvers on the GPU) needs "
            f"backend.name 'gpu' or 'auto', but backend.name is 'cpu'; use --backend gpu, or "
            f"solver_mode 'host' (--solver-mode host) (got 'device')")
    if b.name == "cpu":                # a spelled-out default changes nothing: no notice
        ignored = [f"backend.{key} = {_yaml(getattr(b, key))}" for key in ("assembly", "strict")
                   if key in b.model_fields_set
                   and getattr(b, key) != type(b).model_fields[key].default]
        if ignored:
            log.warning("notice: %s: GPU setting(s), ignored with backend.name = cpu (the CPU "
                        "path is always deterministic)", ", ".join(ignored))
    notice_threads(config)


def notice_threads(config) -> None:
    """One notice when ``backend.threads`` exceeds the threads numba can use on this machine
    (the CPU backend then uses all of them): ``dycore run`` and ``dycore validate``."""
    import numba

    b = config.backend
    cores = numba.config.NUMBA_NUM_THREADS
    if b.threads > cores:
        log.warning("notice: backend.threads = %d is more than the %d threads numba can use on "
                    "this machine; using %d", b.threads, cores, cores)


def notice_backend_fallback(config, backend) -> None:
    """One notice when ``backend.name: auto`` fell back to the CPU with GPU-only settings."""
    b = config.backend
    if b.name != "auto" or getattr(backend, "name", None) != "cpu":
        return
    ignored = [f"backend.{key} = {_yaml(getattr(b, key))}"
               for key in ("solver_mode", "assembly", "strict") if key in b.model_fields_set]
    if ignored:
        log.warning("notice: backend auto chose the CPU; %s ignored", ", ".join(ignored))


def check_checkpoint_path(config, path: Path, *, overwrite: bool) -> None:
    """Refuse a run that would silently replace the checkpoint of an earlier run.

    Parameters
    ----------
    config : Config (``output.checkpoint_interval``)
    path : the output file; its checkpoint is :func:`dycore.io.restart.checkpoint_path` of it
    overwrite : replacing is allowed (``--overwrite``, or a restart continuing ``path``)

    Raises
    ------
    OutputError
        Checkpoints are on, the checkpoint file exists and ``overwrite`` is false.
    """
    from dycore.io.restart import checkpoint_path

    checkpoint = checkpoint_path(path)
    if config.checkpoint_steps and checkpoint.exists() and not overwrite:
        raise OutputError(f"{checkpoint}: checkpoint file exists (of an earlier run writing "
                          f"{path}); pass --overwrite to replace it, or --restart {checkpoint} "
                          "to continue from it")


def check_before_build(config, path: Path, *, overwrite: bool) -> None:
    """Every check that needs no mesh: backend settings, memory estimate, output path and its
    checkpoint.

    Raises
    ------
    ConfigError, OutputError (see the functions called).
    """
    check_backend_settings(config)
    check_memory(config)
    check_output_path(path, overwrite=overwrite)
    check_checkpoint_path(config, path, overwrite=overwrite)


# ------------------------------------------------------------------------------ stability
def inflow_speed(params) -> float:
    """The case's inflow speed ``|u0|`` [m/s], at least 1 m/s (also when the case has no u0)."""
    u0 = getattr(params, "u0", None)
    return max(abs(float(u0)), 1.0) if isinstance(u0, (int, float)) else 1.0


def courant_number(u_ref: float, dt: float, coords: np.ndarray | None = None,
                   tets: np.ndarray | None = None, *, spacing: float | None = None) -> float:
    """Advective Courant number ``u_ref * dt / dx`` with dx the smallest horizontal spacing.

    Parameters
    ----------
    u_ref : inflow speed [m/s]; dt : time step [s]
    coords : (nnodes, 3) node coordinates [m]
    tets : (nele, 4) connectivity, optional. Given: dx is the smallest x or y extent
        (max - min over its 4 nodes) of any element
        (:func:`dycore.mesh.mesh.min_horizontal_extent`), right for any mesh (a file's
        unstructured one too); on the generated mesh, whose every tetrahedron spans its whole
        hexahedral cell, it equals the smallest grid spacing. Not given: dx is the smallest gap
        between the distinct x and y values, the grid lines of a terrain-following mesh
        (meaningless for an unstructured mesh, whose distinct values may lie 1e-13 m apart).
    spacing : dx itself [m] (e.g. the set-up cache's: :meth:`dycore.timestepping.simulation.
        Simulation.horizontal_spacing`); coords and tets are then not read

    Returns 0.0 when no positive spacing exists.
    """
    if spacing is None and tets is not None:
        from dycore.mesh.mesh import min_horizontal_extent
        spacing = min_horizontal_extent(coords, tets)
    if spacing is not None:
        return u_ref * dt / float(spacing) if spacing > 0 else 0.0
    gaps = np.concatenate([np.diff(np.unique(coords[:, axis])) for axis in (0, 1)])
    gaps = gaps[gaps > 0]
    return u_ref * dt / float(gaps.min()) if gaps.size else 0.0


class StabilityWatch:
    """Decides after each step whether the run has left physical bounds.

    Parameters
    ----------
    factor : ``stability.max_speed_factor`` (0: no speed limit, non-finite values still stop)
    u_ref : inflow speed [m/s] (:func:`inflow_speed`)

    Each ``*_problem`` method returns None or one sentence naming the value and the limit.
    """

    def __init__(self, factor: float, u_ref: float):
        self.factor = factor
        self.u_ref = u_ref
        self.limit = factor * u_ref if factor > 0 else math.inf

    def _limit_text(self) -> str:
        return (f"stability.max_speed_factor x inflow speed = {self.factor:g} x "
                f"{self.u_ref:g} m/s = {self.limit:g} m/s")

    def step_problem(self, diag: dict) -> str | None:
        """Non-finite scalars of a step's diagnostics, or max|w| above the limit."""
        for name, value in diag.items():
            if isinstance(value, (int, float)) and not math.isfinite(value):
                return f"{name} = {value} (non-finite)"
        w = diag.get("max_abs_w")
        if w is not None and w > self.limit:
            return f"max|w| = {w:.4g} m/s exceeds {self._limit_text()}"
        return None

    def fields_problem(self, fields: dict) -> str | None:
        """Non-finite velocity, or max speed |u| of the host fields above the limit."""
        speed = np.sqrt(fields["u"] ** 2 + fields["v"] ** 2 + fields["w"] ** 2)
        if not np.all(np.isfinite(speed)):
            return "the velocity has non-finite values"
        top = float(speed.max()) if speed.size else 0.0
        if top > self.limit:
            return f"max|u| = {top:.4g} m/s exceeds {self._limit_text()}"
        return None
