"""``dycore verify --convergence``: one case on K meshes refined by 2, the w error against the
case's linear theory per mesh and the fitted order (docs/verify.md "Convergence").

Level ``l`` (0 = the configuration as written) multiplies the cell counts ``mesh.nx``,
``mesh.nz`` (and ``mesh.ny`` unless the case lists only ``("x", "z")`` in its
``REFINE_AXES``, as the schar channel does) by ``2**l`` and divides the spacings
``mesh.dx_min``, ``mesh.dz_min``, ``mesh.core_dx``, ``mesh.dz_core`` and ``time.dt`` by
``2**l`` (same Courant number; the steady state of the θ-scheme does not depend on dt, the
transient does). Each level runs to ``time.t_end`` into ``WORKDIR/<config>_level<l>.nc``; a
finished file (its last snapshot at t_end) is reused, so the levels can be run one command at a
time (``--level``). The error of a level is the nRMS of w on the verify section
(:func:`dycore.checks.verify.verify`: y = 0, z = 1-9 km, ``|x| <= half_width``); the order
between two levels is ``log2(e_l / e_{l+1})`` and the fitted order the least-squares slope of
``log2 e`` against ``-l`` over the finest three.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dycore.errors import ConfigError, OutputError

__all__ = ["ConvergenceStudy", "convergence_study", "level_overrides", "fitted_order",
           "plot_convergence"]

#: the error norm reported per level (a row of the verify table)
ERROR_ROW = "section 1-9 km"


def level_overrides(config, level: int, refine_axes=("x", "y", "z")) -> dict:
    """Dotted-key overrides that refine ``config`` (a Config) ``level`` times by 2.

    Returns
    -------
    dict of dotted key -> value (for :func:`dycore.api.load_config`); empty for level 0.

    Raises
    ------
    ConfigError when ``config`` reads its mesh from a file (``mesh.file``: nothing to refine)
    or ``level`` is negative.
    """
    if level < 0:
        raise ConfigError(f"convergence level must be >= 0, got {level}")
    if config.mesh.file is not None:
        raise ConfigError(f"{config.source_path}: mesh.file: a convergence study refines the "
                          "generated mesh; remove mesh.file")
    if level == 0:
        return {}
    f = 2 ** level
    m = config.mesh
    out = {"mesh.nx": m.nx * f, "mesh.nz": m.nz * f, "mesh.dx_min": m.dx_min / f,
           "mesh.dz_min": m.dz_min / f, "time.dt": config.time.dt / f}
    if "y" in refine_axes:
        out["mesh.ny"] = m.ny * f
    if m.core_dx is not None:
        out["mesh.core_dx"] = m.core_dx / f
    if m.dz_core is not None:
        out["mesh.dz_core"] = m.dz_core / f
    return out


def fitted_order(errors) -> float:
    """Least-squares slope of log2(error) against -level over the given (successive, each
    refined by 2) errors; NaN for fewer than two finite positive errors."""
    e = np.asarray(errors, dtype=float)
    ok = np.isfinite(e) & (e > 0)
    if ok.sum() < 2:
        return float("nan")
    lev = np.arange(len(e))[ok]
    slope = np.polyfit(lev, np.log2(e[ok]), 1)[0]
    return float(-slope)


@dataclass
class ConvergenceStudy:
    """Per-level results of :func:`convergence_study`."""

    config: str
    case: str
    levels: list = field(default_factory=list)      # dicts: level, nodes, tets, dx, dz, dt, path
    errors: list = field(default_factory=list)      # nRMS of w per level (NaN: not run)
    rows: list = field(default_factory=list)        # full verify rows per level

    @property
    def orders(self) -> list:
        """log2(e_l / e_{l+1}) between successive levels."""
        e = self.errors
        return [math.log2(a / b) if (a > 0 and b > 0) else float("nan")
                for a, b in zip(e[:-1], e[1:])]

    @property
    def order(self) -> float:
        """Fitted order over the finest three levels."""
        return fitted_order(self.errors[-3:])

    def table(self) -> str:
        lines = [f"dycore verify --convergence {self.config} ({self.case}): w error = nRMS on "
                 f"the y = 0 {ERROR_ROW} rows against linear theory", "",
                 f"{'level':>5}{'dx [m]':>9}{'dz [m]':>9}{'dt [s]':>8}{'tets':>11}"
                 f"{'error':>10}{'order':>8}"]
        orders = [float("nan")] + self.orders
        for lev, e, p in zip(self.levels, self.errors, orders):
            lines.append(f"{lev['level']:>5}{lev['dx']:>9.4g}{lev['dz']:>9.4g}{lev['dt']:>8.4g}"
                         f"{lev['tets']:>11,d}{e:>10.4f}" + ("" if math.isnan(p) else f"{p:>8.2f}"))
        lines += ["", f"fitted order over the finest three levels: {self.order:.2f}"]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict:
        return {"config": self.config, "case": self.case, "levels": self.levels,
                "errors": self.errors, "orders": self.orders, "order": self.order,
                "rows": self.rows}

    def write_json(self, out) -> Path:
        out = Path(out)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(self.to_json(), indent=2, allow_nan=True) + "\n")
        except OSError as exc:
            raise OutputError(f"{out}: cannot write the JSON report ({exc})") from None
        return out


def _finished(path: Path, t_end: float, dt: float) -> bool:
    """The output file exists and its last snapshot is at t_end (within dt/2)."""
    if not path.exists():
        return False
    try:
        from dycore.io.netcdf import open_output

        ds = open_output(path, ("time",))
        try:
            times = np.asarray(ds.variables["time"][:], dtype=float)
        finally:
            ds.close()
    except (OSError, RuntimeError, KeyError, OutputError):
        return False
    return len(times) > 0 and abs(times[-1] - t_end) <= 0.5 * dt


def convergence_study(config_path, *, levels: int = 3, workdir="output/convergence",
                      t_start: float = 5000.0, half_width: float | None = None,
                      only_level: int | None = None, run=True,
                      overrides: dict | None = None) -> ConvergenceStudy:
    """Run (or reuse) ``levels`` refinements of ``config_path`` and verify each.

    Parameters
    ----------
    config_path : YAML configuration (its case needs ``linear_reference``)
    levels : int >= 1 — meshes 0 .. levels-1
    workdir : folder of the runs' output files
    t_start : time-mean window start of :func:`dycore.checks.verify.verify` [s]
    half_width : metric window [m] (default: the reference's)
    only_level : run only this level (the others are verified if their files are finished)
    run : False: only verify finished files (levels without one get NaN)
    overrides : dotted keys applied to every level (e.g. ``{"backend.name": "gpu"}``)

    Returns
    -------
    ConvergenceStudy

    Raises
    ------
    ConfigError (bad configuration, mesh.file, a case without a linear reference),
    DycoreError subclasses of the runs, OutputError.
    """
    from dycore.api import load_config
    from dycore.cases import load_case
    from dycore.checks.verify import verify
    from dycore.timestepping.simulation import run_from_config

    overrides = dict(overrides or {})
    base = load_config(config_path, **overrides)
    case = load_case(base.case.name)
    if getattr(case, "linear_reference", None) is None:
        raise ConfigError(f"{config_path}: case {base.case.name!r} has no linear reference "
                          "(linear_reference) for a convergence study")
    axes = tuple(getattr(case, "REFINE_AXES", ("x", "y", "z")))
    workdir = Path(workdir)
    stem = Path(config_path).stem
    study = ConvergenceStudy(config=str(config_path), case=base.case.name)
    for lev in range(levels):
        over = level_overrides(base, lev, axes)
        out = workdir / f"{stem}_level{lev}.nc"
        cfg = load_config(config_path, **overrides, **over, **{"output.path": str(out)})
        m = cfg.mesh
        tets = (20 if m.split == "symmetric_y" else 6) * m.nx * m.ny * m.nz
        info = {"level": lev, "dx": m.core_dx if m.core_dx is not None else m.dx_min,
                "dz": m.dz_core if m.dz_core is not None else m.dz_min, "dt": cfg.time.dt,
                "tets": tets, "path": str(out)}
        study.levels.append(info)
        if not _finished(out, cfg.time.t_end, cfg.time.dt):
            if run and (only_level is None or only_level == lev):
                out.parent.mkdir(parents=True, exist_ok=True)
                run_from_config(cfg, overwrite=True, progress=False)
            else:
                study.errors.append(float("nan"))
                study.rows.append({})
                continue
        result = verify(out, t_start=t_start, keep_fields=False, half_width=half_width)
        study.errors.append(result.rows[ERROR_ROW]["nrms"])
        study.rows.append(result.rows)
    return study


def plot_convergence(study: ConvergenceStudy, out) -> Path:
    """PNG: w error against cell size (log-log) with a slope-2 guide."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from dycore.io.plot import save_png

    fig = Figure(figsize=(6, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    dx = np.array([lev["dx"] for lev in study.levels], dtype=float)
    e = np.array(study.errors, dtype=float)
    ax.loglog(dx, e, "o-", label=f"{study.case}: nRMS of w (fitted order {study.order:.2f})")
    ok = np.isfinite(e)
    if ok.any():
        ref = e[ok][-1] * (dx / dx[ok][-1]) ** 2
        ax.loglog(dx, ref, "k--", lw=0.8, label="slope 2")
    ax.set_xlabel("horizontal cell size in the wave region [m]")
    ax.set_ylabel("w error against linear theory")
    ax.legend()
    ax.grid(True, which="both", lw=0.3)
    return save_png(fig, Path(out), dpi=100)
