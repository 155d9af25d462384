// Simulates one training step under a Strategy (simulator/strategy.h):
// micro-batch events per stage replica, activation and gradient transfers
// between stages, bucketed allreduce among replicas, updates, and memory
// with the micro-batches in flight.
//
// Contract: SimulateStrategy is a pure function of (context, strategy). It
// lowers the strategy to a task graph (simulator/strategy_lowering.h) and
// runs it on the event engine (simulator/engine.h):
//  - Tasks: F(s, j) and B(s, j), the forward and backward nodes of stage s
//    for micro-batch j, run on the device of s's replica j % replicas and
//    take the sum of their nodes' times there (one device per replica runs
//    its nodes one after another) and, as Simulate charges them, of the
//    partial gradients its nodes add into buffers the replica holds (the
//    cost model's PartialAddSeconds); every backward of a replica after its
//    first also adds its gradients into the buffers: the cost model's
//    AccumulateSeconds for each of the stage's parameters. Each device runs its
//    tasks in the schedule's order (GPipe: its forwards ascending, then its
//    backwards descending; 1F1B: min(n, stages - s - 1) warm-up forwards, then
//    one forward and one backward, then the rest of the backwards), each when
//    its inputs are there.
//  - F(s, j) needs, from every earlier stage a that writes values s reads,
//    those values' bytes (one transfer per stage pair and micro-batch,
//    sent when F(a, j) ends, FIFO per link direction). B(s, j) needs F(s, j)
//    and, from every later stage b that makes partial gradients of s's
//    tensors, one summed buffer per gradient (sent when B(b, j) ends).
//  - Gradients of parameters become final at an offset inside a replica's
//    last backward (its nodes' order); buckets of about bucket_bytes, in
//    that order, are allreduced one after another on the stage's replicas
//    (AllreduceSeconds), each once every replica has made it; each replica
//    then runs its stage's update nodes. The step ends with the last update.
//  - A stage whose replicas span several devices (op placement inside the
//    stage): a task's nodes are scheduled over the replica's devices, each
//    device running its slot's nodes in the stage's order, a node once its
//    device is free and the values it reads from other slots of the task
//    are made, charged the copies of those values (and of weights other
//    slots hold) on its own device; the task takes until its last node
//    ends and, for a backward, then until each slot has added up its
//    parameters' gradient buffers from several slots (one addition per
//    buffer beyond the one a node already added into: PartialAddSeconds)
//    and, after the replica's first backward, added them into its
//    accumulators (as the executor's workers do once every slot is done);
//    it occupies the replica as one. Transfers between stages go between the
//    replicas' first devices. Each slot's devices allreduce that slot's
//    gradients, as above, and run its updates.
//  - A recomputing stage's backward B(s, j) is preceded by R(s, j), its
//    forward nodes' time again (strategy_lowering.h), busy time too.
//  - Memory: the strategy's memory timeline (simulator/strategy_memory.h)
//    observes the engine: on a device of stage s (per slot for wide
//    stages), resident parameters and optimizer state, what each
//    micro-batch in flight there (forward started, backward not ended)
//    keeps — the stash: the activations and inputs s's backward reads, and
//    its forward nodes' saved_workspace_bytes; a recomputing stage, only
//    what its forward nodes read from before it — and, while a backward
//    runs, the rest of a micro-batch's peak from the memory timeline
//    (stage on one device, the rest elsewhere) once its resident
//    parameters and what it keeps are taken out (a recomputing stage
//    rebuilds one micro-batch's activations for its backward; a forward
//    holds what that run's forward part did): the first micro-batch's,
//    which makes its gradient buffers as it goes, until the replica's first
//    backward ends; then, when the replica runs more than one micro-batch,
//    one gradient accumulator per parameter and a later micro-batch's,
//    which holds them all from its start and adds each parameter's
//    gradient into its accumulator once complete
//    (StageModel::later_batch_peak_bytes). With one stage, one replica and
//    one micro-batch the peak and the step are Simulate's exactly (the
//    whole model on that device).
//  - ZeRO (Strategy::zero, strategy_lowering.h): a device of a stage with
//    R replicas holds its parameters whole and 1/R of their optimizer state
//    (ceiling); ZeRO-2 also 1/R of the gradient buffer it accumulates
//    into; ZeRO-3 1/R of the parameters too (state and parameters, one
//    ceiling), plus the most its gathered parameters hold at once
//    (StageModel::gathered_window_bytes). Updates take 1/R of their time;
//    reduce-scatters replace the allreduces and (ZeRO-1, -2) an all-gather
//    of the parameters follows the updates; ZeRO-3's gathers are in
//    bytes_moved (one per round, (R-1) x bytes) and allreduce_seconds.
//  - Tensor parallelism (strategy_lowering.h): a pass's task stands for
//    every device of its replica's group: busy, in flight and memory alike
//    (StagePlan's per-device shares).
//  - bytes_moved: the transfers' bytes plus 2(p-1) x bytes per allreduced
//    bucket (what ring and tree both put on the wire), (p-1) x bytes per
//    reduce-scattered bucket and per all-gather (times the tensor-parallel
//    ranks, each reducing its share), plus every tensor-parallel
//    collective's (CollectiveWireBytes). allreduce_seconds sums the
//    data-parallel collectives, tensor_seconds the tensor-parallel ones.
#ifndef PLACER_SIMULATOR_STRATEGY_SIMULATOR_H_
#define PLACER_SIMULATOR_STRATEGY_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/allreduce.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_memory.h"

