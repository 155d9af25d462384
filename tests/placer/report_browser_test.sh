#!/usr/bin/env bash
# placer's HTML report in a real browser: headless Chromium (Debian's
# package, installed by scripts/setup.sh) loads the page that
# `place --compare --report` writes with no console error, and the page's
# step time and policy rows are the JSON report's. A screenshot is left in
# the test's undeclared outputs.
set -euo pipefail
placer="$PWD/placer/placer"
work="${TEST_TMPDIR:-$(mktemp -d)}"
export HOME="$work"
chromium="$(command -v chromium || true)"
if [[ -z "$chromium" ]]; then
  echo "FAIL: chromium is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
model="zoo:gnmt2:batch=8,seq_len=4,hidden=64,vocab=100"
"$placer" place "$model" --cluster p100x4 --compare --budget 1 \
  --evaluations 50 -o "$work/p.json" --report "$work/r.html" --json \
  > "$work/rows.json" 2> "$work/place.log"
"$placer" simulate "$model" --cluster p100x4 --placement "$work/p.json" \
  --json > "$work/sim.json"
step=$(grep -o '"step_seconds":[0-9.e-]*' "$work/sim.json" | head -1 | cut -d: -f2)
step=$(printf '%.6f' "$step")

timeout 120 "$chromium" --headless --no-sandbox --disable-gpu \
  --enable-logging=stderr --v=0 --dump-dom "file://$work/r.html" \
  > "$work/dom.html" 2> "$work/chromium.log" || {
  echo "FAIL: chromium could not load the report" >&2
  cat "$work/chromium.log" >&2
  exit 1
}
if grep -E "CONSOLE|Uncaught|Failed to load|ERR_FILE" "$work/chromium.log"; then
  echo "FAIL: the page logged errors (above)" >&2
  exit 1
fi
if ! grep -q "<td id=\"step_seconds\">$step s</td>" "$work/dom.html"; then
  echo "FAIL: the rendered page's step is not the JSON report's $step s" >&2
  grep -o '<td id="step_seconds">[^<]*' "$work/dom.html" >&2 || true
  exit 1
fi
for policy in single heft m_etf best memory_first; do
  if ! grep -q "<tr><td>$policy</td>" "$work/dom.html"; then
    echo "FAIL: policy $policy is not in the rendered comparison" >&2
    exit 1
  fi
done
if grep -qiE "<script|https?://| src=" "$work/r.html"; then
  echo "FAIL: the report is not self-contained" >&2
  exit 1
fi
# A strategy's page: `simulate --report` on data parallelism over the four
# devices, 4 micro-batches (the placement file's strategy fields).
python3 - "$work/p.json" "$work/s.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["assignment"] = {op: plan["devices"][0] for op in plan["assignment"]}
plan["strategy"] = {"stages": [{"devices": plan["devices"]}],
                    "micro_batches": 4}
json.dump(plan, open(sys.argv[2], "w"))
PY
"$placer" simulate "$model" --cluster p100x4 --placement "$work/s.json" \
  --report "$work/s.html" --json > "$work/s_sim.json"
for field in step_seconds seconds_per_batch; do
  value=$(grep -o "\"$field\":[0-9.e-]*" "$work/s_sim.json" | head -1 | cut -d: -f2)
  value=$(printf '%.6f' "$value")
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu \
    --enable-logging=stderr --v=0 --dump-dom "file://$work/s.html" \
    > "$work/s_dom.html" 2> "$work/s_chromium.log" || {
    echo "FAIL: chromium could not load the strategy's report" >&2
    exit 1
  }
  if grep -E "CONSOLE|Uncaught|Failed to load|ERR_FILE" "$work/s_chromium.log"; then
    echo "FAIL: the strategy's page logged errors (above)" >&2
    exit 1
  fi
  if ! grep -q "<td id=\"$field\">$value s</td>" "$work/s_dom.html"; then
    echo "FAIL: the strategy's page's $field is not the JSON's $value s" >&2
    exit 1
  fi
done
if ! grep -q "micro-batches" "$work/s_dom.html"; then
  echo "FAIL: the strategy's page does not describe the strategy" >&2
  exit 1
fi
if [[ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ]]; then
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu \
    --window-size=1250,1800 \
    --screenshot="$TEST_UNDECLARED_OUTPUTS_DIR/report.png" \
    "file://$work/r.html" > /dev/null 2>&1 || true
fi
echo "PASS: the reports render in Chromium (an op placement's, step $step s, and a strategy's) as in the JSON"
