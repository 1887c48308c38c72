"""Read a tetrahedral mesh file (gmsh ``.msh`` v2/v4 or any meshio format) into a :class:`Mesh`.

The file must hold 4-node tetrahedra (meshio cell type ``tetra``) and, on every boundary face,
a 3-node triangle (``triangle``) in a physical group that names the surface it lies on: one of
``ground``, ``top``, ``west``, ``east``, ``south``, ``north`` (:class:`FaceTag`, case-insensitive;
a group without a name may use the tag's number, 1-6). Lines and points (``line``, ``vertex``)
are ignored; any other cell type is an error. The tags are read from the cell data
``gmsh:physical`` (gmsh), ``medit:ref`` (Medit ``.mesh``) or ``face_tag`` (any other format),
the first present; group names from the file's ``field_data`` (gmsh ``$PhysicalNames``).

What the reader does: negatively oriented tetrahedra get local nodes 1 and 2 swapped (positive
``det J``); the boundary faces are found from the tetrahedra (:func:`boundary_faces`), oriented
outward and matched to the tagged triangles; faces are listed by tag, then owning element (the
generator's order); :meth:`Mesh.check` runs; nodes and elements are renumbered by reverse
Cuthill-McKee unless ``renumber="none"``. The terrain is the file's ``ground`` surface: nothing
else about it is needed (docs/mesh.md).

Every problem raises :class:`MeshError` naming the file and the first offending element or node
(0-based positions in the file's order of tetrahedra / nodes / triangles, as meshio reads them;
gmsh's own numbers start at 1).
"""
from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import numpy as np

from dycore.dtypes import INDEX, REAL
from dycore.errors import MeshError
from dycore.mesh.boundary import boundary_faces
from dycore.mesh.mesh import _DEGENERATE_RTOL, FaceTag, Mesh
from dycore.mesh.renumber import reverse_cuthill_mckee

__all__ = ["read_mesh", "TAG_CELL_DATA", "IGNORED_CELL_TYPES", "face_tag_names"]

#: cell-data arrays that may carry the boundary tags, in the order they are looked for
TAG_CELL_DATA = ("gmsh:physical", "medit:ref", "face_tag")
#: lower-dimensional cells a mesh file may carry besides tetrahedra and triangles (ignored)
IGNORED_CELL_TYPES = ("vertex", "line")


def face_tag_names() -> dict[str, FaceTag]:
    """The physical-group names the reader accepts: ``{"ground": FaceTag.GROUND, ...}``."""
    return {tag.name.lower(): tag for tag in FaceTag}


def _fmt_xyz(x: np.ndarray) -> str:
    """Points [m] on one line: ``(x, y, z)`` or ``(x, y, z), (x, y, z), ...``."""
    rows = np.atleast_2d(np.asarray(x, dtype=float))
    return ", ".join("(" + ", ".join(f"{v:.7g}" for v in row) + ")" for row in rows)


def _raise_at_first(bad: np.ndarray, message) -> None:
    """Raise :class:`MeshError` ``message(i)`` at the first ``i`` where ``bad`` is true, if any."""
    if bad.any():
        raise MeshError(message(int(np.argmax(bad))))


def _read_file(path: Path):
    import meshio

    if not path.exists():
        raise MeshError(f"{path}: mesh file (mesh.file) not found")
    if path.is_dir():
        raise MeshError(f"{path}: mesh.file is a directory; expected a mesh file such as "
                        f"{path / 'domain.msh'}")
    # meshio tries every reader of an ambiguous extension (.msh: ansys, gmsh), printing each
    # failure, and then calls sys.exit: name gmsh for .msh, keep its prints, turn exit into ours
    fmt = "gmsh" if path.suffix.lower() == ".msh" else None
    printed = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(printed), \
                contextlib.redirect_stderr(printed):
            warnings.simplefilter("ignore")       # meshio warns about data it skips
            return meshio.read(path, file_format=fmt)
    except (Exception, SystemExit) as exc:        # noqa: BLE001 (meshio raises many kinds)
        text = str(exc).strip() if not isinstance(exc, SystemExit) else ""
        text = text or " ".join(printed.getvalue().split()) or type(exc).__name__
        raise MeshError(f"{path}: cannot read the mesh file with meshio "
                        f"({text.splitlines()[0]})") from None


