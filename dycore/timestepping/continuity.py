"""May a restart append to its output file? The file's own configuration and time continuity.

A restart from a checkpoint appends to the checkpoint's output file. That file may be a leftover
of another run (another configuration, or a run that stopped long before the checkpoint was
written): appending would make one file of two runs, or one with a hole in time.
:func:`check_append_target` refuses both (docs/output.md, "Restart").
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["check_append_target", "RESTART_FREE_KEYS"]

#: configuration keys that may differ between a restarted run and its restart file (they do not
#: change the fields): the end time and the output section (path, formats, intervals, progress)
RESTART_FREE_KEYS = ("time.t_end", "output.*")


def _flat(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


#: keys whose values all give the same fields (to the solver tolerance), compared as one value:
#: the pressure system is solved to rtol by CG, by the direct factorisation, or by whichever
#: ``auto`` picks — so a restart may switch, and files written before ``auto`` became the
#: default (their ``cg``) restart under it
SAME_RESULT = {"solvers.pressure.method": ("cg", "direct", "auto")}


def _result_keys(config) -> dict:
    """Every dotted key of ``config`` that can change the fields, the case's parameters
    resolved (defaults filled in), i.e. all but :data:`RESTART_FREE_KEYS`; the values of a
    :data:`SAME_RESULT` key are written as their group."""
    data = config.model_dump(mode="json")
    params = config.case.build_parameters()
    if hasattr(params, "model_dump"):
        data["case"]["parameters"] = params.model_dump(mode="json")
    out = {key: value for key, value in _flat(data).items()
           if key != "time.t_end" and not key.startswith("output.")}
    for key, group in SAME_RESULT.items():
        if out.get(key) in group:
            out[key] = " / ".join(group)
    return out


def _file_facts(path: Path, step: int, dt: float):
    """(config text, [(step, t) of the snapshots at or before ``step``]) of output ``path``."""
    from dycore.errors import OutputError
    from dycore.io.netcdf import open_output
    from dycore.io.restart import record_steps

    ds = open_output(path, ("time",), ("config",), what="output file")
    try:
        times, steps, valid = record_steps(ds, dt)
        config_yaml = str(ds.getncattr("config"))
    except (OSError, RuntimeError, KeyError, IndexError) as exc:
        raise OutputError(f"{path}: cannot read output file ({exc})") from None
    finally:
        ds.close()
    kept = [(int(s), float(t)) for s, t, ok in zip(steps, times, valid) if ok and s <= step]
    return config_yaml, kept


def check_append_target(config, path: str | Path, point, *, overwrite: bool) -> bool:
    """Check that a restart from ``point`` (a checkpoint) may append to output file ``path``.

    The file's ``config`` attribute must match ``config`` in every key that changes the fields
    (as :func:`~dycore.timestepping.simulation.check_restart_config`), and its last snapshot at
    or before the restart step must lie at most one output interval (``output.output_interval``
    of the file's configuration) before the restart time: otherwise the file would mix two runs
    or have a hole in time.

    Parameters
    ----------
    config : Config of the run; path : the output file appended to
    point : RestartPoint (``step``, ``t`` [s], ``path``) of the checkpoint
    overwrite : ``--overwrite``: start ``path`` anew from the checkpoint instead of refusing

    Returns
    -------
    bool : True to append, False to start a new file (only with ``overwrite``).

    Raises
    ------
    ConfigError
        The configurations differ (names every differing key with both values; the run is
        refused even with ``overwrite`` only when ``overwrite`` is false).
    OutputError
        The time gap (names the last snapshot, the restart time and the gap), or the file
        cannot be read.
    """
    import yaml

    from dycore.config import Config
    from dycore.errors import ConfigError, OutputError

    path = Path(path)
    dt = config.time.dt
    config_yaml, kept = _file_facts(path, point.step, dt)
    hint = (f"pass --overwrite to start {path} anew from the checkpoint {point.path} "
            f"(t = {point.t:g} s; the file's snapshots are lost), or write a new file with "
            "--output")
    try:
        stored = Config.model_validate(yaml.safe_load(config_yaml) or {})
    except (yaml.YAMLError, ValueError, TypeError, ConfigError):
        stored = None
    if stored is not None:
        ours, theirs = _result_keys(config), _result_keys(stored)
        differ = [k for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)]
        if differ:
            if overwrite:
                return False
            source = config.source_path if config.source_path is not None else "the run"
            items = "; ".join(f"{k} (file: {theirs.get(k)!r}, {source}: {ours.get(k)!r})"
                              for k in differ)
            raise ConfigError(f"{path}: cannot append the restart from {point.path} to it: the "
                              f"file was written with another configuration: {items}; {hint}")
    interval = (stored or config).output.output_interval
    every = max(1, int(round(interval / dt)))
    last_step, last_t = kept[-1] if kept else (None, None)
    if last_step is None or point.step - last_step > every:
        if overwrite:
            return False
        where = ("holds no snapshot at or before it" if last_step is None else
                 f"ends at t = {last_t:g} s (step {last_step}), {point.t - last_t:g} s before "
                 f"it, more than its output.output_interval = {interval:g} s")
        raise OutputError(f"{path}: cannot append the restart from {point.path} (t = "
                          f"{point.t:g} s, step {point.step}) to it: the file {where}; the "
                          f"snapshots between would be missing; {hint}")
    return True
