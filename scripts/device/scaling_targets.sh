#!/usr/bin/env bash
# The multi-GPU scaling figures on a K-GPU host (K = 2 or 4), every run of
# scripts/gpu_ranks_check.py in its own processes, one after the other on the same machine, so
# that each ratio compares runs of one host (docs/parallel.md, "Check on K GPUs"):
#
#   K = 2: strong scaling at 4,423,680 tets (96 x 96 x 80 cells) against one GPU rank, and weak
#          scaling against one GPU rank with half the mesh (96 x 96 x 40: about 2.2 M tets a GPU);
#   K = 4: strong scaling at 4,423,680 tets; weak scaling, 8,847,360 tets (192 x 96 x 80) on four
#          GPUs against 2.2 M tets on one; the cold set-up of 30,720,000 tets (200 x 200 x 128)
#          on four GPUs, with every rank's peak host memory;
#   both:  deterministic mode on K GPUs, one GPU rank and one GPU without MPI (`--serial exact`),
#          max |diff| of every field (0 = the same bits).
#
# Usage (repository root, after `source scripts/gpu_env.sh` and `source scripts/device/mpi_env.sh`):
#   bash scripts/device/scaling_targets.sh K [RUN ...]
# RUN: strong, weak (K = 4), setup30m (K = 4), bits; default all of K's. Each run takes 2-8
# minutes (the cold 30.7 M-tet set-up about 2), so on a machine that limits a command to ten
# minutes name one or two a call; the set-up cache ($DYCORE_CACHE_DIR, default
# /tmp/dycore-scaling-cache) carries the meshes and hierarchies from one call to the next on a
# machine kept warm. Writes $OUT/scaling_K_<run>.json and .log (default OUT: ./gpu_out) and
# prints each run's summary. Exits 2 on a bad K or RUN, 1 when a run failed.
set -u
k=${1:-}
case "$k" in
  2|4) ;;
  *) echo "scaling_targets.sh: K must be 2 or 4 (GPUs of this host), got '${k}'" >&2; exit 2 ;;
esac
shift
runs=${*:-$([ "$k" = 2 ] && echo "strong bits" || echo "strong weak setup30m bits")}
for r in $runs; do
  case "$k:$r" in
    2:strong|2:bits|4:strong|4:weak|4:setup30m|4:bits) ;;
    *) echo "scaling_targets.sh: no run '$r' for K = $k (strong, bits; K = 4 also weak, setup30m)" >&2
       exit 2 ;;
  esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$here/gpu_out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 DYCORE_CACHE_DIR=${DYCORE_CACHE_DIR:-/tmp/dycore-scaling-cache}
cfg=configs/mountainwave3d.yaml
amg="--pressure amg --method cg --global-amg --reduction allreduce"
status=0

# run NAME TIMEOUT ARGS...: one gpu_ranks_check run; its JSON in OUT, its summary printed
run() {
  local name=$1 limit=$2
  shift 2
  echo "== $name: gpu_ranks_check.py $cfg $*"
  (cd "$here" && timeout "$limit" python3 scripts/gpu_ranks_check.py "$cfg" --json \
      "$out/scaling_${k}_$name.json" "$@" > "$out/scaling_${k}_$name.log" 2>&1)
  local rc=$?
  [ $rc -eq 0 ] || { echo "   exit status $rc (log: $out/scaling_${k}_$name.log)"; status=1; }
  python3 - "$out/scaling_${k}_$name.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
keys = ("speedup_vs_1_rank", "weak_efficiency", "max_abs_diff_vs_1_rank", "failed", "error")
print("  ", {k: d[k] for k in keys if k in d})
for red, row in d.get("serial", {}).items():
    print(f"   one GPU without MPI ({red}):", {k: v for k, v in row.items() if "diff" in k})
for ranks, r in d.get("runs", {}).items():
    print(f"   {ranks} rank(s): step {r.get('step_ms_median')} ms, set-up {r.get('setup_s')} s, "
          f"iterations {r.get('iterations_last_step')}, peak host MB {r.get('peak_host_mb')}")
PY
}

for r in $runs; do
  case "$r" in
    strong) run strong 590 $amg --mesh 96 96 80 --steps 6 --warmup 2 --ranks "$k" \
                $([ "$k" = 2 ] && echo "--weak 96 96 40") ;;
    weak) run weak 590 $amg --mesh 192 96 80 --mesh-one 96 96 40 --steps 6 --warmup 2 \
              --ranks 4 ;;
    setup30m) run setup30m 590 --pressure amg --method cg --mesh 200 200 128 --steps 0 \
                  --warmup 0 --ranks 4 --skip-one --mpiexec-args "--bind-to none" ;;
    bits) run bits 590 --deterministic --reduction exact --pressure amg --method cg \
              --global-amg --mesh 24 24 20 --steps 2 --warmup 1 --ranks "$k" --serial exact ;;
  esac
done
exit $status
