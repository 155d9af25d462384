#include "profiles/signature.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placer {
namespace {

std::string TensorSig(const Tensor& t) {
  return absl::StrCat(DataTypeName(t.dtype), "[",
                      t.shape_known ? absl::StrJoin(t.shape, ",") : "?", "]");
}

std::string AttributesSig(const Op& op) {
  std::vector<std::string> parts;
  for (const auto& [name, a] : op.attributes) {
    switch (a.kind) {
      case AttributeValue::Kind::kInt:
        parts.push_back(absl::StrCat(name, "=", a.i));
        break;
      case AttributeValue::Kind::kFloat:
        parts.push_back(absl::StrCat(name, "=", a.f));
        break;
      case AttributeValue::Kind::kString:
        parts.push_back(absl::StrCat(name, "=", a.s));
        break;
      case AttributeValue::Kind::kInts:
        parts.push_back(absl::StrCat(name, "=[", absl::StrJoin(a.ints, ","), "]"));
        break;
      default:
        parts.push_back(name);
        break;
    }
  }
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

}  // namespace

std::vector<bool> InputsNeedingGradient(const TrainingView& view, int node) {
  const TrainingNode& n = view.node(node);
  const Op& op = view.forward().op(n.forward_op);
  std::vector<bool> needs(op.inputs.size(), false);
  for (int out : n.outputs) {
    int t = view.value(out).tensor;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      if (op.inputs[k] == t) needs[k] = true;
    }
  }
  return needs;
}

std::string AccumulateSignature(const TrainingView& view, int update_node) {
  return absl::StrCat(
      "accumulate ",
      TensorSig(view.forward().tensor(view.node(update_node).parameter)));
}

std::string PartialAddSignature(const TrainingView& view, int sum) {
  return absl::StrCat(
      "add ",
      TensorSig(view.forward().tensor(view.gradient_sums()[sum].tensor)));
}

std::string NodeSignature(const TrainingView& view, int node) {
  const TrainingNode& n = view.node(node);
  const Graph& g = view.forward();
  if (n.kind == NodeKind::kUpdate) {
    return absl::StrCat("update ", TensorSig(g.tensor(n.parameter)),
                        " partials=", n.inputs.size() - 1);
  }
  const Op& op = g.op(n.forward_op);
  std::vector<std::string> inputs;
  for (int in : op.inputs) {
    inputs.push_back(in < 0 ? "-" : TensorSig(g.tensor(in)));
  }
  std::string sig = absl::StrCat(
      n.kind == NodeKind::kForward ? "forward " : "backward ", op.domain,
      op.domain.empty() ? "" : "::", op.op_type, "(",
      absl::StrJoin(inputs, ","), ")", AttributesSig(op));
  if (n.kind == NodeKind::kBackward) {
    std::string grads;
    for (bool b : InputsNeedingGradient(view, node)) grads += b ? '1' : '0';
    absl::StrAppend(&sig, " grads=", grads);
  }
  return sig;
}

}  // namespace placer
