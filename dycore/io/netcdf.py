"""netCDF-4 output: UGRID-1.0 tetrahedral mesh, node fields appended per snapshot, diagnostics.

File layout (CF-1.8, UGRID-1.0 fully 3-D mesh)::

    dimensions: time, step, picard (unlimited); nodes, cells, four = 4
    mesh                       UGRID mesh topology (cf_role = "mesh_topology", 3-D)
    x, y, z (nodes)            node coordinates [m]
    cell_nodes (cells, four)   tetrahedron -> node connectivity, 0-based, int32
    mesh_volume_types (cells)  UGRID volume shape flags (0 = tetrahedron)
    time (time)                model time since the start of the run [s]
    u v w p theta_prime q_v q_c q_r (time, nodes)   node fields, float64
    step, diag_time, max_abs_w, ... (step)          per-step diagnostics
    picard_change (step, picard)                    max-norm change per Picard iteration, NaN-padded
    group timers                                    stage-timer table (also JSON and text
                                                    global attributes timers, timers_table)

Every :meth:`SnapshotWriter.write_snapshot` and :meth:`SnapshotWriter.write_diagnostics` ends with
``sync()``, so a run that is killed keeps every record it finished (STYLE.md principle 6).
``netCDF4`` is imported when a file is opened, so importing this module needs no netCDF library.
"""
from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dycore.dtypes import INDEX, NLOC, REAL
from dycore.errors import OutputError

__all__ = ["SnapshotWriter", "read_last_snapshot", "FIELDS", "DIAGNOSTICS"]

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

_FILL_INT = np.int32(-1)


def _import_netcdf4():
    try:
        import netCDF4
    except ImportError as exc:  # e.g. the GPU test machine without a netCDF4 wheel
        raise OutputError(f"netCDF output needs the netCDF4 package ({exc})") from None
    return netCDF4


