#include "runtime/op_autograd.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "graph/fused_region.h"
#include "runtime/initial_values.h"
#include "runtime/torch_ops.h"

namespace placer {
namespace {

// Hands the op's kernel a tensor that shares `data`'s storage and whose
// gradient autograd can give back, without the backward graph holding
// `data` (an autograd leaf would: its AccumulateGrad node keeps it). So only
// what the kernel's own derivative saves stays alive, as in PyTorch. The
// gradient is captured at the tap's edge; the tap's backward never runs.
struct GradientTap : public torch::autograd::Function<GradientTap> {
  static torch::Tensor forward(torch::autograd::AutogradContext*,
                               torch::Tensor data, torch::Tensor /*anchor*/) {
    torch::Tensor alias = torch::empty({0}, data.options());
    alias.set_(data);
    return alias;
  }
  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    return {torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

StepPrecision StepPrecisionFor(const Graph& graph, Precision precision) {
  StepPrecision step;
  step.precision = precision;
  if (precision == Precision::kFp32) return step;
  for (const Tensor& t : AutocastTensors(graph, precision)) {
    step.tensor_types.push_back(t.dtype);
  }
  return step;
}

absl::Status CheckStepPrecision(const TrainingOptions& training,
                                const Cluster& cluster,
                                const std::vector<torch::Device>& devices,
                                const std::vector<char>& local) {
  const Precision precision = training.precision;
  if (training.low_precision_parameters()) {
    return absl::InvalidArgumentError(
        "mixed-precision master: the executor keeps fp32 weights under "
        "autocast (amp); parameters held at the compute type with an fp32 "
        "master copy are simulated only: run with amp");
  }
  if (precision == Precision::kFp8) {
    return absl::InvalidArgumentError(
        "precision fp8: the executor has no fp8 products (Transformer "
        "Engine's); fp8 is simulated only: run at bf16");
  }
  if (precision != Precision::kFp16) return absl::OkStatus();
  for (size_t d = 0; d < devices.size(); ++d) {
    if (!local.empty() && !local[d]) continue;
    if (devices[d].is_cpu()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "precision fp16: device '", cluster.device(static_cast<int>(d)).name,
          "' runs on the CPU, where LibTorch has no fp16 matrix products; "
          "CPUs run bf16"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The kernel under the step's precision: inputs cast for the op's autocast
// class, outputs to their step types.
absl::StatusOr<std::vector<torch::Tensor>> RunAtPrecision(
    const Op& op, std::vector<torch::Tensor> inputs,
    const StepPrecision& precision) {
  if (precision.tensor_types.empty()) return RunTorchOp(op, inputs);
  if (const Graph* body = RegionBody(op); body != nullptr) {
    // Each op of the body at the step's precision, as it would run alone.
    std::vector<DataType> input_types;
    for (int in : op.inputs) {
      input_types.push_back(in < 0 ? DataType::kUndefined
                                   : precision.tensor_types[in]);
    }
    StepPrecision inner;
    inner.precision = precision.precision;
    for (const Tensor& t :
         BodyTensors(*body, input_types, precision.precision)) {
      inner.tensor_types.push_back(t.dtype);
    }
    return RunFusedRegion(
        op, inputs,
        [inner](const Op& member, std::vector<torch::Tensor> args) {
          return RunAtPrecision(member, std::move(args), inner);
        });
  }
  const AutocastClass kind = AutocastClassOf(op);
  if (kind == AutocastClass::kLowerPrecision || kind == AutocastClass::kFp32) {
    const torch::ScalarType type =
        kind == AutocastClass::kFp32
            ? torch::kFloat
            : ToTorchType(ComputeType(precision.precision));
    for (torch::Tensor& t : inputs) {
      if (t.defined() && t.is_floating_point() &&
          t.scalar_type() != torch::kDouble && t.scalar_type() != type) {
        t = t.to(type);
      }
    }
  }
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> out, RunTorchOp(op, inputs));
  for (size_t k = 0; k < out.size() && k < op.outputs.size(); ++k) {
    torch::Tensor& t = out[k];
    const int tensor = op.outputs[k];
    if (tensor < 0 || !t.defined() || !t.is_floating_point()) continue;
    const DataType want = precision.tensor_types[tensor];
    if (IsFloatingPoint(want) && t.scalar_type() != ToTorchType(want)) {
      t = t.to(ToTorchType(want));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<torch::Tensor>> ForwardOp(
    const Graph& graph, const Op& op, std::vector<torch::Tensor> inputs,
    const torch::Device& device, const StepPrecision& precision,
    const std::vector<bool>* needs_gradient, SavedOp* saved) {
  std::vector<torch::Tensor> results;
  if (needs_gradient != nullptr) {
    // One anchor per op call: an empty tensor the taps hang from.
    torch::Tensor anchor =
        torch::empty({0}, torch::TensorOptions().requires_grad(true));
    saved->inputs.assign(inputs.size(), torch::autograd::Edge());
    saved->input_sizes.assign(inputs.size(), {});
    saved->input_options.assign(inputs.size(), torch::TensorOptions());
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k].defined()) continue;
      saved->input_sizes[k] = inputs[k].sizes().vec();
      saved->input_options[k] = inputs[k].options();
      if (k < needs_gradient->size() && (*needs_gradient)[k] &&
          inputs[k].is_floating_point()) {
        inputs[k] = GradientTap::apply(inputs[k].detach(), anchor);
        saved->inputs[k] = torch::autograd::impl::gradient_edge(inputs[k]);
      }
    }
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> out,
                     RunAtPrecision(op, std::move(inputs), precision));
    saved->outputs.assign(out.size(), torch::autograd::Edge());
    for (size_t k = 0; k < out.size(); ++k) {
      const torch::Tensor& t = out[k];
      if (t.defined() && t.requires_grad()) {
        saved->outputs[k] = torch::autograd::impl::gradient_edge(t);
      }
      results.push_back(t.defined() ? t.detach() : t);
    }
    return results;
  }
  torch::NoGradGuard no_grad;
  return RunAtPrecision(op, std::move(inputs), precision);
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
  torch::autograd::edge_list roots;
  std::vector<torch::Tensor> grads;
  for (size_t k = 0; k < op.outputs.size() && k < saved.outputs.size(); ++k) {
    if (k < output_gradients.size() && output_gradients[k].defined() &&
        saved.outputs[k].is_valid()) {
      roots.push_back(saved.outputs[k]);
      grads.push_back(output_gradients[k]);
    }
  }
  torch::autograd::edge_list wrt;
  std::vector<int> wrt_input;
  for (size_t k = 0; k < saved.inputs.size(); ++k) {
    if (saved.inputs[k].is_valid()) {
      wrt.push_back(saved.inputs[k]);
      wrt_input.push_back(static_cast<int>(k));
    }
  }
  std::vector<torch::Tensor> input_grads(op.inputs.size());
  if (!roots.empty() && !wrt.empty()) {
    std::vector<torch::Tensor> g =
        torch::autograd::Engine::get_default_engine().execute(
            roots, grads, /*keep_graph=*/false, /*create_graph=*/false,
            /*accumulate_grad=*/false, wrt);
    for (size_t j = 0; j < g.size(); ++j) {
      input_grads[wrt_input[j]] = OwnBytes(g[j]);
    }
  }
  std::vector<torch::Tensor> result;
  for (int t : tensors) {
    torch::Tensor sum;
    int like = -1;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      if (op.inputs[k] != t) continue;
      if (k < saved.inputs.size() && saved.inputs[k].is_valid()) {
        like = static_cast<int>(k);
      }
      if (input_grads[k].defined()) {
        sum = sum.defined() ? sum + input_grads[k] : input_grads[k];
      }
    }
    if (!sum.defined()) {
      if (like < 0) {
        return absl::InternalError(absl::StrCat(
            "no saved input for the gradient of '", graph.tensor(t).name, "'"));
      }
      sum = torch::zeros(saved.input_sizes[like], saved.input_options[like]);
    }
    result.push_back(sum.detach());
  }
  return result;
}

}  // namespace placer
