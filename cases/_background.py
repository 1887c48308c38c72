"""Pieces shared by the case packages: the stratified background, the reference state and the
box-mesh check (docs/equations.md §2). A case module calls them with its own ``Parameters``,
which must carry ``u0``, ``theta0``, ``brunt_vaisala``, ``g``, ``q_v_surface``,
``q_v_scale_height`` (and ``lx``, ``ly``, ``lz``, ``h0``, ``a`` for :func:`check_box_mesh`).
"""
from __future__ import annotations

import logging
import math

import numpy as np

from dycore.dtypes import REAL
from dycore.errors import MeshError
from dycore.mesh import FaceTag, Mesh

__all__ = ["coords_array", "theta_bar", "dtheta_bar_dz", "q_v_ref", "reference_state",
           "initial_state", "check_box_mesh", "MESH_PLANE_RTOL"]

#: relative tolerance (of the largest domain length) of :func:`check_box_mesh`'s plane tests
MESH_PLANE_RTOL = 1e-6


def coords_array(coords) -> np.ndarray:
    """Node coordinates as a float64 (n, 3) array; MeshError for another shape."""
    c = np.asarray(coords, dtype=REAL)
    if c.ndim != 2 or c.shape[1] != 3:
        raise MeshError(f"coords must have shape (nnodes, 3), got {c.shape}")
    return c


def theta_bar(params, z) -> np.ndarray:
    """Background potential temperature ``theta0 exp(N^2 z / g)`` [K], shape of z [m]
    (constant buoyancy frequency N; docs/equations.md §2)."""
    z = np.asarray(z, dtype=REAL)
    n = params.brunt_vaisala
    return params.theta0 * np.exp(n * n * z / params.g)


def dtheta_bar_dz(params, z) -> np.ndarray:
    """Background lapse ``d theta_bar/dz = theta_bar N^2 / g`` [K/m], shape of z [m]."""
    n = params.brunt_vaisala
    return theta_bar(params, z) * (n * n / params.g)


def q_v_ref(params, z) -> np.ndarray:
    """Reference vapour ``q_v_surface exp(-z / q_v_scale_height)`` [kg/kg], shape of z [m]."""
    z = np.asarray(z, dtype=REAL)
    return params.q_v_surface * np.exp(-z / params.q_v_scale_height)


def reference_state(params, coords) -> dict[str, np.ndarray]:
    """Reference (relaxation / Dirichlet) values at the nodes (fresh float64 arrays).

    Returns ``u`` (n, 3) = (u0, 0, 0) [m/s]; ``theta_prime`` (n,) zeros [K]; ``q_v`` (n,)
    :func:`q_v_ref` of z; ``q_c``, ``q_r`` (n,) zeros [kg/kg]. Source: docs/equations.md §2.
    """
    c = coords_array(coords)
    n = c.shape[0]
    u = np.zeros((n, 3), dtype=REAL)
    u[:, 0] = params.u0
    return {"u": u, "theta_prime": np.zeros(n, dtype=REAL), "q_v": q_v_ref(params, c[:, 2]),
            "q_c": np.zeros(n, dtype=REAL), "q_r": np.zeros(n, dtype=REAL)}


def initial_state(params, coords) -> dict[str, np.ndarray]:
    """Impulsive start: :func:`reference_state` plus ``p`` = 0 [m^2/s^2]."""
    state = reference_state(params, coords)
    state["p"] = np.zeros(state["theta_prime"].shape[0], dtype=REAL)
    return {k: state[k] for k in ("u", "p", "theta_prime", "q_v", "q_c", "q_r")}


def check_box_mesh(params, mesh: Mesh, source: str, terrain) -> None:
    """Check that a mesh read from a file meshes ``[-lx/2, lx/2] x [-ly/2, ly/2] x [ground, lz]``.

    Every :class:`FaceTag` present; west / east / south / north / top faces on their planes and
    every node inside the box (tolerance :data:`MESH_PLANE_RTOL` x the largest length). A ground
    farther than 1 % of ``h0`` (at least 1 m) from ``terrain(x, y)`` is announced once (logged).

    Raises
    ------
    MeshError naming ``source``, the node and the plane.
    """
    c = np.asarray(mesh.coords, dtype=REAL)
    tol = MESH_PLANE_RTOL * max(params.lx, params.ly, params.lz)
    planes = {FaceTag.WEST: (0, -0.5 * params.lx, "-lx/2"), FaceTag.EAST: (0, 0.5 * params.lx, "lx/2"),
              FaceTag.SOUTH: (1, -0.5 * params.ly, "-ly/2"), FaceTag.NORTH: (1, 0.5 * params.ly, "ly/2"),
              FaceTag.TOP: (2, params.lz, "lz")}
    hint = (f"the case's domain is lx = {params.lx:g} m, ly = {params.ly:g} m, lz = "
            f"{params.lz:g} m centred on x = y = 0 (set case.parameters lx, ly, lz to the mesh's "
            f"box)")
    for tag in FaceTag:
        nodes = mesh.tagged_nodes([tag])
        if nodes.size == 0:
            raise MeshError(f"{source}: no boundary face is tagged {tag.name.lower()}; the case "
                            f"needs all of ground, top, west, east, south, north")
        if tag in planes:
            axis, level, name = planes[tag]
            off = np.abs(c[nodes, axis] - level)
            if off.max() > tol:
                k = int(nodes[np.argmax(off)])
                raise MeshError(f"{source}: node {k} at {c[k].tolist()} of a "
                                f"{tag.name.lower()} face is off the plane {'xyz'[axis]} = "
                                f"{name} = {level:g} m; {hint}")
    lo = np.array([-0.5 * params.lx, -0.5 * params.ly, -math.inf]) - tol
    hi = np.array([0.5 * params.lx, 0.5 * params.ly, params.lz]) + tol
    out = np.flatnonzero(((c < lo) | (c > hi)).any(axis=1))
    if out.size:
        raise MeshError(f"{source}: node {out[0]} at {c[out[0]].tolist()} lies outside the "
                        f"domain; {hint}")
    ground = mesh.tagged_nodes([FaceTag.GROUND])
    dev = np.abs(c[ground, 2] - terrain(c[ground, 0], c[ground, 1]))
    if dev.max() > max(0.01 * params.h0, 1.0):
        k = int(ground[np.argmax(dev)])
        logging.getLogger("dycore").warning(
            "notice: %s: the ground differs from the case's terrain (h0 = %g m, a = %g m) by up "
            "to %.4g m (at x = %g m, y = %g m); the run uses the file's ground, dycore verify's "
            "linear theory the case's h0 and a", source, params.h0, params.a, float(dev.max()),
            c[k, 0], c[k, 1])
