"""XDMF + HDF5 time series for ParaView and VTK, written during the run or exported afterwards.

ParaView's netCDF UGRID reader handles 2-D meshes only, so the tetrahedral fields go to ParaView
as XDMF: ``FILE.xdmf`` (XML) and the folder ``FILE-stem_xdmf/`` beside it with the HDF5 data:

- ``mesh.h5``: the node coordinates, the tetrahedra and the boundary triangles with their tags,
  written once;
- ``t00000.h5``, ``t00001.h5``, ...: the fields of one snapshot each, written and closed before
  the XML names them.

After every snapshot the XML is written anew to a temporary file and renamed over ``FILE.xdmf``
(atomic), so at any moment (a run killed with SIGKILL included) ``FILE.xdmf`` lists exactly
the snapshots whose data files are complete, and opens in ParaView and VTK.

XML layout (XDMF 3): a temporal collection ``fields`` of the tetrahedral grid, one grid per
snapshot (its time: the model time in seconds), with the node arrays under their plain netCDF
names ``u v w p theta_prime q_v q_c q_r`` and the vector ``velocity`` (u, v, w), each with an
``Information`` element ``units`` (the netCDF units: ParaView shows plain names, the units stay
metadata); and a static grid ``boundary``: the boundary triangles with the cell array
``face_tag`` (1 ground, 2 top, 3 west, 4 east, 5 south, 6 north), so *Threshold* ``face_tag``
1-1 draws the terrain. Values are the netCDF values bit for bit (float64).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Mapping

import numpy as np

from dycore.dtypes import REAL
from dycore.errors import MeshError, OutputError

__all__ = ["XdmfWriter", "export_xdmf", "xdmf_paths", "xdmf_summary", "boundary_tags", "VECTOR_NAME",
           "SCALARS", "FACE_TAG_NAMES"]

#: the velocity vector (u, v, w) as one array
VECTOR_NAME = "velocity"
_VECTOR_COMPONENTS = ("u", "v", "w")
#: scalar node arrays, named as in the netCDF file
SCALARS = ("u", "v", "w", "p", "theta_prime", "q_v", "q_c", "q_r")
#: face_tag values of the boundary grid
FACE_TAG_NAMES = {1: "ground", 2: "top", 3: "west", 4: "east", 5: "south", 6: "north"}

_MESH_FILE = "mesh.h5"


def xdmf_paths(path: str | Path, out: str | Path | None = None) -> tuple[Path, Path]:
    """The ``.xdmf`` file and the data folder of the XDMF series of ``path`` (default: beside
    it, same stem): ``(FILE.xdmf, FILE-stem_xdmf/)``.

    Raises
    ------
    OutputError
        ``out`` does not end in ``.xdmf``, or one of the two would be ``path`` itself.
    """
    path = Path(path)
    xdmf = path.with_suffix(".xdmf") if out is None else Path(out)
    if xdmf.suffix.lower() != ".xdmf":
        raise OutputError(f"{xdmf}: an XDMF export must end in .xdmf (its HDF5 data goes "
                          f"beside it into the folder {xdmf.stem}_xdmf)")
    data = xdmf.with_name(f"{xdmf.stem}_xdmf")
    from dycore.io.paths import same_file

    if same_file(path, xdmf) or same_file(path, data):     # same file, not only same name
        raise OutputError(f"{path}: the XDMF export would replace the netCDF file itself; "
                          "give another --out")
    return xdmf, data


def xdmf_summary(path: str | Path, out: str | Path | None = None) -> str:
    """The line ``dycore run`` and ``dycore export`` print for the XDMF series of ``path``:
    ``xdmf: FILE.xdmf (+ FILE_xdmf/)`` (the paths of :func:`xdmf_paths`; its errors)."""
    xdmf, data = xdmf_paths(path, out)
    return f"xdmf: {xdmf} (+ {data.name}/)"


def boundary_tags(coords: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boundary triangles of a mesh and their :data:`FACE_TAG_NAMES` tags from the outward
    normals (for a file that stores no tags): downward (``n_z < -1e-3 |n|``) is the ground,
    upward the top, the others by the sign of their largest horizontal component.

    Returns
    -------
    faces : ndarray (nfaces, 3) int64; tags : ndarray (nfaces,) int8
    """
    from dycore.mesh.boundary import boundary_faces

    faces = boundary_faces(tets).faces.astype(np.int64)
    x = np.asarray(coords, dtype=REAL)[faces]
    n = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])
    size = np.linalg.norm(n, axis=1)
    tags = np.where(np.abs(n[:, 0]) >= np.abs(n[:, 1]), np.where(n[:, 0] < 0, 3, 4),
                    np.where(n[:, 1] < 0, 5, 6))
    tags = np.where(n[:, 2] > 1e-3 * size, 2, tags)
    tags = np.where(n[:, 2] < -1e-3 * size, 1, tags)
    return faces, tags.astype(np.int8)