def _cells(path: Path, m):
    """Tetrahedra (file order) and tagged triangles (nodes, raw group id) of a meshio Mesh."""
    tag_key = next((k for k in TAG_CELL_DATA if k in m.cell_data), None)
    tets, tris, tri_ids = [], [], []
    for b, block in enumerate(m.cells):
        data = np.asarray(block.data)
        if block.type == "tetra":
            tets.append(data)
        elif block.type == "triangle":
            tris.append(data)
            ids = (np.asarray(m.cell_data[tag_key][b]).reshape(-1) if tag_key is not None
                   else np.zeros(len(data), dtype=np.int64))
            tri_ids.append(ids.astype(np.int64))
        elif block.type not in IGNORED_CELL_TYPES:
            n = sum(len(c.data) for c in m.cells if c.type == block.type)
            raise MeshError(
                f"{path}: holds {n} '{block.type}' cell(s); dycore reads 4-node tetrahedra "
                f"('tetra') with 3-node boundary triangles ('triangle') only (lines and points "
                f"are ignored): re-mesh with first-order tetrahedra (gmsh: -3 -order 1)")
    if not tets:
        kinds = ", ".join(sorted({c.type for c in m.cells})) or "no cells"
        raise MeshError(f"{path}: holds no tetrahedra ({kinds}); expected a 3-D mesh of "
                        f"4-node tetrahedra")
    tri = np.concatenate(tris) if tris else np.empty((0, 3), dtype=np.int64)
    ids = np.concatenate(tri_ids) if tri_ids else np.empty(0, dtype=np.int64)
    return np.concatenate(tets).astype(np.int64), tri.astype(np.int64), ids, tag_key


def _group_names(m) -> dict[int, str]:
    """Physical-group id -> name of the 2-D groups in ``field_data`` (gmsh $PhysicalNames)."""
    names = {}
    for name, value in (m.field_data or {}).items():
        v = np.asarray(value).reshape(-1)
        if v.size == 0:
            continue
        if v.size >= 2 and int(v[1]) != 2:
            continue                              # a volume, curve or point group
        names[int(v[0])] = str(name)
    return names


def _face_tags(path: Path, ids: np.ndarray, names: dict[int, str], tag_key) -> np.ndarray:
    """FaceTag value (int8) of each triangle from its group id; 0 for id 0 (no group)."""
    accepted = face_tag_names()
    out = np.zeros(ids.size, dtype=np.int8)
    for gid in np.unique(ids):
        gid = int(gid)
        if gid == 0:
            continue
        if gid in names:
            tag = accepted.get(names[gid].strip().lower())
            if tag is None:
                raise MeshError(
                    f"{path}: the boundary triangles' physical group '{names[gid]}' (id {gid}) "
                    f"is not a boundary name; expected one of {', '.join(accepted)} "
                    f"(case-insensitive)")
        elif 1 <= gid <= len(FaceTag):
            tag = FaceTag(gid)
        else:
            raise MeshError(
                f"{path}: the boundary triangles' physical group {gid} ({tag_key}) has no name "
                f"and is not a FaceTag number 1-{len(FaceTag)}; name the groups "
                f"{', '.join(accepted)}")
        out[ids == gid] = int(tag)
    return out


