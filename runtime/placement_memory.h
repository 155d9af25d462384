// What an op placement's step holds on each device while an executor runs
// it: the simulator's MemoryTimeline (simulator/memory_timeline.h, where
// the liveness rules are written) over the simulator's lowering of the
// placement (LowerPlacement), told each node and copy as the executor runs
// it, at the sizes of the tensors it made: the executor's, for an op
// placement's strategy (one stage, one replica, one micro-batch:
// runtime/strategy_placement_memory.h), in its own order of events.
//
// Contract: the lowering's copies are the ones the executor makes (a value
// once to each other device that reads it, a device's summed partial
// gradients once to the sum's sink). Not thread-safe: the executor's lock
// guards it.
#ifndef PLACER_RUNTIME_PLACEMENT_MEMORY_H_
#define PLACER_RUNTIME_PLACEMENT_MEMORY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/memory_timeline.h"
#include "simulator/placement.h"
#include "simulator/placement_lowering.h"
#include "simulator/simulation_context.h"

namespace placer {

class PlacementMemory {
 public:
  // `view` and `cluster` must outlive it; `placement` must fit them
  // (CheckPlacementShape).
  PlacementMemory(const TrainingView& view, const Cluster& cluster,
                  const Placement& placement);

  // The lowering the events are told as (its copies are the step's).
  const LoweredPlacement& lowered() const { return lowered_; }
  // The lowering's task copying `value` to `dst`, or `sum`'s buffer from
  // `src` to its sink's device; -1 when it has none.
  int ValueCopyTask(int value, int dst) const {
    return value_copy_task_[static_cast<size_t>(value) * devices_ + dst];
  }
  int SumCopyTask(int sum, int src) const {
    return sum_copy_task_[static_cast<size_t>(sum) * devices_ + src];
  }

  // A fresh timeline for a step (what is resident from the start counted).
  void StartStep();
  // Node `node` ran, at `seconds` into the step: its outputs
  // (view.node(node).outputs, in order) at `output_bytes` (a missing or
  // negative entry: the view's bytes), all counted before its inputs are
  // released. Returns its device's live bytes after the outputs counted
  // and before anything was released: what to check against its memory.
  int64_t NodeRan(int node, absl::Span<const int64_t> output_bytes,
                  double seconds);
  // Copy task `task` (ValueCopyTask's or SumCopyTask's) was queued, or its
  // copy from another rank arrived (`bytes`: the tensor's, or -1 for the
  // view's); it ended (its source's bytes released).
  void CopyStarted(int task, int64_t bytes, double seconds);
  void CopyEnded(int task, double seconds);

  // What is live on `device` now, and each device's peak this step.
  int64_t bytes(int device) const { return timeline_->bytes(device); }
  const std::vector<int64_t>& peak_bytes() const {
    return timeline_->peak_bytes();
  }
  // ResourceExhausted naming the device and `at` (a node's key; empty: a
  // transfer) when `live` bytes are over `device`'s memory_bytes; else OK.
  absl::Status Check(int device, int64_t live, absl::string_view at) const;

 private:
  const TrainingView& view_;
  const Cluster& cluster_;
  const int devices_;
  std::unique_ptr<CostModel> costs_;  // the lowering's structure only
  std::unique_ptr<SimulationContext> context_;
  LoweredPlacement lowered_;
  std::vector<int> value_copy_task_, sum_copy_task_;
  std::optional<MemoryTimeline> timeline_;
};

}  // namespace placer

#endif  // PLACER_RUNTIME_PLACEMENT_MEMORY_H_
