// StrategyExecutor: runs training steps of a Strategy (simulator/strategy.h:
// pipeline stages, micro-batches, data-parallel replicas) with LibTorch on
// this process's devices, one worker thread per device (a step with one
// device's work and nothing else, not pinned: on the calling thread).
//
// Contract:
//  - Each device of the strategy runs its replica's tasks in
//    ReplicaTaskOrder — the order the strategy simulator assumes — each
//    task being its stage's forward (or backward) nodes for one
//    micro-batch, in the view's topological order, one after another. A
//    forward task waits until every earlier stage it reads from has run that
//    micro-batch's forward; a backward task until every later stage that
//    makes partial gradients of its tensors has run that micro-batch's
//    backward. Values cross devices as copies made by the reader when its
//    task starts.
//  - A stage whose replicas span several devices (op placement inside the
//    stage, Strategy's slots): each device of a replica runs its slot's
//    nodes of the task, one worker per device, each time the ready one
//    with the lowest of ExecutorOptions::priorities (without them, the
//    first in the view's order), ties by node key (as the simulator
//    breaks them), a node being ready once the nodes of its
//    task that make what it reads (values, partial gradients it sums) have
//    run, on any slot, and what it reads from other slots has arrived: a
//    value once made, a weight at the task's start, a slot's summed
//    partials of a gradient it sums (or whose parameter's update it runs)
//    once the slot has made its last of them, each copied (in the order
//    sent) by the worker of the link between the two devices, or between
//    CPU devices by the sender's worker at once: a weight's gradient
//    leaves for its update's device during the backward, as autograd
//    sends a copied weight's home. The task ends when every slot has run
//    its part; then each device adds the gradients of its slot's
//    parameters (its own partials and the other slots' buffers, in slot
//    order) into its accumulators.
//    Each slot's devices across the replicas sum that slot's
//    accumulators. Busy time leaves out the waits for other slots. As
//    ranks, a replica of a pipeline runs within one rank: what its task
//    makes for another rank's stage is sent by its first device once
//    every slot is done (partial gradients of one sum from several slots
//    added up first, in slot order). The replicas of a strategy of one
//    stage without ZeRO (an op placement's, say) may be split over ranks:
//    what crosses between slots of different ranks goes by the link's
//    worker on a channel of its own (sent as made, timed by the sender;
//    received in order by the other rank's worker of the link), a
//    slot's buffer of a parameter's partial gradients among them; a
//    value is kept for this
//    rank's readers only. Create refuses any other replica split over
//    ranks, naming the stage. Either way a slot's sums may cross ranks.
//  - Micro-batch j's graph inputs and loss targets: DrawHostValues(view,
//    seed)'s for j = 0 (so one micro-batch is an op placement's step,
//    executor.h), DrawBatch(view, seed + j) otherwise; the same every
//    step. Parameters start as DrawHostValues' on every replica.
//  - Ops compute as executor.h says (runtime/op_autograd.h). Each
//    loss's seed gradient is scaled by 1 / micro_batches, so a replica's
//    accumulated gradients are its share of the step's mean gradient;
//    partial gradients are summed per micro-batch as the view's gradient
//    sums say, and a parameter's sum is added to the replica's accumulator
//    as soon as its last partial is made (PyTorch's AccumulateGrad; the
//    first micro-batch's becomes it, copied when another tensor shares
//    it), or, where it needs other devices' partials (a wide stage, a
//    tensor-parallel group), when the backward task ends. ZeRO-2/3 cut
//    it into the shards' parts as it completes too, when every replica
//    of the stage is in this process (else at the task's end, for
//    c10d's all-to-all); the round's reduce-scatter still waits at the
//    task's end for every replica's parts.
//  - When the replicas of a stage have run all their tasks, each of them
//    sums the replicas' accumulators in replica order on its own device
//    (the allreduce; every replica gets the same bits), overlapping the
//    other stages' remaining tasks. Each replica then applies the view's
//    optimizer (runtime/parameter_update.h) to its parameters once every task
//    of the step has succeeded: a step that fails in a task (a kernel
//    error, named with its node and micro-batch) updates nothing. Unlike
//    the simulator, the allreduce does not overlap the stage's own last
//    backward (a device's worker runs it after its tasks), and a stage's
//    update waits for the step's last task rather than for its own
//    allreduce only.
//  - A forward value is freed after its last reader's task has taken it
//    (a wide replica's copy of another slot's value after its last read
//    on that slot; another stage's copy on a reading device after its
//    last read there), a gradient buffer once its sink has read it (as
//    frameworks free them). In one process, the partials later stages on
//    other devices made of a stage's sums are copied to its device as its
//    backward task starts (a framework's pipeline receives them then),
//    the maker's let go; freed host memory stays in the heap
//    (KeepFreedHostMemory), as in the profiler.
//  - Step reports the step's wall time, the mean loss over the
//    micro-batches (before the update), each device's busy time, every
//    node run (each forward and backward node per micro-batch, each update
//    of a whole parameter; none with tensor parallelism, whose devices run
//    parts of ops; on a GPU only with ExecutorOptions::time_gpu_nodes,
//    which waits for each), timed without the copies and waits for other
//    devices it made, and the copies a worker or link made of other
//    devices' values and weights in one process (what crosses ranks goes
//    packed, untimed; on a GPU as the node runs), each hand-off to a worker
//    that waited (StepReport::handoff_seconds: from the last change that could
//    make its work ready to its start on it); with
//    measure_allocations, what each device's threads allocated (below).
//    Every step's memory is tracked (StepReport::peak_memory_bytes). An op
//    placement's strategy (one stage, one replica, one micro-batch,
//    nothing tensor parallel, sharded or recomputed: PlacesOps) node by
//    node (runtime/strategy_placement_memory.h: the simulator's memory
//    timeline over the placement's lowering, told this executor's nodes
//    and copies as they run, at the sizes of the tensors made); with
//    enforce_memory a step that goes past a device's memory_bytes there
//    fails after the node (or at the copy) that took it there, with a
//    ResourceExhausted error naming the device and the node. Any other
//    strategy pass by pass (runtime/pass_memory.h: the simulator's
//    strategy memory timeline, told each pass as its replica starts and
//    ends it); with enforce_memory a pass that would take a device of this
//    process past its memory_bytes fails the step before it runs, naming
//    the device, the stage, the pass and the micro-batch. With
//    measure_allocations and enforce_memory (both ExecutorOptions), any
//    strategy's step whose allocations on a device go past its
//    memory_bytes fails after the forward or backward node that took them
//    there, with a ResourceExhausted error naming the device, the node and
//    the micro-batch.
//  - Distributed (options.ranks set): this process is one rank and runs
//    only the devices options.rank_of_device gives it. What one process's
//    workers share goes by the rank group instead, sent by the producing
//    device's worker on the channel of its device pair: a forward's values
//    for a later stage's device on another rank, a backward's summed
//    partial gradients for an earlier stage's (each packed: one index and
//    one data message per stage pair and micro-batch, c10d send/recv).
//    What the replicas of a slot (a stage's, a wide stage's slot's, a
//    tensor rank's) exchange goes by c10d's collectives on a subgroup of
//    their ranks (RankGroup::AddSubgroup), one call per rank for all of its
//    replicas: the allreduce is an all-gather of each replica's
//    accumulators, flattened into buckets (as DDP's) of at most
//    ExecutorOptions::exchange_chunk_bytes, one at a time, after each of
//    which each replica sums that bucket's parameters over all replicas
//    in replica order, as one process does, so losses and parameters do
//    not depend on the process layout.
//    A step ends with ExchangeStepReports (loss and busy time summed,
//    seconds the slowest rank's); a failure is published and stops the
//    other ranks, naming the rank. Updates wait for this rank's tasks
//    only: a step that fails on another rank may have updated this one.
//    Parameter() finds the replicas of this rank only.
//  - A recomputing stage (Recompute::kFull) runs its forward without
//    autograd, keeping of each micro-batch only the values other stages
//    (or ranks) sent it; its backward task first reruns the stage's forward
//    under autograd from those (graph inputs, constants and weights read
//    again; constants copied, so that BatchNormalization's running
//    statistics are updated once), then runs the backward as usual.
//    Recomputing in part (kSelective, kLayers, kSelectiveOp): the nodes
//    the simulator's rule reruns (simulator/selective_recompute.h) run
//    without autograd, and what they read that no rerun node of the stage
//    makes is kept. By layer (kLayers, kSelectiveOp), before the first
//    backward node of each layer (in the stage's backward order) that
//    layer's rerun nodes run again under autograd from it; selectively
//    (kSelective: every node without a weight), each rerun node runs again
//    before the first backward node that needs it (its own, or a kept
//    op's that saved its output), after the rerun nodes it reads from;
//    each kept value let go after its last rerun read. What a kept op
//    saves of a rerun node's making (a product's input) has its storage
//    freed once the forward pass has read it for the last time and is
//    filled again when the rerun makes it (torch's selective
//    checkpointing; what the simulator counts rebuilt, not held), unless
//    it shares storage with another value (a view) or the stage is
//    tensor parallel (the groups save converted parts). With
//    ZeRO-3 a layer's rerun gathers the weights it reads whole from the
//    shards at once (across ranks, one exchange, as the others); the
//    copies stay with the saved graphs until the layer's backward has
//    read them.
//  - ZeRO (Strategy::zero), every stage: each replica of a stage updates
//    a shard of every parameter, the k-th of R equal runs of its elements,
//    flattened (DeepSpeed's and Megatron-LM's distributed optimizer's
//    partition, which the simulator's 1/R of the state and of the update
//    counts), and holds the optimizer state of that shard only.
//  - ZeRO-1: a replica accumulates whole gradients, sums its shard of each
//    over the replicas (in replica order), updates it, and once every
//    replica of the slot has updated, copies the others' shards in. The
//    same bits as without. As ranks, the shards are all-gathered after
//    the updates (flat buckets of at most exchange_chunk_bytes, one at a
//    time, each copied in before the next).
//  - ZeRO-2 and ZeRO-3: after each backward a replica cuts the micro-batch's
//    gradients into the shards' parts, and the round's reduce-scatter
//    (the n-th micro-batch of every replica) waits until every replica
//    has delivered its parts; then each shard's replica sums the round in
//    replica order on its device and adds the rounds in order into its
//    accumulator of the shard (the others keep none). ZeRO-2 holds its
//    parameters whole and, after the updates, copies the other replicas'
//    shards in. ZeRO-3 holds only its shards: each forward, rerun and
//    backward pass of a micro-batch gathers a parameter whole from the
//    shards before its first reader there (and the next node's,
//    prefetched) and lets the copy go after its last reader; what a
//    forward's saved graph keeps of the copy has its storage freed until
//    the backward that reads it, which fills it again from the shards
//    (FSDP's reshard after forward); a copy an op's output shares storage
//    with (a view of the weight) is left to reference counting. The sums
//    are in another order than ZeRO-1's: the same parameters to rounding.
//    As ranks, each round's parts for the replicas on other ranks go by
//    c10d's all-to-all (a flat bucket per pair of replicas and chunk of
//    at most exchange_chunk_bytes, zeros where no gradient flowed; Gloo has no
//    reduce-scatter, and the sum stays in replica order); ZeRO-2's updated
//    shards are all-gathered after the updates, in buckets as ZeRO-1's; and
//    each ZeRO-3 gather (the same ones, in the same order, on every replica of
//    the stage) all-gathers the replicas' shards of the gathered parameters,
//    the pass's next gather started before the node computes (its transfer
//    overlapping it: FSDP's prefetch). Parameter() then answers only where
//    every shard is on this rank (ParameterShard: the replica's shard).
//  - Tensor parallelism (graph/tensor_sharding.h; every stage's groups of
//    one size): each device of a replica's group runs every op of its
//    stage on its part of the tensors, in ShardStrategy's layouts. Before
//    an op, each input is converted from the layout it is held in to the
//    one the op reads (a partial sum allreduced or reduce-scattered, a
//    split value all-gathered or exchanged all-to-all, a whole value
//    sliced); after it, each output to the layout it is held in; the
//    backward converts the gradients back (a partial one summed). Each
//    conversion is an all-gather of the group's parts added or joined in
//    tensor rank order (the same bits on every device): through memory in
//    one process, c10d's all-gather on the group's subgroup of ranks when
//    its devices are one per rank. Ops whose part needs other arguments
//    get them: Reshape's and Expand's shapes, a Split's sizes, a depthwise
//    convolution's groups; a contracted Gemm's or Conv's bias is added by
//    tensor rank 0 only; a lookup split on its table's rows reads zeros
//    for rows elsewhere (vocabulary-parallel embedding); a
//    SoftmaxCrossEntropyLoss or softmax over split classes allreduces its
//    maxima and sums (Megatron-LM's vocabulary-parallel cross-entropy).
//    A value a Split cuts on the dim the group splits is dealt (each
//    device the r-th 1/T of every piece), back to the weights that make
//    it (GPT-2's fused QKV projection). The replicas of a stage allreduce
//    each device's parts with the same tensor rank's in the other
//    replicas (under ZeRO, the replicas of a tensor rank shard its parts as
//    above). A recomputing stage's reruns convert as its forward did (the
//    collectives again). ParameterPart gives a device's part;
//    Parameter joins the group's (FailedPrecondition when some are on
//    other ranks).
//  - Create fails when the strategy does not fit the view and cluster
//    (CheckStrategy), a stage recomputes over several devices per replica
//    or holds an op that draws random numbers (Unimplemented, naming the
//    stage and op: a rerun would draw other numbers), tensor parallelism
//    comes in groups of different sizes, over
//    ranks in a pipeline, with some but not all of a group's devices on one
//    rank, or needs what the executor does not split (a value dealt by a
//    Split read split otherwise, an allreduce inside another op type, an
//    op drawing random numbers that a group runs whole; Unimplemented,
//    naming the op), a device is not
//    available in this LibTorch, an op has no kernel, or a starting value
//    cannot be made.
#ifndef PLACER_RUNTIME_STRATEGY_EXECUTOR_H_
#define PLACER_RUNTIME_STRATEGY_EXECUTOR_H_

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "runtime/executor.h"
#include "simulator/placement.h"
#include "simulator/strategy.h"

