// A Strategy's step (simulator/strategy.h) lowered to a TaskGraph
// (simulator/task_graph.h) for the event engine: what the strategy's
// micro-batches, transfers, allreduced buckets and updates are as tasks on
// devices, links and collectives.
//
// Contract: LowerStrategy is a pure function of its arguments (a strategy
// CheckStrategy accepted and its StagePlan). The graph:
//  - One resource per device (kPriority, index = the device), one per link
//    direction that carries a transfer or a wide pass's copy, one per
//    (stage, slot) whose replicas allreduce (kArrival), and (with a wide
//    stage) one for the passes' marks of no time (kArrival).
//  - Passes: F(s, j) and B(s, j) of the replica that runs micro-batch j,
//    each after the pass before it in the replica's order
//    (ReplicaTaskOrder). A stage of one slot's pass is one task on the
//    replica's first device taking the stage's nodes' time there, a
//    backward after the replica's first plus its accumulation into the
//    gradient buffers. A wide stage's pass is its pass graph
//    (wide_passes.h: the pass's nodes on their slots' devices by the
//    context's priorities, what crosses slots as copies on their links)
//    between a start and an end mark, the next pass starting once every
//    slot has ended this one (Strategy's contract); a backward's partial
//    additions happen as the engine runs it (wide_additions.h), and after
//    it each slot adds up the buffers that arrived for its updates (and,
//    after the replica's first backward, adds into its accumulators) in a
//    task of its own (PassTask::slot_tasks) before its part of the next
//    pass, as the executor's workers do.
//  - Recomputation: a recomputing stage's B(s, j) is preceded on its
//    device by R(s, j), its forward pass again (as long as F(s, j); a wide
//    stage's: its forward graph again; selective: its nodes that read no
//    parameter, without collectives); the gradients B(s, j) reads arrive before
//    R(s, j) starts (frameworks rerun the forward once the backward is called).
//  - Transfers: when F(a, j) ends, one per later stage b reading a's
//    values, to F(b, j); when B(b, j) ends, one per earlier stage a whose
//    gradients b makes, to B(a, j).
//  - Buckets: gradients in the order the replica's last backward makes
//    them, in buckets of about bucket_bytes, each allreduced after the one
//    before and once every replica's last backward has made it (a start
//    edge at that point of the pass; a wide pass's: an edge from the node
//    that makes it).
//  - Updates: one per (stage, slot, replica) on the slot's device, after
//    the replica's last backward and the slot's last bucket.
//  - Tensor parallelism: a pass of a tensor-parallel stage takes its
//    nodes' share of their time (StagePlan::share_of_node) plus its group's
//    collectives (the cost model's, over the replica's group), each
//    backward one counted from the backward node it follows for the
//    buckets' starts; the task stands for every device of the group. Updates
//    and accumulations take their share; buckets carry each device's share
//    of the gradients, reduced on the replicas' first devices (the other
//    ranks' rings, in parallel, as long).
//  - ZeRO (Strategy::zero): buckets are reduce-scattered (ZeRO-2: those of
//    every round of micro-batches, the n-th backward of each replica,
//    each replica's later backwards adding 1/R of the gradients into its
//    shard); an update takes 1/R of its nodes' time; once every replica of
//    a slot has updated, the slot's parameters are all-gathered (ZeRO-1
//    and -2). ZeRO-3: reduce-scatters as ZeRO-2's, no all-gather after
//    the updates; every pass instead gathers each parameter before its
//    first reader there (StageModel's gather bytes, ring all-gathers over the
//    replicas' devices, one at a time, each once the node of the one
//    before has started), part of the pass's time (replicas run their
//    rounds in step, each pass standing for the round's gather).
//    overlap_parameter_gather (ZeRO-1/2): no all-gather after the updates;
//    each replica's first forward pass of the step gathers its parameters
//    as a ZeRO-3 forward pass does (the previous step's updated values).
#ifndef PLACER_SIMULATOR_STRATEGY_LOWERING_H_
#define PLACER_SIMULATOR_STRATEGY_LOWERING_H_

#include <cstdint>
#include <vector>

#include "simulator/allreduce.h"
#include "simulator/pass_table.h"
#include "simulator/simulator.h"
#include "simulator/stage_plan.h"
#include "simulator/strategy.h"
#include "simulator/task_graph.h"
#include "simulator/wide_passes.h"

