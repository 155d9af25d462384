// The FusedElementwise kernel (graph/fused_region.h): the region's body run
// op by op with each op's own kernel, keeping for the backward only what the
// training view counts for it (saved_for_backward.h: the region's inputs
// and outputs its body's derivative formulas read). The backward recomputes
// the body from those under autograd and differentiates it; an input it did
// not keep enters the recomputation as zeros, which only feed ops whose
// derivatives do not read them (that is why it was not kept), and an output
// it kept stands for its recomputed value, gradients passing through to the
// recomputation. The body's inner tensors exist while the forward and the
// backward run, never between them.
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/fused_region.h"
#include "graph/saved_for_backward.h"
#include "runtime/torch_kernel.h"
#include "runtime/torch_ops.h"

namespace placer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the backward needs beside the kept tensors.
struct RegionCall : torch::CustomClassHolder {
  const Op* op = nullptr;
  const Graph* body = nullptr;
  OpRunner run;
  SavedTensors saved;
  std::vector<std::vector<int64_t>> input_sizes;
  std::vector<torch::TensorOptions> input_options;
};

// The kept value of an output in the recomputation: forward it is `kept`;
// backward its gradient goes to `recomputed`.
struct Substitute : torch::autograd::Function<Substitute> {
  static torch::Tensor forward(AutogradContext*, torch::Tensor kept,
                               torch::Tensor /*recomputed*/) {
    torch::Tensor alias = torch::empty({0}, kept.options());
    alias.set_(kept);
    return alias;
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {torch::Tensor(), grads[0]};
  }
};

// Runs the body on `values` (one per body tensor, the inputs set), filling
// in the rest; `kept_outputs` (per body output; undefined: recompute)
// stand for their ops' results.
void RunBody(const RegionCall& call, std::vector<torch::Tensor>& values,
             const std::vector<torch::Tensor>& kept_outputs) {
  const Graph& body = *call.body;
  std::vector<int> output_of(body.tensors().size(), -1);
  for (size_t j = 0; j < body.outputs().size(); ++j) {
    output_of[body.outputs()[j]] = static_cast<int>(j);
  }
  // Readers left per inner tensor: it is dropped after its last one.
  std::vector<int> readers(body.tensors().size(), 0);
  for (const Op& member : body.ops()) {
    for (int in : member.inputs) {
      if (in >= 0) ++readers[in];
    }
  }
  const int inputs_count = static_cast<int>(call.input_sizes.size());
  for (int m : body.topological_order()) {
    const Op& member = body.op(m);
    std::vector<torch::Tensor> inputs;
    for (int in : member.inputs) {
      inputs.push_back(in < 0 ? torch::Tensor() : values[in]);
    }
    for (int in : member.inputs) {
      if (in >= inputs_count && output_of[in] < 0 && --readers[in] == 0) {
        values[in] = torch::Tensor();
      }
    }
    absl::StatusOr<std::vector<torch::Tensor>> out =
        call.run(member, std::move(inputs));
    TORCH_CHECK(out.ok(), "fused region '", call.op->key, "': ",
                std::string(out.status().message()));
    for (size_t k = 0; k < member.outputs.size() && k < out->size(); ++k) {
      const int t = member.outputs[k];
      if (t < 0) continue;
      const int j = output_of[t];
      if (j >= 0 && !kept_outputs.empty() && kept_outputs[j].defined()) {
        values[t] = (*out)[k].requires_grad()
                        ? Substitute::apply(kept_outputs[j], (*out)[k])
                        : kept_outputs[j];
      } else {
        values[t] = (*out)[k];
      }
    }
  }
}

