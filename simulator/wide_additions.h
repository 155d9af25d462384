// The partial additions of a strategy's wide backward passes, as the event
// engine runs them (PartialAdditions, partial_additions.h: one rule, a
// place per slot): each pass's nodes lengthened by what they add, each of
// its slot tasks (strategy_lowering.h: PassTask::slot_tasks) by adding up
// the other slots' buffers that arrived for the slot's updates. Internal
// to simulator/.
//
// Contract: an observer of RunTaskGraph over `lowered`'s graph; the
// lowering and the context must outlive it. Each backward starts with the
// buffers StageModel::held_at_start says. Not thread-safe (one run's).
#ifndef PLACER_SIMULATOR_WIDE_ADDITIONS_H_
#define PLACER_SIMULATOR_WIDE_ADDITIONS_H_

#include <vector>

#include "simulator/engine.h"
#include "simulator/partial_additions.h"
#include "simulator/simulation_context.h"
#include "simulator/stage_plan.h"
#include "simulator/strategy.h"
#include "simulator/strategy_lowering.h"

namespace placer {

class WideAdditions final : public TaskObserver {
 public:
  WideAdditions(const SimulationContext& context, const Strategy& strategy,
                const StagePlan& plan, const LoweredStrategy& lowered);

  // Whether any wide backward adds anything that costs time: without
  // that, running with this observer changes nothing.
  bool charges() const { return charges_; }

  double Started(int task, double now, double start, double end) override;
  void Ended(int task, double now) override;

 private:
  enum class Role { kNone, kStart, kInlined, kSlotTask };
  struct TaskRole {
    Role role = Role::kNone;
    int pass = -1;   // into lowered.passes()
    int index = -1;  // kInlined: task in the pass graph; kSlotTask: slot
  };

  const SimulationContext& context_;
  const Strategy& strategy_;
  const StagePlan& plan_;
  const LoweredStrategy& lowered_;
  bool charges_ = false;
  std::vector<TaskRole> roles_;  // per task of the graph
  // Per pass (a wide backward's, from its start on).
  std::vector<PartialAdditions> additions_;
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_WIDE_ADDITIONS_H_
