// When a device adds partial gradients up within a step, and what that
// costs: the one rule the op placement's engine (MemoryTimeline) and a
// wide stage's pass (wide_tasks.h: ScheduleWideTasks) charge by. A
// "place" is a device, or a slot of a wide stage's replica.
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
//  - When no addition costs anything (SimulationContext::
//    has_partial_adds), nothing is tracked and every charge is 0.
// Not thread-safe (one simulation's).
#ifndef PLACER_SIMULATOR_PARTIAL_ADDITIONS_H_
#define PLACER_SIMULATOR_PARTIAL_ADDITIONS_H_

#include "simulator/pair_table.h"
#include "simulator/simulation_context.h"

namespace placer {

class PartialAdditions {
 public:
  PartialAdditions() = default;
  // `context` must outlive this; `places`: how many places there are.
  PartialAdditions(const SimulationContext& context, int places);

  // Whether any addition costs time (else the calls below do nothing).
  bool charges() const { return context_ != nullptr; }
  // Node `node` starts now at `place` on `device`: returns the seconds it
  // spends adding partials (the second and third rules) and holds its
  // partials' buffers from now on.
  double NodeStarts(int node, int place, int device) {
    return charges() ? Charge(node, place, device) : 0;
  }
  // Another place's summed buffer of `sum` arrives at `place` now.
  void BufferArrives(int sum, int place) {
    if (!charges()) return;
    char& held = held_.at(sum, place);
    if (held) ++arrived_.at(sum, place);
    held = 1;
  }
  // How many buffers of `sum` arrived at `place` where one was held.
  int arrived(int sum, int place) const {
    return charges() ? arrived_.get(sum, place) : 0;
  }

 private:
  double Charge(int node, int place, int device);

  const SimulationContext* context_ = nullptr;
  PairTable<char> held_;
  PairTable<int> arrived_;
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_PARTIAL_ADDITIONS_H_
