#!/usr/bin/env bash
# Runs every libFuzzer target in fuzz/ for a while each, with ASan and
# UBSan (clang), and keeps what it finds in the tree:
#   bash scripts/fuzz.sh 10m          # each target for 10 minutes
#   bash scripts/fuzz.sh 30s onnx_import cluster
# - the corpus grows in a scratch directory and is merged back, minimized,
#   into fuzz/corpus/<target> (only inputs under 64 KiB are kept there);
# - a crash, leak or timeout input goes to fuzz/crashes/<target>/, which the
#   normal `bazel test //fuzz:<target>_replay` replays from then on;
# - a summary line per target (executions, exec/s, edges covered, crashes)
#   goes to stdout and to fuzz/last_run.txt.
# Builds in its own Bazel output base (clang), so the default build's
# outputs are untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-60s}"
shift || true
case "$duration" in
  *m) seconds=$(( ${duration%m} * 60 )) ;;
  *s) seconds=${duration%s} ;;
  *) seconds=$duration ;;
esac
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(onnx_import cluster placement place_request profile rl_checkpoint)
fi
base="${PLACER_FUZZ_OUTPUT_BASE:-$HOME/.cache/placer-clang}"
labels=()
for t in "${targets[@]}"; do labels+=("//fuzz:${t}_fuzzer"); done
bazel --output_base="$base" build --config=fuzz "${labels[@]}"
bin="$(bazel --output_base="$base" info --config=fuzz bazel-bin 2>/dev/null)/fuzz"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# fuzz/last_run.txt keeps one line per target, the latest run's.
touch fuzz/last_run.txt
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/crashes/$t" "$scratch/$t"
  cp -r "fuzz/corpus/$t/." "$scratch/$t/"
  log="$scratch/$t.log"
  set +e
  # LibTorch's zip reader leaks its state (~13 KB) when a damaged archive
  # makes it throw (fuzz/crashes/rl_checkpoint/leak-2451ffac...): not ours
  # to fix, so leak detection is off for that target only.
  # -detect_leaks=0 stops the per-input check; ASAN_OPTIONS the one at exit,
  # which otherwise reports the leak summed over the run against the last
  # (empty) input.
  extra=()
  asan_options="${ASAN_OPTIONS:-}"
  if [ "$t" = rl_checkpoint ]; then
    extra=(-detect_leaks=0)
    asan_options="detect_leaks=0${asan_options:+:$asan_options}"
  fi
  ASAN_OPTIONS="$asan_options" "$bin/${t}_fuzzer" "$scratch/$t" -max_total_time="$seconds" \
      -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 "${extra[@]}" \
      -artifact_prefix="fuzz/crashes/$t/" > "$log" 2>&1
  status=$?
  set -e
  # Keep the corpus small: minimize into the tree, small inputs only.
  mkdir -p "$scratch/$t.min"
  "$bin/${t}_fuzzer" -merge=1 -max_len=65536 "$scratch/$t.min" \
      "fuzz/corpus/$t" "$scratch/$t" > /dev/null 2>&1 || true
  # New inputs, smallest first, at most 30 per run.
  { ls -S -r "$scratch/$t.min" | head -n 30 || true; } | while read -r f; do
    cp -n "$scratch/$t.min/$f" "fuzz/corpus/$t/"
  done
  runs=$( (grep -m1 '^stat::number_of_executed_units' "$log" || true) | awk '{print $2}')
  rate=$( (grep -m1 '^stat::average_exec_per_sec' "$log" || true) | awk '{print $2}')
  edges=$( (grep -o 'cov: [0-9]*' "$log" || true) | tail -1 | awk '{print $2}')
  crashes=$(ls "fuzz/crashes/$t" | grep -cv '^\.keep$' || true)
  line="$t: ${runs:-0} executions, ${rate:-0} exec/s, ${edges:-0} edges, exit $status, $crashes crash input(s) in fuzz/crashes/$t"
  { grep -v "^$t: " fuzz/last_run.txt || true; echo "$line"; } > "$scratch/last"
  sort "$scratch/last" > fuzz/last_run.txt
  echo "$line"
  if [ $status -ne 0 ]; then grep -m3 -E 'ERROR|runtime error|SUMMARY' "$log" || true; fi
done
