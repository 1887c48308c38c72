"""``dycore verify``: compare a run with its case's steady linear theory (docs/verify.md).

The reference comes from the case recorded in the file (``config`` attribute): the case module's
``linear_reference(params)`` (mountainwave3d: 3-D, Smith 1980; schar: 2-D, Schär et al. 2002).
The model's w (time mean over the snapshots with t >= ``t_start``) is sampled exactly as a P1
field (:class:`~dycore.diagnostics.p1_sample.P1Locator`) on

* the x-z section y = 0: x in [-20, 20] km every 250 m, z = 1-9 km every 100 m (whole, and the
  bands 1-3, 3-5, 5-7, 7-9 km);
* 3-D references: the planes z = 2, 4, 6 km: x, y in [-20, 20] km every 250 m;
  2-D references (no y-dependence): the lines z = 2, 4, 6 km of the section,

and compared with the reference at the same points: nRMS = ||m - r|| / ||r||, pattern
correlation (Pearson, centred), peak ratios max(m)/max(r) and min(m)/min(r). Also, 3-D: the
antisymmetric part of w about y = 0 relative to the symmetric part on each plane (L2 norms;
linear theory: 0); 2-D: the y-dependence of w at the nodes (:func:`y_dependence`); both: |w| at
the summit node.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dycore.diagnostics.p1_sample import P1Locator
from dycore.errors import OutputError

__all__ = ["VerifyResult", "verify", "metrics", "antisymmetric_ratio", "y_dependence",
           "plot_verify", "write_json", "case_of_file", "SECTION_X", "SECTION_Z", "PLANE_LEVELS",
           "THEORY_GRID", "DEFAULT_HALF_WIDTH"]

SECTION_X = np.arange(-20_000.0, 20_000.0 + 1, 250.0)
SECTION_Z = np.arange(1_000.0, 9_000.0 + 1, 100.0)
PLANE_XY = np.arange(-20_000.0, 20_000.0 + 1, 250.0)
PLANE_LEVELS = (2_000.0, 4_000.0, 6_000.0)
BANDS = ((1_000.0, 3_000.0), (3_000.0, 5_000.0), (5_000.0, 7_000.0), (7_000.0, 9_000.0))
#: keyword overrides passed to the case's ``linear_reference`` (tests shrink the 3-D grid)
THEORY_GRID: dict = {}
#: metric window |x| (and |y|) <= this [m] by dimension of the reference: schar's absorbing
#: layers start 15 km from its centre
DEFAULT_HALF_WIDTH = {3: 20_000.0, 2: 15_000.0}
#: plot section extends to the ground
PLOT_Z = np.arange(0.0, 9_000.0 + 1, 100.0)


def metrics(model: np.ndarray, ref: np.ndarray) -> dict:
    """nRMS, correlation and peak ratios over the points where both are finite."""
    m, r = np.ravel(model), np.ravel(ref)
    ok = np.isfinite(m) & np.isfinite(r)
    m, r = m[ok], r[ok]
    if len(r) < 2:
        return {"nrms": np.nan, "corr": np.nan, "max_ratio": np.nan, "min_ratio": np.nan,
                "points": int(len(r))}
    dm, dr = m - m.mean(), r - r.mean()
    return {"nrms": float(np.linalg.norm(m - r) / np.linalg.norm(r)),
            "corr": float(dm @ dr / np.sqrt((dm @ dm) * (dr @ dr))),
            "max_ratio": float(m.max() / r.max()), "min_ratio": float(m.min() / r.min()),
            "points": int(len(r))}


def terrain_at(theory, x) -> np.ndarray:
    """The reference's terrain on the section y = 0 at x [m] (any shape of x)."""
    x = np.asarray(x, dtype=float)
    return np.asarray(theory.terrain(x.ravel()), dtype=float).reshape(x.shape)


