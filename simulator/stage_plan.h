// What each pipeline stage of a Strategy (simulator/strategy.h) is,
// whatever devices run it: the tables the strategy lowering
// (simulator/strategy_lowering.h, a wide stage's passes in wide_passes.h)
// and the strategy simulator's memory read. Internal to simulator/.
//
// Contract: MakeStagePlan is a pure function of (context, strategy), which
// must have passed CheckStrategy; it simulates one micro-batch per stage
// (Simulate) for the stages' one-batch peaks and, where a replica runs
// more than one micro-batch, a later micro-batch's (the same run's
// later_peak_memory_bytes), and returns Simulate's error if that fails.
// With tensor parallelism, that simulation's memory counts what one device
// of a group holds (MemoryTimelineOptions::rank_shares: each value's
// TensorSharding::HeldBytes, each op's saved workspace and scratch at its
// share of the op), so a stage's one-batch peak is the memory timeline's
// over one rank's shards: split values at 1/T, replicated ones whole.
#ifndef PLACER_SIMULATOR_STAGE_PLAN_H_
#define PLACER_SIMULATOR_STAGE_PLAN_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/simulator.h"
#include "simulator/stage_crossings.h"
#include "simulator/strategy.h"

namespace placer {

// What a stage is, whatever devices run it. Per slot: what the device of
// that slot in each replica holds (one slot unless ops are placed inside
// the stage).
struct StageModel {
  int width = 1;
  std::vector<int> forward, backward, update;  // nodes, topological order
  std::vector<int64_t> parameter_bytes;        // per slot
  std::vector<int64_t> stash_bytes;            // per slot
  // Per slot: what its forward nodes read from before the stage (earlier
  // stages' activations, graph inputs), what a recomputing stage keeps.
  std::vector<int64_t> input_bytes;
  Recompute recompute = Recompute::kNone;
  // Per slot: Simulate's peak of one micro-batch, the stage alone on
  // replica 0, as the stage runs it: ZeRO-2/3's gradients cut to their
  // shards once complete (MemoryTimelineOptions::gradient_shards), what
  // recomputation in part lets go and makes again
  // (MemoryTimelineOptions::rebuilds).
  std::vector<int64_t> one_batch_peak_bytes;
  // Per slot: the same run's peak before the slot's first backward node
  // started (its forward pass; SimulationResult::forward_peak_memory_bytes).
  std::vector<int64_t> one_batch_forward_peak_bytes;
  // Per slot, when a replica of the stage runs more than one micro-batch:
  // the peak of the same step as a later micro-batch of a
  // gradient-accumulation loop (MemoryTimeline::later_peak_bytes,
  // over the first one's events) less the accumulators it holds from its
  // start, which the strategy simulator counts apart; 0 otherwise.
  std::vector<int64_t> later_batch_peak_bytes;
  // Per slot, parameters' gradients in the order they become final: the
  // position in `backward` of the node that makes the last partial, and
  // the bytes.
  std::vector<std::vector<std::pair<int, int64_t>>> gradients;
  // Per slot: the buffers of gradient sums that have arrived when a
  // backward starts, a sum once per later stage that sends one (each
  // later stage's partials of it, summed).
  std::vector<std::vector<int>> held_at_start;
  // A stage of one slot, per backward node (as `backward`): a sum once per
  // addition the node makes, by PartialAdditions over `held_at_start` and
  // the backward order (its partial into a buffer already held; the
  // buffers that arrived after the first, at the sum's sink). Wide stages:
  // empty lists (wide_additions.h charges them as they happen).
  std::vector<std::vector<int>> adds;
  // Selective recomputation: per slot, what the stage keeps of a
  // micro-batch (Recompute::kSelective, kSelectiveOp, kLayers); the
  // forward nodes its backward reruns first (kSelective: those that read
  // no parameter; kSelectiveOp: its layers' ops but their outputs,
  // attention cores and every other product; kLayers: its layers' ops but
  // their outputs), in order.
  std::vector<int64_t> selective_kept_bytes;
  std::vector<int> selective_rerun;
  // Per slot: what a micro-batch in flight (forward run, backward not)
  // holds there: its stash, its inputs when the stage recomputes, or what
  // selective recomputation keeps.
  int64_t kept_bytes(int slot) const {
    switch (recompute) {
      case Recompute::kNone:
        return stash_bytes[slot];
      case Recompute::kFull:
        return input_bytes[slot];
      case Recompute::kSelective:
      case Recompute::kSelectiveOp:
      case Recompute::kLayers:
        return selective_kept_bytes[slot];
    }
    return stash_bytes[slot];
  }
  // ZeRO-3: per forward and backward node (positions as in `forward` and
  // `backward`), the bytes of the parameters it is the first in its pass
  // to read (one device's share of them whole), gathered before it; and
  // the most the gathered parameters hold at once (those read before and
  // after a node, and the next gather, prefetched). An overlapped ZeRO-1/2
  // gather (Strategy::overlap_parameter_gather): the forward's only, in
  // buckets of about bucket_bytes (each at the first reader of any of its
  // parameters).
  std::vector<int64_t> forward_gather_bytes, backward_gather_bytes;
  int64_t gathered_window_bytes = 0;
  // Tensor parallelism: the devices of each replica's group; the group's
  // collectives in every forward pass (and rerun), and in every backward
  // each after the backward node at `first` (a position in `backward`).
  int tensor = 1;
  std::vector<GroupCollective> forward_collectives;
  std::vector<std::pair<int, GroupCollective>> backward_collectives;
};

struct StagePlan {
  std::vector<StageModel> stages;
  std::vector<int> slot_of_node;
  // Per node: its position in its stage's `forward` or `backward` list
  // (-1: an update).
  std::vector<int> position_in_pass;
  // Per node, the share of its time one device of its group spends: 1, or
  // 1/T for an op a tensor-parallel group of T splits (an update: 1/T for
  // a parameter split). Every bytes figure above is what one device holds.
  std::vector<double> share_of_node;
  // What the stages send each other per micro-batch.
  StageCrossings crossings;
};

absl::StatusOr<StagePlan> MakeStagePlan(const SimulationContext& context,
                                        const Strategy& strategy);

}  // namespace placer

#endif  // PLACER_SIMULATOR_STAGE_PLAN_H_
