"""Plane sections of the output as 2-D UGRID files (``output.sections``).

uxarray, xugrid and ParaView's UGRID reader read 2-D UGRID meshes only, not the 3-D tetrahedral
topology of the run's output file. A section ``z=3000`` or ``y=0`` cuts the tetrahedral mesh
with that plane (:func:`dycore.io.plot.section_mesh`); the cut is a triangle mesh on which every
P1 field is linear, and its vertex values are the exact P1 interpolation along the cut
tetrahedron edges. Each section is one CF-1.8 / UGRID-1.0 netCDF file beside the output,
``FILE-stem.section_<axis><level>m.nc``, with one record per snapshot of the run:

- ``mesh2d`` (``cf_role = mesh_topology``, ``topology_dimension = 2``), ``face_nodes``
  (anticlockwise in the in-plane coordinates, 0-based), the in-plane node coordinates (``x y``
  for a horizontal section, with the standard names ``projection_x_coordinate`` and
  ``projection_y_coordinate``; ``x z`` for ``y=LEVEL`` and ``y z`` for ``x=LEVEL``, without
  standard names, so xugrid takes them as the plane's x and y, with a warning saying so) and
  the fixed coordinate as a scalar variable ``section_<axis>``;
- ``time`` as in the output file, and the fields ``u v w p theta_prime q_v q_c q_r`` on the
  nodes (``location = node``).

:func:`dycore.io.followers.attach_followers` hands each snapshot of the run to every section
file; ``dycore run --restart`` into the same file rebuilds the section files from the output's
kept snapshots first.
"""
from __future__ import annotations

import datetime
from pathlib import Path
from typing import Mapping

import numpy as np

from dycore.errors import OutputError
from dycore.io.netcdf import (CALENDAR, FIELDS, TIME_REFERENCE, TIME_UNITS, _import_netcdf4,
                              portable_text)

__all__ = ["section_path", "SectionWriter", "section_paths"]

_AXES = "xyz"
_STANDARD_NAMES = {"x": "projection_x_coordinate", "y": "projection_y_coordinate",
                   "z": "altitude"}


def section_path(output: str | Path, axis: int, level: float) -> Path:
    """``FILE-stem.section_<axis><level>m.nc`` beside the output file ``output``."""
    output = Path(output)
    return output.with_name(f"{output.stem}.section_{_AXES[axis]}{level:g}m.nc")


def section_paths(output: str | Path, sections: list[str]) -> list[Path]:
    """The files of ``output.sections`` entries (``'z=3000'``, ...) for the output ``output``."""
    from dycore.config import parse_section

    return [section_path(output, *parse_section(item)) for item in sections]


