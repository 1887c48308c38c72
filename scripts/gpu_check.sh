#!/usr/bin/env bash
# One call on the GPU machine: prepare the offline environment, then check and time.
#   bash scripts/gpu_check.sh [gpu_check.py options]      (results under $OUT)
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/gpu_env.sh" || exit 1
cd "$here" && python3 scripts/gpu_check.py "$@"
