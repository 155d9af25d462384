#!/usr/bin/env bash
# The table of docs/parallelism.md: `placer place --parallelism auto` on the
# zoo's big models and two presets, at one micro-batch per device and at
# four. Usage: scripts/strategy_table.sh [PLACER_BINARY] (default: bazel's).
set -euo pipefail
placer="${1:-$(bazel info bazel-bin 2>/dev/null)/placer/placer}"
models="${MODELS:-resnet50 inception_v3 transformer_big gnmt8}"
clusters="${CLUSTERS:-p100x4 v100x8}"
budget="${BUDGET:-60}"
# The op placement policy stops at this many simulations (or the budget):
# its column does not depend on machine speed.
evaluations="${EVALUATIONS:-300}"
echo "| model | cluster | micro-batches | one device s/batch | op placement (best) | data parallel | pipeline | hybrid | tensor | auto | auto's strategy |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for cluster in $clusters; do
  devices=$("$placer" place zoo:chain --noweights --cluster "$cluster" \
      --parallelism data --json 2>/dev/null |
    python3 -c 'import json,sys; print(int(json.load(sys.stdin)["results"][1]["micro_batches"]))')
  for model in $models; do
    for mb in "$devices" $((4 * devices)); do
      "$placer" place "zoo:$model" --noweights --cluster "$cluster" \
          --parallelism auto --micro-batches "$mb" --budget "$budget" \
          --evaluations "$evaluations" \
          --json 2>/dev/null |
        python3 -c '
import json, sys
model, cluster, mb = sys.argv[1:4]
r = json.load(sys.stdin)
rows = {x["row"]: x for x in r["results"]}
one = rows["single"]["seconds_per_batch"]
def cell(name):
    x = rows.get(name)
    if x is None or not x["ok"]:
        return "failed"
    return "%.4f (%.2fx)" % (x["seconds_per_batch"], one / x["seconds_per_batch"])
op = [k for k in rows
      if k not in ("single", "data", "pipeline", "hybrid", "tensor", "auto")][0]
chosen = rows[r["chosen"]]
print("| %s | %s | %s | %.4f | %s | %s | %s | %s | %s | %s | %s: %s |" % (
    model, cluster, mb, one, cell(op), cell("data"), cell("pipeline"),
    cell("hybrid"), cell("tensor"), cell("auto"), r["chosen"],
    chosen["strategy"]))
' "$model" "$cluster" "$mb"
    done
  done
done
