#!/usr/bin/env bash
# Installs everything placer needs to build, test and run on Debian 12, from
# Debian's own packages. Idempotent: packages already present are skipped
# without touching the network.
set -euo pipefail

PACKAGES=(
  # Build: Debian's Bazel 4 and the rule repositories WORKSPACE points at.
  bazel-bootstrap bazel-platforms bazel-rules-java bazel-rules-proto
  bazel-skylib g++
  # Libraries.
  libtorch-dev libopenblas0-pthread libmetis-dev coinor-libclp-dev libonnx-dev libabsl-dev
  # Gloo's headers: c10d's ProcessGroupGloo.hpp includes them (distributed runs,
  # runtime/rank_group.h); Debian's libtorch links libgloo0 already.
  libgloo-dev
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  # OpenSSL: SHA-256 content fingerprints for the placement service cache.
  libssl-dev
  # zlib: CRC-32 checks of RL checkpoint archives before LibTorch reads
  # them (base/zip_check.h); libprotobuf-dev pulls it in already.
  zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # Chromium: the HTML report's browser test (tests/placer/report_browser_test)
  # and its screenshot (scripts/report_screenshot.sh).
  chromium
  # Clang: its thread-safety analysis checks the executors' lock annotations
  # (scripts/thread_safety.sh, run by CI; GCC ignores them), and libFuzzer
  # with the sanitizers (scripts/fuzz.sh).
  clang
)
# Re-exporting the PyTorch test fixtures (tests/fixtures/*.py) also needs
# python3-torch python3-torchvision python3-onnx; the tests do not.

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