def y_dependence(coords: np.ndarray, w: np.ndarray) -> dict:
    """How much nodal w depends on y, over node columns of equal (x, z).

    Parameters
    ----------
    coords : (n, 3) float64 [m]; w : (n,) float64 [m/s]

    Returns
    -------
    dict: ``relative`` = max over columns of (max w - min w) / max|w| (0 for no y-dependence;
    NaN when no two nodes share (x, z)); ``odd`` = max |w(x, y, z) - w(x, -y, z)| / max|w|
    over the mirror pairs (NaN when there are none); ``columns`` = how many columns hold more
    than one node.
    """
    c = np.asarray(coords, dtype=float)
    w = np.asarray(w, dtype=float)
    scale = float(np.max(np.abs(w))) or 1.0
    _, col = np.unique(c[:, [0, 2]], axis=0, return_inverse=True)
    col = col.ravel()
    hi = np.full(col.max() + 1, -np.inf)
    lo = np.full(col.max() + 1, np.inf)
    np.maximum.at(hi, col, w)
    np.minimum.at(lo, col, w)
    count = np.bincount(col)
    multi = count > 1
    relative = float(np.max(hi[multi] - lo[multi]) / scale) if multi.any() else float("nan")
    key = {tuple(p): i for i, p in enumerate(c.tolist())}
    pairs = [(i, key[(p[0], -p[1], p[2])]) for i, p in enumerate(c.tolist())
             if p[1] > 0 and (p[0], -p[1], p[2]) in key]
    odd = (float(max(abs(w[i] - w[j]) for i, j in pairs) / scale) if pairs
           else float("nan"))
    return {"relative": relative, "odd": odd, "columns": int(multi.sum())}


def antisymmetric_ratio(plane: np.ndarray) -> float:
    """||w_a|| / ||w_s|| with w_a, w_s the parts odd / even in y (rows of ``plane`` = y,
    symmetric about the middle row)."""
    mirror = plane[::-1, :]
    ok = np.isfinite(plane) & np.isfinite(mirror)
    anti, sym = 0.5 * (plane - mirror)[ok], 0.5 * (plane + mirror)[ok]
    return float(np.linalg.norm(anti) / np.linalg.norm(sym))


@dataclass
class VerifyResult:
    """Everything ``dycore verify`` reports."""

    path: str
    times: list
    note: str
    parameters: dict
    rows: dict = field(default_factory=dict)           # name -> metrics
    antisymmetry: dict = field(default_factory=dict)   # plane name -> (model, theory)
    ydep: dict = field(default_factory=dict)           # 2-D references: y_dependence()
    summit: dict = field(default_factory=dict)
    title: str = "steady linear theory"
    case: str = ""
    dimensions: int = 3
    fields: dict = field(default_factory=dict, repr=False)   # arrays for the plot
    half_width: float = 20_000.0                        # [m] metrics window |x|, |y| <=

    def table(self) -> str:
        lines = [f"dycore verify: {self.path}",
                 f"w: {self.note}",
                 f"reference ({self.case}): {self.title}, "
                 + ", ".join(f"{k} = {v:g}" for k, v in self.parameters.items()),
                 f"metrics over |x| <= {self.half_width / 1e3:g} km (section"
                 + (f"), |x|, |y| <= {self.half_width / 1e3:g} km (planes)"
                    if self.dimensions == 3 else ", lines)"),
                 "",
                 f"{'w':<18}{'nRMS':>8}{'corr':>8}{'max ratio':>11}{'min ratio':>11}{'points':>8}"]
        for name, row in self.rows.items():
            lines.append(f"{name:<18}{row['nrms']:>8.3f}{row['corr']:>8.3f}"
                         f"{row['max_ratio']:>11.3f}{row['min_ratio']:>11.3f}{row['points']:>8d}")
        lines.append("")
        if self.antisymmetry:
            lines.append("antisymmetric / symmetric part of w about y = 0 (L2):")
        for name, (model, theory) in self.antisymmetry.items():
            lines.append(f"  {name:<16}model {model:.3f}   theory {theory:.1e}")
        if self.ydep:
            d = self.ydep
            lines.append(f"y-dependence of w at the nodes (max over {d['columns']} columns of "
                         f"equal x, z, / max|w|): {d['relative']:.2e}; odd part about y = 0: "
                         f"{d['odd']:.2e}")
        s = self.summit
        lines.append(f"|w| at the summit node ({s['x']:g}, {s['y']:g}, {s['z']:g}) m: "
                     f"{s['abs_w']:.4f} m/s")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict:
        return {"path": self.path, "times": self.times, "note": self.note,
                "parameters": self.parameters, "metrics": self.rows,
                "antisymmetric_ratio": {k: {"model": m, "theory": t}
                                        for k, (m, t) in self.antisymmetry.items()},
                "y_dependence": self.ydep, "case": self.case, "reference": self.title,
                "summit": self.summit, "half_width": self.half_width}


