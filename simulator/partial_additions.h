// When a device adds partial gradients up within a step, and what that
// costs: the one rule the op placement's engine (MemoryTimeline), a wide
// stage's pass (wide_additions.h, as the engine runs it) and a stage of one
// slot (stage_plan.h: StageModel::adds, from its backward order) follow. A
// "place" is a device, or a slot of a stage's replica.
//
// Contract, per (gradient sum, place):
//  - The place holds a buffer of the sum from the start of the first node
//    there that makes a partial of it, or from the arrival of the first
//    summed buffer another place sends it, whichever comes first.
//  - A node that starts where its partial's buffer is already held adds
//    the partial into it right after the node: the node is lengthened by
//    the cost model's PartialAddSeconds (NodeStarts).
//  - A buffer that arrives where one is held (even while the node making
//    the held one runs) is added before the sum's reader starts: the
//    reader is lengthened by it (NodeStarts; `arrived` counts them for a
//    reader outside the simulated pass).
//  - Priced (built from a SimulationContext): when no addition costs
//    anything (SimulationContext::has_partial_adds), nothing is tracked
//    and every charge is 0. Unpriced (built from a TrainingView): always
//    tracked; NodeAdds says which sums a node adds.
// Not thread-safe (one simulation's).
#ifndef PLACER_SIMULATOR_PARTIAL_ADDITIONS_H_
#define PLACER_SIMULATOR_PARTIAL_ADDITIONS_H_

#include "graph/training_view.h"
#include "simulator/pair_table.h"
#include "simulator/simulation_context.h"

namespace placer {

class PartialAdditions {
 public:
  PartialAdditions() = default;
  // Priced by `context`'s costs. `context` must outlive this; `places`:
  // how many places there are.
  PartialAdditions(const SimulationContext& context, int places);
  // Unpriced: follows the rule over `view`'s sums for NodeAdds. `view`
  // must outlive this.
  PartialAdditions(const TrainingView& view, int places);

  // Whether any addition costs time (else NodeStarts returns 0).
  bool charges() const { return context_ != nullptr; }
  // Node `node` starts now at `place` on `device`: returns the seconds it
  // spends adding partials (the second and third rules) and holds its
  // partials' buffers from now on. Priced only.
  double NodeStarts(int node, int place, int device) {
    return charges() ? Charge(node, place, device) : 0;
  }
  // The same, unpriced: calls add(sum, count) for each sum of which `node`
  // adds `count` > 0 buffers or partials, in the order NodeStarts prices
  // them. Unpriced only.
  template <typename Add>
  void NodeAdds(int node, int place, Add&& add) {
    Follow(view_->node(node).outputs, node, place, add);
  }
  // Another place's summed buffer of `sum` arrives at `place` now.
  void BufferArrives(int sum, int place) {
    if (view_ == nullptr) return;
    char& held = held_.at(sum, place);
    if (held) ++arrived_.at(sum, place);
    held = 1;
  }
  // How many buffers of `sum` arrived at `place` where one was held.
  int arrived(int sum, int place) const {
    return view_ != nullptr ? arrived_.get(sum, place) : 0;
  }

 private:
  double Charge(int node, int place, int device);
  // The rule: add(sum, count) per addition `node` (making `outputs`) does
  // at `place`; holds its partials' buffers.
  template <typename Outputs, typename Add>
  void Follow(const Outputs& outputs, int node, int place, Add& add) {
    for (int out : outputs) {
      const int sum = view_->sum_of(out);
      if (sum < 0) continue;
      char& held = held_.at(sum, place);
      if (held) add(sum, 1);
      held = 1;
    }
    for (int sum : view_->sums_read_by(node)) {
      const int count = arrived_.get(sum, place);
      if (count > 0) add(sum, count);
    }
  }

  const SimulationContext* context_ = nullptr;
  const TrainingView* view_ = nullptr;
  PairTable<char> held_;
  PairTable<int> arrived_;
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_PARTIAL_ADDITIONS_H_
