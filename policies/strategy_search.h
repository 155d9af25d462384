// Searches strategies (simulator/strategy.h): where to cut the model into
// pipeline stages, how many data-parallel replicas each stage gets and how
// many micro-batches a step runs — PipeDream's and Alpa's inter-operator
// dynamic programming, judged by the strategy simulator.
//
// Contract:
//  - Devices: the largest set of identical devices of the cluster (by their
//    summed peak FLOP/s; ties: the set with the lowest device index), in
//    cluster order, at most 32; stages take them in order. A stage's
//    replicas run one device each, except in auto's wide candidates below.
//  - Cuts: only between forward ops in the view's topological order where
//    no weight has readers on both sides, coarsened to at most 32 chunks of
//    about equal compute. For each micro-batch count and stage count, a
//    dynamic program over chunk boundaries and device counts minimizes the
//    slowest stage per micro-batch (compute / replicas + allreduce /
//    micro-batches, and the transfers at each cut) for every device count;
//    each result is then simulated with 1F1B and GPipe (when it has two
//    stages or more) and ring and tree allreduce (when it has replicas),
//    and hierarchical allreduce when a stage's replicas are as many on
//    each of two hosts or more (Device::host).
//    Every candidate runs the same micro-batches per step; auto's
//    candidates include data's and pipeline's, so it is never worse.
//  - Wide candidates (hybrid and auto; auto only when inside_policy is
//    set): for each width w
//    from 2 to P / 2, the policy places the whole model on the pool's first
//    w devices (a cluster of those alone, Cluster::Subset; a share of the
//    budget), and P / w replicas of that op placement (replica k on pool
//    devices k w .. k w + w - 1, each op on the same slot) make one stage,
//    simulated with ring and tree allreduce: data parallelism over
//    model-parallel replicas. The policy places one micro-batch: when the
//    strategy takes a device over its limit, the width is placed again
//    with that device's limit lowered by the overshoot (at most three
//    times). auto also takes the dynamic program's partitions with two
//    stages or more over the P / w groups (each group as one device) and
//    gives every stage the same op placement inside: pipelines whose
//    stages span w devices. A width whose placement uses one device is
//    data parallelism, already a candidate; a width the policy fails on
//    is skipped (its error is the answer's when nothing else is found).
//    With inside_placements, a width's placement kept there (an earlier
//    search's, same policy) is taken as it is, without placing or
//    retrying, and the placements this search makes are kept there.
//  - Tensor parallelism (simulator/strategy.h; kTensor and kAuto, or
//    `tensor` fixed): for each group size t (1 first in auto; then every
//    power of two up to P that divides P), the pool's consecutive groups
//    of t devices act as one device each for the dynamic program (a
//    single group: one stage, one replica), and every replica of its
//    partitions is a tensor-parallel group, its ops sharded as
//    ShardTensors chooses. kTensor takes only t >= 2; pipeline, data and
//    hybrid only t = 1 unless `tensor` is fixed. Wide candidates are not
//    tensor parallel.
//  - Uniform candidates (kTensor and kAuto; only where the cluster has
//    more identical devices than the pool, so they are all used): every
//    identical device, in cluster order, cut into tensor groups of t (a
//    power of two up to 8 and up to the devices of a host; kTensor from 2;
//    `tensor` when fixed), the groups into p stages of about equal work
//    (every p up to the chunks that divides the groups), each stage with
//    groups / p replicas (Megatron-LM's layout); ring and, when a stage's
//    replicas span hosts evenly, hierarchical allreduce; 1F1B. They are
//    simulated before the pool's candidates.
//  - Bound: a candidate whose lower bound on seconds per micro-batch (a
//    micro-batch's forward and backward node times on one device over the
//    devices the candidate uses) is no less than the best so far is not
//    simulated. Wide candidates (at most the pool's devices) are not
//    placed when that bound over the pool is no less than the best, or
//    when the parameters with their optimizer state over the pool's
//    devices are over every limit (hybrid: ResourceExhausted saying so).
//  - Memory savers, tried on a candidate over a device's limit only (they
//    add time or collectives; a candidate that fits is never tried with
//    them), until one fits: ZeRO-1 (where it fits, ZeRO-2 simulated too
//    and the faster kept), then ZeRO-2, then ZeRO-3
//    (StrategySearchOptions::zero unset; when a stage has replicas, and
//    for ZeRO-2 and -3 when every stage's replicas run as many
//    micro-batches; ZeRO-3 not inside wide stages), then the stages that
//    still have a device over its limit recomputing selectively, then
//    layer by layer (kLayers, where graph/repeated_layers.h finds layers;
//    neither inside wide stages), then wholly (recompute kAuto). A retry
//    is not simulated when the candidate's last simulated peaks, less all
//    that the saver could free at each over device's peak
//    (policies/memory_savers.h), are still over; nor are the others when
//    ZeRO-3 with recomputation could not fit (ZeRO-3 is simulated, as the
//    recomputation's base, whenever recomputation could). Candidates of
//    one shape that differ only in allreduce algorithm are alike in
//    memory: the later ones start from the savers the first fitted with,
//    and are not simulated when the first did not fit.
//    zero set: every candidate has that ZeRO stage (CheckStrategy refuses
//    it without replicas); recompute kFull, kSelective, kSelectiveOp,
//    kLayers: every stage of every candidate recomputes so; kNone: none
//    does. kAuto never tries kSelectiveOp (torchtitan's policy, for a
//    user to ask for).
//  - The answer is the simulated strategy with the least seconds per graph
//    batch whose every device peaks within MemoryLimits(options); ties:
//    the one found first. Deterministic: no randomness, and the candidates
//    are enumerated in a fixed order; the search stops early (with the best
//    so far) at the budget or when should_stop says so, read between
//    candidates and before each memory saver's retry of one.
//  - Fixed shape (`stages`, `replicas`): a candidate with another stage
//    count, or a stage with another replica count, is not simulated.
//  - Errors: InvalidArgument for parallelism kModel (that is the op
//    placement policies' job), kHybrid without inside_policy, or a cluster
//    without two identical devices (hybrid: four);
//    ResourceExhausted when no candidate fits, naming the smallest
//    overshoot; InvalidArgument when no candidate has the fixed shape
//    (naming it and the devices).
#ifndef PLACER_POLICIES_STRATEGY_SEARCH_H_
#define PLACER_POLICIES_STRATEGY_SEARCH_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "policies/policy.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"

