#!/usr/bin/env bash
# The whole-run figures of issue "time to solution" on one GPU machine, in one call: each
# CONFIG run cold (empty kernel and set-up caches) and warm, `/usr/bin/time` around
# `dycore run CONFIG --backend gpu --solver-mode device --t-end $T_END`, then `dycore verify` of
# the last run of a config whose name holds "verify". Writes $OUT/tts_<config>_<cold|warm>.log
# and $OUT/tts_verify.log (few files: the device tool brings back a limited number) and prints
# the split lines; T_END (default 7200 s) sets the model time of every run. Run from the
# repository root after scripts/gpu_env.sh and scripts/device/cudss_env.sh (the direct
# pressure solve):
#   bash scripts/device/time_to_solution.sh configs/mountainwave3d.yaml configs/mountainwave3d_verify.yaml
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$here/gpu_out}
mkdir -p "$out"
python3 -c "from nvmath.bindings import cudss" 2>/dev/null \
  || echo "time_to_solution: cuDSS is not importable: the runs will use CG (source scripts/device/cudss_env.sh)"
work=$(mktemp -d)
for config in "$@"; do
  name=$(basename "$config" .yaml)
  for phase in cold warm; do
    log="$out/tts_${name}_${phase}.log"
    (cd "$work" && NUMBA_CACHE_DIR="$work/numba" DYCORE_CACHE_DIR="$work/setup" \
      /usr/bin/time -f "%e s command wall, %M kB peak host memory" \
      python3 -m dycore run "$here/$config" --backend gpu --solver-mode device --t-end "${T_END:-7200}" \
        --overwrite --output "$work/$name.nc" --no-progress) > "$log" 2>&1
    echo "== $name, $phase"
    grep -E "pressure: |pressure.method|^wall time|command wall" "$log"
  done
  case "$name" in
    *verify*) python3 -m dycore verify "$work/$name.nc" > "$out/tts_verify.log" 2>&1
              echo "== dycore verify $name (exit status $?)"; tail -20 "$out/tts_verify.log" ;;
  esac
done
rm -rf "$work"
