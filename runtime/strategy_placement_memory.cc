#include "runtime/strategy_placement_memory.h"

#include <set>
#include <utility>

namespace placer {

bool PlacesOps(const Strategy& strategy) {
  if (strategy.stages.size() != 1 || strategy.micro_batches != 1) {
    return false;
  }
  const PipelineStage& stage = strategy.stages[0];
  return stage.num_replicas() == 1 && stage.tensor() == 1 &&
         stage.recompute == Recompute::kNone &&
         strategy.zero == ZeroStage::kNone;
}

std::unique_ptr<StrategyPlacementMemory> StrategyPlacementMemory::Create(
    const TrainingView& view, const Cluster& cluster, const Strategy& strategy,
    const Sends& sends, const WeightSends& weights, std::vector<char> local,
    bool enforce) {
  if (!PlacesOps(strategy)) return nullptr;
  std::unique_ptr<StrategyPlacementMemory> memory(new StrategyPlacementMemory(
      view, cluster, strategy, std::move(local), enforce));
  // The value copies the executor makes: what a forward node sends other
  // slots once made, and the weights sent at the task's start.
  const std::vector<int>& slot_device = memory->device_of_slot_;
  std::set<std::pair<int, int>> made;  // (value, destination device)
  for (size_t n = 0; n < sends.size(); ++n) {
    if (view.node(static_cast<int>(n)).kind != NodeKind::kForward) continue;
    for (auto [v, slot] : sends[n]) made.insert({v, slot_device[slot]});
  }
  for (const auto& [from, sent] : weights) {
    for (auto [v, slot] : sent) made.insert({v, slot_device[slot]});
  }
  const LoweredPlacement& lowered = memory->memory_.lowered();
  for (size_t k = 0; k < lowered.copies.size(); ++k) {
    const CopyTask& copy = lowered.copies[k];
    if (copy.gradient_sum >= 0 || made.count({copy.value, copy.dst}) > 0) {
      continue;
    }
    memory->unmade_[view.value(copy.value).producer].push_back(
        lowered.copy_task(static_cast<int>(k)));
  }
  return memory;
}

StrategyPlacementMemory::StrategyPlacementMemory(const TrainingView& view,
                                                 const Cluster& cluster,
                                                 const Strategy& strategy,
                                                 std::vector<char> local,
                                                 bool enforce)
    : view_(view),
      memory_(view, cluster, FirstReplicaPlacement(strategy)),
      device_of_slot_(strategy.stages[0].replicas[0].device_of_slot),
      local_(std::move(local)),
      enforce_(enforce),
      devices_(cluster.num_devices()),
      values_(static_cast<int>(view.values().size())),
      slots_(strategy.stages[0].width()),
      items_(values_ +
             static_cast<int64_t>(view.gradient_sums().size()) * slots_) {}

void StrategyPlacementMemory::StartStep() {
  start_ = SteadyClock::now();
  memory_.StartStep();
  TellUnmade(-1, 0);
}

void StrategyPlacementMemory::TellUnmade(int producer, double seconds) {
  auto at = unmade_.find(producer);
  if (at == unmade_.end()) return;
  for (int task : at->second) {
    memory_.CopyStarted(task, -1, seconds);
    memory_.CopyEnded(task, seconds);
  }
}

absl::Status StrategyPlacementMemory::NodeRan(
    int n, const std::vector<int64_t>& bytes) {
  const double seconds = Seconds();
  const int64_t live = memory_.NodeRan(n, bytes, seconds);
  TellUnmade(n, seconds);
  if (!enforce_) return absl::OkStatus();
  return memory_.Check(memory_.lowered().device_of_node[n], live,
                       view_.node(n).key);
}

int StrategyPlacementMemory::TaskOfKey(int64_t key) const {
  const int dst = static_cast<int>(key % devices_);
  const int item = static_cast<int>((key / devices_) % items_);
  if (item < values_) return memory_.ValueCopyTask(item, dst);
  const int sum = (item - values_) / slots_;
  const int slot = (item - values_) % slots_;
  return memory_.SumCopyTask(sum, device_of_slot_[slot]);
}

absl::Status StrategyPlacementMemory::Started(int task, int64_t bytes) {
  memory_.CopyStarted(task, bytes, Seconds());
  const int dst = memory_.lowered().copy(task).dst;
  if (!enforce_ || !local_[dst]) return absl::OkStatus();
  return memory_.Check(dst, memory_.bytes(dst), "");
}

absl::Status StrategyPlacementMemory::CopyQueued(int64_t key) {
  const int task = TaskOfKey(key);
  return task < 0 ? absl::OkStatus() : Started(task, -1);
}

void StrategyPlacementMemory::CopyDone(int64_t key) {
  const int task = TaskOfKey(key);
  if (task >= 0) memory_.CopyEnded(task, Seconds());
}

absl::Status StrategyPlacementMemory::CopyArrived(int64_t key,
                                                  int64_t bytes) {
  const int task = TaskOfKey(key);
  if (task < 0) return absl::OkStatus();
  absl::Status status = Started(task, bytes);
  memory_.CopyEnded(task, Seconds());
  return status;
}

std::vector<int64_t> StrategyPlacementMemory::peak_bytes() const {
  std::vector<int64_t> peaks = memory_.peak_bytes();
  for (int d = 0; d < devices_; ++d) {
    if (!local_[d]) peaks[d] = 0;
  }
  return peaks;
}

}  // namespace placer
