// What is live on each device while a lowered strategy's step runs
// (simulator/strategy_lowering.h), pass by pass: the strategy's memory as
// the event engine runs its task graph, where a pass's own bytes are the
// memory timeline's (simulator/memory_timeline.h, through the stage's
// one-micro-batch peaks in simulator/stage_plan.h). The liveness rules of
// values inside a pass are the memory timeline's; what this adds is which
// micro-batches are in flight on a device at each moment of the strategy's
// own schedule, and when its gradient accumulators come to exist.
//
// Contract (times are the engine's; per device of a stage's (slot,
// replica): every device of a tensor-parallel group alike, each slot of a
// wide stage its own):
//  - Resident from the start: the slot's parameters and optimizer state
//    (ZeRO: the state's shard; ZeRO-3: the parameters' and state's shard
//    plus the most its gathered parameters hold at once).
//  - A micro-batch is in flight from its forward pass's start to its
//    backward pass's end and keeps StageModel::kept_bytes (its stash, or
//    what recomputation keeps) throughout.
//  - While a backward pass runs (a recomputing one: from its rerun's
//    start), the device also holds the rest of one micro-batch's peak,
//    taken from the stage's one-micro-batch timeline less what is resident
//    and kept: the first micro-batch's while the replica's first backward
//    has not ended, a later micro-batch's after (that timeline runs the
//    stage as it is run: recomputing in part, it lets go and makes again
//    what it reruns; under ZeRO-2/3, each gradient is cut to its shard once
//    complete; StageModel::one_batch_peak_bytes). While a forward pass
//    runs, what that timeline held beyond them before the stage's first
//    backward node started (at most the first rest).
//  - When a replica that runs more than one micro-batch ends its first
//    backward, its gradient accumulators (ZeRO-2: their shard) are held
//    for the rest of the step.
// Peaks are taken at every change. It is the engine's observer for the
// strategy's step and changes no task's length. Not thread-safe.
#ifndef PLACER_SIMULATOR_STRATEGY_MEMORY_H_
#define PLACER_SIMULATOR_STRATEGY_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "simulator/engine.h"
#include "simulator/memory_timeline.h"
#include "simulator/stage_plan.h"
#include "simulator/strategy.h"
#include "simulator/strategy_lowering.h"

namespace placer {

// When a device reached its peak: during pass (stage, micro_batch,
// backward) — at its start, or at its end (`at_end`: a replica's first
// backward's end, when its gradient accumulators come to exist) —
// `seconds` into the step; stage -1: from the step's start (what is
// resident).
struct PeakPass {
  int stage = -1;
  int micro_batch = -1;
  bool backward = false;
  bool at_end = false;
  double seconds = 0;
};

// "at stage 0's backward of micro-batch 3 (16.000000 s into the step)",
// "at the end of stage 0's backward of micro-batch 3 (...)", or "from the
// step's start (what is resident)".
std::string DescribePeakPass(const PeakPass& moment);

struct StrategyMemoryOptions {
  // Keep every change (samples()).
  bool record = false;
};

class StrategyMemoryTimeline final : public TaskObserver {
 public:
  // Allocates what is resident from the start. `strategy`, `plan` and
  // `lowered` must outlive the timeline; `optimizer_state_per_byte` is the
  // optimizer's state per parameter byte (TrainingOptions).
  StrategyMemoryTimeline(const Strategy& strategy, const StagePlan& plan,
                         const LoweredStrategy& lowered, int num_devices,
                         double optimizer_state_per_byte,
                         const StrategyMemoryOptions& options);

  // The engine's events (TaskObserver); Started returns `end` unchanged.
  double Started(int task, double now, double start, double end) override;
  void Ended(int task, double now) override;

  // Per device: the most live at once, and what it was made of then
  // (parameters: resident; activations: the micro-batches in flight's
  // kept bytes; gradients: the accumulators; workspace: the running
  // pass's rest of a micro-batch's peak).
  const std::vector<int64_t>& peak_bytes() const { return peak_; }
  const std::vector<MemoryBreakdown>& peak_breakdown() const {
    return peak_parts_;
  }
  // Per device: the pass during which it reached its peak (the first such
  // moment).
  const std::vector<PeakPass>& peak_passes() const { return peak_pass_; }
  // Per device: the most micro-batches in flight at once.
  const std::vector<int>& most_in_flight() const { return most_in_flight_; }
  // With StrategyMemoryOptions::record: every change, in the order made
  // (resident memory at 0).
  std::vector<MemorySample>& samples() { return samples_; }

 private:
  // What one device of a stage's slot holds (alike in every replica).
  struct SlotBytes {
    int64_t resident = 0;
    int64_t accumulators = 0;  // held after the replica's first backward
    int64_t kept = 0;          // per micro-batch in flight
    int64_t forward_rest = 0;  // while a forward pass runs
    int64_t first_rest = 0;    // while a backward runs, before that
    int64_t later_rest = 0;    // and after
  };
  // A stage replica's state.
  struct ReplicaState {
    bool accumulates = false;     // it runs more than one micro-batch
    bool backward_ended = false;  // its first backward has ended
  };
  // A device's state.
  struct Device {
    MemoryBreakdown parts;
    int in_flight = 0;
  };
  // Calls visit(device) for each device of `slot` of `replica`: its
  // tensor-parallel group (slot 0), or the slot's device.
  template <typename Visit>
  static void ForDevicesOfSlot(const PipelineStage& stage, int replica,
                               int slot, Visit visit);
  // Applies `change` to every device of pass `pass`, then notes peaks
  // (`at_end`: the pass's end).
  template <typename Change>
  void ForDevicesOf(const PassTask& pass, double seconds, bool at_end,
                    Change change);
  // Notes device's bytes at `seconds`, during `pass` (null: the step's
  // start).
  void Note(int device, double seconds, const PassTask* pass, bool at_end);

  const Strategy& strategy_;
  const LoweredStrategy& lowered_;
  const bool record_;
  std::vector<std::vector<SlotBytes>> bytes_;        // per stage, per slot
  std::vector<std::vector<ReplicaState>> replicas_;  // per stage, replica
  // Per task of the graph: the pass (into lowered.passes()) it starts
  // (the pass's or its rerun's first task), or ends; else -1.
  std::vector<int> pass_started_by_, pass_ended_by_;
  std::vector<Device> devices_;
  std::vector<int64_t> peak_;
  std::vector<MemoryBreakdown> peak_parts_;
  std::vector<PeakPass> peak_pass_;
  std::vector<int> most_in_flight_;
  std::vector<MemorySample> samples_;
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_STRATEGY_MEMORY_H_
