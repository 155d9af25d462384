#include "simulator/simulator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "simulator/engine.h"
#include "simulator/placement_lowering.h"

namespace placer {

std::string TransferName(const TrainingView& view,
                         const ScheduledTransfer& transfer) {
  if (transfer.gradient_sum < 0) return view.value(transfer.value).name;
  const GradientSum& sum = view.gradient_sums()[transfer.gradient_sum];
  return absl::StrCat("grad:", view.forward().tensor(sum.tensor).name,
                      " (summed)");
}

absl::StatusOr<SimulationResult> Simulate(const SimulationContext& context,
                                          const Placement& placement,
                                          const SimulationOptions& options) {
  RETURN_IF_ERROR(
      CheckPlacementShape(context.view(), placement, context.num_devices()));
  const LoweredPlacement lowered = LowerPlacement(context, placement);
  MemoryTimelineOptions memory_options;
  memory_options.record = options.record_schedule;
  memory_options.later_micro_batch = options.later_micro_batch;
  memory_options.rank_shares = options.rank_shares;
  memory_options.gradient_shards = options.gradient_shards;
  memory_options.rebuilds = options.rebuilds;
  MemoryTimeline memory(context, lowered, memory_options);
  const TaskSchedule ran = RunTaskGraph(lowered.graph, &memory);

  const int n = lowered.num_nodes;
  const int devices = context.num_devices();
  SimulationResult r;
  int last = -1;  // the node that ends last: where the critical path ends
  for (int i = 0; i < n; ++i) {
    r.step_seconds = std::max(r.step_seconds, ran.end_seconds[i]);
    if (last < 0 || ran.end_seconds[i] > ran.end_seconds[last]) last = i;
  }
  r.lower_bound_seconds = context.lower_bound_seconds();
  r.busy_seconds.assign(ran.busy_seconds.begin(),
                        ran.busy_seconds.begin() + devices);
  r.peak_memory_bytes = memory.peak_bytes();
  r.forward_peak_memory_bytes = memory.forward_peak_bytes();
  r.peak_breakdown = memory.PeakBreakdown();
  r.peak_moments = memory.PeakMoments();
  r.later_peak_memory_bytes = memory.later_peak_bytes();
  r.later_peak_breakdown = memory.LaterPeakBreakdown();
  r.accumulator_bytes = memory.accumulator_bytes();
  for (int d = 0; d < devices; ++d) {
    r.oom |= r.peak_memory_bytes[d] > context.cluster().device(d).memory_bytes;
  }
  r.inaccurate_nodes = context.inaccurate_nodes();
  for (const CopyTask& copy : lowered.copies) r.bytes_moved += copy.bytes;
  r.transfers_count = static_cast<int>(lowered.copies.size());
  if (!options.list_transfers && !options.record_schedule) return r;
  // Copies in the order they were booked on their links.
  std::vector<int> transfer_of_task(lowered.graph.num_tasks(), -1);
  r.transfers.reserve(lowered.copies.size());
  for (int t : ran.start_order) {
    if (!lowered.is_copy(t)) continue;
    const CopyTask& copy = lowered.copy(t);
    transfer_of_task[t] = static_cast<int>(r.transfers.size());
    r.transfers.push_back({copy.value, copy.gradient_sum, copy.src, copy.dst,
                           copy.bytes, ran.start_seconds[t],
                           ran.end_seconds[t]});
  }
  for (int t = last; t >= 0; t = ran.waited_for[t]) {
    if (lowered.is_barrier(t)) continue;
    const bool is_copy = lowered.is_copy(t);
    r.critical_path.push_back({is_copy, is_copy ? transfer_of_task[t] : t,
                               ran.start_seconds[t], ran.end_seconds[t]});
  }
  std::reverse(r.critical_path.begin(), r.critical_path.end());
  if (options.record_schedule) {
    r.memory = std::move(memory.samples());
    r.schedule.resize(n);
    for (int i = 0; i < n; ++i) {
      r.schedule[i] = {i, lowered.device_of_node[i], ran.start_seconds[i],
                       ran.end_seconds[i]};
    }
  }
  return r;
}

}  // namespace placer