namespace placer {

// ZeRO-3 (and an overlapped ZeRO-1/2 gather): per node of a stage's pass
// (positions as in StageModel's forward or backward), the time of the
// all-gather before it over the stage's replicas (slot 0's devices, by the
// strategy's allreduce scheme), 0 where none; the same for every replica
// and micro-batch.
struct GatherTimes {
  std::vector<double> forward, backward;
};

// A forward or backward pass of one stage replica over one micro-batch.
struct PassTask {
  // The task whose start is the pass's start and the one whose end is its
  // end: for a stage of one slot both are the pass's one task; for a wide
  // stage, tasks of no time (on a resource of their own) before and after
  // the pass's inlined graph.
  int task = -1;
  int end_task = -1;
  int stage = -1;
  int micro_batch = -1;
  int replica = -1;
  int device = -1;  // the replica's first device
  bool backward = false;
  // A recomputing stage's backward: the task that reruns the stage's
  // forward just before it (what arrives for the backward waits for it
  // first), and the one ending that rerun; else -1.
  int recompute_task = -1;
  int recompute_end_task = -1;
  // A wide stage's pass: its pass graph's task 0 in the strategy's graph
  // (task i of WideStagePasses' graph is first_inlined + i), and its
  // rerun's (the forward graph again); else -1.
  int first_inlined = -1;
  int recompute_first_inlined = -1;
  // A wide backward: per slot, the task in which the slot adds up the
  // other slots' buffers that arrived for its updates (and, after a
  // replica's first backward, adds into its accumulators), on its device
  // once the pass has ended and those buffers have arrived. The slot's
  // nodes of the replica's next pass, and after its last backward the
  // slot's updates, wait for it, as each of the executor's workers goes
  // on alone once every slot has ended the pass. Else empty.
  std::vector<int> slot_tasks;
  // The task that what arrives for the pass waits for.
  int entry_task() const { return recompute_task >= 0 ? recompute_task : task; }
  bool wide() const { return first_inlined >= 0; }
};

struct TransferTask {
  int task = -1;
  int src = -1;
  int dst = -1;
  int64_t bytes = 0;
};

struct BucketTask {
  int task = -1;
  int stage = -1;
  int slot = 0;
  int64_t bytes = 0;
  Collective collective = Collective::kAllreduce;
};

struct UpdateTask {
  int task = -1;
  int stage = -1;
  int slot = 0;
  int replica = -1;
  int device = -1;
};

class LoweredStrategy {
 public:
  const TaskGraph& graph() const { return graph_; }
  // F(stage, micro_batch) or B(stage, micro_batch).
  const PassTask& pass(int stage, int micro_batch, bool backward) const {
    return passes_.at(stage, micro_batch, backward);
  }
  const std::vector<PassTask>& passes() const { return passes_.all(); }
  // Per device, the passes it runs (as indices into passes()), in order.
  const std::vector<std::vector<int>>& device_passes() const {
    return device_passes_;
  }
  const std::vector<TransferTask>& transfers() const { return transfers_; }
  // Per stage, per slot, in the order they run: the reduced buckets, then
  // (ZeRO) the all-gather.
  const std::vector<BucketTask>& buckets() const { return buckets_; }
  // In (stage, slot, replica) order.
  const std::vector<UpdateTask>& updates() const { return updates_; }
  // Per stage, its gathers' times (computed once a lowering).
  const GatherTimes& gather_times(int stage) const {
    return gather_times_[stage];
  }
  // Per stage, its pass graphs (a wide stage's; else `wide` false).
  const WideStagePasses& wide_passes(int stage) const {
    return wide_passes_[stage];
  }

 private:
  friend LoweredStrategy LowerStrategy(const SimulationContext& context,
                                       const Strategy& strategy,
                                       const StagePlan& plan);

  TaskGraph graph_;
  PassTable<PassTask> passes_;
  std::vector<std::vector<int>> device_passes_;
  std::vector<TransferTask> transfers_;
  std::vector<BucketTask> buckets_;
  std::vector<UpdateTask> updates_;
  std::vector<GatherTimes> gather_times_;
  std::vector<WideStagePasses> wide_passes_;
};

LoweredStrategy LowerStrategy(const SimulationContext& context,
                              const Strategy& strategy, const StagePlan& plan);

}  // namespace placer

#endif  // PLACER_SIMULATOR_STRATEGY_LOWERING_H_
