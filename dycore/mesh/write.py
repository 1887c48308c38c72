"""Write a :class:`Mesh` with its boundary tags to a mesh file that :func:`read_mesh` reads back.

gmsh ``.msh`` (format 2.2 by default, or 4.1): one tetrahedron block in the volume group
``air`` (id 7) and one triangle block per boundary tag, each in the physical group named after
the tag (``ground`` = 1 ... ``north`` = 6, :class:`FaceTag`) with ``$PhysicalNames``. Any other
format meshio writes (``.vtu``, ``.xdmf``, ...): the tetrahedra and triangles with the tags as the
integer cell data ``face_tag`` (0 on the tetrahedra). Coordinates are written exactly (binary,
or ASCII with 17 significant digits).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dycore.errors import MeshError
from dycore.mesh.mesh import FaceTag, Mesh

__all__ = ["write_mesh", "VOLUME_GROUP"]

#: (name, id) of the physical group of the tetrahedra in a written gmsh file
VOLUME_GROUP = ("air", len(FaceTag) + 1)

_GMSH_FORMATS = {"gmsh22": "gmsh22", "2.2": "gmsh22", "gmsh": "gmsh", "4.1": "gmsh"}


def write_mesh(mesh: Mesh, path: str | Path, *, msh_version: str = "2.2",
               binary: bool = True) -> Path:
    """Write ``mesh`` (nodes, tetrahedra, tagged boundary triangles) to ``path`` via meshio.

    Parameters
    ----------
    mesh : Mesh
    path : str or Path
        ``.msh`` for gmsh; another extension picks meshio's writer for it.
    msh_version : {"2.2", "4.1"}
        gmsh format version (``.msh`` only).
    binary : bool
        Binary or ASCII gmsh file (``.msh`` only).

    Returns
    -------
    Path : the file written.

    Raises
    ------
    MeshError
        An unknown ``msh_version``, or meshio cannot write the file (names the path).
    """
    import meshio

    path = Path(path)
    tets = mesh.tets.astype(np.int64)
    cells, tags = [("tetra", tets)], [np.full(mesh.nele, 0, dtype=np.int32)]
    for tag in FaceTag:
        sel = mesh.face_tags == int(tag)
        cells.append(("triangle", mesh.faces[sel].astype(np.int64)))
        tags.append(np.full(int(sel.sum()), int(tag), dtype=np.int32))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() == ".msh":
            fmt = _GMSH_FORMATS.get(str(msh_version))
            if fmt is None:
                raise MeshError(f"{path}: msh_version must be 2.2 or 4.1, got {msh_version!r}")
            tags[0][:] = VOLUME_GROUP[1]
            names = {tag.name.lower(): np.array([int(tag), 2]) for tag in FaceTag}
            names[VOLUME_GROUP[0]] = np.array([VOLUME_GROUP[1], 3])
            # gmsh 4.1 ties nodes to geometric entities: interior nodes to the volume (3, 1),
            # boundary nodes to the surface of (one of) their tags (2, tag)
            dim_tags = np.tile(np.array([3, 1]), (mesh.nnodes, 1))
            for tag in FaceTag:
                dim_tags[np.unique(mesh.faces[mesh.face_tags == int(tag)])] = [2, int(tag)]
            out = meshio.Mesh(mesh.coords, cells,
                              cell_data={"gmsh:physical": tags,
                                         "gmsh:geometrical": [np.where(t > len(FaceTag), 1, t)
                                                              for t in tags]},
                              field_data=names,
                              point_data={"gmsh:dim_tags": dim_tags} if fmt == "gmsh" else {})
            meshio.write(path, out, file_format=fmt, binary=binary)
        else:
            meshio.write(path, meshio.Mesh(mesh.coords, cells, cell_data={"face_tag": tags}))
    except MeshError:
        raise
    except Exception as exc:                       # noqa: BLE001 (meshio raises many kinds)
        raise MeshError(f"{path}: cannot write the mesh file ({exc})") from None
    return path
