#include "runtime/op_autograd.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/initial_values.h"
#include "runtime/torch_ops.h"

namespace placer {

absl::StatusOr<std::vector<torch::Tensor>> ForwardOp(
    const Graph& graph, const Op& op, std::vector<torch::Tensor> inputs,
    const torch::Device& device, const std::vector<bool>* needs_gradient,
    SavedOp* saved) {
  std::vector<torch::Tensor> results;
  // Folded outputs stand for the op (the importer folds nothing computed
  // from weights, so no gradient flows through such an op).
  if (AllOutputsFolded(graph, op)) {
    for (int out : op.outputs) {
      if (out < 0) {
        results.emplace_back();
        continue;
      }
      absl::StatusOr<torch::Tensor> t = TensorFromData(*graph.tensor(out).data);
      if (!t.ok()) return t.status();
      results.push_back(t->to(device));
    }
    return results;
  }
  if (needs_gradient != nullptr) {
    saved->leaves = MakeGradientLeaves(inputs, *needs_gradient);
    absl::StatusOr<std::vector<torch::Tensor>> out = RunTorchOp(op, inputs);
    if (!out.ok()) return out.status();
    saved->outputs = *out;
    for (const torch::Tensor& t : *out) {
      results.push_back(t.defined() ? t.detach() : t);
    }
    return results;
  }
  torch::NoGradGuard no_grad;
  return RunTorchOp(op, inputs);
}

double OutputLosses(const Graph& graph, const Op& op,
                    const std::vector<torch::Tensor>& outputs,
                    const std::vector<torch::Tensor>& targets,
                    double seed_scale,
                    std::vector<torch::Tensor>* seed_gradients) {
  double loss = 0;
  for (size_t k = 0; k < op.outputs.size() && k < outputs.size(); ++k) {
    const int t = op.outputs[k];
    const torch::Tensor& result = outputs[k];
    if (t < 0 || !graph.tensor(t).is_graph_output || !result.defined() ||
        !result.is_floating_point()) {
      continue;
    }
    torch::Tensor seed;
    if (result.numel() == 1) {
      loss += result.item<double>();
      seed = torch::ones_like(result);
    } else if (targets[t].defined()) {
      torch::Tensor leaf = result.detach().requires_grad_(true);
      torch::Tensor l =
          targets[t].scalar_type() == torch::kLong
              ? torch::nll_loss(torch::log_softmax(leaf, 1), targets[t])
              : 0.5 * torch::mse_loss(leaf, targets[t]);
      loss += l.item<double>();
      seed = torch::autograd::grad({l}, {leaf})[0];
    } else {
      continue;
    }
    (*seed_gradients)[t] = seed_scale == 1.0 ? seed : seed * seed_scale;
  }
  return loss;
}

absl::StatusOr<std::vector<torch::Tensor>> BackwardOp(
    const Graph& graph, const Op& op, SavedOp saved,
    const std::vector<torch::Tensor>& output_gradients,
    const std::vector<int>& tensors) {
  std::vector<torch::Tensor> outs, grads;
  for (size_t k = 0; k < op.outputs.size() && k < saved.outputs.size(); ++k) {
    const torch::Tensor& out = saved.outputs[k];
    if (k < output_gradients.size() && output_gradients[k].defined() &&
        out.defined() && out.requires_grad()) {
      outs.push_back(out);
      grads.push_back(output_gradients[k]);
    }
  }
  std::vector<torch::Tensor> wrt;
  std::vector<int> wrt_input;
  for (size_t k = 0; k < saved.leaves.size(); ++k) {
    if (saved.leaves[k].defined()) {
      wrt.push_back(saved.leaves[k]);
      wrt_input.push_back(static_cast<int>(k));
    }
  }
  std::vector<torch::Tensor> input_grads(op.inputs.size());
  if (!outs.empty() && !wrt.empty()) {
    std::vector<torch::Tensor> g = torch::autograd::grad(
        outs, wrt, grads, /*retain_graph=*/false, /*create_graph=*/false,
        /*allow_unused=*/true);
    for (size_t j = 0; j < g.size(); ++j) input_grads[wrt_input[j]] = g[j];
  }
  std::vector<torch::Tensor> result;
  for (int t : tensors) {
    torch::Tensor sum;
    torch::Tensor like;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      if (op.inputs[k] != t) continue;
      if (k < saved.leaves.size() && saved.leaves[k].defined()) {
        like = saved.leaves[k];
      }
      if (input_grads[k].defined()) {
        sum = sum.defined() ? sum + input_grads[k] : input_grads[k];
      }
    }
    if (!sum.defined()) {
      if (!like.defined()) {
        return absl::InternalError(absl::StrCat(
            "no saved input for the gradient of '", graph.tensor(t).name, "'"));
      }
      sum = torch::zeros_like(like);
    }
    result.push_back(sum.detach());
  }
  return result;
}

}  // namespace placer
