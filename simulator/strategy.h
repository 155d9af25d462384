// Strategy: pipeline stages, micro-batches and data-parallel replicas — how
// a training step runs when placing ops alone is not enough.
//
// Contract:
//  - Stages partition the forward ops (and with each op its colocation
//    group: backward node, parameters, updates). Every forward dataflow
//    edge goes from a stage to the same or a later one, and every forward
//    reader of a parameter is in the parameter's stage (a weight lives in
//    one stage; see CheckStrategy's errors).
//  - A stage has one device per replica, disjoint across the strategy, or
//    — op placement inside the stage — `width` devices per replica: each op
//    of the stage runs on its slot's device (slot_of_op; slot 0 is the
//    replica's first device). A replica's tasks then run one at a time on
//    all its devices: each device runs, whenever it is free, its slot's
//    ready node of the task with the lowest priority (the simulation
//    context's ready order; the executor's ExecutorOptions::priorities), a
//    node being ready once the nodes of the task it reads from, on any
//    slot, have run and what it reads from other slots has arrived (a
//    value or a slot's summed partial gradients copied on the link between
//    the two devices once made, a weight from the task's start), and the
//    next task starts once every slot has ended this one (after a
//    backward, each slot first adds up the other slots' buffers of its
//    parameters' gradients and adds into its accumulators, then goes on
//    to its part of the next task). A weight's
//    readers may be on other slots of its stage. The
//    graph's batch is one micro-batch; a
//    step runs `micro_batches` of them (a step's global batch is micro_batches
//    times the graph's batch). Stage s's replica k runs micro-batches j with j
//    % replicas == k (PipeDream's round robin; with one stage this is data
//    parallelism with micro_batches / replicas accumulation steps per replica).
//  - Each replica accumulates its parameters' gradients over its
//    micro-batches; then the replicas of a stage allreduce them (ring or
//    tree) in buckets of about `bucket_bytes`, each bucket as soon as every
//    replica's last backward has made it (DDP's overlap), and each replica
//    updates its parameters once the last bucket is reduced. With op
//    placement inside a stage, the devices of one slot allreduce the
//    gradients of that slot's parameters, each slot by itself.
//  - A stage may recompute (Recompute::kFull): its forward keeps of each
//    micro-batch only what the stage reads from before it (its inputs and
//    graph inputs), and its backward reruns the stage's forward for that
//    micro-batch first (GPipe's re-materialization; Megatron-LM's full
//    recomputation, a stage being the unit). Memory for time. Or
//    selectively (Recompute::kSelective): it keeps what its ops that read
//    parameters make, and what its other ops read from before them, and
//    its backward first reruns those other ops (Megatron-LM's selective
//    recomputation of the attention core, generic: every op without a
//    weight). What it rebuilds is held layer by layer, not all at once:
//    each rerun value from the first backward node that reads it (or the
//    earlier rerun of a node that reads it, which brings it along) to the
//    last (MemoryTimelineOptions::rebuilds). Or op by op as torchtitan
//    does (Recompute::kSelectiveOp): in each of the model's repeated layers
//    (graph/repeated_layers.h) it keeps what the attention cores and every
//    other linear layer's product (the first, third, ... of the layer, as
//    torchtitan counts aten::mm) and the layer's outputs (the next
//    layer's input, which its checkpoint keeps) make, and reruns the
//    layer's other ops;
//    what it rebuilds for a layer is live from the first of the layer's
//    backward nodes (where the layer's rerun runs, as torch's checkpoint
//    reruns a block) to its last reader. Or layer by layer whole
//    (Recompute::kLayers): each layer keeps its input and output and
//    reruns its other ops at its backward, rebuilt values held as
//    kSelectiveOp's; with tensor parallelism its rerun pays the stage's
//    forward collectives again (those of ops in no layer too, an
//    over-count). None of the three with op placement inside the stage;
//    kSelectiveOp not with tensor parallelism.
//  - ZeRO (Strategy::zero; Rajbhandari et al. 2020): the replicas of each
//    stage (each slot's devices) shard what they would each hold in full.
//    ZeRO-1: each holds and updates 1/R of the optimizer state — buckets
//    are reduce-scattered instead of allreduced, each replica updates its
//    shard, then the updated parameters are all-gathered (reduce-scatters
//    and all-gathers by ring, or by two levels when `allreduce` is
//    hierarchical: simulator/allreduce.h). ZeRO-2: also the accumulated
//    gradients — every round of micro-batches (the n-th of each replica) is
//    reduce-scattered as its backward makes it, so the replicas of a stage must
//    run as many micro-batches each. ZeRO-3 (FSDP): also the parameters — each
//    holds 1/R of them between uses; in every forward, rerun and backward pass,
//    each parameter is all-gathered once, before its first reader there
//    (the next gather overlapping this one's reader: FSDP's prefetch of
//    one unit), and freed after its last reader; reduce-scatters as
//    ZeRO-2's, no all-gather after the update. Not with op placement
//    inside a stage.
//  - overlap_parameter_gather (ZeRO-1 and -2 only; Megatron-LM's
//    --overlap-param-gather): the updated parameters are all-gathered as
//    the next step's first forward pass of each replica needs them, in
//    buckets of about bucket_bytes in the order the forward first reads
//    them, each before its first reader, the next prefetched (as ZeRO-3
//    gathers), instead of once after the update. In the steady state a step
//    then begins with those gathers, overlapping its first forward passes, and
//    ends with the updates. The values are the same; the executors gather
//    after the update. Not with op placement inside a stage.
//  - Tensor parallelism (Megatron-LM; graph/tensor_sharding.h): a stage's
//    replica may be a group of T devices (Replica::tensor_devices, its
//    slot-0 device first; one slot, every replica as many) that split the
//    stage's ops: each op runs as op_sharding says (empty: as ShardTensors
//    chooses), a split op taking 1/T of its time on each device, every
//    change of layout a collective of the group in the pass that needs it.
//    What crosses stages is made whole first. Parameters and activations
//    split are held 1/T per device; the replicas of a stage allreduce each
//    device's share of the gradients with the devices of the same rank in
//    the other replicas.
//  - The op placement of replica 0 (every op on its slot's device in the
//    stage's first replica) is a valid op placement: placement files store it
//    as their assignment so that readers unaware of strategies still read a
//    placement.
#ifndef PLACER_SIMULATOR_STRATEGY_H_
#define PLACER_SIMULATOR_STRATEGY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/tensor_sharding.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "simulator/placement.h"

