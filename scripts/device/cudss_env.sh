#!/usr/bin/env bash
# Install cuDSS (libcudss.so.0) and nvmath-python on an offline GPU machine whose carry limit is
# below the cuDSS wheel: the library arrives in two parts (.cudss1/part_a on a first call, copied
# to /tmp/cudss; .cudss2/part_b and the nvmath-python wheel on the next), joined here and put
# where cuda-pathfinder looks (the image's nvidia/cu13/lib) and on LD_LIBRARY_PATH.
# Source it after scripts/gpu_env.sh:  source scripts/device/cudss_env.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p /tmp/cudss
[ -f "$here/.cudss1/part_a" ] && cp "$here/.cudss1/part_a" /tmp/cudss/part_a
if [ -f "$here/.cudss2/part_b" ] && [ -f /tmp/cudss/part_a ]; then
  cat /tmp/cudss/part_a "$here/.cudss2/part_b" > /tmp/cudss/libcudss.so.0
  lib=$(python3 -c "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], 'cu13', 'lib'))" 2>/dev/null)
  cp "$here"/.cudss2/libcudss_*layer*.so.0 /tmp/cudss/ 2>/dev/null
  if [ -n "$lib" ]; then mkdir -p "$lib" && cp /tmp/cudss/*.so.0 "$lib/"; fi
  export LD_LIBRARY_PATH="/tmp/cudss:${lib:+$lib:}${LD_LIBRARY_PATH}"
  python3 -m pip install -q --no-index --no-deps --target /tmp/nvmath-site "$here"/.cudss2/nvmath_python-*.whl
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/nvmath-site"
  python3 -c "from nvmath.bindings import cudss; print('cuDSS', cudss.get_property(0), cudss.get_property(1), cudss.get_property(2))"
fi
