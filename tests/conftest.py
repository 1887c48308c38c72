"""Test-wide setup: GPU kernels run under numba-cuda's simulator (no GPU in CI).

The variable must be set before numba is first imported anywhere, hence at the very top here.
An explicit ``NUMBA_ENABLE_CUDASIM=0`` (on a GPU machine) is respected.
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def tiny_mesh(nx=4, ny=4, nz=3, height=400.0):
    """A small terrain-following mesh (nx*ny*nz*6 tetrahedra over a bell mountain of
    ``height`` m in an 8 km x 8 km x 4 km box): the one hand-built mesh of the tests."""
    from dycore.mesh import GridSpec, generate_terrain_following

    spec = GridSpec(nx=nx, ny=ny, nz=nz, lx=8000.0, ly=8000.0, lz=4000.0,
                    dx_min=6000.0 / nx, dz_min=2400.0 / nz)
    return generate_terrain_following(
        spec, lambda x, y: height / (1 + (x * x + y * y) / 1e6) ** 1.5)
