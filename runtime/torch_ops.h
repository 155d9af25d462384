// LibTorch implementations of ONNX ops, one function per op type, looked
// up in a registry. The executor runs training steps with them and the
// profiler times them.
//
// Contract: RunTorchOp computes exactly the ONNX op's outputs (one tensor
// per output of the op; omitted optional outputs come back undefined) from
// inputs given as torch tensors on one device, or returns an error naming
// the op and what is unsupported (an attribute value, an input layout).
// Integer inputs that ONNX treats as attributes (Reshape's shape, Split's
// sizes, axes) are int64 tensors. Kernels are differentiable through
// autograd wherever the ONNX op is.
#ifndef PLACER_RUNTIME_TORCH_OPS_H_
#define PLACER_RUNTIME_TORCH_OPS_H_

#include <torch/torch.h>

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/torch_status.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace placer {

bool HasTorchKernel(absl::string_view domain, absl::string_view op_type);
// The op types of the kernel registry, sorted (runtime/executor_ops.h keeps
// the same list for commands without LibTorch).
std::vector<std::string> TorchKernelOpTypes();

// Results own their bytes (OwnBytes): what the training view counts.
absl::StatusOr<std::vector<torch::Tensor>> RunTorchOp(
    const Op& op, const std::vector<torch::Tensor>& inputs);

// Runs one op of a body (a FusedElementwise op's) as its caller runs ops.
using OpRunner = std::function<absl::StatusOr<std::vector<torch::Tensor>>(
    const Op&, std::vector<torch::Tensor>)>;

// A FusedElementwise op (graph/fused_region.h) on `inputs`, each op of its
// body run by `run` (RunTorchOp for the registry's kernel; the executor
// passes its precision's). Differentiable: the backward recomputes the body
// from what SavedForBackward says the op keeps (runtime/torch_ops_fused.cc).
absl::StatusOr<std::vector<torch::Tensor>> RunFusedRegion(
    const Op& op, const std::vector<torch::Tensor>& inputs, OpRunner run);

// A value owns its bytes, as the training view counts them: a result that
// is a strided view (a transpose, an expand) or a part of a larger block (a
// split's outputs, a concat's input gradients) is copied, so that it
// neither keeps a larger block alive nor makes a later kernel keep a
// contiguous copy of it beside it. Views of a whole block (a reshape) stay
// views.
torch::Tensor OwnBytes(const torch::Tensor& t);

// Turns the inputs that get a gradient (needs[k], defined, floating point)
// into autograd leaves, in place, as the executor runs a forward op whose
// backward follows; returns the leaves by input position (undefined where
// none).
std::vector<torch::Tensor> MakeGradientLeaves(std::vector<torch::Tensor>& inputs,
                                              const std::vector<bool>& needs);

// A torch tensor holding `data` (a copy), or an error for types torch
// cannot hold.
absl::StatusOr<torch::Tensor> TensorFromData(const TensorData& data);

torch::ScalarType ToTorchType(DataType type);

// TorchErrorStatus (a LibTorch exception as a status): base/torch_status.h.

}  // namespace placer

#endif  // PLACER_RUNTIME_TORCH_OPS_H_
