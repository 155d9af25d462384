#include "runtime/pass_memory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_helpers.h"

namespace placer {

absl::StatusOr<std::unique_ptr<StrategyPassMemory>> StrategyPassMemory::Create(
    const TrainingView& view, const Cluster& cluster, const Strategy& strategy,
    std::vector<char> local, bool enforce) {
  std::unique_ptr<StrategyPassMemory> memory(new StrategyPassMemory(
      view, cluster, strategy, std::move(local), enforce));
  memory->costs_ = NewRooflineCostModel();
  memory->context_ =
      std::make_unique<SimulationContext>(SimulationContext::Create(
          view, cluster, *memory->costs_, *NewTopologicalReadyOrder()));
  ASSIGN_OR_RETURN(StagePlan plan, MakeStagePlan(*memory->context_, strategy));
  memory->plan_.emplace(std::move(plan));
  memory->lowered_.emplace(
      LowerStrategy(*memory->context_, strategy, *memory->plan_));
  memory->StartStep();
  return memory;
}

StrategyPassMemory::StrategyPassMemory(const TrainingView& view,
                                       const Cluster& cluster,
                                       const Strategy& strategy,
                                       std::vector<char> local, bool enforce)
    : view_(view),
      cluster_(cluster),
      strategy_(strategy),
      local_(std::move(local)),
      enforce_(enforce) {}

void StrategyPassMemory::StartStep() {
  timeline_.emplace(strategy_, *plan_, *lowered_, cluster_.num_devices(),
                    view_.options().optimizer_state_per_parameter_byte(),
                    StrategyMemoryOptions());
}

absl::Status StrategyPassMemory::PassStarting(int stage, int micro_batch,
                                              bool backward, double seconds) {
  timeline_->Started(lowered_->pass(stage, micro_batch, backward).entry_task(),
                     seconds, seconds, seconds);
  if (!enforce_) return absl::OkStatus();
  // Earlier passes were within every limit: a device over one now is
  // over it at this pass.
  const std::vector<int64_t>& peaks = timeline_->peak_bytes();
  for (int d = 0; d < cluster_.num_devices(); ++d) {
    const int64_t limit = cluster_.device(d).memory_bytes;
    if (!local_[d] || peaks[d] <= limit) continue;
    const MemoryBreakdown& parts = timeline_->peak_breakdown()[d];
    return absl::ResourceExhaustedError(absl::StrFormat(
        "out of memory: %s would hold %d bytes, over its %d, %s, before the "
        "pass ran (the strategy's memory timeline: parameters and optimizer "
        "state %d, activations kept for the backward %d, accumulated "
        "gradients %d, the rest of the pass's peak %d)",
        cluster_.device(d).name, peaks[d], limit,
        DescribePeakPass(timeline_->peak_passes()[d]), parts.parameters,
        parts.activations, parts.gradients, parts.workspace));
  }
  return absl::OkStatus();
}

void StrategyPassMemory::PassEnded(int stage, int micro_batch, bool backward,
                                   double seconds) {
  timeline_->Ended(lowered_->pass(stage, micro_batch, backward).end_task,
                   seconds);
}

std::vector<int64_t> StrategyPassMemory::peak_bytes() const {
  std::vector<int64_t> peaks = timeline_->peak_bytes();
  for (size_t d = 0; d < peaks.size(); ++d) {
    if (!local_[d]) peaks[d] = 0;
  }
  return peaks;
}

}  // namespace placer