namespace placer {

struct StrategyTask {
  int stage = -1;
  int micro_batch = -1;  // -1: the replica's update
  int device = -1;
  bool backward = false;
  double start_seconds = 0;
  double end_seconds = 0;
  bool recompute = false;  // a recomputing stage's forward rerun
  // A wide replica's slot adding up, after a backward, the buffers that
  // arrived for its updates and adding into its accumulators
  // (PassTask::slot_tasks).
  bool adds = false;
};

// A node of a wide stage's pass over one micro-batch, on its slot's
// device (record_schedule).
struct StrategyNodeRun {
  int node = -1;
  int micro_batch = -1;
  int device = -1;
  double start_seconds = 0;
  double end_seconds = 0;
};

// One allreduced bucket of a stage's gradients (record_schedule).
struct StrategyBucket {
  int stage = -1;
  int slot = 0;  // whose devices reduce it (op placement inside a stage)
  int64_t bytes = 0;
  double start_seconds = 0;
  double end_seconds = 0;
  Collective collective = Collective::kAllreduce;
};

struct StrategySimulation {
  // step_seconds, lower_bound_seconds, busy_seconds, peak_memory_bytes,
  // oom (over the devices' capacities), bytes_moved, transfers_count and
  // inaccurate_nodes as Simulate reports them; no critical path.
  SimulationResult step;
  int micro_batches = 1;
  // step_seconds / micro_batches: the time per graph batch of samples,
  // what compares strategies with each other and with op placements.
  double seconds_per_batch = 0;
  double allreduce_seconds = 0;  // summed over stages and buckets
  // Tensor parallelism: the groups' collectives, summed over passes.
  double tensor_seconds = 0;
  std::vector<int> most_in_flight;  // per device
  // Per device: the pass during which it reached step.peak_memory_bytes
  // (DescribePeakPass words it).
  std::vector<PeakPass> peak_passes;
  // With record_schedule: tasks, buckets, in step.transfers the
  // transfers between stages (value and gradient_sum -1) and the copies
  // between a wide replica's slots (a value, or a slot's summed partials
  // of gradient_sum), in `nodes` each wide pass's nodes, and in
  // step.memory every change of a device's memory as the strategy's
  // memory timeline made it (in the engine's order).
  std::vector<StrategyTask> tasks;
  std::vector<StrategyBucket> buckets;
  std::vector<StrategyNodeRun> nodes;
};

// Errors: CheckStrategy's.
absl::StatusOr<StrategySimulation> SimulateStrategy(
    const SimulationContext& context, const Strategy& strategy,
    const SimulationOptions& options = {});

}  // namespace placer

#endif  // PLACER_SIMULATOR_STRATEGY_SIMULATOR_H_