struct RegionFunction : torch::autograd::Function<RegionFunction> {
  static variable_list forward(AutogradContext* ctx,
                               c10::intrusive_ptr<RegionCall> call,
                               at::TensorList inputs) {
    const Graph& body = *call->body;
    std::vector<torch::Tensor> values(body.tensors().size());
    call->input_sizes.clear();
    call->input_options.clear();
    for (size_t k = 0; k < inputs.size(); ++k) {
      values[k] = inputs[k];
      call->input_sizes.push_back(
          inputs[k].defined() ? inputs[k].sizes().vec() : std::vector<int64_t>{});
      call->input_options.push_back(inputs[k].defined() ? inputs[k].options()
                                                        : torch::TensorOptions());
    }
    RunBody(*call, values, {});
    variable_list outputs;
    for (int t : body.outputs()) outputs.push_back(values[t]);
    variable_list kept;
    for (int k : call->saved.inputs) kept.push_back(inputs[k]);
    for (int j : call->saved.outputs) kept.push_back(outputs[j]);
    ctx->save_for_backward(kept);
    variable_list fixed;
    for (const torch::Tensor& t : outputs) {
      if (!t.is_floating_point()) fixed.push_back(t);
    }
    if (!fixed.empty()) ctx->mark_non_differentiable(fixed);
    ctx->saved_data["call"] = c10::IValue::make_capsule(call);
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto call = c10::static_intrusive_pointer_cast<RegionCall>(
        ctx->saved_data["call"].toCapsule());
    const Graph& body = *call->body;
    const variable_list kept = ctx->get_saved_variables();
    const size_t inputs = call->input_sizes.size();
    std::vector<torch::Tensor> values(body.tensors().size());
    std::vector<char> have(inputs, 0);
    size_t next = 0;
    for (int k : call->saved.inputs) {
      values[k] = kept[next++];
      have[k] = 1;
    }
    std::vector<torch::Tensor> kept_outputs(body.outputs().size());
    for (int j : call->saved.outputs) kept_outputs[j] = kept[next++];
    torch::AutoGradMode grad_mode(true);
    std::vector<torch::Tensor> leaves;
    std::vector<size_t> leaf_inputs;
    for (size_t k = 0; k < inputs; ++k) {
      if (!have[k]) {
        if (call->input_sizes[k].empty() && !call->input_options[k].has_dtype()) {
          continue;  // an omitted input
        }
        values[k] = torch::zeros(call->input_sizes[k], call->input_options[k]);
      }
      values[k] = values[k].detach();
      if (ctx->needs_input_grad(k) && values[k].is_floating_point()) {
        values[k].requires_grad_(true);
        leaves.push_back(values[k]);
        leaf_inputs.push_back(k);
      }
    }
    variable_list result(1 + inputs);
    if (leaves.empty()) return result;
    RunBody(*call, values, kept_outputs);
    std::vector<torch::Tensor> roots, root_grads;
    for (size_t j = 0; j < body.outputs().size(); ++j) {
      const torch::Tensor& v = values[body.outputs()[j]];
      if (!v.defined() || !v.requires_grad() || j >= grads.size() ||
          !grads[j].defined()) {
        continue;
      }
      roots.push_back(v);
      root_grads.push_back(grads[j]);
    }
    if (roots.empty()) return result;
    const variable_list g = torch::autograd::grad(
        roots, leaves, root_grads, /*retain_graph=*/false,
        /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t i = 0; i < leaves.size(); ++i) {
      result[1 + leaf_inputs[i]] = g[i];
    }
    return result;
  }
};

absl::StatusOr<std::vector<torch::Tensor>> RunMember(
    const Op& op, std::vector<torch::Tensor> inputs) {
  return RunTorchOp(op, inputs);
}

kernels::Result FusedRegionKernel(const Op& op, const kernels::Tensors& in) {
  return RunFusedRegion(op, in, RunMember);
}

}  // namespace

absl::StatusOr<std::vector<torch::Tensor>> RunFusedRegion(
    const Op& op, const std::vector<torch::Tensor>& inputs, OpRunner run) {
  const Graph* body = RegionBody(op);
  if (body == nullptr) {
    return kernels::Unsupported(op, "a FusedElementwise op without a body");
  }
  if (inputs.size() != op.inputs.size()) {
    return kernels::Unsupported(
        op, absl::StrCat("expected ", op.inputs.size(), " inputs, got ",
                         inputs.size()));
  }
  auto call = c10::make_intrusive<RegionCall>();
  call->op = &op;
  call->body = body;
  call->run = std::move(run);
  call->saved = SavedForBackward(op);
  return RegionFunction::apply(call, at::TensorList(inputs));
}

namespace kernels {

void AddFusedRegionKernels(KernelTable& table) {
  table[kFusedRegionType] = FusedRegionKernel;
}

}  // namespace kernels
}  // namespace placer
