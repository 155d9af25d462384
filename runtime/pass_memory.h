// What a strategy's step holds on each device while the executor runs it,
// pass by pass: the simulator's StrategyMemoryTimeline
// (simulator/strategy_memory.h, where a strategy's liveness rules are
// written) over the simulator's lowering of the strategy, told the
// executor's passes as its workers start and end them. What an op
// placement's strategy holds is tracked node by node instead
// (runtime/strategy_placement_memory.h).
//
// Contract: a pass (stage, micro-batch, forward or backward) starts when
// the first of its replica's devices in this process starts it and ends
// when the last of them has run its part (a recomputing backward from its
// rerun's start). The lowering is the simulator's with the roofline cost
// model and the view's topological order (bytes do not depend on costs;
// a stage's one-micro-batch peak takes its nodes in that order), so the
// peaks are those SimulateStrategy gives over such a context: a device's
// passes run in its replica's schedule order either way. Not thread-safe:
// the strategy executor's lock guards it.
#ifndef PLACER_RUNTIME_PASS_MEMORY_H_
#define PLACER_RUNTIME_PASS_MEMORY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/simulation_context.h"
#include "simulator/stage_plan.h"
#include "simulator/strategy.h"
#include "simulator/strategy_lowering.h"
#include "simulator/strategy_memory.h"

namespace placer {

class StrategyPassMemory {
 public:
  // The timeline of `strategy` (CheckStrategy'd) on `cluster`; `local`, per
  // device, whether this process drives it; `enforce`: whether a device
  // going over its memory_bytes is an error. The error of MakeStagePlan
  // when the strategy cannot be lowered. `view`, `cluster` and `strategy`
  // must outlive it.
  static absl::StatusOr<std::unique_ptr<StrategyPassMemory>> Create(
      const TrainingView& view, const Cluster& cluster,
      const Strategy& strategy, std::vector<char> local, bool enforce);

  // A step starts: what is resident, nothing in flight.
  void StartStep();
  // Pass (stage, micro_batch, backward) is about to run (`seconds` into the
  // step). With `enforce`: ResourceExhausted naming the device of this
  // process that it takes over its memory_bytes, the pass and what the
  // device would hold then, before anything of it is allocated.
  absl::Status PassStarting(int stage, int micro_batch, bool backward,
                            double seconds);
  // The pass has ended on every device of its replica here.
  void PassEnded(int stage, int micro_batch, bool backward, double seconds);

  // This step's peak per device (zero for devices of other processes).
  std::vector<int64_t> peak_bytes() const;

 private:
  StrategyPassMemory(const TrainingView& view, const Cluster& cluster,
                     const Strategy& strategy, std::vector<char> local,
                     bool enforce);

  const TrainingView& view_;
  const Cluster& cluster_;
  const Strategy& strategy_;
  const std::vector<char> local_;
  const bool enforce_;
  std::unique_ptr<CostModel> costs_;  // the lowering's structure only
  std::unique_ptr<SimulationContext> context_;
  std::optional<StagePlan> plan_;
  std::optional<LoweredStrategy> lowered_;
  std::optional<StrategyMemoryTimeline> timeline_;
};

}  // namespace placer

#endif  // PLACER_RUNTIME_PASS_MEMORY_H_
