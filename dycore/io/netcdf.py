"""netCDF-4 output: UGRID-1.0 tetrahedral mesh, node fields appended per snapshot, diagnostics.

File layout (CF-1.8, UGRID-1.0 fully 3-D mesh; docs/output.md describes it for users)::

    dimensions: time, step (unlimited); nodes, cells, four = 4, picard = time.nonlinear_iterations
    mesh                       UGRID mesh topology (cf_role = "mesh_topology", 3-D)
    x, y, z (nodes)            node coordinates [m]
    cell_nodes (cells, four)   tetrahedron -> node connectivity, 0-based, int32
    mesh_volume_types (cells)  UGRID volume shape flags (0 = tetrahedron)
    time (time)                seconds since TIME_REFERENCE (a nominal date: t = 0 is the start)
    snapshot_step (time)       time-step number of each snapshot (read by dycore run --restart)
    u v w p theta_prime q_v q_c q_r (time, nodes)   node fields, float64
    step, diag_time, max_abs_w, ... (step)          per-step diagnostics (int32 ones unmasked)
    picard_change (step, picard)                    max-norm change per Picard iteration, NaN-padded
    group timers                                    stage-timer table (also JSON and text
                                                    global attributes timers, timers_table)

Every variable but the scalar ``mesh`` has explicit chunks (:func:`_rows_per_chunk`) and zlib
compression at :data:`COMPRESSION_LEVEL` with the shuffle filter (the level was chosen by measuring
file size and write time, docs/output.md), and a Fletcher-32 checksum per chunk
(:mod:`dycore.io.integrity`). The ``config`` and ``history`` attributes carry no
absolute paths (:func:`portable_text`). Every :meth:`SnapshotWriter.write_snapshot` and
:meth:`SnapshotWriter.write_diagnostics` (and :meth:`SnapshotWriter.write_diagnostics_rows`, which
``dycore run`` uses to write the steps since the last snapshot together with it) ends with
``sync()``, so a run that is killed keeps every record it finished. ``netCDF4`` is imported when a file is opened, so importing this module
needs no netCDF library.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dycore.dtypes import INDEX, NLOC, REAL
from dycore.errors import OutputError
from dycore.io.integrity import CHECKSUM

__all__ = ["SnapshotWriter", "read_last_snapshot", "open_output", "FIELDS", "DIAGNOSTICS",
           "TIME_UNITS", "CALENDAR", "COMPRESSION_LEVEL", "NOT_RECORDED", "portable_text"]

#: node fields of a snapshot: name -> (long_name, units)
FIELDS: dict[str, tuple[str, str]] = {
    "u": ("velocity component along x", "m s-1"),
    "v": ("velocity component along y", "m s-1"),
    "w": ("vertical velocity", "m s-1"),
    "p": ("kinematic perturbation pressure (pressure perturbation / reference density)", "m2 s-2"),
    "theta_prime": ("potential temperature perturbation from the background theta_bar(z)", "K"),
    "q_v": ("water vapour mixing ratio", "kg kg-1"),
    "q_c": ("cloud water mixing ratio", "kg kg-1"),
    "q_r": ("rain water mixing ratio", "kg kg-1"),
}

#: scalar per-step diagnostics with known metadata: name -> (long_name, units, dtype)
DIAGNOSTICS: dict[str, tuple[str, str, str]] = {
    "max_abs_w": ("maximum absolute vertical velocity", "m s-1", "f8"),
    "kinetic_energy": ("kinetic energy 1/2 |u|^2 integrated over the domain (per unit density)",
                       "m5 s-2", "f8"),
    "max_abs_div_u": ("maximum absolute nodal divergence of velocity", "s-1", "f8"),
    "picard_iterations": ("Picard iterations done in the step", "1", "i4"),
    "solver_iterations_pressure": ("pressure solver iterations in the step (all solves)", "1",
                                   "i4"),
    "solver_iterations_momentum": ("momentum solver iterations in the step (all solves)", "1",
                                   "i4"),
    "solver_iterations_tracer": ("tracer solver iterations in the step (all tracers and solves)",
                                 "1", "i4"),
}

#: value of an int32 diagnostic in a step that did not record it (the variables have no
#: _FillValue, so readers return plain integers, never a masked or float array)
NOT_RECORDED = np.int32(-1)

#: reference of the time axis: the case is idealised, so the date is nominal and t = 0 s (the
#: start of the run) is this instant. Raw values are model seconds; xarray decodes them to dates
#: unless ``decode_times=False``.
TIME_REFERENCE = "2000-01-01 00:00:00"
TIME_UNITS = f"seconds since {TIME_REFERENCE}"
CALENDAR = "proleptic_gregorian"

#: zlib level of every variable (with the shuffle filter). Measured on
#: configs/mountainwave3d_small.yaml (docs/output.md): level 4 gives 99% of the size reduction of
#: level 9, writing about 7% slower than level 1; levels 6 and 9 write 17% and 73% slower than
#: level 4 for files < 1% smaller.
COMPRESSION_LEVEL = 4

#: most values in one chunk (8 MiB of float64): a snapshot of a larger mesh spans several chunks
_MAX_CHUNK_VALUES = 1 << 20
#: records per chunk along the unlimited step / time / stage dimensions of 1-D variables
_RECORDS_PER_CHUNK = 1024

#: stages per chunk of the timers group (a table has a few dozen)
_TIMER_CHUNK = 64

#: a POSIX absolute path inside text: "/" at the start or after a space, quote, "=" or "("
_ABSOLUTE_PATH = re.compile(r"(?<![^\s'\"=(])/[^\s'\",()\[\]{}]*[^\s'\",()\[\]{}.:;]")


def _rows_per_chunk(n_rows: int, row_values: int = 1) -> int:
    """Rows of an array of ``n_rows`` rows (0: an unlimited dimension, which gets
    :data:`_RECORDS_PER_CHUNK`) and ``row_values`` values per row in one chunk of at most
    :data:`_MAX_CHUNK_VALUES` values."""
    rows = n_rows if n_rows > 0 else _RECORDS_PER_CHUNK
    return max(1, min(rows, _MAX_CHUNK_VALUES // max(1, row_values)))


def _portable_path(text: str, cwd: Path | None = None) -> str:
    """An absolute path as a path relative to the working directory when it lies below it, else
    its file name (no machine-specific folders in the file's metadata)."""
    cwd = Path.cwd() if cwd is None else cwd
    path = Path(text)
    try:
        return path.relative_to(cwd).as_posix() or "."
    except ValueError:
        return path.name or "."


def portable_text(text: str, cwd: Path | None = None) -> str:
    """``text`` with every absolute path replaced by :func:`_portable_path` of it.

    Examples
    --------
    >>> portable_text("# source: /home/me/run/configs/a.yaml", cwd=Path("/home/me/run"))
    '# source: configs/a.yaml'
    >>> portable_text("path: /scratch/out.nc", cwd=Path("/home/me/run"))
    'path: out.nc'
    """
    return _ABSOLUTE_PATH.sub(lambda m: _portable_path(m.group(0), cwd), text)


def _default_picard_iterations() -> int:
    """The configuration's default ``time.nonlinear_iterations`` (a writer not told its own)."""
    from dycore.config import TimeConfig

    return int(TimeConfig.model_fields["nonlinear_iterations"].default)


def _command_line(argv: list[str] | None = None) -> str:
    """What created the file, for ``history``: ``dycore run configs/a.yaml ...`` for the command
    line (also under ``python -m dycore``), else the calling program's name; no absolute paths."""
    argv = list(sys.argv if argv is None else argv)
    program = Path(argv[0]) if argv and argv[0] else Path("python")
    name = program.parent.name if program.name == "__main__.py" else program.stem
    if name.startswith("-"):            # python -c
        name = "python"
    args = [portable_text(arg) for arg in argv[1:]]
    if name == "dycore":
        return " ".join(["dycore"] + args)
    return f"the dycore Python API (program: {name or 'python'})"


def _import_netcdf4():
    try:
        import netCDF4
    except ImportError as exc:  # e.g. the GPU test machine without a netCDF4 wheel
        raise OutputError(f"netCDF output needs the netCDF4 package ({exc})") from None
    return netCDF4


def open_output(path, required=("x", "y", "z", "cell_nodes", "time"), attrs=(),
                purpose: str = "", what: str = "output file"):
    """Open a dycore output file for reading (masking off) after checking what it must hold.

    Parameters
    ----------
    path : str or Path
    required : variable names the file must have; attrs : global attributes it must have
    purpose : appended to the "not a dycore output file" message (e.g. "; cannot restart
        from it"); what : the file's role in the "cannot open" message

    Returns
    -------
    netCDF4.Dataset (the caller closes it)

    Raises
    ------
    OutputError when the file cannot be opened or lacks a variable or attribute (all named).
    """
    netCDF4 = _import_netcdf4()
    try:
        ds = netCDF4.Dataset(path, "r")
    except (OSError, RuntimeError) as exc:
        raise OutputError(f"{path}: cannot open {what} ({exc})") from None
    ds.set_auto_mask(False)
    missing = [n for n in required if n not in ds.variables]
    missing += [f"{a} attribute" for a in attrs if a not in ds.ncattrs()]
    if missing:
        ds.close()
        raise OutputError(f"{path}: not a dycore output file (no {', '.join(missing)})"
                          f"{purpose}")
    return ds


def _rename_into_place(part: Path, path: Path, replacing: bool) -> None:
    """Rename ``part`` to ``path``: over it when it existed before (``replacing``), else only
    if no file has appeared there meanwhile (a hard link, which fails on an existing name; on
    file systems without hard links, a check just before the rename).

    Raises
    ------
    OutputError
        A file appeared at ``path`` that this process did not create (it is left alone).
    """
    import errno

    if replacing:
        os.replace(part, path)
        return
    try:
        os.link(part, path)
    except FileExistsError:
        part.unlink(missing_ok=True)
        raise OutputError(f"{path}: a file appeared there while this run was starting (not "
                          "made by it); left as it is: choose another --output, or pass "
                          "--overwrite") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                             errno.EMLINK):
            raise
        if path.exists():
            part.unlink(missing_ok=True)
            raise OutputError(f"{path}: a file appeared there while this run was starting "
                              "(not made by it); left as it is") from None
        os.replace(part, path)
        return
    part.unlink()


