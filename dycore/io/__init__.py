"""Output: netCDF-4 / UGRID writer (append + sync per record), reader helpers, plots of w.

``plot_w`` and the section helpers live in :mod:`dycore.io.plot` (imported on first use, so a
run that only writes files never imports Matplotlib).
"""
from dycore.io.netcdf import DIAGNOSTICS, FIELDS, SnapshotWriter, read_last_snapshot

__all__ = ["SnapshotWriter", "read_last_snapshot", "FIELDS", "DIAGNOSTICS", "plot_w"]


def __getattr__(name: str):
    if name == "plot_w":
        from dycore.io.plot import plot_w

        return plot_w
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