def _import_h5py():
    try:
        import h5py
    except ImportError as exc:
        raise OutputError(f"XDMF output needs the h5py package ({exc})") from None
    return h5py


def _put(h5, name: str, data: np.ndarray) -> None:
    """One dataset with HDF5's Fletcher-32 checksum (as the netCDF output's variables have:
    damaged bytes are a read error, not wrong numbers); empty arrays stay contiguous."""
    if data.size:
        h5.create_dataset(name, data=data, fletcher32=True)
    else:
        h5[name] = data


def _data_item(parent, text: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
    kind = "Float" if np.dtype(dtype).kind == "f" else "Int"
    item = ET.SubElement(parent, "DataItem", DataType=kind,
                         Precision=str(np.dtype(dtype).itemsize),
                         Dimensions=" ".join(map(str, shape)), Format="HDF")
    item.text = text


class XdmfWriter:
    """Write an XDMF series snapshot by snapshot (see the module notes for the layout).

    Parameters
    ----------
    xdmf : Path
        The ``.xdmf`` file; the data folder is :func:`xdmf_paths`' second path.
    coords : ndarray (nnodes, 3) float64
        Node coordinates [m].
    tets : ndarray (nele, 4) int
        0-based tetrahedra.
    faces, face_tags : ndarray (nfaces, 3) int, (nfaces,) int
        Boundary triangles and their tags (:data:`FACE_TAG_NAMES`).
    units : mapping of str to str
        netCDF units of each field (stored as the arrays' ``units`` information).
    source : str
        Text of the ``source`` information element (where the data comes from).

    Raises
    ------
    OutputError
        The files cannot be written (names them), or h5py is missing.
    """

    def __init__(self, xdmf: Path, coords: np.ndarray, tets: np.ndarray, faces: np.ndarray,
                 face_tags: np.ndarray, *, units: Mapping[str, str], source: str):
        self.xdmf = Path(xdmf)
        self.data = self.xdmf.with_name(f"{self.xdmf.stem}_xdmf")
        self._h5py = _import_h5py()
        self.nnodes, self.ncells, self.nfaces = len(coords), len(tets), len(faces)
        self.units = dict(units)
        self.source = source
        self.times: list[float] = []
        try:
            self.data.mkdir(parents=True, exist_ok=True)
            for old in self.data.glob("t[0-9][0-9][0-9][0-9][0-9]*.h5"):
                old.unlink()                      # an earlier series' snapshots
            with self._h5py.File(self.data / _MESH_FILE, "w") as h5:
                _put(h5, "points", np.ascontiguousarray(coords, dtype=REAL))
                _put(h5, "tetrahedra", np.ascontiguousarray(tets, dtype=np.int64))
                _put(h5, "boundary_faces", np.ascontiguousarray(faces, dtype=np.int64))
                _put(h5, "face_tag", np.ascontiguousarray(face_tags, dtype=np.int8))
            self._write_xml()
        except OSError as exc:
            raise OutputError(f"{self.xdmf}: cannot write the XDMF output ({exc})") from None

    def _ref(self, file: str, dataset: str) -> str:
        return f"{self.data.name}/{file}:/{dataset}"

    def _geometry(self, grid) -> None:
        geometry = ET.SubElement(grid, "Geometry", GeometryType="XYZ")
        _data_item(geometry, self._ref(_MESH_FILE, "points"), (self.nnodes, 3), REAL)

    def _write_xml(self) -> None:
        root = ET.Element("Xdmf", Version="3.0")
        domain = ET.SubElement(root, "Domain")
        ET.SubElement(domain, "Information", Name="source", Value=self.source)
        ET.SubElement(domain, "Information", Name="time",
                      Value="model time in s since the start of the run")
        series = ET.SubElement(domain, "Grid", Name="fields", GridType="Collection",
                               CollectionType="Temporal")
        for k, t in enumerate(self.times):
            grid = ET.SubElement(series, "Grid", Name="fields", GridType="Uniform")
            ET.SubElement(grid, "Time", Value=repr(float(t)))
            topology = ET.SubElement(grid, "Topology", TopologyType="Tetrahedron",
                                     NumberOfElements=str(self.ncells))
            _data_item(topology, self._ref(_MESH_FILE, "tetrahedra"), (self.ncells, 4),
                       np.int64)
            self._geometry(grid)
            snapshot = f"t{k:05d}.h5"
            arrays = [(VECTOR_NAME, "Vector", 3)] if all(
                c in self.units for c in _VECTOR_COMPONENTS) else []
            arrays += [(name, "Scalar", 1) for name in SCALARS if name in self.units]
            for name, kind, ncomp in arrays:
                attribute = ET.SubElement(grid, "Attribute", Name=name, AttributeType=kind,
                                          Center="Node")
                ET.SubElement(attribute, "Information", Name="units",
                              Value=self.units["u" if name == VECTOR_NAME else name])
                shape = (self.nnodes, 3) if ncomp == 3 else (self.nnodes,)
                _data_item(attribute, self._ref(snapshot, name), shape, REAL)
        if self.nfaces:
            self._boundary_xml(domain)
        ET.indent(root)
        part = self.xdmf.with_name(self.xdmf.name + ".part")
        part.write_bytes(b'<?xml version="1.0" encoding="utf-8"?>\n'
                         + ET.tostring(root, encoding="utf-8") + b"\n")
        os.replace(part, self.xdmf)

    def _boundary_xml(self, domain) -> None:
        boundary = ET.SubElement(domain, "Grid", Name="boundary", GridType="Uniform")
        ET.SubElement(boundary, "Information", Name="face_tag", Value=", ".join(
            f"{k} {v}" for k, v in FACE_TAG_NAMES.items()))
        topology = ET.SubElement(boundary, "Topology", TopologyType="Triangle",
                                 NumberOfElements=str(self.nfaces))
        _data_item(topology, self._ref(_MESH_FILE, "boundary_faces"), (self.nfaces, 3),
                   np.int64)
        self._geometry(boundary)
        tag = ET.SubElement(boundary, "Attribute", Name="face_tag", AttributeType="Scalar",
                            Center="Cell")
        _data_item(tag, self._ref(_MESH_FILE, "face_tag"), (self.nfaces,), np.int8)

    def write(self, t: float, fields: Mapping[str, np.ndarray]) -> int:
        """Add the snapshot at model time ``t`` [s]: its data file, then the XML naming it.

        Parameters
        ----------
        t : float
        fields : mapping of str to ndarray (nnodes,) float64
            The netCDF fields (those with units given at construction are written).

        Returns
        -------
        int : the snapshot's index.

        Raises
        ------
        OutputError
            A field is missing or the files cannot be written (names them).
        """
        k = len(self.times)
        missing = [n for n in self.units if n not in fields]
        if missing:
            raise OutputError(f"{self.xdmf}: snapshot at t = {t:g} s lacks {', '.join(missing)}")
        path = self.data / f"t{k:05d}.h5"
        try:
            with self._h5py.File(path, "w") as h5:
                for name in self.units:
                    _put(h5, name, np.asarray(fields[name], dtype=REAL))
                if all(c in self.units for c in _VECTOR_COMPONENTS):
                    _put(h5, VECTOR_NAME, np.column_stack(
                        [np.asarray(fields[c], dtype=REAL) for c in _VECTOR_COMPONENTS]))
            self.times.append(float(t))
            self._write_xml()
        except OSError as exc:
            raise OutputError(f"{self.xdmf}: cannot write the snapshot at t = {t:g} s "
                              f"({exc})") from None
        return k

    def close(self) -> None:
        """Nothing stays open between snapshots; here for the writer protocol."""


def export_xdmf(path: str | Path, out: str | Path | None = None, *,
                overwrite: bool = False) -> Path:
    """Write every snapshot of a dycore netCDF output as an XDMF series (:class:`XdmfWriter`).

    Parameters
    ----------
    path : str or Path
        netCDF output of ``dycore run`` (a file still being written gives its finished snapshots).
    out : str or Path, optional
        The ``.xdmf`` file to write (default: ``path`` with suffix ``.xdmf``); the HDF5 data goes
        into the folder ``<stem>_xdmf`` beside it.
    overwrite : bool
        Replace an existing ``.xdmf`` file and data folder (default: refuse).

    Returns
    -------
    Path
        The ``.xdmf`` file (ParaView: "XDMF Reader").

    Raises
    ------
    OutputError
        The input cannot be read, is not a dycore output or holds no snapshot; the output exists
        (without ``overwrite``) or cannot be written; h5py is missing. The boundary tags come
        from the faces' normals (:func:`boundary_tags`: the netCDF file stores no tags); a mesh
        whose boundary cannot be found (not conforming) gets no boundary grid.
    """
    from dycore.io.netcdf import _import_netcdf4

    path = Path(path)
    xdmf, data = xdmf_paths(path, out)
    existing = [str(p) for p in (xdmf, data) if p.exists()]
    if existing and not overwrite:
        raise OutputError(f"{' and '.join(existing)}: XDMF output exists; pass --overwrite to "
                          "replace it")
    netCDF4 = _import_netcdf4()
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
        cells = read("cell_nodes").astype(np.int64) - int(getattr(conn, "start_index", 0))
        units = {n: str(getattr(ds.variables[n], "units", "1"))
                 for n in SCALARS if n in ds.variables}
        try:
            faces, tags = boundary_tags(points, cells)
        except MeshError:            # not a conforming, positively oriented mesh: no boundary
            faces, tags = np.empty((0, 3), np.int64), np.empty(0, np.int8)
        staging = None              # written in a folder of its own beside the target and
        try:                        # moved into place only when complete
            xdmf.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".dycore-export-", dir=xdmf.parent))
            writer = XdmfWriter(staging / xdmf.name, points, cells, faces, tags, units=units,
                                source=f"{path.name}: dycore netCDF output, exported by "
                                       "dycore export --xdmf")
            for k in records:
                writer.write(float(times[k]), {n: read(n, k).astype(REAL) for n in units})
            if data.exists():
                shutil.rmtree(data)
            os.replace(staging / data.name, data)
            os.replace(staging / xdmf.name, xdmf)
        except OutputError as exc:
            if staging is not None and str(staging) in str(exc):   # a write error: name ours
                raise OutputError(f"{xdmf}: cannot write the XDMF export ("
                                  f"{str(exc).split(' (', 1)[-1]}") from None
            raise
        except OSError as exc:
            raise OutputError(f"{xdmf}: cannot write the XDMF export ({exc})") from None
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
