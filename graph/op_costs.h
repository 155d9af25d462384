// Forward and backward cost rules for ONNX op types, in FLOPs and bytes.
//
// Contract: every rule is a closed-form function of the op's tensor shapes
// and attributes. An op type without a rule (or in a non-default domain, or
// with unresolved shapes) gets CostStatus::kUnknown and zero FLOPs, and the
// caller reports it; nothing is silently invented. A handful of op types
// whose work depends on data (TopK, NonMaxSuppression...) or on a
// convention (Resize's interpolation) are kEstimated.
//
// Conventions: a multiply-add is 2 FLOPs; elementwise ops cost a fixed
// number of FLOPs per output element given in the table (1 for arithmetic,
// a few for transcendental functions); data movement costs 0 FLOPs and its
// bytes. Batch and layer normalization are costed as in training (batch
// statistics computed).
#ifndef PLACER_GRAPH_OP_COSTS_H_
#define PLACER_GRAPH_OP_COSTS_H_

#include "absl/strings/string_view.h"
#include <vector>

#include "graph/graph.h"

namespace placer {

// How an op's backward pass relates to its forward pass.
enum class GradientRule {
  kNone,         // no gradient flows (shape arithmetic, comparisons, casts
                 // to integers, random generators)
  kPerInput,     // a contraction: computing the gradient of each input that
                 // needs one costs about one forward pass (Conv, MatMul...)
  kSamePass,     // one pass over the data costing about the forward FLOPs
  // FlashAttention's backward (placer's FusedAttention): the scores
  // recomputed from Q and Kᵀ, then dV, dP, dQ and dK, each a product the
  // size of a forward one (5 products to the forward's 2), and the
  // elementwise chain twice (recomputed, differentiated).
  kAttention,
  // A FusedElementwise region (graph/fused_region.h): its body's forward
  // recomputed, then each body op's own backward; it reads what it kept
  // (saved_for_backward.h) and its outputs' gradients, and writes its
  // inputs' gradients, nothing between its ops.
  kRegion,
};

struct OpCostRule {
  GradientRule gradient = GradientRule::kSamePass;
  // Which inputs are "operands" whose gradients cost one forward pass each
  // under kPerInput (e.g. {0, 1} for Conv's X and W; the bias is cheaper).
  std::vector<int> contraction_inputs;
  // Inputs that are state rather than trainable weights even when they are
  // floating-point initializers (BatchNormalization's running mean and
  // variance).
  std::vector<int> non_trainable_inputs;
};

// The rule for an op type, or nullptr when the type has no rule.
const OpCostRule* FindOpCostRule(absl::string_view domain,
                                 absl::string_view op_type);

// Whether input k of `op` is state rather than a weight (a rule's
// non_trainable_inputs: BatchNormalization's running mean and variance):
// never a parameter, never a gradient.
bool IsStateInput(const Op& op, int k);

// Computes the forward cost of `op` from the shapes in `tensors`.
OpCost ComputeForwardCost(const Op& op, const std::vector<Tensor>& tensors);

// Backward cost of `op`, given which of its inputs need a gradient
// (input_needs_grad[k] for input k). Bytes: incoming output gradients, the
// saved inputs, and the input gradients written.
OpCost ComputeBackwardCost(const Op& op, const std::vector<Tensor>& tensors,
                           const std::vector<bool>& input_needs_grad);

}  // namespace placer

#endif  // PLACER_GRAPH_OP_COSTS_H_
