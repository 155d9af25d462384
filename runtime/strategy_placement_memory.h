// The memory of an op placement's strategy (simulator/strategy.h:
// StrategyOfPlacement — one stage, one replica, one micro-batch) as the
// strategy executor runs it (runtime/placement_memory.h: the simulator's
// MemoryTimeline over the
// placement's lowering), told the strategy executor's events: its nodes as
// they run, at the sizes of the tensors they made; its copies between
// slots (by their link keys) when queued and when done, one from another
// rank when it arrives (a slot's buffer of a parameter's partial gradients
// among them, sent to its update's slot). The lowering's copies
// the executor does not make (of constants and graph inputs, which it
// takes from the host) are told done once their value is made.
//
// Not thread-safe: the strategy executor's lock guards it.
#ifndef PLACER_RUNTIME_STRATEGY_PLACEMENT_MEMORY_H_
#define PLACER_RUNTIME_STRATEGY_PLACEMENT_MEMORY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/stopwatch.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "runtime/placement_memory.h"
#include "simulator/strategy.h"

namespace placer {

// Whether the strategy is an op placement's: one stage of one replica, one
// micro-batch, nothing tensor parallel, sharded or recomputed.
bool PlacesOps(const Strategy& strategy);

class StrategyPlacementMemory {
 public:
  // What the executor copies between slots (StrategyLinkTables'): per
  // node, what it sends once made ((value, slot); a backward node's are
  // sums'); per (stage, slot), the weights sent at a task's start.
  using Sends = std::vector<std::vector<std::pair<int, int>>>;
  using WeightSends =
      std::map<std::pair<int, int>, std::vector<std::pair<int, int>>>;
  // Null unless PlacesOps(strategy). `local`, per device, whether this
  // process drives it; `enforce`: whether going over a device's
  // memory_bytes is an error. `view` and `cluster` must outlive it.
  static std::unique_ptr<StrategyPlacementMemory> Create(
      const TrainingView& view, const Cluster& cluster,
      const Strategy& strategy, const Sends& sends,
      const WeightSends& weights, std::vector<char> local, bool enforce);

  // A step starts: nothing but what is resident is live.
  void StartStep();
  // Node n ran on its device; `bytes`: its outputs' (view.node(n).outputs,
  // in order). ResourceExhausted naming the device and node when that
  // device went over its memory.
  absl::Status NodeRan(int n, const std::vector<int64_t>& bytes);
  // The copy of link key `key` (the executor's LinkKey) was queued, or
  // made; its ResourceExhausted when its destination, here, went over.
  absl::Status CopyQueued(int64_t key);
  void CopyDone(int64_t key);
  // It arrived from another rank at `bytes` (queued and done at once).
  absl::Status CopyArrived(int64_t key, int64_t bytes);
  // Per device, this step's peak so far; 0 for devices of other processes.
  std::vector<int64_t> peak_bytes() const;

 private:
  StrategyPlacementMemory(const TrainingView& view, const Cluster& cluster,
                          const Strategy& strategy, std::vector<char> local,
                          bool enforce);
  int TaskOfKey(int64_t key) const;
  void TellUnmade(int producer, double seconds);
  absl::Status Started(int task, int64_t bytes);
  double Seconds() const { return SecondsSince(start_); }

  const TrainingView& view_;
  PlacementMemory memory_;
  const std::vector<int> device_of_slot_;  // the replica's
  const std::vector<char> local_;
  const bool enforce_;
  const int devices_, values_, slots_;
  const int64_t items_;  // per lane and device, as LinkKey counts them
  // Copy tasks the executor does not make, by the node that makes the
  // value (-1: a weight, from the step's start).
  std::map<int, std::vector<int>> unmade_;
  SteadyClock::time_point start_;
};

}  // namespace placer

#endif  // PLACER_RUNTIME_STRATEGY_PLACEMENT_MEMORY_H_