class SnapshotWriter:
    """Create a netCDF-4 file for one run and append snapshots and diagnostics to it.

    Parameters
    ----------
    path : str or Path
        File to create (overwritten if it exists); its parent folder is created.
    mesh : object
        Anything with ``coords`` (nnodes, 3) float64 [m] and ``tets`` (nele, 4) int [0-based].
    config_yaml : str
        The resolved configuration (stored in the global attribute ``config``).
    version : str
        ``dycore.__version__`` (global attribute ``dycore_version``).
    title : str
        Global attribute ``title``.

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
                 title: str = "dycore mountain-wave simulation"):
        self.path = Path(path)
        self._ds = None
        coords = np.ascontiguousarray(mesh.coords, dtype=REAL)
        tets = np.asarray(mesh.tets)
        if coords.ndim != 2 or coords.shape[1] != 3 or tets.ndim != 2 or tets.shape[1] != NLOC:
            raise OutputError(f"{self.path}: mesh must have coords (nnodes, 3) and tets "
                              f"(nele, 4); got {coords.shape} and {tets.shape}")
        self.nnodes = coords.shape[0]
        self._n_time = 0
        self._n_step = 0
        netCDF4 = _import_netcdf4()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._ds = netCDF4.Dataset(self.path, "w", format="NETCDF4")
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot create output file ({exc})") from None
        try:
            self._define(coords, tets.astype(INDEX), config_yaml, version, title)
            self._ds.sync()
        except (OSError, RuntimeError) as exc:
            self._ds.close()
            raise OutputError(f"{self.path}: cannot write output file ({exc})") from None

    # ---------------------------------------------------------------------------- layout
    def _define(self, coords, tets, config_yaml, version, title) -> None:
        ds = self._ds
        ds.createDimension("time", None)
        ds.createDimension("step", None)
        ds.createDimension("nodes", coords.shape[0])
        ds.createDimension("cells", tets.shape[0])
        ds.createDimension("four", NLOC)
        ds.createDimension("picard", None)     # grows to the most Picard iterations of a step

        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        ds.setncatts({
            "Conventions": "CF-1.8 UGRID-1.0",
            "title": title,
            "institution": "dycore",
            "source": f"dycore {version}: P1-P1 continuous-Galerkin Boussinesq dynamical core",
            "dycore_version": version,
            "config": config_yaml,
            "history": f"{now}: created by {' '.join([Path(sys.argv[0]).name] + sys.argv[1:])}",
        })

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

        for name, std, long_name, values in (
                ("x", "projection_x_coordinate", "x coordinate of node (streamwise)", coords[:, 0]),
                ("y", "projection_y_coordinate", "y coordinate of node (spanwise)", coords[:, 1]),
                ("z", "altitude", "height of node above z = 0", coords[:, 2])):
            var = ds.createVariable(name, "f8", ("nodes",))
            var.setncatts({"standard_name": std, "long_name": long_name, "units": "m",
                           "mesh": "mesh", "location": "node"})
            if name == "z":
                var.positive = "up"
            var[:] = values

        conn = ds.createVariable("cell_nodes", "i4", ("cells", "four"))
        conn.setncatts({"cf_role": "volume_node_connectivity",
                        "long_name": "nodes of each tetrahedron (positively oriented)",
                        "start_index": np.int32(0)})
        conn[:, :] = tets

        shape = ds.createVariable("mesh_volume_types", "i1", ("cells",))
        shape.setncatts({"cf_role": "volume_shape_type",
                         "long_name": "shape of each volume",
                         "flag_range": np.array([0, 2], dtype=np.int8),
                         "flag_values": np.array([0, 1, 2], dtype=np.int8),
                         "flag_meanings": "tetrahedron wedge hexahedron"})
        shape[:] = np.zeros(tets.shape[0], dtype=np.int8)

        time = ds.createVariable("time", "f8", ("time",))
        time.setncatts({"long_name": "model time since the start of the run", "units": "s",
                        "axis": "T"})
        for name, (long_name, units) in FIELDS.items():
            var = ds.createVariable(name, "f8", ("time", "nodes"), fill_value=np.nan,
                                    chunksizes=(1, coords.shape[0]))
            var.setncatts({"long_name": long_name, "units": units, "mesh": "mesh",
                           "location": "node", "coordinates": "x y z"})

        step = ds.createVariable("step", "i4", ("step",))
        step.long_name = "time-step number (1 = first step)"
        diag_time = ds.createVariable("diag_time", "f8", ("step",))
        diag_time.setncatts({"long_name": "model time at the end of the step", "units": "s"})
        picard = ds.createVariable("picard_change", "f8", ("step", "picard"), fill_value=np.nan)
        picard.setncatts({"long_name": "max-norm velocity change of each Picard iteration "
                                       "(NaN after an early exit)", "units": "m s-1"})
        for name in DIAGNOSTICS:
            self._diagnostic_variable(name)

    def _diagnostic_variable(self, name: str):
        if name in self._ds.variables:
            return self._ds.variables[name]
        long_name, units, dtype = DIAGNOSTICS.get(name, (name.replace("_", " "), None, "f8"))
        fill = np.nan if dtype == "f8" else _FILL_INT
        var = self._ds.createVariable(name, dtype, ("step",), fill_value=fill)
        var.long_name = long_name
        if units is not None:
            var.units = units
        return var

    # ---------------------------------------------------------------------------- writing
    def write_snapshot(self, t: float, fields: Mapping[str, np.ndarray]) -> int:
        """Append one time record and flush it to disk.

        Parameters
        ----------
        t : float
            Model time [s].
        fields : mapping of str to ndarray (nnodes,)
            Host arrays named as in :data:`FIELDS`; fields left out stay NaN in this record.

        Returns
        -------
        int
            Index of the record written.

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
            float64 variable on ``step`` at first use); ``picard_change``: sequence of at most
            floats (one per Picard iteration done); ``solver_iterations``: optional mapping
            ``{system: count}`` stored as ``solver_iterations_<system>``; ``solver_iterations_*``
            values may be sequences (one count per solve), summed.

        Returns
        -------
        int
            Index of the record written.

        Raises
        ------
        OutputError
            A non-scalar value, or a write error (names the file).
        """
        diag = dict(diag)
        for system, count in dict(diag.pop("solver_iterations", None) or {}).items():
            diag[f"solver_iterations_{system}"] = count
        picard = diag.pop("picard_change", None)
        picard = np.zeros(0) if picard is None else np.asarray(picard, dtype=REAL).ravel()
        scalars = {}
        for name, value in diag.items():
            if name.startswith("solver_iterations_") and np.ndim(value) == 1:
                value = int(np.sum(value))
            if np.ndim(value) != 0:
                raise OutputError(f"{self.path}: diagnostic {name} must be a scalar, got shape "
                                  f"{np.shape(value)}")
            scalars[name] = value
        index = self._n_step
        try:
            ds = self._dataset()
            ds.variables["step"][index] = int(step)
            ds.variables["diag_time"][index] = float(t)
            if picard.size:
                ds.variables["picard_change"][index, :picard.size] = picard
            for name, value in scalars.items():
                self._diagnostic_variable(name)[index] = value
            ds.sync()
        except (OSError, RuntimeError) as exc:
            raise OutputError(f"{self.path}: cannot write diagnostics of step {step} "
                              f"({exc})") from None
        self._n_step += 1
        return index

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
                names = group.createVariable("stage_name", str, ("stage",))
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
                    var = group.createVariable(col, "f8", ("stage",), fill_value=np.nan)
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

    def __enter__(self) -> "SnapshotWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def read_last_snapshot(path: str | Path, *, fields: tuple[str, ...] | None = None
                       ) -> tuple[float, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Read the last complete snapshot of a file written by :class:`SnapshotWriter`.

    Parameters
    ----------
    path : str or Path
        The netCDF file.
    fields : tuple of str, optional
        Names to read (default: every field of :data:`FIELDS` present in the file).

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
    netCDF4 = _import_netcdf4()
    try:
        ds = netCDF4.Dataset(path, "r")
    except (OSError, RuntimeError) as exc:
        raise OutputError(f"{path}: cannot open output file ({exc})") from None
    try:
        ds.set_auto_mask(False)
        missing = [name for name in ("x", "y", "z", "cell_nodes", "time") if name not in
                   ds.variables]
        if missing:
            raise OutputError(f"{path}: not a dycore output file (no {', '.join(missing)})")
        n_time = len(ds.dimensions["time"])
        if n_time == 0:
            raise OutputError(f"{path}: the file holds no snapshot yet")
        last = n_time - 1
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
