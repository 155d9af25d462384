// The execution simulator: one training step of a placed TrainingView.
//
// Contract: Simulate is a pure function of (context, placement, options):
// the same inputs give the same result, bit for bit. It is event driven:
//  - One compute queue per device. A node becomes ready when each of its
//    input values is present on its device and its control inputs are done;
//    an idle device runs the ready node that the context's ReadyOrder ranks
//    first (lowest priority value), ties broken by node key. A node takes
//    the cost model's NodeSeconds, or its AloneNodeSeconds on a device that
//    is the only one of its host (Device::host) the placement uses: a
//    device in use slows its host's others down for the whole step (its
//    threads, its copies), not only while it runs a node.
//  - A value is sent at most once to each device that needs it, right when
//    it is produced (parameters: at time 0 from their group's device).
//    Transfers are serialized per link direction (FIFO) and take the cost
//    model's TransferSeconds. Graph inputs and constants are present on
//    every device that reads them from the start (fed by the host).
//  - Partial gradients are accumulated where they are made (the view's
//    gradient sums): when a device has made the last of its partials of a
//    sum, its one buffer is sent to the sink's device (a single transfer of
//    the tensor's bytes, however many partials it holds); the sink is ready
//    when every device's buffer is there. A node whose partial is added
//    into a buffer its device holds when it starts takes the cost model's
//    PartialAddSeconds more (the add follows the node on its device; an
//    arriving buffer's add is not charged).
//  - Memory per device: resident for the whole step are the parameters
//    homed there times (1 + optimizer state per parameter byte). Every other
//    value is allocated
//    when its producer starts (or, for a copy, when it is queued on its
//    link: when its producer ends, or at time 0 for a parameter; it may
//    start later, when the link is free) and
//    freed when the last node or outgoing transfer on that device that uses
//    it has finished: activations thus live until their backward use.
//    Graph inputs and constants are allocated from the start on each device
//    that reads them and freed after their last use there. A partial
//    gradient is allocated when its node starts; when the node finishes it
//    becomes its device's buffer for the sum, or, when that device has one
//    already, is added into it and freed. An arriving buffer is likewise
//    kept or added and freed. A device's buffer lives until it is sent (the
//    transfer's end) or, on the sink's device, until the sink finishes.
//    A forward node's saved_workspace_bytes (graph/training_view.h) are
//    allocated when it starts and freed when its backward node finishes;
//    a node's scratch_bytes when it starts, freed when it finishes.
// SimulationContext (simulator/simulation_context.h) holds everything that
// does not depend on the placement. Simulate lowers the placement to a task
// graph (simulator/placement_lowering.h), runs it on the event engine
// (simulator/engine.h) and keeps memory with a MemoryTimeline
// (simulator/memory_timeline.h).
#ifndef PLACER_SIMULATOR_SIMULATOR_H_
#define PLACER_SIMULATOR_SIMULATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/memory_timeline.h"
#include "simulator/placement.h"
#include "simulator/simulation_context.h"

namespace placer {

struct SimulationOptions {
  // Keep every node's and transfer's times (for traces).
  bool record_schedule = false;
  // List every transfer and trace the critical path; false leaves
  // SimulationResult::transfers and critical_path empty (what needs only
  // the step, busy time, peaks and counts).
  bool list_transfers = true;
  // Also take the step's peaks as a later micro-batch of a
  // gradient-accumulation loop (SimulationResult::later_*; zeros
  // without it).
  bool later_micro_batch = false;
  // Count one tensor-parallel rank's shares of the bytes in memory
  // (MemoryTimelineOptions::rank_shares); times stay the whole ops'.
  const RankShares* rank_shares = nullptr;
  // ZeRO-2/3: each parameter's gradient cut to its shard of this many
  // once complete (MemoryTimelineOptions::gradient_shards).
  int gradient_shards = 1;
  // Recomputation in part: what the forward lets go and the backward makes
  // again (MemoryTimelineOptions::rebuilds); times stay the step's.
  const Rebuilds* rebuilds = nullptr;
};

struct ScheduledNode {
  int node = -1;
  int device = -1;
  double start_seconds = 0;
  double end_seconds = 0;
};

struct ScheduledTransfer {
  int value = -1;  // for a gradient sum: the first partial made on src
  int gradient_sum = -1;  // the view's gradient sum sent, or -1
  int src = -1;
  int dst = -1;
  int64_t bytes = 0;
  double start_seconds = 0;
  double end_seconds = 0;
};

// One step of the critical path: a node or a transfer (an index into
// SimulationResult::transfers).
struct CriticalStep {
  bool is_transfer = false;
  int index = -1;
  double start_seconds = 0;
  double end_seconds = 0;
};

struct SimulationResult {
  double step_seconds = 0;
  double lower_bound_seconds = 0;
  std::vector<double> busy_seconds;        // per device
  std::vector<int64_t> peak_memory_bytes;  // per device
  // Op placements, per device: the most live before its first backward
  // node started (MemoryTimeline::forward_peak_bytes).
  std::vector<int64_t> forward_peak_memory_bytes;
  // Per device: what was live when it first reached its peak (op
  // placements); for strategies, the parts the strategy's memory timeline
  // counts (simulator/strategy_memory.h) at its peak: parameters and
  // optimizer state resident, the gradient accumulators, the activations
  // kept by the micro-batches in flight, and the running pass's rest of
  // one micro-batch's peak as workspace.
  std::vector<MemoryBreakdown> peak_breakdown;
  // Op placements, per device: when it first reached its peak
  // (DescribePeakMoment words it; strategies: StrategySimulation's
  // peak_passes).
  std::vector<PeakMoment> peak_moments;
  // Op placements, with SimulationOptions::later_micro_batch: the same
  // step as a later micro-batch of a gradient-accumulation loop, on the
  // same events
  // (MemoryTimeline::later_peak_bytes): per device its peak, what was
  // live then, and the parameters' accumulators it holds throughout.
  std::vector<int64_t> later_peak_memory_bytes;
  std::vector<MemoryBreakdown> later_peak_breakdown;
  std::vector<int64_t> accumulator_bytes;
  bool oom = false;                        // some device over capacity
  int64_t bytes_moved = 0;                 // across devices
  int transfers_count = 0;
  int inaccurate_nodes = 0;
  std::vector<CriticalStep> critical_path;  // first step first
  std::vector<ScheduledTransfer> transfers;  // every transfer
  std::vector<ScheduledNode> schedule;  // with record_schedule, by node
  // With record_schedule: every change of a device's memory, in the order
  // the simulation made them (times ascending); resident memory at 0.
  std::vector<MemorySample> memory;
};

// What a transfer carries, for reports and traces: the value's name, or
// for a device's summed partial gradients "grad:<tensor> (summed)".
std::string TransferName(const TrainingView& view,
                         const ScheduledTransfer& transfer);

// Errors: a placement of the wrong size or naming a device out of range.
absl::StatusOr<SimulationResult> Simulate(
    const SimulationContext& context, const Placement& placement,
    const SimulationOptions& options = {});

}  // namespace placer

#endif  // PLACER_SIMULATOR_SIMULATOR_H_
