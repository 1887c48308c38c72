"""Checksums of the output files: every chunked variable that :class:`~dycore.io.netcdf.
SnapshotWriter` creates carries HDF5's Fletcher-32 checksum (netCDF4's ``fletcher32=True``),
verified by the HDF5 library whenever a chunk is read. :func:`find_damage` reads a whole file
chunk row by chunk row and names each variable and record whose checksum fails (or that does not
decode at all), so that ``dycore run --restart`` refuses damaged data, says where it is, and
falls back to the checkpoint as it does for a file cut short by a killed run (docs/output.md,
"Checksums").
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dycore.errors import OutputError

__all__ = ["find_damage", "check_undamaged", "CHECKSUM"]

#: the netCDF4 ``createVariable`` keyword of the checksum filter
CHECKSUM = {"fletcher32": True}

#: damaged places named in one message (the rest are counted)
_SHOWN = 4


def _variables(group, prefix: str = ""):
    for name, var in group.variables.items():
        yield f"{prefix}{name}", var
    for name, sub in group.groups.items():
        yield from _variables(sub, f"{prefix}{name}/")


def find_damage(ds, times=None, skip_dims: tuple[str, ...] = ()) -> list[str]:
    """Every place of an open netCDF4 Dataset ``ds`` that does not read back: "variable NAME"
    for a variable without a record dimension, "variable NAME, record K (t = T s)" for one
    along ``time`` (``step`` records are named by index).

    Reads each variable in blocks of its chunk rows (one snapshot record per block for the node
    fields), so memory stays at one chunk row. ``times`` : the ``time`` values (for the
    messages; read from ``ds`` when None and readable); ``skip_dims``: variables whose first
    dimension is one of these are not read. Returns [] for an intact file.
    """
    if times is None:
        try:
            times = np.asarray(ds.variables["time"][:], dtype=float)
        except (KeyError, OSError, RuntimeError, IndexError):
            times = None
    damage = []
    for name, var in _variables(ds):
        if var.dimensions[:1] and var.dimensions[0] in skip_dims:
            continue
        if var.ndim == 0 or not var.dimensions:
            try:
                var[...]
            except (OSError, RuntimeError, ValueError) as exc:
                damage.append(f"variable {name} ({exc})")
            continue
        n = var.shape[0]
        chunking = var.chunking()
        rows = 1 if chunking in (None, "contiguous") else max(1, int(chunking[0]))
        if chunking == "contiguous":
            rows = n or 1
        for start in range(0, n, rows):
            try:
                var[start:start + rows, ...]
            except (OSError, RuntimeError, ValueError):
                for k in range(start, min(n, start + rows)):     # narrow it to the record
                    try:
                        var[k, ...]
                    except (OSError, RuntimeError, ValueError):
                        what = f"variable {name}, record {k}"
                        if (var.dimensions[0] == "time" and times is not None
                                and k < len(times) and np.isfinite(times[k])):
                            what += f" (t = {times[k]:g} s)"
                        damage.append(what)
    return damage


#: per-step records are not needed to continue a run: a kill can leave them unreadable, and a
#: restart then drops that history with a warning (dycore.io.restart.rewrite_output)
RESTART_SKIPS = ("step",)


def check_undamaged(ds, path: str | Path, purpose: str = "",
                    skip_dims: tuple[str, ...] = RESTART_SKIPS) -> None:
    """Raise OutputError naming the damaged variables and records of open file ``ds``
    (:func:`find_damage`; variables along ``skip_dims`` not read: by default the per-step
    diagnostics, which a restart does not need), if any; ``purpose`` ends the message (e.g.
    "; cannot restart from it")."""
    damage = find_damage(ds, skip_dims=skip_dims)
    if damage:
        more = f" and {len(damage) - _SHOWN} more" if len(damage) > _SHOWN else ""
        raise OutputError(f"{path}: damaged data (checksum mismatch or undecodable chunk) in "
                          f"{'; '.join(damage[:_SHOWN])}{more}{purpose}")
