#!/usr/bin/env bash
# Simulated against measured when the devices run as processes (placer run
# --nproc 2, c10d ranks; docs/distributed.md).
#
#   bash scripts/calibrate_ranks.sh MODEL...    (after bazel build //placer)
#
# Per model, the profile: with REFERENCE=hash (the default) a run of `hash`
# (it cuts many edges, so every link direction carries work) as 2 ranks
# writes the node and link times measured inside its steps
# (--profile-out); with REFERENCE=profile, `placer profile --nproc 2`
# (node times op by op and inside one process's reference steps, the links
# between the ranks measured over their transport). Then every heuristic and
# search policy's placement runs as 2 ranks and is simulated with that
# profile. Prints one line per placement (model, policy, measured and
# simulated median step), then per model and over all: the median of
# |simulated - measured| / measured and Spearman's rho (ties averaged).
# Placements that two policies share are measured once.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-$(bazel info bazel-bin 2>/dev/null)}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
CLUSTER=${CLUSTER:-cpu2}
NPROC=${NPROC:-2}
STEPS=${STEPS:-5}
POLICIES=${POLICIES:-single expert hash critical_path metis heft m_etf m_sct m_topo local_search best memory_first}
results="$OUT/results.txt"
: > "$results"
for model in "$@"; do
  tag=$(echo "$model" | tr ':=,/' '____')
  profile="$OUT/$tag.pbtxt"
  if [ "${REFERENCE:-hash}" = profile ]; then
    reference=("$BIN/placer/placer" profile "$model" --cluster "$CLUSTER"
               --nproc "$NPROC" -o "$profile")
  else
    reference=("$BIN/placer/placer" run "$model" --cluster "$CLUSTER"
               --policy hash --steps "$STEPS" --warmup 2 --nproc "$NPROC"
               --profile-out "$profile")
  fi
  if ! "${reference[@]}" > /dev/null 2> "$OUT/$tag.reference.err"; then
    cat "$OUT/$tag.reference.err" >&2
    continue
  fi
  declare -A seen=()
  for policy in $POLICIES; do
    placement="$OUT/$tag.$policy.json"
    "$BIN/placer/placer" place "$model" --cluster "$CLUSTER" --policy "$policy" \
        --evaluations 200 --profile "$profile" -o "$placement" > /dev/null 2>&1 || continue
    # The same device per op as an earlier policy's: measured already.
    key=$(python3 -c "import json,sys; print(sorted(json.load(open(sys.argv[1]))['assignment'].items()))" "$placement" | md5sum | cut -c1-16)
    if [ -n "${seen[$key]:-}" ]; then continue; fi
    seen[$key]=$policy
    line=$("$BIN/placer/placer" run "$model" --cluster "$CLUSTER" --placement "$placement" \
        --steps "$STEPS" --warmup 2 --nproc "$NPROC" --profile "$profile" --json 2>> "$OUT/$tag.err" |
        python3 -c "import json,sys; d=json.load(sys.stdin); print(d['measured_step_seconds'], d['simulated_step_seconds'])") || continue
    echo "$model $policy $line" | tee -a "$results"
  done
  unset seen
done
python3 - "$results" <<'EOF'
import sys, statistics
sys.path.insert(0, "scripts")
from calibration_stats import spearman
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def summary(name, rs):
    m = [float(r[2]) for r in rs]
    s = [float(r[3]) for r in rs]
    err = statistics.median(abs(b - a) / a for a, b in zip(m, s))
    print(f"{name}: {len(rs)} placements, median error {100 * err:.1f}%, rho {spearman(m, s):.3f}")
models = []
for r in rows:
    if r[0] not in models:
        models.append(r[0])
for model in models:
    summary(model, [r for r in rows if r[0] == model])
if len(models) > 1:
    summary("all", rows)
EOF
