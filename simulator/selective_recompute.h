// Which forward nodes a stage that recomputes in part reruns at its
// backward (Recompute::kSelective, kSelectiveOp, kLayers;
// simulator/strategy.h): the one rule the strategy simulator's stage
// tables (stage_plan.h) and the strategy executor
// (runtime/strategy_executor.h) both follow.
//
// Contract: FindSelectiveRecompute is a pure function of (view, strategy),
// which must have passed CheckStrategy. rerun[n] is 1 for a forward node n
// of a stage recomputing in part that the stage reruns: kSelective, those
// that read no parameter; kSelectiveOp, its layers' nodes but their
// outputs (what a node makes for a forward node outside its layer, or for
// none), attention cores and every other product of each layer (the
// first, third, ... as torchtitan counts aten::mm); kLayers, its layers'
// nodes but their outputs. Nodes in no layer are kept. `layers` is the
// view's repeated layers when a stage recomputes by layer (empty
// otherwise); INVALID_ARGUMENT when one does and the model has none.
#ifndef PLACER_SIMULATOR_SELECTIVE_RECOMPUTE_H_
#define PLACER_SIMULATOR_SELECTIVE_RECOMPUTE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "graph/repeated_layers.h"
#include "graph/training_view.h"
#include "simulator/strategy.h"

namespace placer {

struct SelectiveRecompute {
  std::vector<char> rerun;  // per view node
  RepeatedLayers layers;
};

absl::StatusOr<SelectiveRecompute> FindSelectiveRecompute(
    const TrainingView& view, const Strategy& strategy);

// Recomputing by layer: where in a stage's backward each layer's rerun
// runs, as torch's checkpoint reruns a block when its backward starts.
// `backward`: the stage's backward nodes in the order its pass runs them.
// Per layer of `layers`, the position in `backward` of the first node
// whose forward node is in the layer; -1 where none is. Pure.
std::vector<int> LayerRerunPositions(const TrainingView& view,
                                     const RepeatedLayers& layers,
                                     const std::vector<int>& backward);

}  // namespace placer

#endif  // PLACER_SIMULATOR_SELECTIVE_RECOMPUTE_H_
