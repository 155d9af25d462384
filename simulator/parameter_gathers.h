// ZeRO-3's gathers in one pass of a stage: each parameter the pass's nodes
// read is gathered whole once, before the first of them to read it, and
// let go after the last (FSDP's unshard and reshard, node by node). The
// one rule for both the stage model (simulator/stage_plan.h: the gathers'
// bytes and the window they hold) and the strategy executor (what it
// gathers before a node and releases after it).
//
// What a node reads is its inputs in the view of kind kParameter: a
// forward node's op inputs, a backward node's what its op keeps for the
// backward (graph/saved_for_backward.h; a bias's Add or a weight's
// Transpose keeps none, so its backward gathers nothing).
#ifndef PLACER_SIMULATOR_PARAMETER_GATHERS_H_
#define PLACER_SIMULATOR_PARAMETER_GATHERS_H_

#include <map>
#include <vector>

#include "graph/repeated_layers.h"
#include "graph/training_view.h"

namespace placer {

// Per position in a pass's nodes: the parameters (values) first read
// there, gathered before it, and those last read there, let go after it;
// each list in ascending value order, each parameter the pass reads in one
// list of each.
struct PassGathers {
  std::vector<std::vector<int>> first_read;
  std::vector<std::vector<int>> last_read;
};

// `nodes`: a stage's forward or backward nodes in the order its pass runs
// them. Pure; thread-safe.
PassGathers PlanPassGathers(const TrainingView& view,
                            const std::vector<int>& nodes);

// Per layer with rerun nodes among `forward` (a stage's forward nodes),
// the parameters those nodes read, ascending (empty if none): what the
// layer's rerun gathers at once under ZeRO-3, in the stage model
// (GatherAtLayerReruns) and the strategy executor. `rerun`: per view node,
// whether it reruns; nodes outside a layer are left out. Pure;
// thread-safe.
std::map<int, std::vector<int>> LayerRerunParameters(
    const TrainingView& view, const RepeatedLayers& layers,
    const std::vector<char>& rerun, const std::vector<int>& forward);

// A stage recomputed by layer (Recompute::kLayers, kSelectiveOp) gathers,
// before a layer's rerun, the parameters its rerun nodes read, at once;
// each stays until its last reader in the backward (the rerun's saved
// graphs hold it), or through the rerun where the backward reads it not.
// Moves those parameters' first reads in `gathers` (the backward pass's,
// from PlanPassGathers) to their layer's rerun. `rerun`: per view node,
// whether it reruns; `forward`: the stage's forward nodes; `layer_start`:
// per layer, the position in the backward pass where its rerun runs (-1:
// none; LayerRerunPositions). Pure; thread-safe.
void GatherAtLayerReruns(const TrainingView& view, const RepeatedLayers& layers,
                         const std::vector<char>& rerun,
                         const std::vector<int>& forward,
                         const std::vector<int>& layer_start,
                         PassGathers* gathers);

}  // namespace placer

#endif  // PLACER_SIMULATOR_PARAMETER_GATHERS_H_
