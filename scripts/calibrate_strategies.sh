#!/usr/bin/env bash
# Measured vs simulated step times of strategies on cpu2 (docs/parallelism.md):
# profiles MODEL, makes strategies with `place --parallelism` (one device,
# data parallel, pipelines with GPipe and 1F1B, one stage over both devices
# with the op placement of `place` inside it, several micro-batch counts),
# runs each with the strategy executor and prints a row per strategy, the
# median absolute error and Spearman's rank correlation.
# Usage: scripts/calibrate_strategies.sh MODEL [PLACER_BINARY]
# NPROC=2: the devices run as 2 c10d ranks, and the profile's links between
# them are measured over that transport (`profile --nproc 2`).
# MEMORY=1: also each data-parallel and pipeline strategy with every stage
# recomputing, and the data-parallel ones with ZeRO-1, ZeRO-2 and ZeRO-3
# (WIDE=0 and MB="2 4" keep such a run short).
# TENSOR=1: also `place --parallelism tensor` (one group of both devices)
# and the same group with sequence parallelism, at each micro-batch count.
set -euo pipefail
model="$1"
placer="${2:-$(bazel info bazel-bin 2>/dev/null)/placer/placer}"
steps="${STEPS:-5}"
ranks=()
if [ "${NPROC:-1}" != 1 ]; then ranks=(--nproc "$NPROC"); fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$placer" profile "$model" --cluster cpu2 "${ranks[@]}" -o "$dir/profile.pbtxt" >/dev/null 2>&1
strategies=()
# Op placement inside a stage: `place`'s op placement on the two devices as
# one stage whose replica spans both (WIDE=0 leaves these rows out).
"$placer" place "$model" --cluster cpu2 --profile "$dir/profile.pbtxt" \
    -o "$dir/op.json" >/dev/null 2>&1
for mb in ${MB:-2 4 8}; do
  for mode in data pipeline; do
    f="$dir/$mode-$mb.json"
    if "$placer" place "$model" --cluster cpu2 --parallelism "$mode" \
        --micro-batches "$mb" --profile "$dir/profile.pbtxt" -o "$f" \
        >/dev/null 2>&1; then
      strategies+=("$f")
      if [ "${MEMORY:-0}" = 1 ]; then
        zeros="1 2 3"
        python3 - "$f" "$dir/$mode-$mb" "$zeros" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for stage in d["strategy"]["stages"]:
    stage["recompute"] = "full"
json.dump(d, open(sys.argv[2] + "-recompute.json", "w"))
for zero in sys.argv[3].split():
    d = json.load(open(sys.argv[1]))
    if len(d["strategy"]["stages"]) == 1 and len(d["strategy"]["stages"][0]["devices"]) > 1:
        d["strategy"]["zero"] = int(zero)
        json.dump(d, open("%s-zero%s.json" % (sys.argv[2], zero), "w"))
PY
        strategies+=("$dir/$mode-$mb-recompute.json")
        for zero in $zeros; do
          if [ -f "$dir/$mode-$mb-zero$zero.json" ]; then
            strategies+=("$dir/$mode-$mb-zero$zero.json")
          fi
        done
      fi
      if [ "$mode" = pipeline ]; then
        # The same stages with the other schedule.
        python3 - "$f" "$dir/$mode-$mb-other.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["strategy"]["schedule"] = "gpipe" if d["strategy"]["schedule"] == "1f1b" else "1f1b"
json.dump(d, open(sys.argv[2], "w"))
PY
        strategies+=("$dir/$mode-$mb-other.json")
      fi
    fi
  done
  if [ "${TENSOR:-0}" = 1 ]; then
    f="$dir/tensor-$mb.json"
    if "$placer" place "$model" --cluster cpu2 --parallelism tensor \
        --tensor 2 --micro-batches "$mb" --profile "$dir/profile.pbtxt" \
        -o "$f" >/dev/null 2>&1; then
      strategies+=("$f")
      python3 - "$f" "$dir/tensor-$mb-sequence.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["strategy"]["sequence_parallel"] = True
d["strategy"].pop("sharding", None)  # chosen again, with it
json.dump(d, open(sys.argv[2], "w"))
PY
      strategies+=("$dir/tensor-$mb-sequence.json")
    fi
  fi
  # One device accumulating the same micro-batches.
  python3 - "$dir/data-$mb.json" "$dir/one-$mb.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
first = d["strategy"]["stages"][0]["devices"][0]
d["assignment"] = {k: first for k in d["assignment"]}
d["strategy"]["stages"] = [{"devices": [first]}]
d["strategy"]["schedule"] = "1f1b"
json.dump(d, open(sys.argv[2], "w"))
PY
  strategies+=("$dir/one-$mb.json")
  if [ "${WIDE:-1}" = 1 ] && [ "${NPROC:-1}" = 1 ]; then
    python3 - "$dir/op.json" "$dir/wide-$mb.json" "$mb" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["strategy"] = {"stages": [{"devices": ["/cpu:0"],
                             "more_devices": [{"devices": ["/cpu:1"]}]}],
                 "micro_batches": int(sys.argv[3]), "schedule": "1f1b"}
json.dump(d, open(sys.argv[2], "w"))
PY
    strategies+=("$dir/wide-$mb.json")
  fi
done
printf '| strategy | simulated s | measured s | error |\n|---|---:|---:|---:|\n'
errors=()
for f in "${strategies[@]}"; do
  "$placer" run "$model" --cluster cpu2 --placement "$f" \
      --profile "$dir/profile.pbtxt" --steps "$steps" "${ranks[@]}" --json \
      2>/dev/null |
    python3 -c '
import json, sys
r = json.load(sys.stdin)
sim, meas = r["simulated_step_seconds"], r["measured_step_seconds"]
print("| %s | %.4f | %.4f | %+.1f%% |" % (r["strategy"], sim, meas, 100 * (sim - meas) / meas))
' | tee -a "$dir/rows"
done
python3 - "$dir/rows" "$(dirname "$0")" <<'PY'
import re, statistics, sys
sys.path.insert(0, sys.argv[2])
from calibration_stats import spearman
rows = [l.split("|") for l in open(sys.argv[1])]
sim = [float(r[2]) for r in rows]
meas = [float(r[3]) for r in rows]
errs = [abs(float(re.findall(r"([+-][0-9.]+)%", r[4])[0])) for r in rows]
print("\nmedian |error| %.1f%% over %d strategies (max %.1f%%), Spearman rho %.3f" % (statistics.median(errs), len(errs), max(errs), spearman(sim, meas)))
PY
