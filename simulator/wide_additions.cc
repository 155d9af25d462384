#include "simulator/wide_additions.h"

namespace placer {

WideAdditions::WideAdditions(const SimulationContext& context,
                             const Strategy& strategy, const StagePlan& plan,
                             const LoweredStrategy& lowered)
    : context_(context), strategy_(strategy), plan_(plan), lowered_(lowered) {
  const std::vector<PassTask>& passes = lowered.passes();
  for (size_t p = 0; p < passes.size(); ++p) {
    const PassTask& pass = passes[p];
    if (pass.wide() && pass.backward) charges_ = context.has_partial_adds();
  }
  if (!charges_) return;
  roles_.assign(lowered.graph().num_tasks(), TaskRole());
  additions_.resize(passes.size());
  for (size_t p = 0; p < passes.size(); ++p) {
    const PassTask& pass = passes[p];
    if (!pass.wide() || !pass.backward) continue;
    const int index = static_cast<int>(p);
    roles_[pass.task] = {Role::kStart, index, -1};
    const LoweredPlacement& own = lowered.wide_passes(pass.stage).backward;
    for (int t = 0; t < own.graph.num_tasks(); ++t) {
      roles_[pass.first_inlined + t] = {Role::kInlined, index, t};
    }
    for (size_t slot = 0; slot < pass.slot_tasks.size(); ++slot) {
      roles_[pass.slot_tasks[slot]] = {Role::kSlotTask, index,
                                       static_cast<int>(slot)};
    }
  }
}

double WideAdditions::Started(int task, double, double, double end) {
  if (!charges_) return end;
  const TaskRole& role = roles_[task];
  if (role.role == Role::kNone) return end;
  const PassTask& pass = lowered_.passes()[role.pass];
  const StageModel& st = plan_.stages[pass.stage];
  const PipelineStage& stage = strategy_.stages[pass.stage];
  PartialAdditions& additions = additions_[role.pass];
  switch (role.role) {
    case Role::kStart:
      additions = PartialAdditions(context_, st.width);
      for (int slot = 0; slot < st.width; ++slot) {
        for (int sum : st.held_at_start[slot]) {
          additions.BufferArrives(sum, slot);
        }
      }
      return end;
    case Role::kInlined: {
      const LoweredPlacement& own = lowered_.wide_passes(pass.stage).backward;
      if (!own.is_node(role.index)) return end;
      const int node = own.node_of_task[role.index];
      const int slot = own.device_of_node[node];
      return end +
             additions.NodeStarts(node, slot, stage.device(pass.replica, slot));
    }
    case Role::kSlotTask: {
      // Other slots' buffers that arrived into one held, added before the
      // slot's updates (PartialAdditions: before the sum's reader starts).
      const int slot = role.index;
      const int device = stage.device(pass.replica, slot);
      double seconds = 0;
      for (int u : st.update) {
        if (plan_.slot_of_node[u] != slot) continue;
        for (int sum : context_.view().sums_read_by(u)) {
          seconds += additions.arrived(sum, slot) *
                     context_.partial_add_seconds(sum, device);
        }
      }
      return end + seconds;
    }
    case Role::kNone:
      break;
  }
  return end;
}

void WideAdditions::Ended(int task, double) {
  if (!charges_) return;
  const TaskRole& role = roles_[task];
  if (role.role != Role::kInlined) return;
  const PassTask& pass = lowered_.passes()[role.pass];
  const LoweredPlacement& own = lowered_.wide_passes(pass.stage).backward;
  if (!own.is_copy(role.index)) return;
  const CopyTask& copy = own.copy(role.index);
  if (copy.gradient_sum >= 0) {
    additions_[role.pass].BufferArrives(copy.gradient_sum, copy.dst);
  }
}

}  // namespace placer