def case_of_file(config_text):
    """(case name, case module, its Parameters) recorded in a file's ``config`` attribute.

    Without one (an older file), the configuration's default case with its default parameters.
    Raises ConfigError for an unknown case name or parameters the case refuses.
    """
    import yaml

    from dycore.cases import load_case
    from dycore.config import CaseConfig
    from dycore.errors import ConfigError

    name, overrides = CaseConfig.model_fields["name"].default, {}
    if config_text:
        cfg = yaml.safe_load(config_text) or {}
        case = cfg.get("case") or {}
        name = case.get("name", name)
        overrides = case.get("parameters") or {}
    module = load_case(name)
    try:
        params = module.Parameters(**overrides)
    except ValueError as exc:
        raise ConfigError(f"case.parameters recorded in the file: {exc}".splitlines()[0]) from None
    return name, module, params


def _case_parameters(ds):
    """(case name, case module, Parameters, the report's parameter dict) of a run."""
    name, module, params = case_of_file(getattr(ds, "config", None))
    shown = {"u0": float(params.u0), "n": float(params.brunt_vaisala), "h0": float(params.h0),
             "a": float(params.a)}
    if hasattr(params, "wavelength"):
        shown["wavelength"] = float(params.wavelength)
    return name, module, params, shown


def _read_mean_w(path: Path, t_start: float):
    """(mean w, times used, note, coords, cell_nodes, parameters)."""
    from dycore.io.netcdf import open_output

    ds = open_output(path, ("x", "y", "z", "cell_nodes", "time", "w"))
    try:
        times = np.asarray(ds.variables["time"][:], dtype=float)
        if len(times) == 0:
            raise OutputError(f"{path}: the file holds no snapshot yet")
        wvar = ds.variables["w"]
        written = [i for i in range(len(times)) if np.all(np.isfinite(wvar[i, :]))]
        if not written:
            raise OutputError(f"{path}: w was not written in any snapshot")
        use = [i for i in written if times[i] >= t_start]
        if use:
            note = (f"time mean over {len(use)} snapshot(s), t = {times[use[0]]:g}-"
                    f"{times[use[-1]]:g} s (t >= {t_start:g} s)")
        else:
            use = [written[-1]]
            note = (f"no snapshot with t >= {t_start:g} s (last: t = {times[use[0]]:g} s); "
                    f"using the last snapshot only")
        w = np.mean([np.asarray(wvar[i, :], dtype=float) for i in use], axis=0)
        if not np.any(w):          # every correlation and ratio would be 0 / 0 (issue 25)
            raise OutputError(
                f"{path}: w is 0 at every node in the snapshot(s) used (t = "
                f"{', '.join(f'{times[i]:g}' for i in use)} s); there is no wave to compare "
                "with linear theory (t = 0 is the state at rest: verify a run that has stepped)")
        coords = np.column_stack([np.asarray(ds.variables[c][:], dtype=float) for c in "xyz"])
        conn = ds.variables["cell_nodes"]
        cells = np.asarray(conn[:, :], dtype=np.int64) - int(getattr(conn, "start_index", 0))
        params = _case_parameters(ds)
    except (OSError, RuntimeError, KeyError, IndexError) as exc:
        raise OutputError(f"{path}: cannot read output file ({exc})") from None
    finally:
        ds.close()
    return w, [float(times[i]) for i in use], note, coords, cells, params


