"""Test-wide setup: GPU kernels run under numba-cuda's simulator (no GPU in CI).

The variable must be set before numba is first imported anywhere, hence at the very top here.
An explicit ``NUMBA_ENABLE_CUDASIM=0`` (on a GPU machine) is respected.
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# the set-up cache (dycore.io.setup_cache) is off unless a test turns it on with its own folder:
# results are bitwise the same either way, but timer tables and "built" counts are not
os.environ.setdefault("DYCORE_CACHE_DIR", "off")
