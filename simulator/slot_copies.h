// What crosses the slots of each wide stage's replica within a task
// (Strategy's contract, simulator/strategy.h), as lists: what the strategy
// executor's slots exchange and wait for. Read off LowerStagePass
// (placement_lowering.h), the walk the simulator times, so that the rule
// is written once.
//
// Contract: StageSlotCopies is a pure function of (index, strategy), which
// must have passed CheckStrategy; a stage of one slot has no copies and
// its nodes no waits.
#ifndef PLACER_SIMULATOR_SLOT_COPIES_H_
#define PLACER_SIMULATOR_SLOT_COPIES_H_

#include <vector>

#include "simulator/strategy.h"
#include "simulator/view_index.h"

namespace placer {

// A copy between two slots of a wide stage's replica within a task.
// Either `value`, a weight of the stage's ops or an activation a forward
// node of the stage makes, copied from the slot holding it to a slot whose
// forward nodes read it; or the partials of gradient sum `sum` that the
// stage's backward nodes on `from_slot` make, summed there and copied to
// the slot of the sum's sink (a backward node of the stage, or,
// `to_update`, a parameter's update, which reads it once the task ends:
// the buffer leaves once the slot's last partial is made, during the
// backward, as autograd sends a copied weight's gradient home).
// `made_by`: what it waits for (a value's producer; each partial's
// producer on `from_slot`, once per partial; a weight: none, from the
// task's start), ascending; `readers`: the nodes on `to_slot` reading it
// (a sum: its sink), ascending.
struct SlotCopy {
  int value = -1;
  int sum = -1;
  int from_slot = 0;
  int to_slot = 0;
  std::vector<int> made_by;
  std::vector<int> readers;
  bool to_update = false;
};

struct StageSlotLinks {
  // Per stage: the values' copies in value order, each value's by
  // ascending to_slot, then the sums' in sum order, each sum's by
  // ascending from_slot.
  std::vector<std::vector<SlotCopy>> copies;
  // Per view node of a wide stage's forward or backward: the nodes of the
  // same pass it waits for, on its slot or through a copy (what it reads,
  // partials it sums, its control inputs), each once, ascending; empty for
  // other nodes.
  std::vector<std::vector<int>> waits;
};

StageSlotLinks StageSlotCopies(const ViewIndex& index,
                               const Strategy& strategy);

}  // namespace placer

#endif  // PLACER_SIMULATOR_SLOT_COPIES_H_
