#!/usr/bin/env bash
# One call on the GPU machine: prepare the offline environment, then check and time.
#   bash scripts/gpu_check.sh [gpu_check.py options]      (results under $OUT)
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/gpu_env.sh" || exit 1
cd "$here" || exit 1
# what a bug report needs, first (exit 3 = no GPU run can work here: stop)
mkdir -p "${OUT:-gpu_out}"
python3 -m dycore doctor | tee "${OUT:-gpu_out}/doctor.txt"
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] || { echo "dycore doctor: exit $status, no GPU run here"; exit "$status"; }
python3 scripts/gpu_check.py "$@"
