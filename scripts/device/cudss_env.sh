#!/usr/bin/env bash
# Install cuDSS (libcudss.so.0) and nvmath-python on an offline GPU machine whose carry limit is
# below the cuDSS wheel: the library arrives in parts carried over back-to-back calls to one
# warm machine (.cudss1/part_a, .cudss2/part_b, ... — any folder .cudss*/ — each part copied to
# /tmp/cudss as it arrives), and a folder's `manifest` names the parts in order (without one:
# part_a and part_b). Once every part is there they are joined, put where cuda-pathfinder
# looks (the image's nvidia/cu13/lib) and on LD_LIBRARY_PATH, with the communication layers
# (libcudss_*layer*.so.0) and the nvmath-python wheel carried in any of the folders.
# Source it after scripts/gpu_env.sh:  source scripts/device/cudss_env.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p /tmp/cudss
for f in "$here"/.cudss*/part_* "$here"/.cudss*/manifest "$here"/.cudss*/libcudss_*layer*.so.0 \
         "$here"/.cudss*/nvmath_python-*.whl; do
  [ -f "$f" ] && cp "$f" /tmp/cudss/
done
parts=$(cat /tmp/cudss/manifest 2>/dev/null || echo "part_a part_b")
ready=1
for p in $parts; do [ -f "/tmp/cudss/$p" ] || ready=0; done
if [ "$ready" = 1 ] && ls /tmp/cudss/nvmath_python-*.whl >/dev/null 2>&1; then
  (cd /tmp/cudss && cat $parts > libcudss.so.0)
  lib=$(python3 -c "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], 'cu13', 'lib'))" 2>/dev/null)
  if [ -n "$lib" ]; then mkdir -p "$lib" && cp /tmp/cudss/*.so.0 "$lib/"; fi
  export LD_LIBRARY_PATH="/tmp/cudss:${lib:+$lib:}${LD_LIBRARY_PATH}"
  python3 -m pip install -q --no-index --no-deps --target /tmp/nvmath-site /tmp/cudss/nvmath_python-*.whl
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/nvmath-site"
  python3 -c "from nvmath.bindings import cudss; print('cuDSS', cudss.get_property(0), cudss.get_property(1), cudss.get_property(2))"
else
  echo "cuDSS: parts so far: $(cd /tmp/cudss && ls part_* 2>/dev/null | tr '\n' ' ')(of: $parts)"
fi
