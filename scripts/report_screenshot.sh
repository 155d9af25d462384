#!/usr/bin/env bash
# Regenerates docs/images/gnmt4_report.png: the HTML report of
# `placer place zoo:gnmt4 --noweights --cluster p100x4 --compare`, as
# headless Chromium draws it. Needs a build (bazel build //placer) and
# Chromium (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bazel-bin/placer/placer place zoo:gnmt4 --noweights --cluster p100x4 \
  --compare --budget 5 --evaluations 2000 -o "$work/p.json" \
  --report "$work/gnmt4_report.html" > /dev/null
HOME="$work" chromium --headless --no-sandbox --disable-gpu \
  --window-size=1250,1700 --screenshot="$work/shot.png" \
  "file://$work/gnmt4_report.html" > /dev/null 2>&1
cp "$work/shot.png" docs/images/gnmt4_report.png
echo "wrote docs/images/gnmt4_report.png"
