// The form of one LibTorch kernel of torch_ops.h's registry, and the
// helpers kernels share, for the files that define kernels
// (torch_ops.cc: elementwise, linear algebra, shapes, reductions;
// torch_ops_layers.cc: convolution, pooling, normalization, recurrent
// cells, softmax and losses, dropout;
// torch_ops_image.cc: normalizations, transposed convolution, resizing;
// torch_ops_indexing.cc: top-k, scatters, gathers, cumulative sums;
// torch_ops_attention.cc: placer's FusedAttention;
// torch_ops_fused.cc: placer's FusedElementwise).
//
// Contract: a kernel computes exactly the ONNX op's outputs from its inputs
// with differentiable LibTorch calls (autograd gives the backward), or
// returns Unsupported naming the node and what it does not support.
#ifndef PLACER_RUNTIME_TORCH_KERNEL_H_
#define PLACER_RUNTIME_TORCH_KERNEL_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace placer::kernels {

using Tensors = std::vector<torch::Tensor>;
using Result = absl::StatusOr<Tensors>;
using Kernel = Result (*)(const Op&, const Tensors&);
using KernelTable = absl::flat_hash_map<std::string, Kernel>;

// UNIMPLEMENTED: "node 'KEY' (TYPE): what".
absl::Status Unsupported(const Op& op, const std::string& what);
// Whether optional input k was given.
bool Present(const Tensors& in, size_t k);
// An integer tensor's values (on the host).
std::vector<int64_t> IntsOf(const torch::Tensor& t);
// A possibly negative axis, counted from 0.
int64_t Axis(int64_t axis, int64_t rank);

// The kernels of torch_ops_layers.cc, torch_ops_image.cc and
// torch_ops_indexing.cc.
void AddLayerKernels(KernelTable& table);
void AddImageKernels(KernelTable& table);
void AddIndexingKernels(KernelTable& table);
// torch_ops_attention.cc: placer's FusedAttention.
void AddAttentionKernels(KernelTable& table);
// torch_ops_fused.cc: placer's FusedElementwise.
void AddFusedRegionKernels(KernelTable& table);

}  // namespace placer::kernels

#endif  // PLACER_RUNTIME_TORCH_KERNEL_H_
