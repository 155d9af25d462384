#include "simulator/selective_recompute.h"

namespace placer {

absl::StatusOr<SelectiveRecompute> FindSelectiveRecompute(
    const TrainingView& view, const Strategy& strategy) {
  SelectiveRecompute out;
  bool selective = false, by_layer = false;
  for (const PipelineStage& stage : strategy.stages) {
    selective |= RecomputesInPart(stage.recompute);
    by_layer |= RecomputesByLayer(stage.recompute);
  }
  const size_t N = view.nodes().size();
  out.rerun.assign(N, 0);
  if (!selective) return out;
  // Per node, what kLayers keeps (a layer's output, which is the next
  // layer's input, as torch's checkpoint of that layer keeps it: what a
  // node makes for a forward node outside its layer or for none; every
  // node in no layer) and what kSelectiveOp keeps besides (attention
  // cores and every other product).
  std::vector<char> layer_kept, op_kept;
  if (by_layer) {
    out.layers = FindRepeatedLayers(view);
    if (out.layers.count == 0) {
      return absl::InvalidArgumentError(
          "recomputation by layer (selective-op, layers) reruns ops of the "
          "model's repeated layers, and this model has none "
          "(graph/repeated_layers.h); use --recompute selective or full");
    }
    layer_kept.assign(N, 1);
    op_kept.assign(N, 1);
    std::vector<int> products(out.layers.count, 0);
    for (int n : view.topological_order()) {
      const int layer = out.layers.layer_of_node[n];
      if (layer < 0) continue;
      // What leaves the layer: read by a forward node outside it, or by
      // none (a graph output).
      bool output = false;
      for (int v : view.node(n).outputs) {
        bool read = false;
        for (int c : view.value(v).consumers) {
          if (view.node(c).kind != NodeKind::kForward) continue;
          read = true;
          output |= out.layers.layer_of_node[c] != layer;
        }
        output |= !read;
      }
      const bool product = out.layers.weight_product[n];
      layer_kept[n] = output;
      op_kept[n] = output || view.node(n).fused_attention ||
                   (product && products[layer] % 2 == 0);
      products[layer] += product;
    }
  }
  for (int n = 0; n < static_cast<int>(N); ++n) {
    const TrainingNode& node = view.node(n);
    if (node.kind != NodeKind::kForward) continue;
    const Recompute recompute =
        strategy.stages[strategy.stage_of_op[node.forward_op]].recompute;
    if (!RecomputesInPart(recompute)) continue;
    bool weights = false;
    for (int v : node.inputs) {
      weights |= view.value(v).kind == ValueKind::kParameter;
    }
    const bool keep = recompute == Recompute::kSelectiveOp ? op_kept[n]
                      : recompute == Recompute::kLayers   ? layer_kept[n]
                                                          : weights;
    out.rerun[n] = keep ? 0 : 1;
  }
  return out;
}

std::vector<int> LayerRerunPositions(const TrainingView& view,
                                     const RepeatedLayers& layers,
                                     const std::vector<int>& backward) {
  std::vector<int> positions(layers.count, -1);
  for (int i = static_cast<int>(backward.size()) - 1; i >= 0; --i) {
    const int layer = layers.layer_of_node[view.node(backward[i]).forward_op];
    if (layer >= 0) positions[layer] = i;
  }
  return positions;
}

}  // namespace placer
