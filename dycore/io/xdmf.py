"""XDMF + HDF5 export of a dycore netCDF output, for ParaView and VTK, written through meshio.

ParaView's netCDF UGRID reader handles 2-D meshes only, so the netCDF file (the primary record of a
run) is converted into an XDMF time series: ``FILE.xdmf`` (XML: one grid per snapshot with its
time; the first holds the mesh, the others include it) and ``FILE.h5`` (the arrays). The two files
belong together; the XML names the HDF5 file without a folder, so they can be moved together.

Node fields, with their units in the names (ParaView shows the names)::

    u [m s-1]              3-component velocity vector (u, v, w)
    w [m s-1]              vertical velocity (also as a scalar: colour by it directly)
    p [m2 s-2]             kinematic perturbation pressure
    theta_prime [K]        potential-temperature perturbation
    q_v [kg kg-1], q_c [kg kg-1], q_r [kg kg-1]   moisture tracers

The time of each snapshot is the model time in seconds (the netCDF ``time`` values). Values are
copied bit for bit (float64). ``meshio`` and ``h5py`` are imported when an export starts.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from dycore.dtypes import INDEX, REAL
from dycore.errors import OutputError

__all__ = ["export_xdmf", "xdmf_paths", "xdmf_field_names", "VECTOR_NAME"]

#: the velocity vector built from the netCDF fields u, v, w
VECTOR_NAME = "u"
_VECTOR_COMPONENTS = ("u", "v", "w")
#: scalar fields exported, in this order (u and v live in the vector only)
_SCALARS = ("w", "p", "theta_prime", "q_v", "q_c", "q_r")


def xdmf_paths(path: str | Path, out: str | Path | None = None) -> tuple[Path, Path]:
    """The ``.xdmf`` and ``.h5`` files of an export of ``path`` (default: beside it, same stem).

    Raises
    ------
    OutputError
        ``out`` does not end in ``.xdmf``, or one of the files would be ``path`` itself.
    """
    path = Path(path)
    xdmf = path.with_suffix(".xdmf") if out is None else Path(out)
    if xdmf.suffix.lower() != ".xdmf":
        raise OutputError(f"{xdmf}: an XDMF export must end in .xdmf (its HDF5 data goes "
                          f"beside it as {xdmf.stem}.h5)")
    h5 = xdmf.with_suffix(".h5")
    from dycore.io.safety import same_file

    if same_file(path, xdmf) or same_file(path, h5):      # same file, not only same name
        raise OutputError(f"{path}: the XDMF export would replace the netCDF file itself; "
                          "give another --out")
    return xdmf, h5


def xdmf_field_names(units: dict[str, str]) -> dict[str, str]:
    """XDMF array name of each exported field: ``"<name> [<units>]"`` (``VECTOR_NAME`` for the
    velocity vector), for the fields whose netCDF ``units`` are given."""
    names = {}
    if all(c in units for c in _VECTOR_COMPONENTS):
        names[VECTOR_NAME] = f"{VECTOR_NAME} [{units['u']}]"
    for name in _SCALARS:
        if name in units:
            names[name] = f"{name} [{units[name]}]"
    return names


def _import_meshio():
    try:
        import h5py  # noqa: F401  (meshio's XDMF writer needs it and imports it late)
        import meshio
    except ImportError as exc:
        raise OutputError(f"XDMF export needs the meshio and h5py packages ({exc})") from None
    return meshio


class _Checksummed:
    """An h5py File whose new datasets carry HDF5's Fletcher-32 checksum (as the netCDF
    output's variables do: damaged bytes are a read error, not wrong numbers)."""

    def __init__(self, h5):
        self._h5 = h5

    def create_dataset(self, name, **kwargs):
        return self._h5.create_dataset(name, fletcher32=True, **kwargs)

    def __getattr__(self, name):
        return getattr(self._h5, name)


def _time_series_writer(meshio):
    """meshio's XDMF time-series writer with its HDF5 file beside the XDMF file (meshio 5.3
    creates it in the working directory)."""

    class Writer(meshio.xdmf.TimeSeriesWriter):
        def __enter__(self):
            import h5py

            self.h5_filename = str(self.filename.with_suffix(".h5"))
            self.h5_file = _Checksummed(h5py.File(self.h5_filename, "w"))
            return self

    return Writer


def _describe(writer, path: Path, time_units: str) -> None:
    """Name the time series after the netCDF file and say where the data came from (XDMF
    ``Information`` elements, which readers that do not use them skip)."""
    import xml.etree.ElementTree as ET

    writer.collection.set("Name", path.stem)
    for name, value in (
            ("source", f"{path.name}: dycore netCDF output, exported by dycore export --xdmf"),
            ("time", f"model time in s since the start of the run (netCDF time: {time_units})")):
        info = ET.Element("Information", Name=name, Value=value)
        writer.domain.insert(0, info)


