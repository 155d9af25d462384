#!/usr/bin/env bash
# On a GPU machine with PyTorch's LibTorch and CMake but no -dev packages:
# unpacks .gpu/debs (scripts/gpu_bundle.sh) into a prefix and builds the
# tree with CMake into BUILD_DIR (default build/).
#
#   source scripts/gpu_build.sh [BUILD_DIR]   # sets PATH, LD_LIBRARY_PATH
#   BUILD_DIR/placer_torch run zoo:gnmt2 --cluster cpu1_h100x1 --policy single
set -eo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir=${1:-build}
prefix=${PREFIX:-/tmp/placer_prefix}
mkdir -p "$prefix"
for deb in .gpu/debs/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
export PATH=$prefix/usr/bin:$PATH
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
torch_cmake=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix/usr;$torch_cmake" \
  -DProtobuf_PROTOC_EXECUTABLE="$prefix/usr/bin/protoc" \
  -DCMAKE_CXX_FLAGS="-isystem $PWD/.gpu/gloo_include" > "$build_dir.cmake.log"
cmake --build "$build_dir" -j"$(nproc)"
set +eo pipefail