def _oriented_tets(path: Path, coords: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """``tets`` with local nodes 1 and 2 swapped where the signed volume is negative."""
    x = coords[tets]
    e = x[:, 1:, :] - x[:, :1, :]
    det = np.einsum("ij,ij->i", e[:, 0], np.cross(e[:, 1], e[:, 2]))
    scale = np.abs(e).max(axis=(1, 2))
    flat = ~(np.abs(det) > 6.0 * _DEGENERATE_RTOL * scale ** 3)
    _raise_at_first(flat, lambda k: (
        f"{path}: tetrahedron {k} has zero volume (signed volume {det[k] / 6.0:.6g} m^3; "
        f"{int(flat.sum())} degenerate tetrahedra in total); nodes {tets[k].tolist()} at "
        f"{_fmt_xyz(x[k])}"))
    out = tets.copy()
    neg = det < 0.0
    out[neg, 1], out[neg, 2] = tets[neg, 2], tets[neg, 1]
    return out


def read_mesh(path: str | Path, *, renumber: str = "rcm") -> Mesh:
    """Read a tetrahedral mesh with tagged boundary triangles from a file (through meshio).

    Parameters
    ----------
    path : str or Path
        Mesh file: gmsh ``.msh`` (format 2.2 or 4.1, ASCII or binary) or any format meshio reads
        by its extension (VTU, XDMF, Medit ``.mesh``, ...). Coordinates in metres.
    renumber : {"rcm", "none"}
        Reverse Cuthill-McKee (:func:`dycore.mesh.reverse_cuthill_mckee`) or the file's order.

    Returns
    -------
    Mesh
        coords (nnodes, 3) float64 [m]; tets (nele, 4) int32, positively oriented; faces
        (nfaces, 3) int32 outward, listed by tag then owning element (before renumbering);
        face_tags (nfaces,) int8; face_ele (nfaces,) int32. Checked by :meth:`Mesh.check`.

    Raises
    ------
    MeshError
        Naming the file and, where there is one, the offending tetrahedron / node / triangle
        (0-based position in the file): the file is missing or cannot be parsed; it holds
        cells other than tetrahedra, triangles, lines and points, or no tetrahedra; it is not
        3-D or has non-finite coordinates; a node belongs to no tetrahedron; a tetrahedron has
        zero volume; a face is shared by more than two tetrahedra or two tetrahedra overlap; a
        triangle's group is not a boundary name; a tagged triangle is not a boundary face, or
        lies in two groups; a boundary face has no tag.
    ValueError
        ``renumber`` is not "rcm" or "none".

    Source: gmsh reference manual, "MSH file format" (physical groups, $PhysicalNames);
    meshio 5 (``gmsh:physical`` cell data, ``field_data`` = {name: [id, dim]}).
    """
    if renumber not in ("rcm", "none"):
        raise ValueError(f"renumber must be 'rcm' or 'none', got {renumber!r}")
    path = Path(path)
    m = _read_file(path)
    tets, tri, ids, tag_key = _cells(path, m)

    coords = np.asarray(m.points, dtype=REAL)
    if coords.ndim != 2 or coords.shape[1] != 3:
        raise MeshError(f"{path}: points have shape {coords.shape}; expected (n, 3) "
                        f"(a 3-D mesh with x, y, z in metres)")
    bad = np.flatnonzero(~np.isfinite(coords).all(axis=1))
    if bad.size:
        raise MeshError(f"{path}: node {bad[0]} has non-finite coordinates {coords[bad[0]]}")
    n = coords.shape[0]
    if tets.min() < 0 or tets.max() >= n:
        raise MeshError(f"{path}: a tetrahedron refers to a node outside 0..{n - 1}")
    unused = np.flatnonzero(np.bincount(tets.ravel(), minlength=n) == 0)
    if unused.size:
        raise MeshError(
            f"{path}: node {unused[0]} at {_fmt_xyz(coords[unused[0]])} belongs to no "
            f"tetrahedron ({unused.size} unused node(s)); remove them (gmsh: Mesh.SaveAll = 0 "
            f"and no stray points)")

    tets = _oriented_tets(path, coords, tets)
    try:
        bnd = boundary_faces(tets)
    except MeshError as exc:
        raise MeshError(f"{path}: {exc}") from None

    # ---- match the tagged triangles to the boundary faces
    tags = _face_tags(path, ids, _group_names(m), tag_key)
    keep = tags != 0
    tri, tags, tri_pos = tri[keep], tags[keep], np.flatnonzero(keep)
    nb = bnd.faces.shape[0]
    both = np.concatenate([np.sort(bnd.faces, axis=1), np.sort(tri, axis=1)])
    _, inv = np.unique(both, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    slot = np.full(inv.max() + 1 if inv.size else 0, -1, dtype=np.int64)
    slot[inv[:nb]] = np.arange(nb)
    match = slot[inv[nb:]]
    group = {int(t): t.name.lower() for t in FaceTag}
    _raise_at_first(match < 0, lambda i: (
        f"{path}: triangle {tri_pos[i]} (group '{group[int(tags[i])]}', nodes "
        f"{tri[i].tolist()} at {_fmt_xyz(coords[tri[i]])}) is not a boundary face of the "
        f"tetrahedra; {int((match < 0).sum())} such triangle(s)"))
    face_tag = np.zeros(nb, dtype=np.int8)
    face_tag[match] = tags
    _raise_at_first(face_tag[match] != tags, lambda i: (
        f"{path}: the boundary face with nodes {tri[i].tolist()} is in two groups, "
        f"'{group[int(face_tag[match[i]])]}' and '{group[int(tags[i])]}'; each boundary "
        f"face takes one tag"))
    untagged = np.flatnonzero(face_tag == 0)
    if untagged.size:
        f = int(untagged[0])
        need = "no triangles in a named physical group" if not tri.size else "no tag"
        raise MeshError(
            f"{path}: the boundary face of tetrahedron {bnd.owner[f]} with nodes "
            f"{bnd.faces[f].tolist()} (centroid {_fmt_xyz(coords[bnd.faces[f]].mean(axis=0))}) "
            f"has {need}; {untagged.size} of {nb} boundary faces are untagged. Every boundary "
            f"face needs a triangle in one of the physical groups {', '.join(group.values())}")

    order = np.lexsort((bnd.local, bnd.owner, face_tag))
    mesh = Mesh(coords=coords, tets=tets.astype(INDEX), faces=bnd.faces[order],
                face_tags=face_tag[order], face_ele=bnd.owner[order].astype(INDEX))
    try:
        mesh.check()
    except MeshError as exc:                       # one line, for `dycore run`
        raise MeshError(f"{path}: {' '.join(str(exc).split())}") from None
    return reverse_cuthill_mckee(mesh) if renumber == "rcm" else mesh
