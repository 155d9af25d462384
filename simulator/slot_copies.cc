#include "simulator/slot_copies.h"

#include <algorithm>
#include <tuple>

#include "simulator/placement_lowering.h"

namespace placer {
namespace {

// Sorted, and (`unique`) each once.
void Sort(std::vector<int>* list, bool unique) {
  std::sort(list->begin(), list->end());
  if (unique) list->erase(std::unique(list->begin(), list->end()), list->end());
}

// Pass `pass`'s copies appended to `copies`, and its nodes' waits.
void ReadPass(const ViewIndex& index, const LoweredPlacement& pass,
              std::vector<SlotCopy>* copies,
              std::vector<std::vector<int>>* waits) {
  const int first = static_cast<int>(copies->size());
  for (const CopyTask& copy : pass.copies) {
    SlotCopy slot_copy;
    slot_copy.from_slot = copy.src;
    slot_copy.to_slot = copy.dst;
    if (copy.gradient_sum >= 0) {
      slot_copy.sum = copy.gradient_sum;
      const int sink = index.view().gradient_sums()[copy.gradient_sum].sink;
      slot_copy.to_update = index.kind(sink) == NodeKind::kUpdate;
      slot_copy.readers = {sink};
    } else {
      slot_copy.value = copy.value;
    }
    copies->push_back(std::move(slot_copy));
  }
  auto node = [&](int task) { return pass.node_of_task[task]; };
  for (const TaskEdge& edge : pass.graph.edges()) {
    if (pass.is_copy(edge.to)) {
      // A producer of what the copy carries (once per partial it makes).
      (*copies)[first + edge.to - pass.first_copy].made_by.push_back(
          node(edge.from));
    } else if (pass.is_copy(edge.from)) {
      SlotCopy& copy = (*copies)[first + edge.from - pass.first_copy];
      if (copy.sum < 0) copy.readers.push_back(node(edge.to));
    } else {
      (*waits)[node(edge.to)].push_back(node(edge.from));
    }
  }
  // What a node waits for through a copy: the copy's producers.
  for (const TaskEdge& edge : pass.graph.edges()) {
    if (!pass.is_copy(edge.from) || pass.is_copy(edge.to)) continue;
    const SlotCopy& copy = (*copies)[first + edge.from - pass.first_copy];
    std::vector<int>& into = (*waits)[node(edge.to)];
    into.insert(into.end(), copy.made_by.begin(), copy.made_by.end());
  }
  for (int k = first; k < static_cast<int>(copies->size()); ++k) {
    Sort(&(*copies)[k].made_by, /*unique=*/false);
    Sort(&(*copies)[k].readers, /*unique=*/true);
  }
  for (int n : pass.node_of_task) Sort(&(*waits)[n], /*unique=*/true);
}

}  // namespace

StageSlotLinks StageSlotCopies(const ViewIndex& index,
                               const Strategy& strategy) {
  const TrainingView& view = index.view();
  const int S = static_cast<int>(strategy.stages.size());
  StageSlotLinks links;
  links.copies.assign(S, {});
  links.waits.assign(index.num_nodes(), {});
  std::vector<int> slot_of_node(index.num_nodes());
  // Per stage, its forward and backward pass's nodes, in topological order.
  std::vector<std::vector<int>> forward(S), backward(S);
  for (int n : view.topological_order()) {
    const int op = view.node(n).forward_op;
    slot_of_node[n] = SlotOfOp(strategy, op);
    const int s = strategy.stage_of_op[op];
    if (strategy.stages[s].width() == 1) continue;
    if (index.kind(n) == NodeKind::kForward) forward[s].push_back(n);
    if (index.kind(n) == NodeKind::kBackward) backward[s].push_back(n);
  }
  for (int s = 0; s < S; ++s) {
    if (strategy.stages[s].width() == 1) continue;
    for (bool pass : {false, true}) {
      ReadPass(index,
               LowerStagePass(index, {}, strategy, s, pass,
                              pass ? backward[s] : forward[s], slot_of_node),
               &links.copies[s], &links.waits);
    }
    std::sort(links.copies[s].begin(), links.copies[s].end(),
              [](const SlotCopy& a, const SlotCopy& b) {
                return std::make_tuple(a.sum, a.value, a.from_slot, a.to_slot) <
                       std::make_tuple(b.sum, b.value, b.from_slot, b.to_slot);
              });
  }
  return links;
}

}  // namespace placer
