// Fused elementwise regions: the chains of elementwise ops, row reductions,
// normalizations and data movement between a graph's matrix products, each
// run as one kernel (graph/fused_region.h), the way torch.compile's
// generated kernels and Transformer Engine's fused RMSNorm, RoPE, SwiGLU and
// bias-GELU run them: one read of the region's inputs, one write of its
// outputs, and for the backward only what the region's own derivative
// formulas read of its inputs and outputs (its inner tensors recomputed).
// Exporters write these chains op by op, and a graph read as exported keeps
// and moves every inner tensor, as eager PyTorch does.
//
// Contract:
//  - FuseElementwise(graph) returns a copy of `graph` where every region
//    of two or more fusible ops is one op of type kFusedRegionType in
//    kPlacerDomain; every other op keeps its key, every tensor its name,
//    shape, type and data. The fused op's key is its first op's key +
//    "/FusedElementwise"; its inputs are the tensors its ops read from
//    outside it (activations, parameters and constants, each once, in the
//    order they are first read), its outputs those of its tensors that an
//    op outside it reads or that are graph outputs, in graph order.
//  - Fusible: an op of the standard domain whose type is in the fusion's
//    table (elementwise arithmetic and activations, Where, Cast and
//    comparisons; ReduceMean/Sum/Max/Min, Softmax, LogSoftmax,
//    LayerNormalization; Reshape, Transpose, Squeeze, Unsqueeze, Flatten,
//    Expand, Slice, Split, Concat, Identity), whose forward cost is known,
//    whose outputs were not folded to constants, and which draws no random
//    numbers. Matrix products, convolutions, FusedAttention, gathers,
//    losses and dropout end regions.
//  - Regions grow in topological order: an op joins the regions of the
//    fusible ops it reads from while the graph stays acyclic (no path
//    leaves a region and comes back into it, every other region taken as
//    one op), only where both or neither read a tensor computed from
//    parameters (tables computed from constants, as rotary embeddings'
//    cos and sin, stay a region of their own), and only within one of the
//    graph's repeated layers (graph/repeated_layers.h) or between ops in
//    none: a block's residual sum and the next block's norm are two
//    kernels, as torch.compile, compiling each TransformerBlock, and
//    Transformer Engine's layers run them. Deterministic.
//  - `fused` (optional) receives the number of regions made.
//  - Errors: only GraphBuilder's, naming the graph's source.
#ifndef PLACER_GRAPH_ELEMENTWISE_FUSION_H_
#define PLACER_GRAPH_ELEMENTWISE_FUSION_H_

#include "absl/status/statusor.h"
#include "graph/fused_region.h"
#include "graph/graph.h"

namespace placer {

absl::StatusOr<Graph> FuseElementwise(const Graph& graph, int* fused = nullptr);

// Whether FuseElementwise may put op `op` of `graph` in a region.
bool IsFusible(const Graph& graph, int op);

}  // namespace placer

#endif  // PLACER_GRAPH_ELEMENTWISE_FUSION_H_