namespace placer {

enum class PipelineSchedule {
  kGPipe,  // every forward of a step, then every backward (last first)
  k1F1B,   // PipeDream-Flush: warm-up forwards, then one forward, one
           // backward; at most (stages - s) micro-batches in flight on s
};

enum class AllreduceAlgorithm {
  kRing,  // reduce-scatter + all-gather: 2(p-1) steps of bytes/p
  kTree,  // reduce up a binary tree (heap order), broadcast down it
  // Across hosts: reduce-scatter inside each host, allreduce each shard
  // across hosts (one ring per local rank), all-gather inside each host
  // (Horovod's and NCCL's two-level scheme). A ring where the devices are
  // not l >= 2 on each of h >= 2 hosts. ZeRO's reduce-scatters and
  // all-gathers likewise in two levels.
  kHierarchical,
};

// What the data-parallel replicas of a stage shard (ZeRO).
enum class ZeroStage {
  kNone,            // nothing: each holds everything
  kOptimizerState,  // ZeRO-1: the optimizer state
  kGradients,       // ZeRO-2: the optimizer state and the gradients
  kParameters,      // ZeRO-3 (FSDP): and the parameters, gathered for use
};

// ZeRO-2 and ZeRO-3 shard the accumulated gradients.
inline bool ShardsGradients(ZeroStage zero) {
  return zero == ZeroStage::kGradients || zero == ZeroStage::kParameters;
}

// What a stage keeps of a micro-batch's forward pass for its backward.
enum class Recompute {
  kNone,  // every activation its backward reads, and ops' saved workspace
  kFull,  // its inputs only; the backward reruns the forward first
  // What the ops that read parameters make (MatMuls, convolutions: the
  // costly ones) and what the others read from before them; the backward
  // first reruns the ops that read no parameter (norms, activations, the
  // attention core: Megatron-LM's selective recomputation, generic).
  kSelective,
  // torchtitan's op-level selective checkpointing (selective_ac_option =
  // "op"): in each repeated layer, keeps the attention cores' outputs and
  // every other linear product's (from the layer's first), reruns the
  // layer's other ops; ops in no layer keep what they would.
  kSelectiveOp,
  // Each repeated layer whole from its input (Megatron-LM's
  // --recompute-granularity full --recompute-method uniform
  // --recompute-num-layers 1; torchtitan's mode = "full"): keeps the
  // layers' inputs and outputs, reruns every other op of a layer at its
  // backward; ops in no layer keep what they would.
  kLayers,
};

// Whether a stage keeps part of its forward and reruns the rest at its
// backward (kSelective, kSelectiveOp, kLayers), not the whole (kFull).
inline bool RecomputesInPart(Recompute recompute) {
  return recompute == Recompute::kSelective ||
         recompute == Recompute::kSelectiveOp ||
         recompute == Recompute::kLayers;
}

// Whether a stage's recomputation follows the model's repeated layers
// (graph/repeated_layers.h): kSelectiveOp, kLayers.
inline bool RecomputesByLayer(Recompute recompute) {
  return recompute == Recompute::kSelectiveOp ||
         recompute == Recompute::kLayers;
}

// One data-parallel replica of a stage: the device of each of its slots
// (slot 0 first; one slot unless ops are placed inside the stage).
struct Replica {
  std::vector<int> device_of_slot;
  // Tensor parallelism: the replica's group, device_of_slot[0] first
  // (empty: none).
  std::vector<int> tensor_devices;
};

struct PipelineStage {
  std::vector<Replica> replicas;  // every replica has as many slots
  Recompute recompute = Recompute::kNone;

