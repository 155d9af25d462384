// The op FuseAttention (graph/attention_fusion.h) writes: FusedAttention in
// kPlacerDomain, the attention core of a graph as one op. Inputs: Q
// [..., Sq, d], Kᵀ [..., d, Sk], V [..., Sk, dv], then each step's other
// inputs in step order; output [..., Sq, dv]. It computes
//   softmax(step_n(... step_1(Q·Kᵀ)), axis=-1) · V
// where step i is the ONNX op steps[i] with the scores as its input
// score_positions[i] and the next step_inputs[i] inputs filling its other
// positions in order; `causal` (1 or absent) says the steps' mask hides
// every key after its query. Its backward is FlashAttention's: it keeps Q,
// Kᵀ, V, the steps' inputs, O and one fp32 log-sum-exp per query row,
// never the scores.
#ifndef PLACER_GRAPH_FUSED_ATTENTION_H_
#define PLACER_GRAPH_FUSED_ATTENTION_H_

#include <string>
#include <vector>

#include "graph/graph.h"

namespace placer {

inline constexpr char kFusedAttentionType[] = "FusedAttention";

// Whether `op` is a FusedAttention op.
bool IsFusedAttention(const Op& op);

// Whether a FusedAttention op's mask is causal (its `causal` attribute is
// 1: FuseAttention found a mask that hides exactly the keys after each
// query), so that FlashAttention computes only the scores on and below the
// diagonal.
bool IsCausalAttention(const Op& op);

// One elementwise step on the scores.
struct AttentionStep {
  std::string op_type;    // Mul, Div, Add, Where
  int score_position = 0;  // where the scores go among the step's inputs
  int first_input = 0;     // the step's first other input, in op.inputs
  int inputs = 0;          // how many of op.inputs the step reads
};

// The steps of a FusedAttention op, from its attributes (empty when it
// has none or they disagree in length).
std::vector<AttentionStep> AttentionSteps(const Op& op);

// The bytes a FusedAttention op keeps for its backward beyond its inputs
// and output: one fp32 log-sum-exp per query row (0 when shapes are
// unknown).
int64_t AttentionLogSumExpBytes(const Op& op, const std::vector<Tensor>& tensors);

}  // namespace placer

#endif  // PLACER_GRAPH_FUSED_ATTENTION_H_
