// Fused attention: the attention core of a graph — scores = Q·Kᵀ, a chain
// of elementwise steps on the scores (a scale, an additive mask, a masking
// Where), Softmax over the keys, then the probabilities times V — as one
// op, the way training frameworks run it (FlashAttention, cuDNN's fused
// attention, PyTorch's scaled_dot_product_attention): the seq x seq scores
// are never a tensor of the step, neither in the forward nor kept for the
// backward. Exporters at opsets 13-18 write the core op by op, so a graph
// read as exported holds every head's scores until its backward.
//
// Contract:
//  - FuseAttention(graph) returns a copy of `graph` where every match is
//    one op of type kFusedAttentionType in kPlacerDomain whose inputs are
//    [Q, Kᵀ, V, the steps' other inputs in step order] and whose output is
//    the second MatMul's output tensor (same name, shape and type). Its
//    attributes say how to replay the chain: `steps` (each step's op type),
//    `score_positions` (where the scores enter the step's inputs) and
//    `step_inputs` (how many of the fused op's inputs the step reads).
//    A core whose Add or Where step applies a causal mask (a Trilu of
//    ConstantOfShape as the zoo's decoders build it, or constant data
//    that is triangular; the rule is AppliesCausalMask's in the .cc) gets
//    `causal` = 1.
//    The fused op's key is the first MatMul's key + "/FusedAttention";
//    every other op keeps its key, every other tensor its name and data.
//  - A match: a MatMul of two tensors of rank >= 3 that are no weights or
//    constants; then, each the
//    only reader of the one before it and no graph output, up to 8 steps
//    of Mul or Div by a one-element tensor, Add of any tensor, Where with the
//    scores as its second or third input (each keeping the scores' shape);
//    Softmax over the last axis; an eval-mode Dropout (no training_mode
//    input, or a constant false one) whose mask nobody reads, at most one;
//    a MatMul reading the probabilities as its first input. Anything else
//    (a training-mode dropout on the probabilities, a second reader of the
//    scores) leaves the core as it is.
//  - `fused` (optional) receives the number of cores fused.
//  - Errors: only GraphBuilder's, naming the graph's source.
#ifndef PLACER_GRAPH_ATTENTION_FUSION_H_
#define PLACER_GRAPH_ATTENTION_FUSION_H_

#include "absl/status/statusor.h"
#include "graph/fused_attention.h"
#include "graph/graph.h"

namespace placer {

absl::StatusOr<Graph> FuseAttention(const Graph& graph, int* fused = nullptr);

}  // namespace placer

#endif  // PLACER_GRAPH_ATTENTION_FUSION_H_
