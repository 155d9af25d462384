// One op's forward and backward as the executor (strategy_executor.h)
// runs them, in every kind of stage: so an op computes the same numbers
// wherever it runs.
//
// Contract:
//  - ForwardOp runs the op's LibTorch kernel on `inputs` (tensors on one
//    device; undefined for omitted optional inputs). With `needs_gradient`
//    (one flag per op input: the inputs a backward node wants gradients
//    of), the kernel runs under autograd and
//    `saved` keeps the op's backward graph: only what the kernel's own
//    derivative saves stays alive (as in PyTorch, and as the training
//    view's saved_for_backward.h assumes), not the inputs themselves; the
//    returned outputs are detached. Without it, the kernel runs without
//    autograd. Below fp32 (`precision`), as torch.autocast does: the
//    floating-point inputs of a lower-precision op are cast to the step's
//    type and those of an fp32 op to fp32 (the casts inside autograd, so a
//    weight's gradient comes back in its own type), and each output is
//    cast to its type in precision.tensor_types.
//  - OutputLosses: for each floating-point graph output among the op's
//    outputs, its loss (a scalar output as it is; else cross-entropy
//    against an int64 target, or half the MSE against a float target) is
//    added to the returned sum and the gradient of that loss, times
//    `seed_scale`, is stored as the output's seed gradient.
//  - BackwardOp: with `output_gradients` (per op output; undefined: none
//    flows), autograd over the op alone gives the gradient of each tensor
//    in `tensors` (summed over the input positions that read it; zeros
//    when none flows). Errors name the tensor.
#ifndef PLACER_RUNTIME_OP_AUTOGRAD_H_
#define PLACER_RUNTIME_OP_AUTOGRAD_H_

#include <torch/csrc/autograd/edge.h>
#include <torch/torch.h>

#include <vector>

#include "absl/status/statusor.h"
#include "graph/autocast.h"
#include "graph/graph.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"

namespace placer {

struct SavedOp {
  // Per op input: where autograd hands back its gradient (invalid: none
  // wanted), and its sizes and options (for a zero gradient).
  std::vector<torch::autograd::Edge> inputs;
  std::vector<std::vector<int64_t>> input_sizes;
  std::vector<torch::TensorOptions> input_options;
  // Per op output: where its gradient enters the op's backward graph
  // (invalid: the output has no history).
  std::vector<torch::autograd::Edge> outputs;
};

// The step's precision as ForwardOp applies it: autocast by the rules of
// graph/autocast.h (one set of rules for the simulator's sizes and costs and
// for the executors). At kFp32 tensor_types is empty and nothing is cast.
struct StepPrecision {
  Precision precision = Precision::kFp32;
  std::vector<DataType> tensor_types;  // per graph tensor
};
StepPrecision StepPrecisionFor(const Graph& graph, Precision precision);
// OK when every device of `cluster` that this process drives (`devices`,
// TorchDevices' answer; placeholders included) can compute at the step's
// precision: fp16 needs CUDA (LibTorch's CPU kernels have no fp16 matrix
// products); INVALID_ARGUMENT naming the first device that cannot, or for
// fp8 and for parameters held at the compute type (MixedPrecision::kMaster):
// both are simulated only.
absl::Status CheckStepPrecision(const TrainingOptions& training,
                                const Cluster& cluster,
                                const std::vector<torch::Device>& devices,
                                const std::vector<char>& local = {});

absl::StatusOr<std::vector<torch::Tensor>> ForwardOp(
    const Graph& graph, const Op& op, std::vector<torch::Tensor> inputs,
    const torch::Device& device, const StepPrecision& precision,
    const std::vector<bool>* needs_gradient, SavedOp* saved);

// `targets` and `seed_gradients` are indexed by graph tensor.
double OutputLosses(const Graph& graph, const Op& op,
                    const std::vector<torch::Tensor>& outputs,
                    const std::vector<torch::Tensor>& targets,
                    double seed_scale,
                    std::vector<torch::Tensor>* seed_gradients);

absl::StatusOr<std::vector<torch::Tensor>> BackwardOp(
    const Graph& graph, const Op& op, SavedOp saved,
    const std::vector<torch::Tensor>& output_gradients,
    const std::vector<int>& tensors);

}  // namespace placer

#endif  // PLACER_RUNTIME_OP_AUTOGRAD_H_
