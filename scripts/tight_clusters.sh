#!/bin/bash
# Writes the tight clusters of docs/memory_results.md into DIR: for each zoo model,
# p100x4 with each device given a third, and v100x8 with each given a
# quarter, of the model's single-device peak (benchmarks/results/bench.csv's "single"
# rows); and small4.pbtxt, p100x4 cut to 2.9 GiB a device (issue 19's
# examples). Files: DIR/MODEL_p100x4_3.pbtxt, DIR/MODEL_v100x8_4.pbtxt.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: scripts/tight_clusters.sh DIR}
mkdir -p "$dir"
while IFS=, read -r model cluster policy ok step bound peak rest; do
  [ "$policy" = single ] || continue
  model=${model//\"/}
  case "$cluster" in
    p100x4) share=3 ;;
    v100x8) share=4 ;;
    *) continue ;;
  esac
  name="${model}_${cluster}_${share}"
  sed -e "s/memory_bytes: [0-9]*/memory_bytes: $((peak / share))/" \
      -e "s/^name: \".*\"/name: \"$name\"/" \
      "$here/profiles/clusters/$cluster.pbtxt" > "$dir/$name.pbtxt"
done < <(tail -n +2 "$here/benchmarks/results/bench.csv" | sort -u)
sed -e "s/memory_bytes: [0-9]*/memory_bytes: 3113851289/" \
    -e 's/^name: ".*"/name: "small4"/' \
    "$here/profiles/clusters/p100x4.pbtxt" > "$dir/small4.pbtxt"
ls "$dir"
