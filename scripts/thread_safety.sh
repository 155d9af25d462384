#!/usr/bin/env bash
# Clang's thread-safety analysis over the code whose shared state carries
# Abseil's annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED on an
# absl::Mutex): the executor and the METIS wrapper. GCC, which builds
# placer, ignores the annotations; this makes them checked. Fails, listing
# them, on any warning. Needs clang (scripts/setup.sh installs it).
# Usage: bash scripts/thread_safety.sh   (from anywhere; ~1 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null; then
  echo "thread_safety: no clang++ (bash scripts/setup.sh installs it)" >&2
  exit 1
fi
files=(runtime/strategy_*.cc runtime/gradient_rounds.cc policies/metis_graph.cc)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -I{} clang++ -std=c++17 -fsyntax-only \
      -Wthread-safety -Wthread-safety-beta -Werror=thread-safety -ferror-limit=0 \
      -DONNX_ML=1 -DONNX_NAMESPACE=onnx -iquote . \
      -isystem /usr/include/torch/csrc/api/include {} >"$log" 2>&1 || true
if grep -q -E "warning|error" "$log"; then
  grep -E "warning|error" "$log" >&2
  echo "thread_safety: the analysis found the above" >&2
  exit 1
fi
echo "thread_safety: ${#files[@]} files, no warnings"
