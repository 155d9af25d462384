// What is live on each device while a lowered op placement's step runs
// (simulator/placement_lowering.h): the liveness rules, kept apart from
// scheduling as Grappler keeps GraphMemory, and written only here. The
// simulator feeds it the engine's starts and ends; the executor feeds it
// the step it runs, with the sizes of the tensors it made
// (runtime/placement_memory.h), and may let each value's tensor go where
// the timeline frees it (ReportFreedValues). It answers peaks, what is
// live now and every change (when asked to record them).
//
// Contract (times are the engine's):
//  - Bytes are the view's, or a tensor-parallel rank's shares of them
//    (MemoryTimelineOptions::rank_shares), or as SetValueBytes sets them.
//  - Resident from the start: the parameters homed on a device times
//    (1 + optimizer state per parameter byte); graph inputs and constants
//    on each device that reads them.
//  - A node's outputs, saved_workspace_bytes and scratch_bytes are
//    allocated when it starts; a copy's bytes on its destination when it
//    is booked on its link (it may start later).
//  - When a node ends: each input it read is released on its device (freed
//    after the last reader or outgoing copy there, unless it is a resident
//    parameter or input at home); the summed buffers it read and its
//    scratch are freed; a backward node frees its forward op's saved
//    workspace; each partial gradient it made becomes its device's buffer
//    for the sum or, when the device holds one, is added into it and
//    freed; an output nobody reads is freed.
//  - When a copy ends: a summed buffer is freed on its source and kept or
//    added (and freed) on its destination; a value is released on its
//    source.
//  - With gradient shards (ZeRO-2/3), a parameter's summed gradient is cut
//    to its shard once complete on its update's device.
//  - With rebuilds (recomputation in part), a rebuilt value is freed after
//    its last forward reader on its producer's device (as it is made, when
//    none reads it there) and allocated again as its rebuild node starts,
//    then freed after its last backward reader there; a rebuilt saved
//    workspace is freed as its forward node ends and allocated again as
//    its rebuild node starts; what a rerun node reads is held until the
//    end of the backward node named to hold it.
//  - It is the engine's observer for the step: a node that starts is
//    lengthened by its partial additions, as PartialAdditions
//    (simulator/partial_additions.h) charges them.
// Not thread-safe.
#ifndef PLACER_SIMULATOR_MEMORY_TIMELINE_H_
#define PLACER_SIMULATOR_MEMORY_TIMELINE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "simulator/engine.h"
#include "simulator/pair_table.h"
#include "simulator/partial_additions.h"
#include "simulator/placement_lowering.h"
#include "simulator/simulation_context.h"

