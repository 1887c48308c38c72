"""Convergence layer: P1 on tetrahedra is second order in L2 (Ciarlet 1978, Thm 3.2.1 for the
interpolant; Brenner & Scott 2008, §5.7 for the L2 projection and the Aubin–Nitsche bound of
the Poisson solution).

On the unit cube [-1/2, 1/2]² × [0, 1] meshed by the project's generator (flat terrain, uniform
spacing, 6 n³ tetrahedra for n = 4, 8, 16) with f = cos πx cos πy sin πz (zero on the whole
boundary, -Δf = 3π² f), the L2 error of

- the nodal interpolant of f,
- the L2 projection of f (M u = ∫N f),
- the Poisson solution (K u = ∫N 3π² f, u = 0 on the boundary)

is measured with the 11-point Keast rule on every element; ``numpy.polyfit`` of log error
against log h must give a slope of 2 ± 0.2. Element matrices come from the project's element
functions (transform_to_physical, shape_shape, dshape_tensor_dshape).
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from dycore.assembly.weak_forms import QUAD_N, QUAD_W
from dycore.fem import dshape_tensor_dshape, shape_shape, transform_to_physical
from dycore.mesh import GridSpec, generate_terrain_following

LEVELS = (4, 8, 16)


def exact(x):
    return np.cos(np.pi * x[..., 0]) * np.cos(np.pi * x[..., 1]) * np.sin(np.pi * x[..., 2])


def unit_cube(n):
    spec = GridSpec(nx=n, ny=n, nz=n, lx=1.0, ly=1.0, lz=1.0, dx_min=1.0 / n, dz_min=1.0 / n)
    return generate_terrain_following(spec, lambda x, y: np.zeros_like(x))


def element_arrays(mesh):
    """Per element: quadrature points (nele, NGI, 3), detwei (nele, NGI), M_e, K_e (nele,4,4)."""
    nele = mesh.nele
    xg = np.einsum("gi,eid->egd", QUAD_N, mesh.coords[mesh.tets])
    detwei, me, ke = np.empty((nele, QUAD_W.size)), np.empty((nele, 4, 4)), np.empty((nele, 4, 4))
    dshape, eye = np.empty((4, 3)), np.eye(3)
    for e in range(nele):
        transform_to_physical(np.ascontiguousarray(mesh.coords[mesh.tets[e]]), QUAD_W, dshape,
                              detwei[e])
        shape_shape(QUAD_N, detwei[e], me[e])
        dshape_tensor_dshape(dshape, eye, detwei[e], ke[e])
    return xg, detwei, me, ke


def assemble(mesh, ele):
    rows = np.repeat(mesh.tets, 4, axis=1).ravel()
    cols = np.tile(mesh.tets, (1, 4)).ravel()
    return sp.csr_matrix((ele.ravel(), (rows, cols)), shape=(mesh.nnodes, mesh.nnodes))


def l2_error(mesh, xg, detwei, u):
    """sqrt(∫ (f - Σ N_i u_i)²) with the Keast rule."""
    uh = np.einsum("gi,ei->eg", QUAD_N, u[mesh.tets])
    return math.sqrt(float(np.sum(detwei * (exact(xg) - uh) ** 2)))


def errors(n):
    mesh = unit_cube(n)
    xg, detwei, me, ke = element_arrays(mesh)
    load = np.zeros(mesh.nnodes)
    np.add.at(load, mesh.tets, np.einsum("gi,eg->ei", QUAD_N, detwei * exact(xg)))
    interp = exact(mesh.coords)
    proj = spla.spsolve(assemble(mesh, me).tocsc(), load)
    x, z = mesh.coords, mesh.coords[:, 2]
    boundary = ((np.abs(np.abs(x[:, 0]) - 0.5) < 1e-12) | (np.abs(np.abs(x[:, 1]) - 0.5) < 1e-12)
                | (z < 1e-12) | (np.abs(z - 1.0) < 1e-12))
    inner = np.flatnonzero(~boundary)
    k = assemble(mesh, ke)[inner][:, inner]
    poisson = np.zeros(mesh.nnodes)
    poisson[inner] = spla.spsolve(k.tocsc(), 3.0 * np.pi ** 2 * load[inner])
    return {"interpolation": l2_error(mesh, xg, detwei, interp),
            "projection": l2_error(mesh, xg, detwei, proj),
            "poisson": l2_error(mesh, xg, detwei, poisson)}


@pytest.fixture(scope="module")
def table():
    return {n: errors(n) for n in LEVELS}


@pytest.mark.parametrize("kind", ["interpolation", "projection", "poisson"])
def test_second_order_in_l2(table, kind):
    h = np.array([1.0 / n for n in LEVELS])
    e = np.array([table[n][kind] for n in LEVELS])
    assert np.all(np.diff(e) < 0), e                        # every refinement helps
    order = np.polyfit(np.log(h), np.log(e), 1)[0]
    assert abs(order - 2.0) < 0.2, (kind, order, e)


def test_projection_is_the_best_l2_approximation(table):
    """The L2 projection minimises the L2 error over the P1 space: below the interpolant's."""
    for n in LEVELS:
        assert table[n]["projection"] < table[n]["interpolation"], table[n]
