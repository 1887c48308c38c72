"""Test-wide setup: GPU kernels run under numba-cuda's simulator (no GPU in CI).

The variable must be set before numba is first imported anywhere, hence at the very top here.
An explicit ``NUMBA_ENABLE_CUDASIM=0`` (on a GPU machine) is respected.
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# the set-up cache (dycore.io.setup_cache) is off unless a test turns it on with its own folder:
# results are bitwise the same either way, but timer tables and "built" counts are not
os.environ.setdefault("DYCORE_CACHE_DIR", "off")


# ------------------------------------------------------------------------------ test lanes
# Markers (registered in pyproject.toml): `slow` is set on each long unit test where it is
# defined; the end-to-end runs of tests/integration are all slow, and `mpi` and `gpu_sim`
# follow from where a test lives, below. `make test-quick` deselects slow, mpi and gpu_sim;
# `make test` (CI) runs everything.
_LANES = (("integration/", "slow"),              # whole runs: restarts, kills, races, tutorials
          ("parallel/", "mpi"),                  # mpiexec ranks (dycore.parallel)
          ("parity/", "gpu_sim"),                # GPU kernels under the CUDA simulator / NVVM
          ("unit/test_fem_cuda_sim.py", "gpu_sim"))


def pytest_collection_modifyitems(config, items):
    from pathlib import Path

    here = Path(__file__).resolve().parent
    for item in items:
        try:
            rel = Path(item.path).resolve().relative_to(here).as_posix()
        except ValueError:
            continue
        for prefix, marker in _LANES:
            if rel.startswith(prefix):
                item.add_marker(marker)


# ------------------------------------------------------------------------- garbage per module
# Reader libraries leave file handles in reference cycles (xarray's file managers, uxarray's
# grid, the compliance checker's datasets) that only a garbage collection closes. Collected at
# the end of the module that made them, their netCDF closes run there, in the main thread with
# no run writing, and never inside a later module's run (docs/output.md, "Writes happen off
# the critical path": a CI segfault).
import gc  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _collect_the_modules_garbage():
    yield
    gc.collect()
