#!/usr/bin/env bash
# Prepares, on a Debian 12 machine with network, what the CMake build needs
# on a GPU machine that has PyTorch's LibTorch but no -dev packages and no
# network (docs/gpus.md, "CMake build on a GPU machine without Bazel"):
#
#   bash scripts/gpu_bundle.sh GLOO_SOURCE_DIR     # then carry .gpu/ there
#
# .gpu/debs: Debian's -dev packages (and the libraries they need) for
# Abseil, protobuf, ONNX, METIS, CLP and GoogleTest, unpacked there by
# scripts/gpu_build.sh. .gpu/gloo_include: gloo's headers, which
# PyTorch's pip LibTorch does not ship but torch/csrc/distributed/c10d's
# ProcessGroupGloo.hpp includes, from a checkout of github.com/pytorch/gloo
# (GLOO_SOURCE_DIR), with a config.h for its TCP transport only.
set -euo pipefail
cd "$(dirname "$0")/.."
gloo=${1:?usage: bash scripts/gpu_bundle.sh GLOO_SOURCE_DIR}
mkdir -p .gpu/debs
(cd .gpu/debs && apt-get download \
  libabsl-dev libabsl20220623 libprotobuf-dev libprotobuf32 \
  libprotobuf-lite32 libprotoc32 protobuf-compiler libonnx-dev libonnx1 \
  libonnxifi libmetis-dev libmetis5 coinor-libclp-dev coinor-libclp1 \
  coinor-libcoinutils-dev coinor-libcoinutils3v5 coinor-libosi-dev \
  coinor-libosi1v5 libgtest-dev libgmock-dev googletest liblapack3 libblas3 \
  libgfortran5)
rm -rf .gpu/gloo_include
mkdir -p .gpu/gloo_include
(cd "$gloo" && find gloo -name '*.h' ! -path '*/test/*' ! -path '*/benchmark/*' \
   ! -path 'gloo/cuda*' ! -path 'gloo/nccl/*' ! -path 'gloo/mpi/*' \
   ! -path 'gloo/examples/*') |
  tar -C "$gloo" -T - -cf - | tar -C .gpu/gloo_include -xf -
cat > .gpu/gloo_include/gloo/config.h <<'H'
// Written by scripts/gpu_bundle.sh: gloo as torch's CPU transport needs it.
#pragma once
#define GLOO_VERSION_MAJOR 0
#define GLOO_VERSION_MINOR 5
#define GLOO_VERSION_PATCH 0
#define GLOO_VERSION \
  (GLOO_VERSION_MAJOR * 10000 + GLOO_VERSION_MINOR * 100 + GLOO_VERSION_PATCH)
#define GLOO_USE_CUDA 0
#define GLOO_USE_NCCL 0
#define GLOO_USE_ROCM 0
#define GLOO_USE_RCCL 0
#define GLOO_USE_REDIS 0
#define GLOO_USE_IBVERBS 0
#define GLOO_USE_MPI 0
#define GLOO_USE_AVX 0
#define GLOO_USE_LIBUV 0
#define GLOO_HAVE_TRANSPORT_TCP 1
#define GLOO_HAVE_TRANSPORT_TCP_TLS 0
#define GLOO_HAVE_TRANSPORT_IBVERBS 0
#define GLOO_HAVE_TRANSPORT_UV 0
#define GLOO_USE_TORCH_DTYPES 0
H
du -sh .gpu
