// A wide stage's passes (a stage whose replica spans several devices, its
// slots) as tasks of the strategy's task graph: each pass is lowered once
// per stage by the op placement's walk (LowerStagePass,
// placement_lowering.h) and copied into the strategy's graph for every
// forward, rerun and backward a replica runs, on the replica's devices and
// the links between them (strategy_lowering.h). Internal to simulator/.
//
// Contract: LowerWidePasses, PlaceWidePass and InlineWidePass are pure
// functions of their arguments (a strategy CheckStrategy accepted and its
// MakeStagePlan).
#ifndef PLACER_SIMULATOR_WIDE_PASSES_H_
#define PLACER_SIMULATOR_WIDE_PASSES_H_

#include <vector>

#include "absl/functional/function_ref.h"
#include "simulator/placement_lowering.h"
#include "simulator/simulation_context.h"
#include "simulator/stage_plan.h"
#include "simulator/strategy.h"
#include "simulator/task_graph.h"

namespace placer {

// A wide stage's forward and backward pass graphs (LowerStagePass's: the
// pass's nodes on the stage's slots, then what crosses slots as copies),
// the same for every replica and micro-batch; `wide` false (and both
// empty) for a stage of one slot.
struct WideStagePasses {
  bool wide = false;
  LoweredPlacement forward, backward;
  // Per slot: the backward graph's copies (tasks) that carry another
  // slot's summed buffer to that slot's updates (no node of the pass
  // waits for them).
  std::vector<std::vector<int>> update_buffers;
  const LoweredPlacement& pass(bool is_backward) const {
    return is_backward ? backward : forward;
  }
};

// Per stage of `strategy`.
std::vector<WideStagePasses> LowerWidePasses(const SimulationContext& context,
                                             const Strategy& strategy,
                                             const StagePlan& plan);

// A pass graph's tasks as one replica runs them, in the strategy's graph:
// per task, its resource (a slot's task: that slot's device, the resource
// of the same index; a copy: `link(src device, dst device)`) and its
// seconds (a node: the context's node_seconds there; a copy: the cost
// model's transfer time).
struct PlacedWidePass {
  std::vector<int> resource;
  std::vector<double> seconds;
};
PlacedWidePass PlaceWidePass(const SimulationContext& context,
                             const LoweredPlacement& pass,
                             const PipelineStage& stage, int replica,
                             absl::FunctionRef<int(int, int)> link);

// Copies `pass` into `graph` as `placed` says, its tasks that wait for
// nothing in it waiting for task `begin`, in task order. Returns the index
// in `graph` of the pass's task 0 (its task i is the returned index + i).
int InlineWidePass(const LoweredPlacement& pass, const PlacedWidePass& placed,
                   int begin, TaskGraph* graph);

}  // namespace placer

#endif  // PLACER_SIMULATOR_WIDE_PASSES_H_
