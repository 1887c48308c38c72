"""``dycore verify --convergence``: one case on K meshes refined by 2, the w error against the
case's linear theory per mesh and the fitted order (docs/verify.md "Convergence").

Level ``l`` (0 = the configuration as written) multiplies the cell counts ``mesh.nx``,
``mesh.nz`` (and ``mesh.ny`` unless the case lists only ``("x", "z")`` in its
``REFINE_AXES``, as the schar channel does) by ``2**l`` and divides the spacings
``mesh.dx_min``, ``mesh.dz_min``, ``mesh.core_dx``, ``mesh.dz_core`` and ``time.dt`` by
``2**l`` (same Courant number; the steady state of the θ-scheme does not depend on dt, the
transient does). Each level runs to ``time.t_end`` into ``WORKDIR/<config>_level<l>.nc``; a
finished file (its last snapshot at t_end) is reused and an unfinished one (a run killed by a
time limit) is continued from its last snapshot (``dycore run --restart``), so the levels can
be run one command at a time (``--level``) and a long level over several commands. The error
of a level is the nRMS of w on the verify section (:func:`dycore.checks.verify.verify`: y = 0,
``|x| <= half_width``) over the rows ``norm`` (default z = 1-9 km; each band is reported too);
the order between two levels is ``log2(e_l / e_{l+1})`` and the fitted order the least-squares
slope of ``log2 e`` against ``-l`` over the finest three.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dycore.errors import ConfigError, OutputError

__all__ = ["ConvergenceStudy", "convergence_study", "level_overrides", "fitted_order",
           "plot_convergence"]

#: the error norm reported per level by default (a row of the verify table)
ERROR_ROW = "section 1-9 km"
#: the section rows whose errors and orders the table shows
BAND_ROWS = ("section 1-9 km", "section 1-3 km", "section 3-5 km", "section 5-7 km",
             "section 7-9 km")


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
    norm: str = ERROR_ROW                           # the verify row behind ``errors``
    notes: list = field(default_factory=list)       # the verify note (time window) per level

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

    def band_errors(self, row: str) -> list:
        """nRMS of w per level over the verify row ``row`` (NaN where not run)."""
        return [float(r[row]["nrms"]) if row in r else float("nan") for r in self.rows]

    def table(self) -> str:
        short = [r.replace("section ", "") for r in BAND_ROWS]
        lines = [f"dycore verify --convergence {self.config} ({self.case}): w error = nRMS on "
                 f"the y = 0 section against linear theory; the study's norm: {self.norm}", "",
                 f"{'level':>5}{'dx [m]':>9}{'dz [m]':>9}{'dt [s]':>8}{'tets':>11}"
                 + "".join(f"{name:>10}" for name in short) + f"{'order':>8}"]
        orders = [float("nan")] + self.orders
        bands = [self.band_errors(row) for row in BAND_ROWS]
        for i, (lev, p) in enumerate(zip(self.levels, orders)):
            lines.append(f"{lev['level']:>5}{lev['dx']:>9.4g}{lev['dz']:>9.4g}{lev['dt']:>8.4g}"
                         f"{lev['tets']:>11,d}" + "".join(f"{b[i]:>10.4f}" for b in bands)
                         + ("" if math.isnan(p) else f"{p:>8.2f}"))
        lines.append(f"{'fitted order, finest three':>42}"
                     + "".join(f"{fitted_order(b[-3:]):>10.2f}" for b in bands))
        lines += ["", f"fitted order of {self.norm} over the finest three levels: "
                      f"{self.order:.2f}"]
        lines += [f"level {lev['level']}: w {note}" for lev, note in zip(self.levels, self.notes)
                  if note]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict:
        return {"config": self.config, "case": self.case, "norm": self.norm,
                "levels": self.levels, "errors": self.errors, "orders": self.orders,
                "order": self.order, "rows": self.rows, "notes": self.notes,
                "band_orders": {row: fitted_order(self.band_errors(row)[-3:])
                                for row in BAND_ROWS}}

    def write_json(self, out) -> Path:
        """The study as JSON (:func:`dycore.checks.verify.write_json`); returns ``out``."""
        from dycore.checks.verify import write_json
        return write_json(self, out)


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
                      overrides: dict | None = None, norm: str = ERROR_ROW) -> ConvergenceStudy:
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
    norm : the verify row whose nRMS is the study's error (one of :data:`BAND_ROWS`)

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

    if norm not in BAND_ROWS:
        raise ConfigError(f"convergence norm {norm!r}: expected one of {', '.join(BAND_ROWS)}")
    overrides = dict(overrides or {})
    base = load_config(config_path, **overrides)
    case = load_case(base.case.name)
    if getattr(case, "linear_reference", None) is None:
        raise ConfigError(f"{config_path}: case {base.case.name!r} has no linear reference "
                          "(linear_reference) for a convergence study")
    axes = tuple(getattr(case, "REFINE_AXES", ("x", "y", "z")))
    workdir = Path(workdir)
    stem = Path(config_path).stem
    study = ConvergenceStudy(config=str(config_path), case=base.case.name, norm=norm)
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
                _run_level(cfg, out, run_from_config)
            else:
                study.errors.append(float("nan"))
                study.rows.append({})
                study.notes.append("")
                continue
        result = verify(out, t_start=t_start, keep_fields=False, half_width=half_width)
        study.errors.append(result.rows[norm]["nrms"])
        study.rows.append(result.rows)
        study.notes.append(result.note)
    return study


def _run_level(cfg, out: Path, run_from_config) -> None:
    """Run one level into ``out``: continue an unfinished file from its last snapshot, or
    start afresh (also when the continuation is refused, e.g. a file of another config)."""
    import logging

    from dycore.errors import DycoreError

    if out.exists():
        try:
            run_from_config(cfg, overwrite=True, progress=False, restart=str(out))
            return
        except DycoreError as exc:
            logging.getLogger("dycore").warning(
                "notice: %s: cannot continue it (%s); running the level afresh", out,
                str(exc).splitlines()[0])
    run_from_config(cfg, overwrite=True, progress=False)


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
