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
