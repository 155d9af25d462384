#include "runtime/placement_memory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "simulator/simulation_context.h"

namespace placer {

PlacementMemory::PlacementMemory(const TrainingView& view,
                                 const Cluster& cluster,
                                 const Placement& placement)
    : view_(view), cluster_(cluster), devices_(cluster.num_devices()) {
  costs_ = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewTopologicalReadyOrder();
  context_ = std::make_unique<SimulationContext>(
      SimulationContext::Create(view_, cluster_, *costs_, *order));
  lowered_ = LowerPlacement(*context_, placement);
  value_copy_task_.assign(view_.values().size() * devices_, -1);
  sum_copy_task_.assign(view_.gradient_sums().size() * devices_, -1);
  for (size_t k = 0; k < lowered_.copies.size(); ++k) {
    const CopyTask& copy = lowered_.copies[k];
    const int task = lowered_.copy_task(static_cast<int>(k));
    if (copy.gradient_sum >= 0) {
      sum_copy_task_[static_cast<size_t>(copy.gradient_sum) * devices_ +
                     copy.src] = task;
    } else {
      value_copy_task_[static_cast<size_t>(copy.value) * devices_ + copy.dst] =
          task;
    }
  }
}

void PlacementMemory::StartStep() {
  timeline_.emplace(*context_, lowered_, MemoryTimelineOptions());
}

int64_t PlacementMemory::NodeRan(int node,
                                 absl::Span<const int64_t> output_bytes,
                                 double seconds) {
  const std::vector<int>& outputs = view_.node(node).outputs;
  for (size_t k = 0; k < outputs.size() && k < output_bytes.size(); ++k) {
    if (output_bytes[k] >= 0) {
      timeline_->SetValueBytes(outputs[k], output_bytes[k]);
    }
  }
  timeline_->Started(node, seconds, seconds, seconds);
  const int64_t live = timeline_->bytes(lowered_.device_of_node[node]);
  timeline_->Ended(node, seconds);
  return live;
}

void PlacementMemory::CopyStarted(int task, int64_t bytes, double seconds) {
  if (bytes >= 0) timeline_->SetValueBytes(lowered_.copy(task).value, bytes);
  timeline_->Started(task, seconds, 0, 0);
}

void PlacementMemory::CopyEnded(int task, double seconds) {
  timeline_->Ended(task, seconds);
}

absl::Status PlacementMemory::Check(int device, int64_t live,
                                    absl::string_view at) const {
  const int64_t limit = cluster_.device(device).memory_bytes;
  if (live <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory: ", cluster_.device(device).name, " needs ", live,
      " bytes, over its ", limit, " at '",
      at.empty() ? absl::string_view("a transfer") : at, "'"));
}

}  // namespace placer
