"""The one hand-built mesh of the tests (a module of its own: ``conftest`` names two modules
here, tests/conftest.py and tests/parallel/conftest.py, so nothing imports from it)."""


def tiny_mesh(nx=4, ny=4, nz=3, height=400.0):
    """A small terrain-following mesh (nx*ny*nz*6 tetrahedra over a bell mountain of
    ``height`` m in an 8 km x 8 km x 4 km box): the one hand-built mesh of the tests."""
    from dycore.mesh import GridSpec, generate_terrain_following

    spec = GridSpec(nx=nx, ny=ny, nz=nz, lx=8000.0, ly=8000.0, lz=4000.0,
                    dx_min=6000.0 / nx, dz_min=2400.0 / nz)
    return generate_terrain_following(
        spec, lambda x, y: height / (1 + (x * x + y * y) / 1e6) ** 1.5)
