#include "graph/fused_attention.h"

namespace placer {

bool IsFusedAttention(const Op& op) {
  return op.domain == kPlacerDomain && op.op_type == kFusedAttentionType;
}

bool IsCausalAttention(const Op& op) {
  return IsFusedAttention(op) && op.IntAttribute("causal", 0) == 1;
}

std::vector<AttentionStep> AttentionSteps(const Op& op) {
  std::vector<AttentionStep> steps;
  const AttributeValue* types = op.FindAttribute("steps");
  const std::vector<int64_t> positions = op.IntsAttribute("score_positions");
  const std::vector<int64_t> counts = op.IntsAttribute("step_inputs");
  if (types == nullptr || types->strings.size() != positions.size() ||
      positions.size() != counts.size()) {
    return steps;
  }
  int first = 3;
  for (size_t i = 0; i < positions.size(); ++i) {
    AttentionStep step;
    step.op_type = types->strings[i];
    step.score_position = static_cast<int>(positions[i]);
    step.first_input = first;
    step.inputs = static_cast<int>(counts[i]);
    first += step.inputs;
    steps.push_back(step);
  }
  return steps;
}

int64_t AttentionLogSumExpBytes(const Op& op,
                                const std::vector<Tensor>& tensors) {
  if (op.outputs.empty() || op.outputs[0] < 0) return 0;
  const Tensor& out = tensors[op.outputs[0]];
  if (!out.shape_known || out.shape.empty() || out.shape.back() == 0) return 0;
  return out.num_elements() / out.shape.back() * 4;
}

}  // namespace placer
