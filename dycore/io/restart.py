"""Restart points and checkpoints: where ``dycore run --restart FILE[@TIME]`` continues from.

A restart point is one complete snapshot of a file written by
:class:`~dycore.io.netcdf.SnapshotWriter`: the run's output file, or its **checkpoint**
(``<stem>.checkpoint.nc`` beside it, written every ``output.checkpoint_interval`` by
:func:`write_checkpoint`). A checkpoint is an output file of one snapshot with a
``checkpoint_of`` attribute naming its output file; it is written to a temporary name, closed,
fsync'ed and renamed over the previous one (``os.replace``), so at every moment the checkpoint
on disk is a complete file, whatever happens to the process. One reader (:func:`read_restart`)
reads both; :func:`find_restart` adds the choice between an output file and its checkpoint
(docs/output.md, "Restart" and "Checkpoints").
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dycore.dtypes import INDEX, REAL
from dycore.errors import OutputError
from dycore.io.integrity import check_undamaged
from dycore.io.netcdf import FIELDS, SnapshotWriter, open_output

__all__ = ["RestartPoint", "read_restart", "find_restart", "checkpoint_path",
           "write_checkpoint", "snapshots_upto", "record_steps", "rewrite_output",
           "drop_blank_records",
           "CHECKPOINT_SUFFIX"]

log = logging.getLogger("dycore")

#: what a checkpoint's name ends with: ``out.nc`` -> ``out.checkpoint.nc``
CHECKPOINT_SUFFIX = ".checkpoint.nc"


@dataclass
class RestartPoint:
    """One complete snapshot of an output file to continue a run from (:func:`read_restart`).

    Attributes
    ----------
    path : Path; index : int (time record); t : float (model time [s], as stored)
    step : int (time-step number: ``snapshot_step``, else round(t / dt) for files without it)
    fields : dict of str to ndarray (nnodes,) float64 (every name of :data:`FIELDS`)
    coords : ndarray (nnodes, 3); cell_nodes : ndarray (nele, 4) 0-based
    config_yaml : str (the file's ``config`` attribute)
    later : int (time records after ``index`` that hold a time: discarded when appending)
    checkpoint_of : Path or None (for a checkpoint: the output file it belongs to, beside it)
    """

    path: Path
    index: int
    t: float
    step: int
    fields: dict
    coords: np.ndarray
    cell_nodes: np.ndarray
    config_yaml: str
    later: int
    checkpoint_of: Path | None = None


def checkpoint_path(output: str | Path) -> Path:
    """The checkpoint file of the output file ``output``: beside it, its stem (its whole name
    when it does not end in ``.nc``) + :data:`CHECKPOINT_SUFFIX`.

    >>> checkpoint_path("output/run.nc").as_posix()
    'output/run.checkpoint.nc'
    """
    output = Path(output)
    stem = output.stem if output.suffix == ".nc" else output.name
    return output.with_name(stem + CHECKPOINT_SUFFIX)


def _times_text(times: np.ndarray, limit: int = 8) -> str:
    shown = [f"{t:g}" for t in times[:limit // 2]]
    if len(times) > limit:
        shown.append("...")
        shown += [f"{t:g}" for t in times[-(limit // 2):]]
    else:
        shown = [f"{t:g}" for t in times]
    return ", ".join(shown) + " s"


def read_restart(path: str | Path, at: float | None = None, *, dt: float) -> RestartPoint:
    """The snapshot of ``path`` (an output file or a checkpoint) to restart from: the last
    complete one, or the one at ``at``.

    A snapshot is complete when its time is finite and every field of :data:`FIELDS` is finite
    (a run killed while writing a record leaves NaN, the variables' fill value). ``at`` [s]
    selects the snapshot whose stored time is nearest to it, within ``dt / 2`` [s].

    Raises
    ------
    OutputError
        The file cannot be read, is not a dycore output file, holds damaged data (a checksum
        that fails; variable and record named), or holds no complete snapshot
        (or the one at ``at`` is incomplete).
    ConfigError
        No snapshot lies within ``dt / 2`` of ``at`` (names the file's snapshot times).
    """
    from dycore.errors import ConfigError

    path = Path(path)
    ds = open_output(path, ("x", "y", "z", "cell_nodes", "time", *FIELDS), ("config",),
                     "; cannot restart from it", what="restart file")
    try:
        check_undamaged(ds, path, "; cannot restart from it")
    except OutputError:
        ds.close()
        raise
    try:
        times = np.asarray(ds.variables["time"][:], dtype=REAL)
        valid = np.flatnonzero(np.isfinite(times))

        def complete(i: int) -> dict | None:
            values = {n: np.asarray(ds.variables[n][i, :], dtype=REAL) for n in FIELDS}
            return values if all(np.isfinite(v).all() for v in values.values()) else None

        index, fields = None, None
        if at is None:
            for i in valid[::-1]:
                fields = complete(int(i))
                if fields is not None:
                    index = int(i)
                    break
            if index is None:
                raise OutputError(f"{path}: holds no complete snapshot to restart from")
        else:
            if valid.size:
                i = int(valid[np.argmin(np.abs(times[valid] - at))])
            if not valid.size or not abs(times[i] - at) <= dt / 2:
                raise ConfigError(
                    f"--restart {path}@{at:g}: no snapshot within time.dt / 2 = {dt / 2:g} s of "
                    f"t = {at:g} s; the file's snapshots: "
                    f"{_times_text(times[valid]) if valid.size else 'none'}")
            fields = complete(i)
            if fields is None:
                raise OutputError(f"{path}: the snapshot at t = {times[i]:g} s is incomplete "
                                  "(NaN values: the run was stopped while writing it); restart "
                                  "from an earlier one")
            index = i
        t = float(times[index])
        step = -1
        if "snapshot_step" in ds.variables:
            step = int(ds.variables["snapshot_step"][index])
        if step < 0:
            step = int(round(t / dt))
        coords = np.column_stack([np.asarray(ds.variables[c][:], dtype=REAL) for c in "xyz"])
        conn = ds.variables["cell_nodes"]
        cell_nodes = np.asarray(conn[:, :], dtype=INDEX) - INDEX(getattr(conn, "start_index", 0))
        owner = ds.getncattr("checkpoint_of") if "checkpoint_of" in ds.ncattrs() else None
        point = RestartPoint(path=path, index=index, t=t, step=step, fields=fields,
                             coords=coords, cell_nodes=cell_nodes,
                             config_yaml=str(ds.getncattr("config")),
                             later=int(np.count_nonzero(valid > index)),
                             checkpoint_of=None if owner is None else path.with_name(str(owner)))
    except (OSError, RuntimeError, KeyError, IndexError) as exc:
        raise OutputError(f"{path}: cannot read restart file ({exc})") from None
    finally:
        ds.close()
    return point


def _same_file(a: Path, b: Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve() or Path(a).samefile(b)
    except OSError:
        return False


def find_restart(path: str | Path, at: float | None = None, *, dt: float) -> RestartPoint:
    """The restart point for ``--restart path[@at]``, taking the checkpoint of ``path`` into
    account (``path`` itself may also be a checkpoint).

    When ``path`` is an output file whose checkpoint (:func:`checkpoint_path`) exists and
    belongs to it (its ``checkpoint_of``):

    - ``path`` cannot be opened or holds no usable snapshot (a file cut off mid-write by a
      killed process): the checkpoint is used, with a notice naming both (for ``at``: when the
      checkpoint's time is within ``dt / 2`` of it);
    - without ``at``, the checkpoint is used when it is later than ``path``'s last complete
      snapshot (a notice says so), else ``path``'s snapshot.

    Raises
    ------
    OutputError, ConfigError as :func:`read_restart` (the error about ``path``; when its
    checkpoint was tried too, the message says why that failed).
    """
    path = Path(path)
    checkpoint = checkpoint_path(path)
    if path.name.endswith(CHECKPOINT_SUFFIX) or not checkpoint.is_file():
        return read_restart(path, at, dt=dt)

    def own_checkpoint() -> RestartPoint:
        point = read_restart(checkpoint, None, dt=dt)
        if point.checkpoint_of is None or not _same_file(point.checkpoint_of, path):
            raise OutputError(f"{checkpoint}: not the checkpoint of {path} (its checkpoint_of "
                              f"is {point.checkpoint_of})")
        return point

    try:
        point = read_restart(path, at, dt=dt)
    except OutputError as exc:
        try:
            saved = own_checkpoint()
        except OutputError as why:
            raise OutputError(f"{exc}; its checkpoint cannot be used either: {why}") from None
        if at is not None and not abs(saved.t - at) <= dt / 2:
            raise OutputError(f"{exc}; its checkpoint {checkpoint} holds t = {saved.t:g} s, not "
                              f"t = {at:g} s: restart with --restart {checkpoint}") from None
        log.warning("notice: %s; restarting from its checkpoint %s (t = %g s, step %d)",
                    exc, checkpoint, saved.t, saved.step)
        return saved
    if at is None:
        try:
            saved = own_checkpoint()
        except OutputError as why:
            log.warning("notice: %s: checkpoint not used (%s)", checkpoint, why)
            return point
        if saved.step > point.step:
            log.warning("notice: restarting from the checkpoint %s (t = %g s, step %d), later "
                        "than the last complete snapshot of %s (t = %g s)", checkpoint, saved.t,
                        saved.step, path, point.t)
            return saved
    return point


def record_steps(ds, dt: float):
    """(times [s], step numbers, finished) of every time record of an open output dataset:
    ``snapshot_step`` where recorded, else round(t / dt); a record is finished when its time is
    finite (a restart blanks later records with NaN). Three (ntime,) arrays."""
    times = np.asarray(ds.variables["time"][:], dtype=REAL)
    if "snapshot_step" in ds.variables:
        steps = np.asarray(ds.variables["snapshot_step"][:], dtype=np.int64)
    else:
        steps = np.full(times.shape, -1, dtype=np.int64)
    valid = np.isfinite(times)
    steps = np.where(steps < 0, np.round(np.where(valid, times, 0.0) / dt), steps)
    return times, steps, valid


def snapshots_upto(path: str | Path, step: int, *, dt: float) -> tuple[int, int]:
    """(records to keep, later snapshots) of output file ``path`` when a run continues it after
    step ``step``: the time records up to the last one with a snapshot at or before ``step``,
    and how many records after those hold a time (they would be discarded).

    Raises
    ------
    OutputError
        ``path`` cannot be opened, is not a dycore output file, or holds damaged data (a
        checksum that fails: the variable and record are named, :mod:`dycore.io.integrity`).
    """
    ds = open_output(path, ("time",), what="output file")
    try:
        check_undamaged(ds, path)
        times, steps, valid = record_steps(ds, dt)
    except (OSError, RuntimeError, KeyError, IndexError) as exc:
        raise OutputError(f"{path}: cannot read output file ({exc})") from None
    finally:
        ds.close()
    upto = np.flatnonzero(valid & (steps <= step))
    keep = int(upto[-1]) + 1 if upto.size else 0
    return keep, int(np.count_nonzero(valid[keep:]))


def rewrite_output(path: str | Path, *, keep_snapshots: int, keep_steps_upto: int) -> None:
    """Rewrite output file ``path`` as a fresh file holding only what a restart keeps: the
    first ``keep_snapshots`` time records and the step records of steps 1..``keep_steps_upto``
    (every dimension, variable, chunking, compression and attribute copied as it is).

    For a file that a killed run left readable but not writable in place: HDF5 can leave
    metadata that a reader tolerates and a writer refuses ("NetCDF: HDF error" on append; 8 of
    300 kills from a timer thread of the SIGKILL tests, under load). Such a kill can also leave the per-step
    variables being written unreadable while every snapshot reads: then the copy drops the
    per-step records (with a warning) and keeps the snapshots. The copy is made as ``path`` +
    ``.part`` and renamed over ``path`` (``os.replace``), so ``path`` is at every moment the old
    file or the complete new one.

    Raises
    ------
    OutputError
        ``path`` cannot be read (named with the reason) or the copy cannot be written.
    """
    path = Path(path)
    part = path.with_name(path.name + ".part")
    src = open_output(path, ("time",), what="output file")
    import netCDF4                            # open_output succeeded: the package is there
    try:
        try:
            steps = np.asarray(src.variables["step"][:]) if "step" in src.variables else []
            lost = {}
        except (OSError, RuntimeError) as exc:
            steps, lost = [], {"step": str(exc)}
        n_step = 0
        while n_step < len(steps) and 1 <= steps[n_step] <= keep_steps_upto:
            n_step += 1
        keep = {"time": int(keep_snapshots), "step": n_step}
        lost.update(_unreadable_records(src, "step", n_step))
        if lost:                       # the kill cut a diagnostics write: drop that history
            log.warning("warning: %s: per-step variable(s) %s cannot be read (%s); the copy keeps the "
                        "snapshots and starts the per-step records at the restart step",
                        path, ", ".join(lost), next(iter(lost.values())))
            keep["step"] = 0
        with netCDF4.Dataset(part, "w", format=src.data_model) as dst:
            _copy_group(src, dst, keep)
        os.replace(part, path)
    except (OSError, RuntimeError, KeyError, IndexError, ValueError) as exc:
        part.unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot rewrite output file to continue it ({exc}); "
                          "start a new file with --output") from None
    finally:
        src.close()


def drop_blank_records(path: str | Path) -> int:
    """Remove the blanked records (NaN time) at the end of output file ``path``: a run that
    appended to it (``--restart``) and ended before writing over every record its restart
    blanked. netCDF cannot shorten a dimension, so the file is rewritten by
    :func:`rewrite_output` (atomically) when there are any.

    Returns
    -------
    int : the time records removed (0: the file was left as it is).

    Raises
    ------
    OutputError
        The file cannot be read or rewritten (names it).
    """
    ds = open_output(path, ("time",), what="output file")
    try:
        times = np.asarray(ds.variables["time"][:], dtype=REAL)
    except (OSError, RuntimeError, KeyError, IndexError) as exc:
        raise OutputError(f"{path}: cannot read output file ({exc})") from None
    finally:
        ds.close()
    valid = np.flatnonzero(np.isfinite(times))
    keep = int(valid[-1]) + 1 if valid.size else 0
    if keep == len(times):
        return 0
    rewrite_output(path, keep_snapshots=keep, keep_steps_upto=np.iinfo(np.int32).max)
    return len(times) - keep


def _unreadable_records(group, dim: str, n: int) -> dict[str, str]:
    """{name: error text} of the variables of ``group`` along ``dim`` whose first ``n`` records
    cannot be read."""
    bad = {}
    for name, var in group.variables.items():
        if n and var.dimensions[:1] == (dim,):
            try:
                var[:n, ...]
            except (OSError, RuntimeError, IndexError) as exc:
                bad[name] = str(exc)
    return bad


def _copy_group(src, dst, keep: Mapping[str, int]) -> None:
    """Copy netCDF group ``src`` (dimensions, attributes, variables, subgroups) into ``dst``;
    a variable whose first dimension is in ``keep`` gets only its first ``keep[dim]`` records."""
    dst.set_auto_mask(False)
    for name, dim in src.dimensions.items():
        dst.createDimension(name, None if dim.isunlimited() else len(dim))
    dst.setncatts({a: src.getncattr(a) for a in src.ncattrs()})
    for name, var in src.variables.items():
        filters = var.filters() or {}
        chunking = var.chunking()
        attrs = {a: var.getncattr(a) for a in var.ncattrs() if a != "_FillValue"}
        out = dst.createVariable(
            name, var.datatype, var.dimensions,
            fill_value=var.getncattr("_FillValue") if "_FillValue" in var.ncattrs() else None,
            compression="zlib" if filters.get("zlib") else None,
            complevel=filters.get("complevel", 4), shuffle=bool(filters.get("shuffle")),
            chunksizes=None if chunking in (None, "contiguous") else chunking,
            contiguous=chunking == "contiguous", fletcher32=bool(filters.get("fletcher32")))
        out.set_auto_mask(False)
        out.setncatts(attrs)
        n = keep.get(var.dimensions[0]) if var.dimensions else None
        if n is None:
            out[...] = var[...]
        elif n:
            out[:n, ...] = var[:n, ...]
    for name, group in src.groups.items():
        _copy_group(group, dst.createGroup(name), keep)


def write_checkpoint(path: str | Path, mesh: Any, t: float, step: int,
                     fields: Mapping[str, np.ndarray], *, config_yaml: str, version: str,
                     output: str | Path, picard_iterations: int | None = None) -> Path:
    """Replace the checkpoint ``path`` atomically by the state at model time ``t`` [s] after
    step ``step``.

    The file is a :class:`SnapshotWriter` file with one snapshot (mesh, ``fields``: every name
    of :data:`FIELDS`, (nnodes,) float64 host arrays, ``config`` attribute) and the global
    attribute ``checkpoint_of`` = ``output``'s file name; its ``picard`` dimension has
    ``picard_iterations`` (the run's ``time.nonlinear_iterations``). It is written to ``path`` + ``.tmp``,
    closed, fsync'ed, renamed over ``path`` (``os.replace``, atomic on POSIX) and the folder
    fsync'ed: a process killed at any moment leaves either the previous checkpoint or this one.

    Returns
    -------
    Path : ``path``.

    Raises
    ------
    OutputError
        The checkpoint cannot be written (names the file).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    missing = [name for name in FIELDS if name not in fields]
    if missing:
        raise OutputError(f"{path}: a checkpoint needs every field; missing {', '.join(missing)}")
    with SnapshotWriter(tmp, mesh, config_yaml=config_yaml, version=version,
                        title="dycore checkpoint",
                        picard_iterations=picard_iterations) as writer:
        try:
            writer._dataset().setncattr("checkpoint_of", Path(output).name)
        except (OSError, RuntimeError) as exc:
            raise OutputError(f"{tmp}: cannot write checkpoint ({exc})") from None
        writer.write_snapshot(t, fields, step=step)
    try:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        raise OutputError(f"{path}: cannot replace checkpoint ({exc})") from None
    return path
