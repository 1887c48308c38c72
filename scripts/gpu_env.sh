#!/usr/bin/env bash
# Prepare an offline GPU machine that already has numba-cuda, CuPy and SciPy (docs/equations.md §7):
# install the wheels carried in .whl/ (netCDF4, cftime, pydantic, pyamg, ...) without touching
# the network, and put the project on PYTHONPATH (no dependency resolution). The numpy
# `row_stack` shim is applied inside the package (dycore/backend/_numpy_compat.py) before the
# first kernel compile. Source this file:  source scripts/gpu_env.sh
set -e
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
site=${DYCORE_SITE:-/tmp/dycore-site}
if [ -d "$here/.whl" ] && ls "$here"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade \
      --target "$site" "$here"/.whl/*.whl
fi
# byte-compile the project, as `pip install .` does: without it every run compiles ~400 modules
# from source (1.1 s of a paper-mesh run on the H200 machine, whose image sets no .pyc caching)
python3 -m compileall -q "$here/dycore" "$site" > /dev/null 2>&1 || true
export PYTHONPATH="$here:$site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
python3 - <<'PY'
import numpy, numba, scipy
from numba import cuda
import dycore.backend._numpy_compat  # noqa: F401
print(f"numpy {numpy.__version__}  numba {numba.__version__}  scipy {scipy.__version__}")
try:
    import numba_cuda; print("numba-cuda", numba_cuda.__version__)
except Exception as exc:
    print("numba-cuda version unknown:", exc)
print("CUDA available:", cuda.is_available())
for mod in ("cupy", "netCDF4", "pydantic", "pyamg", "threadpoolctl"):
    try:
        m = __import__(mod); print(mod, getattr(m, "__version__", "?"))
    except Exception as exc:
        print(mod, "MISSING:", exc)
PY
set +e