def verify(path, *, t_start: float = 5000.0, theory=None, keep_fields: bool = True,
           half_width: float | None = None) -> VerifyResult:
    """Compute every verify metric for the output file ``path``.

    Parameters
    ----------
    path : output file of ``dycore run``
    t_start : average the snapshots with t >= t_start [s]
    theory : reference object (default: the recorded case's ``linear_reference(params)``);
        it has ``section_y0(x, z)``, ``terrain(x)``, ``dimensions`` (2 or 3), ``title`` and,
        for 3, ``plane(z, x, y)``
    keep_fields : keep the sampled arrays for :func:`plot_verify`
    half_width : [m] restricts the metrics to |x| <= half_width on the section and lines and
        |x|, |y| <= half_width on the planes (default :data:`DEFAULT_HALF_WIDTH` of the
        reference's dimension: 20 km, the whole sampled window, in 3-D; 15 km, inside the
        absorbing layers, for schar; 8 km is the region a paper-size 3-D mesh resolves)

    Raises
    ------
    OutputError for an unreadable file or one whose w is 0 everywhere in the snapshots used
    (nothing to compare: only t = 0); ConfigError for a case this package does not know or
    one without ``linear_reference``; ValueError for a half_width outside (0, 20 km].
    """
    if half_width is not None and not 0.0 < half_width <= SECTION_X[-1]:
        raise ValueError(f"half_width: expected a width in (0, {SECTION_X[-1]:g}] m "
                         f"(got {half_width:g})")
    path = Path(path)
    w, times, note, coords, cells, (case_name, case, case_params, params) = _read_mean_w(
        path, t_start)
    if theory is None:
        make = getattr(case, "linear_reference", None)
        if make is None:
            from dycore.errors import ConfigError
            raise ConfigError(f"{path}: case {case_name!r} has no linear reference "
                              "(linear_reference) to verify against")
        theory = make(case_params, **THEORY_GRID)
    dims = int(getattr(theory, "dimensions", 3))
    if half_width is None:
        half_width = DEFAULT_HALF_WIDTH[dims]

    # model samples: section (plot range 0-9 km), planes
    xs, zs = np.meshgrid(SECTION_X, PLOT_Z)
    sec_pts = np.column_stack([xs.ravel(), np.zeros(xs.size), zs.ravel()])
    px, py = np.meshgrid(PLANE_XY, PLANE_XY)
    plane_pts = [np.column_stack([px.ravel(), py.ravel(), np.full(px.size, lev)])
                 for lev in (PLANE_LEVELS if dims == 3 else ())]
    pts = np.concatenate([sec_pts] + plane_pts)
    sampled = P1Locator(coords, cells, pts)(w)
    n_sec = len(sec_pts)
    model_sec = sampled[:n_sec].reshape(xs.shape)
    model_planes = [sampled[n_sec + i * px.size: n_sec + (i + 1) * px.size].reshape(px.shape)
                    for i in range(len(plane_pts))]

    theory_sec = theory.section_y0(SECTION_X, PLOT_Z)
    terrain = theory.terrain(SECTION_X)
    theory_sec[PLOT_Z[:, None] < terrain[None, :]] = np.nan       # below the ground
    theory_planes = [theory.plane(lev, PLANE_XY, PLANE_XY) for lev in PLANE_LEVELS] \
        if dims == 3 else []

    result = VerifyResult(path=str(path), times=times, note=note, parameters=params,
                          title=str(getattr(theory, "title", "steady linear theory")),
                          case=case_name, dimensions=dims)
    result.half_width = float(half_width)
    cols = np.abs(SECTION_X) <= half_width + 1e-6
    inside = np.abs(PLANE_XY) <= half_width + 1e-6
    win = np.ix_(inside, inside)
    metric_rows = PLOT_Z >= SECTION_Z[0] - 1e-6
    result.rows["section 1-9 km"] = metrics(model_sec[metric_rows][:, cols],
                                            theory_sec[metric_rows][:, cols])
    for lo, hi in BANDS:
        rows = (PLOT_Z >= lo - 1e-6) & (PLOT_Z <= hi + 1e-6)
        result.rows[f"section {lo / 1e3:g}-{hi / 1e3:g} km"] = metrics(
            model_sec[rows][:, cols], theory_sec[rows][:, cols])
    for lev, m, r in zip(PLANE_LEVELS, model_planes, theory_planes):
        name = f"plane {lev / 1e3:g} km"
        result.rows[name] = metrics(m[win], r[win])
        result.antisymmetry[name] = (antisymmetric_ratio(m[win]), antisymmetric_ratio(r[win]))
    if dims == 2:
        for lev in PLANE_LEVELS:
            row = int(np.argmin(np.abs(PLOT_Z - lev)))
            result.rows[f"line z = {lev / 1e3:g} km"] = metrics(model_sec[row][cols],
                                                                theory_sec[row][cols])
        result.ydep = y_dependence(coords, w)

    # summit node: the ground node nearest to the axis x = y = 0, or to x = 0 for a 2-D
    # reference (among the nodes on or below
    # the terrain of the section y = 0: every ground node, and no node above the summit)
    r2 = coords[:, 0] ** 2 + (coords[:, 1] ** 2 if dims == 3 else 0.0)   # 2-D: any y
    low = coords[:, 2] <= terrain_at(theory, coords[:, 0]) + 1e-6 * max(1.0, params["h0"])
    r2 = np.where(low, r2, np.inf) if low.any() else r2
    near = np.flatnonzero(r2 <= r2.min() * (1 + 1e-9) + 1e-9)
    node = int(near[np.argmin(coords[near, 2])])
    result.summit = {"node": node, "x": float(coords[node, 0]), "y": float(coords[node, 1]),
                     "z": float(coords[node, 2]), "w": float(w[node]),
                     "abs_w": float(abs(w[node]))}
    if keep_fields:
        result.fields = {"model_sec": model_sec, "theory_sec": theory_sec, "terrain": terrain,
                         "model_planes": model_planes, "theory_planes": theory_planes}
    return result


