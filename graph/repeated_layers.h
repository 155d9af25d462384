// The repeated layers of a model's forward pass, found from its dataflow
// and op types alone (no names): the unit that recomputation per layer
// checkpoints and that compiled kernels do not fuse across (a transformer
// block, a ResNet bottleneck), as frameworks wrap and compile each block of
// a model's layer list.
//
// Contract:
//  - The nodes are the forward graph's ops, in its topological order; a
//    training view's layers are those of its forward graph.
//  - The stream: forward activations that depend on a graph input and on a
//    parameter. What is made from graph inputs and constants alone (an
//    attention mask, rotary tables, labels) or from parameters and
//    constants alone (a tied output layer's transposed embedding) is a side
//    value, and the nodes that make only side values belong to no layer.
//  - A cut: a point in the forward nodes' topological order where the
//    stream values made before it and read by a forward node after it are
//    all one node's (the residual stream between blocks; with fused
//    elementwise regions, the region that adds the attention's residual
//    and normalizes it for the MLP, both its outputs). The stream nodes
//    between two consecutive cuts form a segment (a transformer's attention
//    block, its MLP block, a ResNet's bottleneck, or a single op of a plain
//    chain).
//  - A segment's signature is the op types of its nodes that read weights
//    (autocast's WeightTensors), in order, with those weights' sizes. A
//    run is k >= 2 consecutive groups of p segments with equal signatures,
//    and makes k layers of p segments each (a decoder's attention and MLP
//    blocks together, as a TransformerBlock wraps them). Runs are taken the
//    shortest groups first (p = 1, 2, ... kMaxLayerPeriod), each over
//    segments no shorter run took, leftmost first: a ResNet's identical
//    bottlenecks are one layer each, and a stage's first (projection)
//    block, in no run, belongs to no layer. Nor do the embeddings, the
//    final norm, the output layer and the loss. Layers are numbered in
//    forward order.
//  - Pure function of the graph; linear in its size but for the signature
//    comparisons.
#ifndef PLACER_GRAPH_REPEATED_LAYERS_H_
#define PLACER_GRAPH_REPEATED_LAYERS_H_

#include <vector>

#include "graph/training_view.h"

namespace placer {

inline constexpr int kMaxLayerPeriod = 8;

struct OpLayers {
  // Per op of the forward graph: its layer (0, 1, ... in forward order), or
  // -1 for an op in no layer.
  std::vector<int> layer_of_op;
  int count = 0;
};

OpLayers FindRepeatedLayers(const Graph& forward);

struct RepeatedLayers {
  // Per view node: its layer (0, 1, ... in forward order) for forward nodes
  // in a layer; -1 for every other node.
  std::vector<int> layer_of_node;
  int count = 0;
  // Per view node: whether it is a forward node of one of autocast's
  // WeightProducts (graph/autocast.h): a linear layer's product, as torch
  // runs it (aten::mm).
  std::vector<char> weight_product;
};

RepeatedLayers FindRepeatedLayers(const TrainingView& view);

}  // namespace placer

#endif  // PLACER_GRAPH_REPEATED_LAYERS_H_