namespace placer {

class StrategyExecutor : public StepRunner {
 public:
  // `view` (and its graph) must outlive the executor. Uses the options'
  // update (with the view's optimizer), seed, input_values,
  // threads_per_cpu_device, pin_cpu_devices, priorities (wide stages),
  // time_gpu_nodes, measure_allocations, enforce_memory (an op
  // placement's tracked memory; any strategy's allocations with
  // measure_allocations), before_node, exchange_chunk_bytes, ranks and
  // rank_of_device (each device's rank in [0, world size); InvalidArgument
  // otherwise, or when this rank drives no device).
  static absl::StatusOr<std::unique_ptr<StrategyExecutor>> Create(
      const TrainingView& view, const Cluster& cluster,
      const Strategy& strategy, const ExecutorOptions& options = {});
  // An op placement's executor: its strategy's (StrategyOfPlacement: one
  // stage, one replica whose slots are the devices, one micro-batch).
  // InvalidArgument when the placement does not fit the view and cluster.
  static absl::StatusOr<std::unique_ptr<StrategyExecutor>> Create(
      const TrainingView& view, const Cluster& cluster,
      const Placement& placement, const ExecutorOptions& options = {});

  // One step (StepReport: its seconds, mean loss, per-device busy time,
  // node runs and copies;
  // with ExecutorOptions::measure_allocations, per cluster device, 0 for
  // one the strategy leaves out, every rank's merged at the step's end:
  // what the device holds before the step — parameters and optimizer
  // state; on CPU devices also the step's inputs and constants its stage
  // reads, as it reads them in place; not the synthetic loss targets,
  // which are the executor's and not the model's — plus the peak of the
  // bytes LibTorch allocated during the step on its worker and the
  // receivers of what other ranks send it, freed wherever they are freed).
  // A step with one device's worker and no receiver or link worker, not
  // pinned (pin_cpu_devices), runs it on the calling thread, whose
  // intra-op thread count it puts back.
  absl::StatusOr<StepReport> Step() override = 0;