namespace placer {

// What a device's live bytes are, by what holds them.
struct MemoryBreakdown {
  int64_t parameters = 0;   // weights and optimizer state, and their copies
  int64_t activations = 0;  // forward outputs kept for later readers
  int64_t gradients = 0;    // partial gradients and summed buffers
  int64_t workspace = 0;    // what ops keep for backward or use while running
  int64_t inputs = 0;       // graph inputs and constants
};

// A value's copy on a device.
struct ValueOnDevice {
  int value = -1;
  int device = -1;
};

// When an op placement's device reached its peak: as node `node` started
// (its outputs allocated) or ended (`at_end`: a partial gradient added into
// a buffer), or as the copy of `copied_value` started or ended, `seconds`
// into the step; neither: from the step's start (what is resident).
struct PeakMoment {
  int node = -1;
  int copied_value = -1;
  bool at_end = false;
  double seconds = 0;
};

// "when node 'grad:C' started (3.000000 s into the step)", "when a copy of
// 'x' started arriving (...)", or "from the step's start (what is
// resident)".
std::string DescribePeakMoment(const TrainingView& view,
                               const PeakMoment& moment);

// A device's memory after a change, at a moment of the step.
struct MemorySample {
  double seconds = 0;
  int device = -1;
  int64_t bytes = 0;
};

// What one device of a tensor-parallel group holds where the view counts
// whole tensors (simulator/stage_plan.h builds it from TensorSharding): per
// value, its bytes there; per node, the share of its saved workspace and
// scratch it holds. Both indexed as the view's values and nodes.
struct RankShares {
  std::vector<int64_t> value_bytes;
  std::vector<double> node_share;
};

// Recomputation in part (simulator/selective_recompute.h): what a step's
// forward lets go instead of keeping for its backward, and where the
// backward makes it again. Indexed as the view's values and nodes.
struct Rebuilds {
  // Per value: the backward node at whose start it is made again on its
  // producer's device, for the backward nodes there that read it (the
  // forward lets it go after its last forward reader there); -1: kept.
  std::vector<int> value_at;
  // Per forward node: the backward node at whose start its saved
  // workspace is made again (its forward run lets it go at its end); -1:
  // kept.
  std::vector<int> workspace_at;
  // What a rerun node reads, held until the rerun that reads it: each
  // (value, backward node) pair, the node's device holding the value
  // until the node ends. A value read by reruns on several devices has a
  // hold on each.
  struct Hold {
    int value = -1;
    int until_node = -1;
  };
  std::vector<Hold> holds;
};

struct MemoryTimelineOptions {
  // Count one tensor-parallel rank's shares in place of the view's bytes
  // (nullptr: the view's). Must outlive the timeline's constructor.
  const RankShares* rank_shares = nullptr;
  // Keep every change (samples()).
  bool record = false;
  // Also track the step as a later micro-batch of a gradient-accumulation
  // loop (later_peak_bytes); without it those figures are zeros.
  bool later_micro_batch = false;
  // ZeRO-2/3 over this many replicas (1: none): once a parameter's
  // gradient sum is complete on its update node's device (every partial
  // and other device's buffer of it there), it is reduce-scattered, and
  // the device keeps its shard, ceil(bytes / gradient_shards), freeing the
  // rest; the shard is also the accumulator a later micro-batch holds.
  int gradient_shards = 1;
  // Recomputation in part (nullptr: none): values and saved workspace let
  // go by the forward and made again by the backward. Must outlive the
  // timeline's constructor.
  const Rebuilds* rebuilds = nullptr;
};

class MemoryTimeline final : public TaskObserver {
 public:
  // Allocates what is resident from the start. `context` and `lowered`
  // must outlive the timeline.
  MemoryTimeline(const SimulationContext& context,
                 const LoweredPlacement& lowered,
                 const MemoryTimelineOptions& options);

  // Task `task` of the lowered graph starts at `start` (a copy: was booked
  // at `now`); returns `end` plus its partial additions (a node's own
  // partials added into buffers its device holds, and the buffers that
  // arrived into those of the sums it reads). A barrier
  // (LoweredPlacement::is_barrier) holds nothing.
  double Started(int task, double now, double start, double end) override;
  // Task `task` ended at `now`.
  void Ended(int task, double now) override;

  // From now on, value `value` counts `bytes` (a tensor's measured size)
  // in place of the view's: call it before the task that makes the value
  // (or, for a copy's, the copy) starts. A gradient sum's buffer counts
  // as the partial that became it; a summed buffer's copy as the copy's
  // value (CopyTask::value).
  void SetValueBytes(int value, int64_t bytes) { value_bytes_[value] = bytes; }
  // From now on, each value whose bytes it frees on a device (its last
  // reader or outgoing copy there ended, or it was made and nobody reads
  // it) is appended to *freed, in order: what holds the value's tensor
  // there may let it go (the executor's). Gradient sums' buffers are not
  // values: not reported. `freed` must outlive the timeline.
  void ReportFreedValues(std::vector<ValueOnDevice>* freed) { freed_ = freed; }
  // What is live on `device` now.
  int64_t bytes(int device) const { return memory_[device]; }
  const std::vector<int64_t>& peak_bytes() const { return peak_; }
  // Per device: the most live before its first backward node started
  // (the forward part of the step there; the whole step's peak on a
  // device that runs no backward node).
  const std::vector<int64_t>& forward_peak_bytes() const {
    return forward_peak_;
  }
  // Per device: what was live when it first reached its peak, and when.
  std::vector<MemoryBreakdown> PeakBreakdown() const;
  std::vector<PeakMoment> PeakMoments() const;
  // The same step as a later micro-batch of a gradient-accumulation loop,
  // over the same events: each parameter's accumulator (what the earlier
  // micro-batches summed: its gradient sum's bytes) is held on its update
  // node's device throughout, and the micro-batch's gradient of it,
  // summed as in any step, is added into it and freed once every partial
  // has reached that device (PyTorch's AccumulateGrad: a weight read
  // several times sums its gradient apart first). Per device: that step's
  // peak, what was live then, and the accumulators it holds.
  const std::vector<int64_t>& later_peak_bytes() const { return later_peak_; }
  std::vector<MemoryBreakdown> LaterPeakBreakdown() const;
  const std::vector<int64_t>& accumulator_bytes() const {
    return accumulators_;
  }
  // With MemoryTimelineOptions::record: every change, in the order made.
  std::vector<MemorySample>& samples() { return samples_; }