def _mesh_in_first_step(writer) -> None:
    """Move meshio's separate mesh grid into the first time step (named ``mesh``; the later steps
    include its topology and geometry by the same XPointer), so that readers show one dataset:
    VTK's XDMF reader otherwise adds a second block, the mesh with the first step's fields."""
    grids = [g for g in writer.domain if g.tag == "Grid" and g.get("Name") == writer.mesh_name]
    steps = list(writer.collection)
    if len(grids) != 1 or not steps:
        return
    mesh, first = grids[0], steps[0]
    writer.domain.remove(mesh)
    for child in [c for c in first if c.tag.endswith("}include")]:
        first.remove(child)
    for k, child in enumerate(c for c in mesh if c.tag in ("Topology", "Geometry")):
        first.insert(k, child)
    first.set("Name", writer.mesh_name)
    first.set("GridType", "Uniform")


def export_xdmf(path: str | Path, out: str | Path | None = None, *,
                overwrite: bool = False) -> Path:
    """Write every snapshot of a dycore netCDF output as an XDMF time series (+ HDF5).

    Parameters
    ----------
    path : str or Path
        netCDF output of ``dycore run`` (a file still being written gives its finished snapshots).
    out : str or Path, optional
        The ``.xdmf`` file to write (default: ``path`` with suffix ``.xdmf``); the HDF5 data goes
        beside it with suffix ``.h5``.
    overwrite : bool
        Replace existing ``.xdmf`` / ``.h5`` files (default: refuse).

    Returns
    -------
    Path
        The ``.xdmf`` file (open it in ParaView with the "XDMF Reader" or "Xdmf3 Reader").

    Raises
    ------
    OutputError
        The input cannot be read, is not a dycore output or holds no snapshot; the output exists
        (without ``overwrite``) or cannot be written; meshio or h5py is missing.

    Examples
    --------
    >>> export_xdmf("output/mountainwave3d_small.nc")            # doctest: +SKIP
    PosixPath('output/mountainwave3d_small.xdmf')
    """
    from dycore.io.netcdf import _import_netcdf4

    path = Path(path)
    xdmf, h5 = xdmf_paths(path, out)
    existing = [str(p) for p in (xdmf, h5) if p.exists()]
    if existing and not overwrite:
        raise OutputError(f"{' and '.join(existing)}: XDMF output exists; pass --overwrite to "
                          "replace it")
    netCDF4 = _import_netcdf4()
    meshio = _import_meshio()
    try:
        ds = netCDF4.Dataset(path, "r")
    except (OSError, RuntimeError) as exc:
        raise OutputError(f"{path}: cannot open output file ({exc})") from None
    try:
        ds.set_auto_mask(False)
        missing = [n for n in ("x", "y", "z", "cell_nodes", "time") if n not in ds.variables]
        if missing:
            raise OutputError(f"{path}: not a dycore output file (no {', '.join(missing)})")
        times = np.asarray(ds.variables["time"][:], dtype=REAL)
        records = np.flatnonzero(np.isfinite(times))   # a restart blanks later records (NaN)
        if records.size == 0:
            raise OutputError(f"{path}: the file holds no snapshot yet")

        def read(name, k=None):
            """A variable (record ``k``) of the input; OutputError naming it if unreadable."""
            try:
                var = ds.variables[name]
                return np.asarray(var[:] if k is None else var[k, :])
            except (OSError, RuntimeError, IndexError) as exc:
                where = "" if k is None else f", record {k} (t = {times[k]:g} s)"
                raise OutputError(f"{path}: cannot read {name}{where} of the output file "
                                  f"({exc})") from None
        points = np.column_stack([read(c).astype(REAL) for c in "xyz"])
        conn = ds.variables["cell_nodes"]
        cells = read("cell_nodes").astype(INDEX) - INDEX(getattr(conn, "start_index", 0))
        units = {n: str(getattr(ds.variables[n], "units", "1"))
                 for n in _VECTOR_COMPONENTS + _SCALARS if n in ds.variables}
        names = xdmf_field_names(units)
        staging = None              # the pair is written in a folder of its own beside the
        try:                        # target and moved into place only when complete
            xdmf.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".dycore-export-", dir=xdmf.parent))
            with _time_series_writer(meshio)(staging / xdmf.name, data_format="HDF") as writer:
                _describe(writer, path, str(getattr(ds.variables["time"], "units", "s")))
                writer.write_points_cells(points, [("tetra", cells)])
                for k in records:
                    data = {}
                    if VECTOR_NAME in names:
                        data[names[VECTOR_NAME]] = np.column_stack(
                            [read(c, k).astype(REAL) for c in _VECTOR_COMPONENTS])
                    for name in _SCALARS:
                        if name in names:
                            data[names[name]] = read(name, k).astype(REAL)
                    writer.write_data(float(times[k]), point_data=data)
                _mesh_in_first_step(writer)
            os.replace(staging / h5.name, h5)     # the XML names the .h5 without a folder
            os.replace(staging / xdmf.name, xdmf)
        except OutputError:
            raise
        except Exception as exc:                  # meshio / h5py / OS errors: name the files
            raise OutputError(f"{xdmf}: cannot write the XDMF export ({type(exc).__name__}: "
                              f"{exc})") from None
        finally:                # a failed export leaves the earlier pair (if any) as it was
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
    except OutputError:
        raise
    except (OSError, RuntimeError, KeyError, IndexError) as exc:
        raise OutputError(f"{path}: cannot read output file ({exc})") from None
    finally:
        ds.close()
    return xdmf
