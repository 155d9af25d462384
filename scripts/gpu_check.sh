#!/usr/bin/env bash
# The checks a lent GPU machine runs (docs/gpus.md), as one
# script: build with CMake (scripts/gpu_build.sh; carry .gpu/ from
# scripts/gpu_bundle.sh), run the runtime's tests (the CPU+GPU placement
# against the CPU alone among them), then simulated against measured with
# CPU+GPU placements for the three calibration models (placer profile, then
# placer calibrate with that profile); then the same placement of GNMT-2
# as threads and as 2 ranks (a GPU value crossing ranks goes through the
# host), and the ranks calibration of scripts/calibrate_ranks.sh on this
# host's cores (cpu2, REFERENCE=profile; RANKS=0 skips both). Everything
# goes to OUT_DIR (default $OUT, else /tmp/gpu_check): the logs, the
# profiles, one CSV per model, ranks/results.txt.
#
#   bash scripts/gpu_check.sh [MODEL ...]      # default: the three below
#
# Each stage has a time limit (seconds: BUILD_S, TESTS_S, PROFILE_S,
# CALIBRATE_S, RANKS_S) so that a lent machine's minutes are not lost to a
# hang; a stage over its limit is reported and the script goes on.
set -u
cd "$(dirname "$0")/.."
out=${OUT_DIR:-${OUT:-/tmp/gpu_check}}
mkdir -p "$out"
cluster=${CLUSTER:-cpu1_h100x1}
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  models=("zoo:gnmt2:batch=32,hidden=512,seq_len=6,vocab=4000"
          "zoo:transformer_big:batch=8,layers=2,hidden=256,seq_len=32,vocab=4000"
          "zoo:inception_v3:batch=4,image_size=139")
fi
stage() {  # stage NAME LIMIT_S LOG COMMAND...
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$SECONDS
  timeout "$limit" "$@" > "$log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s$([ $rc -eq 124 ] && echo ' (time limit)')" |
    tee -a "$out/summary.txt"
  return $rc
}
{ date -u; nvidia-smi -L; nproc
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
stage build "${BUILD_S:-240}" "$out/build.log" bash -c \
  'source scripts/gpu_build.sh build' || { tail -40 "$out/build.log"; exit 1; }
prefix=${PREFIX:-/tmp/placer_prefix}
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
stage executor_test "${TESTS_S:-200}" "$out/executor_test.log" build/executor_test
grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[       OK|relative distance' "$out/executor_test.log" | tail -25
stage profiler_test 60 "$out/profiler_test.log" build/measured_cost_model_test
grep -E '^\[  (FAILED|PASSED) ' "$out/profiler_test.log"
for model in "${models[@]}"; do
  name=$(echo "$model" | sed -E 's/^zoo://; s/:.*//')
  stage "profile $name" "${PROFILE_S:-90}" "$out/profile_$name.log" \
    build/placer_torch profile "$model" --cluster "$cluster" --threads 8 \
      -o "$out/profile_$name.pbtxt" || continue
  stage "calibrate $name" "${CALIBRATE_S:-120}" "$out/calibrate_$name.log" \
    build/placer_torch calibrate "$model" --cluster "$cluster" --placements 10 \
      --steps 10 --warmup 2 --budget 2 --evaluations 100 --threads 8 \
      --rounds 1 --profile "$out/profile_$name.pbtxt" -o "$out/calibration_$name.csv"
  tail -6 "$out/calibrate_$name.log"
done
if [ "${RANKS:-1}" != 0 ]; then
  gnmt=zoo:gnmt2:batch=32,hidden=512,seq_len=6,vocab=4000
  for n in 1 2; do
    timeout 60 build/placer_torch run "$gnmt" --cluster "$cluster" \
      --policy hash --steps 5 --warmup 1 --threads 8 --nproc "$n" --json \
      > "$out/gpu_ranks_$n.json" 2> "$out/gpu_ranks_$n.err"
    echo "run cpu+gpu hash, $n rank(s): exit $?" | tee -a "$out/summary.txt"
  done
  python3 - "$out/gpu_ranks_1.json" "$out/gpu_ranks_2.json" <<'EOF2' |
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
worst = max(abs(x - y) / abs(x) for x, y in zip(a["losses"], b["losses"]))
print(f"cpu+gpu as 2 ranks: losses within {worst:.2g} (relative) of threads; "
      f"step {a['measured_step_seconds']:.4f} s threads, "
      f"{b['measured_step_seconds']:.4f} s ranks")
EOF2
    tee -a "$out/summary.txt"
  # placer run --nproc execs placer_torch from placer's folder.
  bin=$(mktemp -d)
  mkdir -p "$bin/placer"
  ln -sf "$PWD/build/placer" "$PWD/build/placer_torch" "$bin/placer/"
  stage "calibrate ranks" "${RANKS_S:-240}" "$out/calibrate_ranks.log" \
    env REFERENCE=profile BIN="$bin" OUT="$out/ranks" \
    bash scripts/calibrate_ranks.sh \
    zoo:gnmt2:batch=16,hidden=256,seq_len=4,vocab=1000 "$gnmt"
  tail -3 "$out/calibrate_ranks.log"
fi
cat "$out/summary.txt"
