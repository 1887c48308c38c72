"""Output: netCDF-4 / UGRID writer (append + sync per record), reader helpers, plots of w, the
XDMF + HDF5 series for ParaView and the 2-D UGRID plane sections (both written snapshot by
snapshot through :mod:`dycore.io.followers`).

``plot_w`` and the section geometry live in :mod:`dycore.io.plot`, ``export_xdmf`` in
:mod:`dycore.io.xdmf` (imported on first use, so a run that only writes netCDF never imports
Matplotlib or h5py).
"""
from dycore.io.netcdf import DIAGNOSTICS, FIELDS, SnapshotWriter, read_last_snapshot

__all__ = ["SnapshotWriter", "read_last_snapshot", "FIELDS", "DIAGNOSTICS", "plot_w",
           "export_xdmf"]


def __getattr__(name: str):
    if name == "plot_w":
        from dycore.io.plot import plot_w

        return plot_w
    if name == "export_xdmf":
        from dycore.io.xdmf import export_xdmf

        return export_xdmf
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