 private:
  // What holds bytes (MemoryBreakdown's fields, in order).
  enum Use { kParameters, kActivations, kGradients, kWorkspace, kInputs };
  static constexpr int kUses = 5;
  void Allocate(int device, int64_t bytes, Use use);
  void Free(int device, int64_t bytes, Use use);
  void Release(int value, int device);
  // A partial gradient (or another device's buffer) of `bytes` for `sum`
  // on `device`: its buffer, or added into the one it holds and freed.
  void Accumulate(int sum, int device, int64_t bytes);

  const SimulationContext& context_;
  const TrainingView& view_;
  const LoweredPlacement& lowered_;
  const bool record_;
  const bool later_;  // MemoryTimelineOptions::later_micro_batch
  const int shards_;  // MemoryTimelineOptions::gradient_shards
  const int devices_;
  double now_ = 0;
  int task_ = -1;        // the task whose event is being told; -1: none yet
  bool ending_ = false;  // the event is its end
  std::vector<int64_t> memory_, peak_, forward_peak_;
  // Per device: the task during which it first reached its peak, and when.
  std::vector<int> peak_task_;
  std::vector<char> peak_at_end_;
  std::vector<double> peak_seconds_;
  std::vector<char> backward_started_;  // per device
  std::vector<int64_t> value_bytes_;  // per value: the view's, or as set
  // Per node: its saved workspace and scratch bytes (the view's or the
  // rank's share).
  std::vector<int64_t> saved_workspace_, scratch_;
  PairTable<int> users_;            // per (value, device)
  std::vector<int> source_device_;  // per value, or -1
  std::vector<char> transient_;     // per value: an activation or gradient
  std::vector<char> use_;           // per value: its Use
  // Per device: live bytes by use, now and when it reached its peak.
  std::vector<std::array<int64_t, kUses>> by_use_, peak_by_use_;
  // Per (sum, device) that holds a buffer of the sum (from its first
  // partial or arrival there on): its bytes; -1 for none.
  PairTable<int64_t> buffer_bytes_;
  // What adding partials into the buffers held costs the nodes.
  PartialAdditions additions_;
  // A later micro-batch (later_peak_bytes): per device, the accumulators
  // (gradient shards: theirs) and what it holds beyond this step (the
  // accumulators less the completed sums' buffers this step holds until
  // their updates end), its peak and what was live then. Per parameter's
  // sum (with later_ or shards_ > 1): its update node's device (-1: not a
  // parameter's), and the partials and other devices' buffers still to
  // reach it.
  std::vector<int64_t> accumulators_, later_extra_, later_peak_;
  std::vector<std::array<int64_t, kUses>> later_peak_by_use_;
  std::vector<int> home_of_sum_, to_complete_;
  // A later micro-batch's peak on `device` after a change there (with
  // later_).
  void NoteLater(int device) {
    if (!later_) return;
    const int64_t later = memory_[device] + later_extra_[device];
    if (later > later_peak_[device]) NewLaterPeak(device, later);
  }
  void NewLaterPeak(int device, int64_t bytes);
  // Recomputation in part: per node, the values and forward nodes' saved
  // workspace it makes again as it starts, and the values whose hold ends
  // with it; per rebuilt value, its backward readers on its producer's
  // device.
  std::vector<std::vector<int>> rebuilt_values_, rebuilt_workspace_,
      holds_ending_;
  std::vector<int> rebuilt_readers_;
  std::vector<char> workspace_rebuilt_;  // per node
  std::vector<MemorySample> samples_;
  std::vector<ValueOnDevice>* freed_ = nullptr;
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_MEMORY_TIMELINE_H_
