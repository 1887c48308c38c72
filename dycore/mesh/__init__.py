"""Mesh layer: the :class:`Mesh` container, the terrain-following generator, mesh files (read,
write) and renumbering.

See docs/architecture.md, "Mesh (dycore/mesh) -- exact contract".
"""
from dycore.mesh.generate import (
    GridSpec,
    generate_terrain_following,
    graded_one_sided_nodes,
    graded_symmetric_nodes,
)
from dycore.mesh.boundary import BoundaryFaces, boundary_faces
from dycore.mesh.mesh import FaceTag, Mesh
from dycore.mesh.read import read_mesh
from dycore.mesh.renumber import bandwidth, node_graph, reverse_cuthill_mckee, shuffle
from dycore.mesh.write import write_mesh

__all__ = [
    "FaceTag",
    "Mesh",
    "GridSpec",
    "generate_terrain_following",
    "graded_symmetric_nodes",
    "graded_one_sided_nodes",
    "reverse_cuthill_mckee",
    "shuffle",
    "node_graph",
    "bandwidth",
    "boundary_faces",
    "BoundaryFaces",
    "read_mesh",
    "write_mesh",
]