def write_json(result, out) -> Path:
    """``result.to_json()`` (a VerifyResult or a convergence study) written to ``out`` as
    indented JSON; OutputError naming ``out`` when it cannot be written."""
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result.to_json(), indent=2, allow_nan=True) + "\n")
    except OSError as exc:
        raise OutputError(f"{out}: cannot write the JSON report ({exc})") from None
    return out


def _plot_section_pair(result: VerifyResult, out) -> Path:
    """PNG of a 2-D reference: model and linear theory side by side on the y = 0 section over
    the metric window (as Schär et al. 2002, Fig. 12-13), one colour scale, contours every
    0.1 of it, terrain in grey."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from dycore.io.plot import save_png

    f = result.fields
    km = 1e-3
    cols = np.abs(SECTION_X) <= result.half_width + 1e-6
    x = SECTION_X[cols]
    aloft = PLOT_Z >= SECTION_Z[0] - 1e-6
    both = np.concatenate([np.ravel(f["model_sec"][aloft][:, cols]),
                           np.ravel(f["theory_sec"][aloft][:, cols])])
    vmax = float(np.nanmax(np.abs(both))) if np.isfinite(both).any() else 1e-12
    vmax = vmax if vmax > 0 else 1e-12
    fig = Figure(figsize=(15, 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    levels = np.linspace(-vmax, vmax, 21)
    for ax, (label, data) in zip(axes, (("model", f["model_sec"]),
                                        ("linear theory", f["theory_sec"]))):
        image = ax.pcolormesh(x * km, PLOT_Z * km, np.ma.masked_invalid(data[:, cols]),
                              cmap="RdBu_r", vmin=-vmax, vmax=vmax, shading="nearest",
                              rasterized=True)
        ax.contour(x * km, PLOT_Z * km, np.ma.masked_invalid(data[:, cols]), levels=levels,
                   colors="k", linewidths=0.4)
        ax.fill_between(x * km, 0.0, f["terrain"][cols] * km, color="0.5", zorder=3)
        ax.axhline(SECTION_Z[0] * km, color="k", lw=0.6, ls="--")
        ax.set_xlabel("x [km]")
        ax.set_title(f"{label}: w on y = 0 [m/s] (metrics above the dashed line)")
    axes[0].set_ylabel("z [km]")
    fig.colorbar(image, ax=axes, label="w [m/s]", shrink=0.9)
    fig.suptitle(f"{Path(result.path).name} ({result.case}): {result.note}", fontsize=11)
    return save_png(fig, Path(out), dpi=90)


def plot_verify(result: VerifyResult, out) -> Path:
    """PNG: model (top row) and linear theory (bottom row) on the y = 0 section (with terrain)
    and on the planes z = 2, 4, 6 km, one colour scale per column; for a 2-D reference the
    section only, model and theory side by side."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if result.dimensions == 2:
        return _plot_section_pair(result, out)
    out = Path(out)
    f = result.fields
    km = 1e-3
    fig = Figure(figsize=(20, 8.5), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 4, gridspec_kw={"width_ratios": [2.0, 1.0, 1.0, 1.0]})
    columns = [("section", f["model_sec"], f["theory_sec"])] + [
        (f"z = {lev * km:g} km", m, r)
        for lev, m, r in zip(PLANE_LEVELS, f["model_planes"], f["theory_planes"])]
    aloft = PLOT_Z >= SECTION_Z[0] - 1e-6        # colour scale of the section: the metric rows
    for col, (title, model, theory) in enumerate(columns):
        scaled = (model[aloft], theory[aloft]) if col == 0 else (model, theory)
        vmax = float(np.nanmax(np.abs(np.concatenate([np.ravel(a) for a in scaled]))))
        vmax = vmax if np.isfinite(vmax) and vmax > 0 else 1e-12
        for row, (label, data) in enumerate((("model", model), ("linear theory", theory))):
            ax = axes[row, col]
            if col == 0:
                image = ax.pcolormesh(SECTION_X * km, PLOT_Z * km, np.ma.masked_invalid(data),
                                      cmap="RdBu_r", vmin=-vmax, vmax=vmax, shading="nearest",
                                      rasterized=True)     # below 1 km: saturates
                ax.fill_between(SECTION_X * km, 0.0, f["terrain"] * km, color="0.5", zorder=3)
                ax.axhline(SECTION_Z[0] * km, color="k", lw=0.6, ls="--")
                ax.set_xlabel("x [km]")
                ax.set_ylabel("z [km]")
                ax.set_title(f"{label}: w on y = 0 (metrics above the dashed line)")
            else:
                image = ax.pcolormesh(PLANE_XY * km, PLANE_XY * km, np.ma.masked_invalid(data),
                                      cmap="RdBu_r", vmin=-vmax, vmax=vmax, shading="nearest",
                                      rasterized=True)
                ax.set_aspect("equal")
                ax.set_xlabel("x [km]")
                ax.set_ylabel("y [km]")
                ax.set_title(f"{label}: w on {title}")
        fig.colorbar(image, ax=axes[:, col], label="w [m/s]", shrink=0.8)
    fig.suptitle(f"{Path(result.path).name}: {result.note}", fontsize=11)
    from dycore.io.plot import save_png
    return save_png(fig, out, dpi=90)
