// The op FuseElementwise (graph/elementwise_fusion.h) writes: a
// FusedElementwise op in kPlacerDomain, a region of elementwise ops,
// reductions along rows, normalizations and data movement run as one kernel
// (as torch.compile's generated kernels and Transformer Engine's fused
// RMSNorm, RoPE and SwiGLU run them): it reads its inputs once and writes
// its outputs once; the tensors between its ops are never materialized.
//
// Contract:
//  - The op's `body` attribute (AttributeValue::Kind::kGraph) is the
//    region as a Graph: body tensor k (k < op.inputs.size()) is the op's
//    input k (a kGraphInput for an activation, else the input's own kind,
//    constants with their data), body.outputs()[k] is the op's output k,
//    and every op of the body keeps its key, type, attributes and forward
//    cost from the graph it was taken from.
//  - Its backward recomputes the body from what it kept (the region's
//    inputs and outputs that the body's own backward formulas read,
//    saved_for_backward.h) and runs the body's backward; nothing between
//    its ops is kept for it.
#ifndef PLACER_GRAPH_FUSED_REGION_H_
#define PLACER_GRAPH_FUSED_REGION_H_

#include "graph/graph.h"

namespace placer {

inline constexpr char kFusedRegionType[] = "FusedElementwise";

// Whether `op` is a FusedElementwise op.
bool IsFusedRegion(const Op& op);

// The body of a FusedElementwise op; nullptr for any other op or one
// without a body attribute.
const Graph* RegionBody(const Op& op);

}  // namespace placer

#endif  // PLACER_GRAPH_FUSED_REGION_H_