namespace placer {

enum class Parallelism {
  kModel,     // op placement only (one micro-batch, no replicas)
  kPipeline,  // two or more stages, one replica each
  kData,      // one stage, every device a replica
  kHybrid,    // one stage: replicas of an op placement over devices
  kTensor,    // every replica a tensor-parallel group (any stages)
  kAuto,      // any of the above, and stages with replicas
};

// Which stages of a searched strategy recompute (Strategy's Recompute).
enum class StageRecompute {
  kAuto,       // those whose devices would be over their limits otherwise
  kNone,       // none
  kFull,       // every one, wholly
  kSelective,  // every one, selectively (Recompute::kSelective)
  kSelectiveOp,  // every one, op by op (Recompute::kSelectiveOp)
  kLayers,       // every one, layer by layer (Recompute::kLayers)
};

std::string ParallelismName(Parallelism parallelism);
// "auto", "model", "pipeline", "data", "hybrid", "tensor".
absl::StatusOr<Parallelism> ParseParallelism(const std::string& name);
// "auto", "none", "full", "selective", "selective-op", "layers".
absl::StatusOr<StageRecompute> ParseStageRecompute(const std::string& name);

// The op placements a search made inside wide replicas (per policy and
// width: the last one it tried), for a later search over the same input,
// options and cluster to take instead of placing again (`place
// --parallelism auto` searches hybrid, then auto).
class InsidePlacements {
 public:
  // nullptr when none was kept.
  const std::vector<int>* Find(const std::string& policy, int width) const;
  void Keep(const std::string& policy, int width, std::vector<int> placed);

 private:
  std::map<std::pair<std::string, int>, std::vector<int>> placed_;
};

struct StrategySearchOptions {
  Parallelism parallelism = Parallelism::kAuto;
  // Micro-batches per step: a step's global batch is micro_batches times
  // the graph's batch, the same for every strategy compared. 0: one per
  // device of the pool (plain data parallelism's global batch).
  int micro_batches = 0;
  // hybrid and auto: the op placement policy (a registered name,
  // NewPolicy) that places ops inside wide stages; empty: no wide
  // candidates (an error for hybrid).
  std::string inside_policy;
  // Not owned; when set, wide candidates take the placements kept there
  // (no retry) and keep the ones this search makes.
  InsidePlacements* inside_placements = nullptr;
  StageRecompute recompute = StageRecompute::kAuto;
  // ZeRO for every candidate; unset: as above.
  std::optional<ZeroStage> zero;
  // Devices per tensor-parallel group for every candidate (dividing the
  // pool); 0: as the parallelism says (contract).
  int tensor = 0;
  // Tensor-parallel candidates with sequence parallelism
  // (Strategy::sequence_parallel).
  bool sequence_parallel = false;
  // Candidates with ZeRO-1 or -2 gather their parameters in the next step's
  // forward passes (Strategy::overlap_parameter_gather); the others cannot.
  bool overlap_parameter_gather = false;
  // Pipeline stages of every candidate, and data-parallel replicas of each
  // of its stages; 0: any. With `tensor`, they fix a published layout
  // (Megatron-LM's tensor x pipeline x data sizes): only candidates of that
  // shape are simulated.
  int stages = 0;
  int replicas = 0;
};

struct StrategyChoice {
  Strategy strategy;
  StrategySimulation simulation;
  int evaluations = 0;  // strategies simulated
  // Candidates not simulated: their bound no better than the best so far
  // (contract's Bound).
  int bounded = 0;
};

absl::StatusOr<StrategyChoice> SearchStrategy(
    const PolicyInput& input, const PolicyOptions& options,
    const StrategySearchOptions& search);

// The devices SearchStrategy uses (see the contract).
std::vector<int> IdenticalDevicePool(const Cluster& cluster);
// The same set before it is cut to the pool's 32 devices.
std::vector<int> IdenticalDevices(const Cluster& cluster);

// The baseline every strategy is compared with: the whole model on
// `device`, one stage, one replica, `micro_batches` accumulated one after
// another (1F1B: one micro-batch in flight).
Strategy OneDeviceStrategy(const TrainingView& view, int device,
                           int micro_batches);

}  // namespace placer

#endif  // PLACER_POLICIES_STRATEGY_SEARCH_H_