class SnapshotWriter:
    """Create a netCDF-4 file for one run and append snapshots and diagnostics to it.

    Parameters
    ----------
    path : str or Path
        File to create (overwritten if it exists); its parent folder is created. The file is
        made as ``path`` + ``.part`` and renamed to ``path`` (``os.replace``) once its header
        (dimensions, mesh, metadata) is flushed, so ``path`` never names a file without one,
        whenever the process is killed (a stale ``.part`` may be left). A ``path`` that did not
        exist when the writer started is never renamed over: a file that appeared there
        meanwhile (made by another program) is left alone and OutputError raised.
    mesh : object
        Anything with ``coords`` (nnodes, 3) float64 [m] and ``tets`` (nele, 4) int [0-based].
    config_yaml : str
        The resolved configuration (stored in the global attribute ``config``).
    version : str
        ``dycore.__version__`` (global attribute ``dycore_version``).
    title : str
        Global attribute ``title``.
    picard_iterations : int, optional
        Length of the fixed ``picard`` dimension: the most Picard iterations of a step, i.e. the
        run's ``time.nonlinear_iterations`` (its callers pass it; default: the configuration's
        default value).
    compression_level : int
        zlib level 0-9 of every variable (0: uncompressed); default :data:`COMPRESSION_LEVEL`.
    shuffle : bool
        HDF5 byte-shuffle filter before zlib (default on; ignored at level 0).

    Raises
    ------
    OutputError
        The file or its folder cannot be created (names the path), or netCDF4 is missing.

    Examples
    --------
    >>> with SnapshotWriter("out.nc", mesh, config_yaml=cfg.resolved_yaml(),
    ...                     version=__version__) as writer:          # doctest: +SKIP
    ...     writer.write_snapshot(0.0, {"u": u, "w": w})
    """

    def __init__(self, path: str | Path, mesh: Any, *, config_yaml: str, version: str,
                 title: str = "dycore mountain-wave simulation",
                 picard_iterations: int | None = None,
                 compression_level: int = COMPRESSION_LEVEL, shuffle: bool = True):
        self.path = Path(path)
        self._ds = None
        if not (isinstance(compression_level, (int, np.integer)) and 0 <= compression_level <= 9):
            raise OutputError(f"{self.path}: compression_level must be an integer from 0 to 9, "
                              f"got {compression_level!r}")
        if picard_iterations is None:
            picard_iterations = _default_picard_iterations()
        if not (isinstance(picard_iterations, (int, np.integer)) and picard_iterations >= 1):
            raise OutputError(f"{self.path}: picard_iterations must be a positive integer, got "
                              f"{picard_iterations!r}")
        self.picard_iterations = int(picard_iterations)
        self._compression = ({"compression": "zlib", "complevel": int(compression_level),
                              "shuffle": bool(shuffle)} if compression_level > 0 else {})
        coords = np.ascontiguousarray(mesh.coords, dtype=REAL)
        tets = np.asarray(mesh.tets)
        if coords.ndim != 2 or coords.shape[1] != 3 or tets.ndim != 2 or tets.shape[1] != NLOC:
            raise OutputError(f"{self.path}: mesh must have coords (nnodes, 3) and tets "
                              f"(nele, 4); got {coords.shape} and {tets.shape}")
        self.nnodes = coords.shape[0]
        self._n_time = 0
        self._n_step = 0
        netCDF4 = _import_netcdf4()
        replacing = self.path.exists()     # the caller chose to replace it (--overwrite)
        part = self.path.with_name(self.path.name + ".part")   # renamed once the header is
        try:                                                  # on disk (see the class notes)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._ds = netCDF4.Dataset(part, "w", format="NETCDF4")
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot create output file ({exc})") from None
        try:
            self._define(coords, tets.astype(INDEX), config_yaml, version, title)
            self._ds.sync()
            _rename_into_place(part, self.path, replacing)    # the open file keeps its inode
        except OutputError:
            self._ds.close()
            raise
        except (OSError, RuntimeError) as exc:
            self._ds.close()
            part.unlink(missing_ok=True)
            raise OutputError(f"{self.path}: cannot write output file ({exc})") from None

    # ---------------------------------------------------------------------------- layout
    def _variable(self, name: str, dtype, dims: tuple[str, ...], chunks: tuple[int, ...],
                  fill_value: Any = False, group=None):
        """A compressed variable with explicit chunks; ``fill_value=False``: no _FillValue."""
        where = self._ds if group is None else group
        return where.createVariable(name, dtype, dims, fill_value=fill_value,
                                    chunksizes=chunks, **self._compression, **CHECKSUM)

    def _define(self, coords, tets, config_yaml, version, title) -> None:
        ds = self._ds
        nnodes, ncells = coords.shape[0], tets.shape[0]
        ds.createDimension("time", None)
        ds.createDimension("step", None)
        ds.createDimension("nodes", nnodes)
        ds.createDimension("cells", ncells)
        ds.createDimension("four", NLOC)
        ds.createDimension("picard", self.picard_iterations)   # the most iterations of a step

        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        ds.setncatts({
            "Conventions": "CF-1.8 UGRID-1.0",
            "title": title,
            "institution": "dycore",
            "source": f"dycore {version}: P1-P1 continuous-Galerkin Boussinesq dynamical core",
            "dycore_version": version,
            "config": portable_text(config_yaml),
            "history": f"{now}: created by dycore {version}: {_command_line()}",
        })

        # UGRID requires the two cf_role values below (R102, R301); CF-1.8 defines cf_role only
        # for discrete sampling geometries, so a CF checker lists them (docs/output.md).
        mesh = ds.createVariable("mesh", "i4")
        mesh.setncatts({
            "cf_role": "mesh_topology",
            "long_name": "topology of the 3-D tetrahedral mesh",
            "topology_dimension": np.int32(3),
            "node_coordinates": "x y z",
            "node_dimension": "nodes",
            "volume_node_connectivity": "cell_nodes",
            "volume_dimension": "cells",
            "volume_shape_type": "mesh_volume_types",
        })
        mesh.assignValue(0)

        node_chunks = (_rows_per_chunk(nnodes),)
        for name, std, long_name, values in (
                ("x", "projection_x_coordinate", "x coordinate of node (streamwise)", coords[:, 0]),
                ("y", "projection_y_coordinate", "y coordinate of node (spanwise)", coords[:, 1]),
                ("z", "altitude", "height of node above z = 0", coords[:, 2])):
            var = self._variable(name, "f8", ("nodes",), node_chunks)
            var.setncatts({"standard_name": std, "long_name": long_name, "units": "m",
                           "mesh": "mesh", "location": "node"})
            if name == "z":
                var.positive = "up"
            var[:] = values

        conn = self._variable("cell_nodes", "i4", ("cells", "four"),
                              (_rows_per_chunk(ncells, NLOC), NLOC))
        conn.setncatts({"cf_role": "volume_node_connectivity",
                        "long_name": "nodes of each tetrahedron (positively oriented)",
                        "start_index": np.int32(0)})
        conn[:, :] = tets

        # a CF flag variable; the mesh's volume_shape_type attribute names it (no cf_role: UGRID
        # defines cf_role values for meshes and connectivities only)
        shape = self._variable("mesh_volume_types", "i1", ("cells",), (_rows_per_chunk(ncells),))
        shape.setncatts({"long_name": "shape of each volume",
                         "flag_range": np.array([0, 2], dtype=np.int8),
                         "flag_values": np.array([0, 1, 2], dtype=np.int8),
                         "flag_meanings": "tetrahedron wedge hexahedron"})
        shape[:] = np.zeros(ncells, dtype=np.int8)

        time = self._variable("time", "f8", ("time",), (_rows_per_chunk(0),))
        time.setncatts({"standard_name": "time", "long_name": "model time",
                        "units": TIME_UNITS, "calendar": CALENDAR, "axis": "T",
                        "units_metadata": "leap_seconds: none",
                        "comment": f"seconds since the start of the run; the case is idealised, "
                                   f"so the reference date {TIME_REFERENCE} is nominal"})
        snap_step = self._variable("snapshot_step", "i4", ("time",), (_rows_per_chunk(0),))
        snap_step.setncatts({"long_name": "time-step number of the snapshot (0 = initial state)",
                             "units": "1",
                             "comment": f"{int(NOT_RECORDED)}: not recorded; dycore run "
                                        "--restart reads it to continue the step count"})
        for name, (long_name, units) in FIELDS.items():
            var = self._variable(name, "f8", ("time", "nodes"),
                                 (1, _rows_per_chunk(nnodes)), fill_value=np.nan)
            var.setncatts({"long_name": long_name, "units": units, "mesh": "mesh",
                           "location": "node", "coordinates": "x y z"})

        record = (_rows_per_chunk(0),)
        step = self._variable("step", "i4", ("step",), record)
        step.setncatts({"long_name": "time-step number (1 = first step)", "units": "1"})
        # no standard_name "time" here: CF tools (cf_xarray's ds.cf["time"]) must find one time
        # coordinate, the snapshots' ``time``; this is a second time axis, of the step records
        diag_time = self._variable("diag_time", "f8", ("step",), record, fill_value=np.nan)
        diag_time.setncatts({"long_name": "model time at the end of the step",
                             "units": TIME_UNITS, "calendar": CALENDAR,
                             "units_metadata": "leap_seconds: none"})
        picard = self._variable("picard_change", "f8", ("step", "picard"),
                                (_rows_per_chunk(0, self.picard_iterations),
                                 self.picard_iterations), fill_value=np.nan)
        picard.setncatts({"long_name": "max-norm velocity change of each Picard iteration "
                                       "(NaN after an early exit)", "units": "m s-1"})
        for name in DIAGNOSTICS:
            self._diagnostic_variable(name)

    def _diagnostic_variable(self, name: str):
        if name in self._ds.variables:
            return self._ds.variables[name]
        long_name, units, dtype = DIAGNOSTICS.get(name, (name.replace("_", " "), None, "f8"))
        integer = dtype != "f8"
        var = self._variable(name, dtype, ("step",), (_rows_per_chunk(0),),
                             fill_value=False if integer else np.nan)
        var.long_name = long_name
        if units is not None:
            var.units = units
        if integer:
            var.comment = f"{int(NOT_RECORDED)}: not recorded in this step"
        return var

    # ---------------------------------------------------------------------------- writing
    def write_snapshot(self, t: float, fields: Mapping[str, np.ndarray],
                       step: int | None = None) -> int:
        """Append one time record and flush it to disk.

        Parameters
        ----------
        t : float
            Model time [s].
        fields : mapping of str to ndarray (nnodes,)
            Host arrays named as in :data:`FIELDS`; fields left out stay NaN in this record.
        step : int, optional
            Time-step number of the snapshot (``snapshot_step``; 0 = initial state); default
            :data:`NOT_RECORDED`.

        Returns
        -------
        int
            Index of the record written on the file's ``time`` dimension.

        Raises
        ------
        OutputError
            Unknown field name, wrong shape, or a write error (names the file).
        """
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            raise OutputError(f"{self.path}: unknown snapshot field(s) {', '.join(unknown)}; "
                              f"expected some of {', '.join(FIELDS)}")
        arrays = {}
        for name, values in fields.items():
            values = np.asarray(values, dtype=REAL)
            if values.shape != (self.nnodes,):
                raise OutputError(f"{self.path}: field {name} has shape {values.shape}, expected "
                                  f"({self.nnodes},)")
            arrays[name] = values
        index = self._n_time
        try:
            ds = self._dataset()
            ds.variables["time"][index] = float(t)
            if "snapshot_step" in ds.variables:
                ds.variables["snapshot_step"][index] = NOT_RECORDED if step is None else int(step)
            for name, values in arrays.items():
                ds.variables[name][index, :] = values
            ds.sync()
        except (OSError, RuntimeError) as exc:
            raise OutputError(f"{self.path}: cannot write snapshot at t = {t} s ({exc})") from None
        self._n_time += 1
        return index

    def write_diagnostics(self, step: int, t: float, diag: Mapping[str, Any]) -> int:
        """Append one per-step diagnostics record and flush it to disk.

        Parameters
        ----------
        step : int
            Time-step number.
        t : float
            Model time at the end of the step [s].
        diag : mapping
            Scalars by name (:data:`DIAGNOSTICS` gives the known ones; other names get a new
            float64 variable on ``step`` at first use; an int32 one not given is written as
            :data:`NOT_RECORDED`); ``picard_change``: sequence of at most ``picard_iterations``
            floats (one per Picard iteration done); ``solver_iterations``: optional mapping
            ``{system: count}`` stored as ``solver_iterations_<system>``; ``solver_iterations_*``
            values may be sequences (one count per solve), summed.

        Returns
        -------
        int
            Index of the record written on the file's ``step`` dimension.

        Raises
        ------
        OutputError
            A non-scalar value, more Picard values than the ``picard`` dimension holds, or a
            write error (names the file).
        """
        return self.write_diagnostics_rows([(step, t, diag)])

    def _diagnostics_row(self, step: int, diag: Mapping[str, Any]):
        """(picard values, scalars) of one record, checked (see :meth:`write_diagnostics`)."""
        diag = dict(diag)
        for system, count in dict(diag.pop("solver_iterations", None) or {}).items():
            diag[f"solver_iterations_{system}"] = count
        picard = diag.pop("picard_change", None)
        picard = np.zeros(0) if picard is None else np.asarray(picard, dtype=REAL).ravel()
        if picard.size > self.picard_iterations:
            raise OutputError(f"{self.path}: step {step} has {picard.size} picard_change values; "
                              f"the file's picard dimension holds {self.picard_iterations} "
                              "(time.nonlinear_iterations)")
        scalars = {}
        for name, value in diag.items():
            if name.startswith("solver_iterations_") and np.ndim(value) == 1:
                value = int(np.sum(value))
            if np.ndim(value) != 0:
                raise OutputError(f"{self.path}: diagnostic {name} must be a scalar, got shape "
                                  f"{np.shape(value)}")
            scalars[name] = value
        return picard, scalars

    def write_diagnostics_rows(self, rows) -> int:
        """Append several per-step records at once (one slice per variable) and flush once.

        Parameters
        ----------
        rows : sequence of (step, t, diag) as the arguments of :meth:`write_diagnostics`, in
            step order

        Returns
        -------
        int
            Index of the last record written (-1 for no rows).

        Raises
        ------
        OutputError as :meth:`write_diagnostics`; nothing is written when a row is invalid.
        """
        rows = list(rows)
        if not rows:
            return self._n_step - 1
        checked = [self._diagnostics_row(step, diag) for step, _, diag in rows]
        i0, m = self._n_step, len(rows)
        first = rows[0][0]
        try:
            ds = self._dataset()
            ds.variables["step"][i0:i0 + m] = np.array([int(r[0]) for r in rows], np.int32)
            ds.variables["diag_time"][i0:i0 + m] = np.array([float(r[1]) for r in rows], REAL)
            width = max(p.size for p, _ in checked)
            if width:
                block = np.full((m, width), np.nan)
                for j, (picard, _) in enumerate(checked):
                    block[j, :picard.size] = picard
                ds.variables["picard_change"][i0:i0 + m, :width] = block
            names = []
            for _, scalars in checked:
                names += [name for name in scalars if name not in names]
            for name in names:
                var = self._diagnostic_variable(name)
                fill = NOT_RECORDED if var.dtype == np.int32 else np.nan
                col = np.array([scalars.get(name, fill) for _, scalars in checked],
                               dtype=var.dtype)
                var[i0:i0 + m] = col
            for name, var in ds.variables.items():     # int32: no fill value, so write them all
                if (var.dimensions == ("step",) and var.dtype == np.int32 and name != "step"
                        and name not in names):
                    var[i0:i0 + m] = np.full(m, NOT_RECORDED, np.int32)
            ds.sync()
        except (OSError, RuntimeError) as exc:
            which = f"step {first}" if m == 1 else f"steps {first}-{rows[-1][0]}"
            raise OutputError(f"{self.path}: cannot write diagnostics of {which} "
                              f"({exc})") from None
        self._n_step += m
        return self._n_step - 1

    def write_timers(self, table: Mapping[str, Mapping[str, Any]], text: str | None = None
                     ) -> None:
        """Store the stage-timer table: global attribute ``timers`` (JSON) and group ``timers``.

        Parameters
        ----------
        table : mapping of stage name to mapping of column to number
            e.g. ``{"assemble.momentum": {"calls": 600, "total_ms": 12.5, "mean_ms": 0.0208}}``.
            The group holds ``stage_name`` and one float64 variable per column (NaN where a
            stage lacks the column; units from a ``_s`` / ``_ms`` suffix). A later call replaces
            the table.
        text : str, optional
            The table as printed (global attribute ``timers_table``).

        Raises
        ------
        OutputError
            A write error (names the file).
        """
        table = {str(stage): dict(row) for stage, row in table.items()}
        columns: list[str] = []
        for row in table.values():
            columns += [col for col in row if col not in columns]
        try:
            ds = self._dataset()
            ds.setncattr("timers", json.dumps(table, default=float))
            if text is not None:
                ds.setncattr("timers_table", text)
            group = ds.groups["timers"] if "timers" in ds.groups else ds.createGroup("timers")
            if "stage" not in group.dimensions:
                group.createDimension("stage", None)
                names = group.createVariable("stage_name", str, ("stage",),
                                             chunksizes=(_TIMER_CHUNK,), **CHECKSUM)
                names.long_name = "timed stage"
            old = len(group.dimensions["stage"])
            names = group.variables["stage_name"]
            for i, stage in enumerate(table):
                names[i] = stage
            for i in range(len(table), old):
                names[i] = ""
            for col in columns:
                if col in group.variables:
                    var = group.variables[col]
                else:
                    var = self._variable(col, "f8", ("stage",), (_TIMER_CHUNK,),
                                         fill_value=np.nan, group=group)
                for suffix, units in (("_s", "s"), ("_ms", "ms")):
                    if col.endswith(suffix):
                        var.units = units
            n = max(len(table), old)
            for col, var in group.variables.items():
                if col == "stage_name":
                    continue
                values = np.full(n, np.nan)
                for i, row in enumerate(table.values()):
                    value = row.get(col)
                    if isinstance(value, (int, float, np.number)):
                        values[i] = float(value)
                if n:
                    var[:n] = values
            ds.sync()
        except (OSError, RuntimeError, TypeError) as exc:
            raise OutputError(f"{self.path}: cannot write the timer table ({exc})") from None

    # ---------------------------------------------------------------------------- lifetime
    @property
    def n_snapshots(self) -> int:
        """Number of snapshot records written."""
        return self._n_time

    def _dataset(self):
        if self._ds is None or not self._ds.isopen():
            raise OutputError(f"{self.path}: output file is already closed")
        return self._ds

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        if self._ds is not None and self._ds.isopen():
            try:
                self._ds.close()
            except (OSError, RuntimeError) as exc:
                raise OutputError(f"{self.path}: cannot close output file ({exc})") from None

    @classmethod
    def append(cls, path: str | Path, *, keep_snapshots: int, keep_steps_upto: int,
               config_yaml: str, version: str) -> "SnapshotWriter":
        """Open an existing file written by this class to continue it (``dycore run --restart``).

        Time records from index ``keep_snapshots`` on and step records whose ``step`` exceeds
        ``keep_steps_upto`` are blanked (time, fields and float diagnostics NaN, integers
        :data:`NOT_RECORDED`); the next :meth:`write_snapshot` / :meth:`write_diagnostics` write
        over them (netCDF cannot shorten an unlimited dimension). The ``config`` attribute is
        replaced by ``config_yaml`` and a line is added to ``history``.

        Raises
        ------
        OutputError
            The file cannot be opened for writing or is not a dycore output file.
        """
        self = cls.__new__(cls)
        self.path = Path(path)
        self._ds = None
        self._compression = {"compression": "zlib", "complevel": COMPRESSION_LEVEL,
                             "shuffle": True}
        netCDF4 = _import_netcdf4()
        try:
            self._ds = netCDF4.Dataset(self.path, "a")
        except (OSError, RuntimeError) as exc:
            raise OutputError(f"{self.path}: cannot open output file to append to it "
                              f"({exc})") from None
        try:
            ds = self._ds
            ds.set_auto_mask(False)
            missing = [n for n in ("time", "step", "nodes", "picard") if n not in ds.dimensions]
            if missing:
                raise OutputError(f"{self.path}: not a dycore output file (no dimension "
                                  f"{', '.join(missing)})")
            self.nnodes = len(ds.dimensions["nodes"])
            self.picard_iterations = len(ds.dimensions["picard"])
            n_time = len(ds.dimensions["time"])
            self._n_time = min(int(keep_snapshots), n_time)
            for index in range(self._n_time, n_time):
                for name, var in ds.variables.items():
                    if var.dimensions[:1] == ("time",):
                        var[index, ...] = NOT_RECORDED if var.dtype == np.int32 else np.nan
            steps = np.asarray(ds.variables["step"][:]) if "step" in ds.variables else []
            self._n_step = 0
            while (self._n_step < len(steps)
                   and 1 <= steps[self._n_step] <= keep_steps_upto):
                self._n_step += 1
            for index in range(self._n_step, len(steps)):
                for name, var in ds.variables.items():
                    if var.dimensions[:1] == ("step",):
                        var[index, ...] = NOT_RECORDED if var.dtype == np.int32 else np.nan
            now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            ds.setncattr("config", portable_text(config_yaml))
            history = getattr(ds, "history", "")
            ds.setncattr("history", f"{history}\n{now}: continued by dycore {version}: "
                                    f"{_command_line()}".lstrip("\n"))
            ds.sync()
        except (OSError, RuntimeError, KeyError, IndexError) as exc:
            self._ds.close()
            raise OutputError(f"{self.path}: cannot append to output file ({exc})") from None
        except OutputError:
            self._ds.close()
            raise
        return self

    def __enter__(self) -> "SnapshotWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def read_last_snapshot(path: str | Path, *, fields: tuple[str, ...] | None = None,
                       at: float | None = None
                       ) -> tuple[float, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Read the last complete snapshot of a file written by :class:`SnapshotWriter` (or, with
    ``at``, the snapshot nearest model time ``at`` [s]).

    Parameters
    ----------
    path : str or Path
        The netCDF file.
    fields : tuple of str, optional
        Names to read (default: every field of :data:`FIELDS` present in the file).
    at : float, optional
        Model time [s]; the snapshot nearest to it is read (default: the last).

    Returns
    -------
    t : float
        Model time of the snapshot [s].
    values : dict of str to ndarray (nnodes,) float64
        The node fields (NaN where a field was not written).
    coords : ndarray (nnodes, 3) float64
        Node coordinates [m].
    cell_nodes : ndarray (nele, 4) int32
        0-based tetrahedron connectivity.

    Raises
    ------
    OutputError
        The file cannot be opened, is not a dycore output file, or holds no snapshot.
    """
    path = Path(path)
    ds = open_output(path)
    try:
        times = np.asarray(ds.variables["time"][:], dtype=REAL)
        valid = np.flatnonzero(np.isfinite(times))     # records blanked by a restart hold NaN
        if valid.size == 0:
            raise OutputError(f"{path}: the file holds no snapshot yet")
        last = int(valid[-1] if at is None else valid[np.argmin(np.abs(times[valid] - at))])
        names = fields if fields is not None else tuple(n for n in FIELDS if n in ds.variables)
        absent = [name for name in names if name not in ds.variables]
        if absent:
            raise OutputError(f"{path}: no field {', '.join(absent)} in the file")
        values = {name: np.asarray(ds.variables[name][last, :], dtype=REAL) for name in names}
        coords = np.column_stack([np.asarray(ds.variables[c][:], dtype=REAL) for c in "xyz"])
        conn = ds.variables["cell_nodes"]
        cell_nodes = np.asarray(conn[:, :], dtype=INDEX) - INDEX(getattr(conn, "start_index", 0))
        t = float(ds.variables["time"][last])
    except (OSError, RuntimeError, KeyError, IndexError) as exc:
        raise OutputError(f"{path}: cannot read output file ({exc})") from None
    finally:
        ds.close()
    return t, values, coords, cell_nodes