  // A stage whose replicas are one device each, in the order given.
  static PipelineStage OneDevicePerReplica(const std::vector<int>& devices);
  // A stage of the given replicas, each its devices in slot order.
  static PipelineStage OfReplicas(
      const std::vector<std::vector<int>>& device_of_slot_per_replica);
  // A stage whose replicas are tensor-parallel groups, each its devices.
  static PipelineStage OfTensorGroups(
      const std::vector<std::vector<int>>& devices_per_replica);

  int num_replicas() const { return static_cast<int>(replicas.size()); }
  // Devices per replica: replica 0's slots (1 when there are none).
  int width() const;
  // Devices per tensor-parallel group: replica 0's (1 when none).
  int tensor() const;
  // Replica `replica`'s tensor-parallel group, or its slot-0 device alone.
  std::vector<int> TensorGroup(int replica) const;
  int device(int replica, int slot) const {
    return replicas[replica].device_of_slot[slot];
  }
  // Each replica's slot-0 device, in replica order: where transfers between
  // stages go.
  std::vector<int> FirstDevices() const;
};

struct Strategy {
  std::vector<int> stage_of_op;  // per forward op
  // Per forward op: its slot in its stage's replicas; empty: every op in
  // slot 0 (each replica one device).
  std::vector<int> slot_of_op;
  std::vector<PipelineStage> stages;
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::kGPipe;
  AllreduceAlgorithm allreduce = AllreduceAlgorithm::kRing;
  int64_t bucket_bytes = int64_t{25} << 20;  // PyTorch DDP's default
  ZeroStage zero = ZeroStage::kNone;
  // Per forward op: how its stage's tensor-parallel group runs it; empty:
  // as ShardTensors chooses (graph/tensor_sharding.h), with sequence
  // parallelism when set.
  std::vector<OpSharding> op_sharding;
  bool sequence_parallel = false;
  // ZeRO-1 and -2: gather the updated parameters in the next step's first
  // forward passes (contract).
  bool overlap_parameter_gather = false;
};

// Names for files and flags: "gpipe", "1f1b"; "ring", "tree",
// "hierarchical"; "none",
// "full", "selective", "selective-op", "layers".
std::string ScheduleName(PipelineSchedule schedule);
absl::StatusOr<PipelineSchedule> ParseSchedule(const std::string& name);
std::string AllreduceName(AllreduceAlgorithm algorithm);
absl::StatusOr<AllreduceAlgorithm> ParseAllreduce(const std::string& name);
std::string RecomputeName(Recompute recompute);
absl::StatusOr<Recompute> ParseRecompute(const std::string& name);
// 0, 1, 2 (the ZeRO stage's number).
int ZeroNumber(ZeroStage zero);
absl::StatusOr<ZeroStage> ZeroFromNumber(int number);

// OK when the strategy keeps the contract above on `cluster`; else
// InvalidArgument naming the op, parameter, stage or device at fault (for
// tensor parallelism, ShardTensors' errors).
absl::Status CheckStrategy(const TrainingView& view, const Cluster& cluster,
                           const Strategy& strategy);

// Whether any stage is tensor parallel.
bool HasTensorParallelism(const Strategy& strategy);
// The strategy's ops sharded over their stages' tensor-parallel groups
// (ShardTensors with the stages as groups and op_sharding as fixed).
absl::StatusOr<TensorSharding> ShardStrategy(const Graph& graph,
                                             const Strategy& strategy);

// One task of a stage replica: the stage's forward or backward nodes for
// one micro-batch.
struct ReplicaTask {
  int micro_batch = 0;
  bool backward = false;
};
// The tasks replica `replica` of stage `stage` runs, in the schedule's
// order (GPipe: its forwards ascending, then its backwards descending;
// 1F1B: min(n, stages - stage - 1) warm-up forwards, then one forward and
// one backward, then the remaining backwards). The simulator and the
// strategy executor both run this order.
std::vector<ReplicaTask> ReplicaTaskOrder(const Strategy& strategy, int stage,
                                          int replica);

// Forward op `op`'s slot in its stage (0 when slot_of_op is empty).
int SlotOfOp(const Strategy& strategy, int op);
// Slot `slot`'s device in every replica of `stage`, in replica order (the
// devices that allreduce that slot's gradients).
std::vector<int> SlotDevices(const PipelineStage& stage, int slot);

// Every op on its slot's device in its stage's first replica (replica 0's
// placement).
Placement FirstReplicaPlacement(const Strategy& strategy);

// An op placement (of at least one op) as the strategy it is: one stage,
// one replica whose slots are the devices the placement uses, in
// ascending order, each op in its device's slot; one micro-batch or (a
// gradient-accumulation loop) `micro_batches` run one at a time (1F1B);
// FirstReplicaPlacement gives the placement back.
Strategy StrategyOfPlacement(const Placement& placement, int micro_batches = 1);

// Devices the strategy uses, replicas, slots and tensor groups included.
int StrategyDevices(const Strategy& strategy);

// "3 stages x (2, 1, 1) replicas, 8 micro-batches, 1f1b, ring"; with op
// placement inside a stage "1 stage x 4 replicas of 2 devices, ..."; with
// recomputation "..., ring, recompute" (every stage) or "..., ring,
// recompute stages 0, 2" ("selective recompute" likewise); with ZeRO "...,
// ring, zero-1" ("zero-1, gather overlapped" with
// overlap_parameter_gather); with tensor parallelism "1 stage x 2 replicas of
// tensor 2,
// ..." ("of tensor 2 (sequence parallel)" when set).
std::string DescribeStrategy(const Strategy& strategy);

}  // namespace placer

#endif  // PLACER_SIMULATOR_STRATEGY_H_
