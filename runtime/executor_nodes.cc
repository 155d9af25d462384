// The op-placement executor's node bodies (runtime/executor_impl.h): a
// forward node runs its op, a backward node its op's derivative, an update
// node the optimizer's step on its parameter.
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <random>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/host_setup.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "profiles/signature.h"
#include "runtime/allocation_tracker.h"
#include "runtime/cpu_cores.h"
#include "runtime/executor_impl.h"
#include "runtime/executor_ops.h"
#include "runtime/initial_values.h"
#include "runtime/op_autograd.h"
#include "runtime/step_exchange.h"
#include "runtime/torch_devices.h"
#include "runtime/torch_ops.h"
#include "simulator/gradient_partials.h"
#include "simulator/simulator.h"

namespace placer {

absl::Status TorchExecutor::RunNode(int i, std::vector<torch::Tensor>* outputs,
                                    double* loss) {
  switch (view_.node(i).kind) {
    case NodeKind::kForward:
      return RunForward(i, outputs, loss);
    case NodeKind::kBackward:
      return RunBackward(i, outputs);
    case NodeKind::kUpdate:
      return RunUpdate(i);
  }
  return absl::InternalError("unknown node kind");
}

absl::Status TorchExecutor::RunForward(int i, std::vector<torch::Tensor>* outputs,
                                       double* loss) {
  const TrainingNode& node = view_.node(i);
  const int d = device_of_node_[i];
  const Op& op = graph_.op(node.forward_op);
  std::vector<torch::Tensor> inputs;
  if (!AllOutputsFolded(graph_, op)) {
    for (int in : op.inputs) {
      inputs.push_back(in < 0 ? torch::Tensor()
                              : Present(value_of_tensor_[in], d));
    }
  }
  const bool backward = view_.backward_node(node.forward_op) >= 0;
  ASSIGN_OR_RETURN(
      std::vector<torch::Tensor> results,
      ForwardOp(graph_, op, std::move(inputs), devices_[d], precision_,
                backward ? &needs_gradient_[node.forward_op] : nullptr,
                &saved_[node.forward_op]));
  // Losses of graph outputs written here.
  *loss += OutputLosses(graph_, op, results, targets_, 1.0, &seed_grad_);
  // One tensor per node output value, in the node's order.
  outputs->clear();
  for (int v : node.outputs) {
    int t = view_.value(v).tensor;
    torch::Tensor found;
    for (size_t k = 0; k < op.outputs.size() && k < results.size(); ++k) {
      if (op.outputs[k] == t) found = results[k];
    }
    outputs->push_back(found);
  }
  return absl::OkStatus();
}

absl::Status TorchExecutor::RunBackward(int i,
                                        std::vector<torch::Tensor>* outputs) {
  const TrainingNode& node = view_.node(i);
  const int d = device_of_node_[i];
  const Op& op = graph_.op(node.forward_op);
  SavedOp saved = std::move(saved_[node.forward_op]);
  saved_[node.forward_op] = SavedOp();
  // The gradient of each output: its partial gradients plus the loss seed.
  std::vector<torch::Tensor> output_gradients(op.outputs.size());
  for (size_t k = 0; k < op.outputs.size(); ++k) {
    int t = op.outputs[k];
    if (t < 0) continue;
    torch::Tensor sum = seed_grad_[t];
    for (int s : view_.sums_read_by(i)) {
      if (view_.gradient_sums()[s].tensor != t) continue;
      const torch::Tensor& g = sum_buffer_[SumSlot(s, d)];
      if (g.defined()) sum = sum.defined() ? sum + g : g;
    }
    output_gradients[k] = sum;
  }
  std::vector<int> tensors;
  for (int v : node.outputs) tensors.push_back(view_.value(v).tensor);
  ASSIGN_OR_RETURN(
      std::vector<torch::Tensor> grads,
      BackwardOp(graph_, op, std::move(saved), output_gradients, tensors));
  *outputs = std::move(grads);
  return absl::OkStatus();
}

absl::Status TorchExecutor::RunUpdate(int i) {
  const TrainingNode& node = view_.node(i);
  const int d = device_of_node_[i];
  torch::NoGradGuard no_grad;
  int p = -1;
  for (int v : node.inputs) {
    if (view_.value(v).kind == ValueKind::kParameter) p = v;
  }
  if (p < 0) return absl::InternalError("update node without its parameter");
  torch::Tensor sum;
  for (int s : view_.sums_read_by(i)) {
    const torch::Tensor& g = sum_buffer_[SumSlot(s, d)];
    if (g.defined()) sum = sum.defined() ? sum + g : g;
  }
  if (!sum.defined()) return absl::OkStatus();
  updates_[p]->Apply(sum);
  return absl::OkStatus();
}

}  // namespace placer