  // StepRunner's: a parameter's as Parameter(name, 0) gives it (its
  // errors too); graph inputs are micro-batch 0's, the same every step.
  absl::StatusOr<torch::Tensor> Resident(
      absl::string_view name) const override = 0;

  // A parameter's current value on replica `replica` of its stage (a copy
  // on the CPU); NotFound for other names or replicas (or a replica on
  // another rank); FailedPrecondition under ZeRO-3 when some of its
  // shards are on other ranks.
  virtual absl::StatusOr<torch::Tensor> Parameter(absl::string_view name,
                                                  int replica = 0) const = 0;
  // ZeRO: replica `replica`'s shard of the parameter (its run of the
  // flattened elements, 1-D; a copy on the CPU); errors as Parameter's,
  // and FailedPrecondition when the parameter's stage is not sharded.
  virtual absl::StatusOr<torch::Tensor> ParameterShard(absl::string_view name,
                                                       int replica) const = 0;
  // Tensor parallelism: the part of the parameter that the device of
  // tensor rank `rank` in replica `replica`'s group holds (its 1/T of the
  // split dim, dealt where a Split cuts it; whole when replicated; a copy
  // on the CPU); NotFound as Parameter's (that device on another rank);
  // FailedPrecondition when its stage is not tensor parallel.
  virtual absl::StatusOr<torch::Tensor> ParameterPart(absl::string_view name,
                                                      int replica,
                                                      int rank) const = 0;
};

}  // namespace placer

#endif  // PLACER_RUNTIME_STRATEGY_EXECUTOR_H_