class SectionWriter:
    """One section file: create it (replacing one that exists) and append snapshots to it.

    Parameters
    ----------
    path : Path
        The file to write.
    coords : ndarray (nnodes, 3) float64
        Mesh node coordinates [m].
    tets : ndarray (nele, 4) int
        0-based connectivity.
    axis, level : int, float
        The plane ``coords[:, axis] == level`` [m].
    config_yaml, version : str
        Stored as the global attributes ``config`` and ``dycore_version`` (as the output file).

    Raises
    ------
    OutputError
        The plane misses the mesh (names the plane and the mesh's extent along it), or the file
        cannot be written (names it).
    """

    def __init__(self, path: Path, coords: np.ndarray, tets: np.ndarray, axis: int,
                 level: float, *, config_yaml: str = "", version: str = ""):
        from dycore.io.plot import section_mesh

        self.path = Path(path)
        self.mesh = section_mesh(coords, tets, axis=axis, level=level)
        if len(self.mesh.triangles) == 0:
            lo, hi = float(coords[:, axis].min()), float(coords[:, axis].max())
            raise OutputError(f"output.sections: the plane {_AXES[axis]} = {level:g} m does not "
                              f"cut the mesh ({_AXES[axis]} from {lo:g} to {hi:g} m)")
        self._n_time = 0
        self._ds = None
        netCDF4 = _import_netcdf4()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._ds = netCDF4.Dataset(self.path, "w", format="NETCDF4")
            self._define(config_yaml, version)
            self._ds.sync()
        except (OSError, RuntimeError) as exc:
            self.close()
            raise OutputError(f"{self.path}: cannot write the section file ({exc})") from None

    def _define(self, config_yaml: str, version: str) -> None:
        ds, mesh = self._ds, self.mesh
        a, b = (_AXES[i] for i in range(3) if i != mesh.axis)
        fixed = _AXES[mesh.axis]
        tri = np.asarray(mesh.triangles, dtype=np.int32).copy()
        p = mesh.points[tri]
        clockwise = ((p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1])
                     - (p[:, 1, 1] - p[:, 0, 1]) * (p[:, 2, 0] - p[:, 0, 0])) < 0
        tri[clockwise] = tri[clockwise][:, [0, 2, 1]]      # UGRID: anticlockwise faces
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        ds.setncatts({
            "Conventions": "CF-1.8 UGRID-1.0",
            "title": f"dycore section {fixed} = {mesh.level:g} m",
            "institution": "dycore",
            "source": f"dycore {version}: plane section of the P1 fields of the 3-D output "
                      "(exact P1 interpolation along the cut tetrahedron edges)",
            "dycore_version": version,
            "section": f"{fixed}={mesh.level:g}",
            "config": portable_text(config_yaml),
            "history": f"{now}: created by dycore {version}",
        })
        ds.createDimension("time", None)
        # the dimension names the UGRID checker (cc-plugin-ugrid 1.1) looks for
        ds.createDimension("nnodes", len(mesh.points))
        ds.createDimension("nfaces", len(tri))
        ds.createDimension("three", 3)
        topo = ds.createVariable("mesh2d", "i4")
        topo.setncatts({"cf_role": "mesh_topology",
                        "long_name": f"triangles of the plane {fixed} = {mesh.level:g} m",
                        "topology_dimension": np.int32(2), "node_coordinates": f"{a} {b}",
                        "node_dimension": "nnodes", "face_node_connectivity": "face_nodes",
                        "face_dimension": "nfaces"})
        topo.assignValue(0)
        horizontal = fixed == "z"
        for k, name in enumerate((a, b)):
            var = ds.createVariable(name, "f8", ("nnodes",))
            var.setncatts({"units": "m", "long_name": f"{name} coordinate of the section node ("
                           f"{'first' if k == 0 else 'second'} axis of the section plane)"})
            if horizontal:        # a vertical section's (x, z) are no projected (x, y) pair
                var.standard_name = _STANDARD_NAMES[name]
            if name == "z":
                var.positive = "up"
            var[:] = mesh.points[:, k]
        level = ds.createVariable(f"section_{fixed}", "f8")
        level.setncatts({"standard_name": _STANDARD_NAMES[fixed], "units": "m",
                         "long_name": f"{fixed} of the section plane"})
        if fixed == "z":
            level.positive = "up"
        level.assignValue(mesh.level)
        faces = ds.createVariable("face_nodes", "i4", ("nfaces", "three"))
        faces.setncatts({"cf_role": "face_node_connectivity", "start_index": np.int32(0),
                         "long_name": "nodes of each triangle, anticlockwise"})
        faces[:, :] = tri
        time = ds.createVariable("time", "f8", ("time",))
        time.setncatts({"standard_name": "time", "long_name": "model time", "units": TIME_UNITS,
                        "calendar": CALENDAR, "axis": "T",
                        "comment": f"seconds since the start of the run; the reference date "
                                   f"{TIME_REFERENCE} is nominal"})
        for name, (long_name, units) in FIELDS.items():
            var = ds.createVariable(name, "f8", ("time", "nnodes"), fill_value=np.nan,
                                    compression="zlib", complevel=4, shuffle=True)
            var.setncatts({"long_name": long_name, "units": units, "mesh": "mesh2d",
                           "location": "node", "coordinates": f"{a} {b} section_{fixed}"})

    def write(self, t: float, fields: Mapping[str, np.ndarray]) -> int:
        """Append the snapshot ``fields`` (nnodes,) each (names of FIELDS) at model time ``t``
        [s], interpolated onto the section, and flush it; returns the record index.

        Raises
        ------
        OutputError
            A write error (names the file).
        """
        index = self._n_time
        try:
            self._ds.variables["time"][index] = float(t)
            for name, values in fields.items():
                if name in FIELDS:
                    self._ds.variables[name][index, :] = self.mesh.values(values)
            self._ds.sync()
        except (OSError, RuntimeError) as exc:
            raise OutputError(f"{self.path}: cannot write the section at t = {t:g} s "
                              f"({exc})") from None
        self._n_time += 1
        return index

    def close(self) -> None:
        if self._ds is not None:
            try:
                self._ds.close()
            finally:
                self._ds = None
