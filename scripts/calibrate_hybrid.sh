#!/usr/bin/env bash
# Hybrid strategies (replicas whose ops are placed over several devices)
# simulated against measured, as threads and as 2 ranks, on 4 CPU devices
# (docs/parallelism.md): per model, `placer profile` with the devices as
# one process and as 2 ranks; then `place --parallelism hybrid` and
# `--parallelism data` at 4 and 8 micro-batches (the op placement inside:
# heft), each run with `--nproc 1` and `--nproc 2` and simulated with the
# profile of the same process layout. Four CPU devices need a host with
# four cores or more to mean anything (the lent GPU machines have 16).
#
#   BIN=DIR bash scripts/calibrate_hybrid.sh [MODEL ...]
#
# DIR holds placer_torch (default: bazel-bin/placer; the CMake build's
# build/ on a GPU machine). STEPS (default 10) steps after 2 warm-up.
# Prints one line per strategy and layout: simulated and measured step,
# error, last loss (the same for both layouts). Files go to OUT (default: a
# new temporary folder).
set -u
cd "$(dirname "$0")/.."
BIN=${BIN:-$(bazel info bazel-bin 2>/dev/null)/placer}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
P=$BIN/placer_torch
C=$OUT/cpu4.pbtxt
{
  echo 'name: "cpu4"'
  for d in 0 1 2 3; do
    echo "devices { name: \"/cpu:$d\" kind: CPU peak_flops: 8e10" \
         "memory_bandwidth: 1e10 memory_bytes: 6442450944" \
         "op_overhead_seconds: 5e-6 }"
  done
  echo 'default_link { latency_seconds: 2e-6 bandwidth: 5e9 }'
} > "$C"
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  models=("zoo:gnmt2:batch=16,hidden=256,seq_len=4,vocab=1000"
          "zoo:transformer_big:batch=8,layers=2,hidden=256,seq_len=32,vocab=4000")
fi
for M in "${models[@]}"; do
  n=$(echo "$M" | sed -E 's/^zoo://; s/:.*//')
  for np in 1 2; do
    timeout 300 "$P" profile "$M" --cluster "$C" --nproc "$np" \
      -o "$OUT/${n}_p$np.pbtxt" > "$OUT/${n}_p$np.log" 2>&1 ||
      { echo "$n: profile --nproc $np failed (see $OUT/${n}_p$np.log)"
        continue 2; }
  done
  for mb in 4 8; do
    for mode in hybrid data; do
      s=$OUT/${n}_${mode}_$mb
      timeout 120 "$P" place "$M" --cluster "$C" --parallelism "$mode" \
        --micro-batches "$mb" --policy heft --budget 5 \
        --profile "$OUT/${n}_p1.pbtxt" -o "$s.json" > "$s.place.log" 2>&1 ||
        { echo "$n $mode mb $mb: place failed (see $s.place.log)"; continue; }
      for np in 1 2; do
        timeout 300 "$P" run "$M" --cluster "$C" --placement "$s.json" \
          --steps "${STEPS:-10}" --warmup 2 --nproc "$np" \
          --profile "$OUT/${n}_p$np.pbtxt" --json > "${s}_n$np.json" \
          2> "${s}_n$np.err"
        python3 - "${s}_n$np.json" "$n $mode mb $mb nproc $np" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    print("%s: failed (see the .err beside %s)" % (sys.argv[2], sys.argv[1]))
    sys.exit(0)
s, m = d["simulated_step_seconds"], d["measured_step_seconds"]
print("%s: %s  simulated %.4f measured %.4f  %+.1f%%  loss %.6f"
      % (sys.argv[2], d.get("strategy", ""), s, m, 100 * (s - m) / m,
         d["losses"][-1]))
PY
      done
    done
  done
done
