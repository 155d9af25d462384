// The strategy executor's worker state (runtime/strategy_executor.h): one
// class whose step is split over several files (docs/architecture.md names
// each); what its workers share is strategy_exchanges.h's. Internal.
#ifndef PLACER_RUNTIME_STRATEGY_EXECUTOR_IMPL_H_
#define PLACER_RUNTIME_STRATEGY_EXECUTOR_IMPL_H_

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "base/stopwatch.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "runtime/allocation_tracker.h"
#include "runtime/executor.h"
#include "runtime/gradient_rounds.h"
#include "runtime/initial_values.h"
#include "runtime/op_autograd.h"
#include "runtime/parameter_update.h"
#include "runtime/pass_memory.h"
#include "runtime/stage_partials.h"
#include "runtime/strategy_exchanges.h"
#include "runtime/strategy_executor.h"
#include "runtime/strategy_placement_memory.h"
#include "simulator/pass_table.h"
#include "simulator/selective_recompute.h"
#include "simulator/simulation_context.h"
#include "simulator/slot_copies.h"
#include "simulator/stage_crossings.h"
#include "simulator/strategy.h"

namespace placer {

class TorchStrategyExecutor : public StrategyExecutor {
 public:
  TorchStrategyExecutor(const TrainingView& view, const Cluster& cluster,
                        const Strategy& strategy,
                        const ExecutorOptions& options,
                        std::vector<torch::Device> devices);

  absl::Status Init();
  absl::StatusOr<StepReport> Step() override;
  absl::StatusOr<torch::Tensor> Resident(absl::string_view name) const override;
  absl::StatusOr<torch::Tensor> Parameter(absl::string_view name,
                                          int replica) const override;
  absl::StatusOr<torch::Tensor> ParameterShard(absl::string_view name,
                                               int replica) const override;
  absl::StatusOr<torch::Tensor> ParameterPart(absl::string_view name,
                                              int replica,
                                              int rank) const override;
  // The parameter `name` (value) of replica `replica` of its stage and the
  // device of this process holding it (with tensor parallelism, the group's
  // device of tensor rank `rank`); NotFound as Parameter's.
  struct LocalParameterAt {
    int value = -1;
    int device = -1;
  };
  absl::StatusOr<LocalParameterAt> LocalParameter(absl::string_view name,
                                                  int replica,
                                                  int rank = 0) const;

 private:
  // A replica exchange's key (SlotKey, ordinal; Replica exchanges, below).
  using ReplicaTicket = std::pair<size_t, int>;
  // What workers exchange (runtime/strategy_exchanges.h).
  using GroupExchange = StrategyGroupExchange;
  using ReplicaExchange = StrategyReplicaExchange;
  using SelectiveRerun = SelectiveRerunState;
  using TensorParallelSaved = StrategyTensorParallelSaved;

  int StageOfNode(int n) const {
    return strategy_.stage_of_op[view_.node(n).forward_op];
  }
  bool Distributed() const { return options_.ranks != nullptr; }
  int RankOf(int d) const {
    return Distributed() ? options_.rank_of_device[d] : 0;
  }
  bool Local(int d) const { return RankOf(d) == rank_; }
  // The device of stage s's tasks for micro-batch j (wide: the first).
  int DeviceOf(int s, int j) const {
    const PipelineStage& stage = strategy_.stages[s];
    return stage.device(j % stage.num_replicas(), 0);
  }
  int SlotOfNode(int n) const {
    return SlotOfOp(strategy_, view_.node(n).forward_op);
  }
  // The device holding parameter p (value) in replica k of its stage (with
  // tensor parallelism, the group's device of tensor rank r: its part).
  int ParameterDevice(int p, int k, int r = 0) const;
  // Micro-batch j's lane on device d: the index of its tables per
  // micro-batch (values_, partials_, saved_, seeds_): j, or per device of a
  // tensor-parallel group.
  int Lane(int j, int d) const {
    return T_ == 1 ? j : j * T_ + tensor_rank_of_device_[d];
  }
  // The devices of d's replica: its slots, or its tensor-parallel group.
  std::vector<int> ReplicaMembers(int d) const;
  // The devices whose gradients d's are allreduced with: its slot's (tensor
  // rank's) in every replica of its stage, in replica order; stage s's
  // lists of such devices, per slot (per tensor rank).
  std::vector<int> ReplicaDevices(int d) const;
  std::vector<std::vector<int>> ReplicaLists(int s) const;
  // With measure_allocations and enforce_memory: ResourceExhausted naming
  // d, node n and micro-batch j when what d's threads allocated in this
  // step (over what it held before) went past its memory_bytes; else OK.
  absl::Status CheckMemory(int n, int j, int d);
  // Device d's nodes of `nodes` (forward_[s] or backward_[s]): its slot's,
  // in a wide stage by node_priority_ and then node key, else in the
  // view's order; the first to take last.
  std::vector<int> SlotNodes(const std::vector<int>& nodes, int d) const;
  // The next node of `pending` (SlotNodes') that device d runs for
  // micro-batch j, taken out of it. In a wide stage: the first whose
  // nodes of the task it reads from (task_deps_, any slot of this rank;
  // what others make arrives by link) have run, waiting under the lock
  // (into waited_seconds_[d]); else the first. -1 when none is left, or
  // when the step failed meanwhile.
  int NextNode(std::vector<int>* pending, int j, int d)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Node n of micro-batch j has run (for those some node waits for); a
  // change that may make a wide replica's node ready (slots_given_).
  void MarkNodeDone(int n, int j) ABSL_LOCKS_EXCLUDED(mu_);
  void GiveToSlotsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After the task (s, j) has ended on every slot of d's replica (of this
  // rank): the parameters of d's slot whose gradients it completed, into
  // d's accumulators, other slots' buffers of them waited for by link
  // (d's worker).
  absl::Status Accumulate(int s, int j, int d);
  // Parameter p's gradient (or a slot's part) into device d's accumulator,
  // as AccumulateGrad does. Device d's worker only.
  void AddToAccumulator(int d, int p, torch::Tensor gradient);
  int Channel(int src, int dst) const { return 1 + src * D_ + dst; }
  int LinkChannel(int src, int dst) const {
    return Channel(src, dst) + D_ * D_;  // a replica split over ranks
  }
  // A copy on `device` when `tensor` was made on another device.
  torch::Tensor On(const torch::Tensor& tensor, int from, int device) const {
    if (from == device) return tensor;
    return tensor.to(devices_[device], /*non_blocking=*/false, /*copy=*/true);
  }
  // On(), made by device d's worker for its node: when `from` is another
  // device, timed (until d has it; on a GPU with time_gpu_nodes only) into
  // d's transfers_ (as value v) and copy_seconds_. Device d's worker only.
  torch::Tensor CopyIn(const torch::Tensor& tensor, int v, int from, int d);
  // Copies between a wide replica's slots (strategy_links.cc): the tables;
  // where item `item` (a value, or SumItem: slot `slot`'s buffer of sum
  // `sum`) of lane `lane` arrives on device d; a copy queued for link src
  // -> dst's worker; d's worker sending `copies` ((to, copy); emptied),
  // those between CPU devices made at once by it (CopiedBySender), timed
  // into d's transfers_; whether every item node n reads by link has
  // arrived; an arrived item (undefined once taken); a link's next copy
  // (false: the step failed); a link's worker (to or from another rank:
  // SendLink, ReceiveLink on LinkChannel); the slot the sink of backward
  // node n's partial of `sum` is on (a backward node's, or a parameter's
  // update's; or -1); whether stage s's `slot` makes partials of
  // parameter sum `sum` updated on another slot (sent by link).
  void InitLinks(const std::vector<std::vector<SlotCopy>>& crossing);
  int SumItem(int sum, int slot) const { return V_ + sum * W_ + slot; }
  int64_t LinkKey(int lane, int item, int d) const;
  void QueueCopy(int src, int dst, StrategySlotCopy copy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendToSlots(int d, std::vector<std::pair<int, StrategySlotCopy>>* out)
      ABSL_LOCKS_EXCLUDED(mu_);
  bool CopiedBySender(int src, int dst) const;
  bool ArrivedLocked(int n, int lane, int d) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  torch::Tensor TakeArrivedLocked(int lane, int item, int d)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NextQueued(int link, StrategySlotCopy* copy) ABSL_LOCKS_EXCLUDED(mu_);
  void LinkWorker(int link);
  void SendLink(int link);
  void ReceiveLink(int link);
  int LinkedSinkSlot(int n, int sum) const;
  bool MakesUpdatePartials(int s, int slot, int sum) const;
  // Node n has run on device d from `start`: its run into node_runs_[d],
  // without the copies and waits for other devices it made meanwhile
  // (copy_seconds_ and waited_seconds_ past `copies` and `waited`); on a
  // GPU once the device has finished it, with time_gpu_nodes only; none
  // with tensor parallelism (a device runs its part of the op). Device d's
  // worker only.
  void RecordRun(int n, int d, SteadyClock::time_point start, double copies,
                 double waited);
  // Before a step: the step's state, empty (failure_ OK, nothing done,
  // arrived or held), and the counts of this process's workers.
  void ResetStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether task (s, j) of the given direction has every input here.
  bool ReadyLocked(int s, int j, bool backward) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // options_.before_node (fault injection), its error naming the node.
  absl::Status BeforeNode(const TrainingNode& node);
  // A recomputing stage's forward runs without autograd and keeps, of
  // what it read, the values other stages made (kept_); its backward
  // first reruns the forward under autograd from those (Rerun).
  // Forward node n of micro-batch j on device d: its op's kernel on inputs
  // gathered here (weights, copied from the slot that holds them once per
  // `copied`; graph inputs; constants, copies when a `rerun`) and
  // by `activation` (values of the view made by forward ops; undefined:
  // missing), under autograd into saved_ when `autograd`. A rerun's
  // tensor-parallel collectives are keyed apart from the forward's.
  absl::StatusOr<std::vector<torch::Tensor>> ForwardNode(
      int n, int j, int d, bool autograd, bool rerun,
      std::map<int, torch::Tensor>* copied,
      const std::function<torch::Tensor(int value)>& activation);
  absl::Status RunForward(int s, int j, int d);
  // A stage recomputed whole: its forward rerun under autograd first.
  absl::Status Rerun(int s, int j, int d);
  // Recomputing in part (Recompute::kSelective, kLayers, kSelectiveOp):
  // the tables (selective_, reruns_); whether forward node n is rerun at its
  // stage's backward (every node of a stage recomputed whole); and a layer's
  // rerun nodes of stage s run again under autograd for micro-batch j on device
  // d, from what the forward kept (kept_, each let go after its last rerun
  // read).
  absl::Status InitRecompute();
  bool Reruns(int n) const;
  bool HasBackward(int n) const;  // forward node n's op has a backward node
  // Forward node n run again for micro-batch j on device d (under autograd
  // when it has a backward), errors naming it as recomputed.
  absl::StatusOr<std::vector<torch::Tensor>> RerunNode(
      int n, int j, int d, std::map<int, torch::Tensor>* copied,
      const std::function<torch::Tensor(int value)>& activation);
  absl::Status RerunLayer(int s, int layer, int j, int d);
  // Before backward node b of stage s (micro-batch j, device d): its
  // forward node when that is rerun, and the producers of what its op saved
  // that is parked, each after the rerun nodes whose values it reads (in
  // their order), as torch's selective checkpointing recomputes a saved
  // tensor when the backward unpacks it.
  absl::Status RerunFor(int b, int s, int j, int d, SelectiveRerun* state);
  absl::Status RerunOne(int n, int s, int j, int d, SelectiveRerun* state);
  // Recomputing in part: after a forward node of stage s ran for
  // micro-batch j on d, the values rerun nodes of s made that this pass
  // read (`read`), whose reads are all done: those a kept op's saved graph
  // alone holds get their storage freed (Parkable) and are parked; the
  // others are let go. Unpark: a rerun of node n made `results`; those
  // parked are filled from them.
  void ParkSaved(int s, int j, int d, std::map<int, torch::Tensor>* read);
  // What the forward kept of value v for stage s's rerun of micro-batch j
  // on d (kept_), let go after its last rerun read.
  torch::Tensor TakeKept(int s, int j, int d, int v) ABSL_LOCKS_EXCLUDED(mu_);
  void Unpark(int n, int s, int j, int d,
              const std::vector<torch::Tensor>& results);
  absl::Status RunBackward(int s, int j, int d);
  // Tensor parallelism (strategy_tensor.cc; every stage's groups of T_
  // devices): the tables (tensor_rank_of_device_, sharding_, the group's
  // devices as workers); Unimplemented naming what the executor does not
  // run split (a softmax over its split axis, a Split dealt over the
  // group, groups of different sizes).
  absl::Status InitTensorParallelism();
  // pieces_: per tensor dealt over its group (a Split over its split dim
  // reads it, or it makes, through ops that split it alike, what one
  // reads), the sizes of its pieces along the split dim; empty:
  // contiguous. Unimplemented where a dealt value would be read otherwise.
  absl::Status InitPieces();
  // Tensor t's layout as held on the group (a parameter's part, a value
  // between ops), and as its producer leaves it (graph outputs whole).
  TensorLayout HeldLayout(int t) const;
  TensorLayout FinalLayout(int t) const;
  // Tensor rank r's part of `whole` in `layout` (contiguous 1/T on the
  // split dim, or the r-th 1/T of each of tensor t's pieces; the whole
  // when not split).
  torch::Tensor PartOf(const torch::Tensor& whole, const TensorLayout& layout,
                       int r, int t = -1) const;
  // The group's collective at site `code` of node n for micro-batch j:
  // each device of d's group gives its tensor and gets every device's, in
  // tensor rank order, on d (Aborted when the step failed elsewhere). In
  // one process through memory; over ranks (one device each) c10d's
  // all-gather on the group's subgroup. Waiting adds to
  // waited_seconds_[d].
  absl::StatusOr<std::vector<torch::Tensor>> FromGroup(
      int j, int n, int code, int d, const torch::Tensor& mine);
  // The parts added in tensor rank order (the same bits on every device).
  torch::Tensor Sum(const std::vector<torch::Tensor>& parts) const;
  // The devices' parts of tensor t split on `dim`, joined whole (dealt
  // back where t is dealt).
  torch::Tensor Join(const std::vector<torch::Tensor>& parts, int dim,
                     int t) const;
  // Tensor t held in `from` as device d's op reads it in `to`: an
  // allreduce, reduce-scatter, all-gather, all-to-all or local slice.
  absl::StatusOr<torch::Tensor> ToLayout(const torch::Tensor& value,
                                         const TensorLayout& from,
                                         const TensorLayout& to, int t, int j,
                                         int n, int code, int d);
  // The gradient of tensor t read in `at` (with `partial`, each device's a
  // part of the sum) as t is held in `to`.
  absl::StatusOr<torch::Tensor> GradientToLayout(torch::Tensor gradient,
                                                 const TensorLayout& at,
                                                 bool partial,
                                                 const TensorLayout& to, int t,
                                                 int j, int n, int code, int d);
  // The sites (FromGroup's codes) of the collectives inside an op's part,
  // + 0, 1, 2 (a rerun's past kRerunSite).
  static constexpr int kInsideSite = 5000;
  static constexpr int kRerunSite = 1 << 20;
  // Forward node n on device d of a tensor-parallel group: its inputs
  // (as held) converted, its part run, its outputs converted to how they
  // are held.
  absl::StatusOr<std::vector<torch::Tensor>> TensorParallelForward(
      int n, int j, int d, std::vector<torch::Tensor> inputs, bool autograd,
      bool rerun);
  // A Softmax or LogSoftmax over the axis the group splits (fp32 inside),
  // and its gradient (the backward's allreduce of the row sums).
  // `pass` sets a rerun's collectives apart (as TensorParallelForward's).
  absl::StatusOr<std::vector<torch::Tensor>> SplitSoftmax(
      int n, int j, int d, const torch::Tensor& input, int pass,
      TensorParallelSaved* kept);
  absl::StatusOr<torch::Tensor> SplitSoftmaxGradient(
      int b, int j, int d, const torch::Tensor& output_gradient,
      const TensorParallelSaved& kept);
  absl::StatusOr<std::vector<torch::Tensor>> VocabularyParallelLoss(
      int n, int j, int d, const std::vector<torch::Tensor>& inputs, int pass,
      TensorParallelSaved* kept);
  // Backward node b's part on device d: gradients of `tensors` as held.
  absl::StatusOr<std::vector<torch::Tensor>> TensorParallelBackward(
      int b, int j, int d, std::vector<torch::Tensor> output_gradients,
      const std::vector<int>& tensors);
  // Parameter v of replica k whole (its group's parts joined).
  absl::StatusOr<torch::Tensor> WholeParameter(int v, int k) const;
  // ZeRO-2/3 (strategy_sharding.cc) on stage s: with more than one replica,
  // its gradients are reduce-scattered round by round (Deliver), and with
  // ZeRO-3 its parameters are held as shards only, gathered for each pass.
  bool ShardsGradientsOf(int s) const {
    return ShardsGradients(strategy_.zero) &&
           strategy_.stages[s].num_replicas() > 1;
  }
  bool ShardsParametersOf(int s) const {
    return strategy_.zero == ZeroStage::kParameters &&
           strategy_.stages[s].num_replicas() > 1;
  }
  // ZeRO-1/2/3 on stage s with more than one replica: each replica
  // updates its shard of every parameter (ShardRange), and holds the
  // optimizer state of that shard only.
  bool ShardsStateOf(int s) const {
    return strategy_.zero != ZeroStage::kNone &&
           strategy_.stages[s].num_replicas() > 1;
  }
  // ZeRO-3's gathers_, from each pass's PlanPassGathers.
  void InitSharding();
  // ZeRO-2/3: replica k's shard of parameter v: the k-th of its replicas'
  // equal runs of its elements, flattened (the last shorter; empty when
  // the parameter has fewer elements than replicas), as a view of
  // `whole` (v's shape).
  torch::Tensor Shard(const torch::Tensor& whole, int v, int k) const;
  // Its first element and length; with tensor parallelism of each
  // device's part (all one size): a tensor rank's replicas shard it.
  std::pair<int64_t, int64_t> ShardRange(int v, int k) const;
  std::vector<int64_t> PartShape(int v) const;
  // ZeRO-3: parameter v whole on device d from its replicas' shards (this
  // process's, and those of `others`; as FSDP's all-gather fills its
  // unsharded buffer); FillFromShards writes them into `whole` (v's shape;
  // its part), taking replica k's from `others` when it has k, the
  // others' from tensor rank r's devices.
  torch::Tensor Gather(int v, int d,
                       const std::map<int, torch::Tensor>& others = {}) const;
  void FillFromShards(const torch::Tensor& whole, int v,
                      const std::map<int, torch::Tensor>& others, int r) const;
  // ZeRO-3, one gather of `parameters` by device d: across ranks, the
  // replicas' shards of them all-gathered (ReplicaAllGather, one flat
  // bucket each); per parameter, the other ranks' replicas' shards by
  // replica.
  absl::StatusOr<std::vector<std::map<int, torch::Tensor>>> ExchangeShards(
      int d, const std::vector<int>& parameters);
  // Its halves (Start/FinishReplicaExchange's), and the gather of node n
  // (gathers[n]) in a pass: the one started for it at the pass's previous
  // gather, or one started now; before waiting for it, the pass's next
  // gather is started (gathers_.next; prefetched_[d] holds it), so that
  // its transfer runs while n computes (FSDP's prefetch).
  absl::StatusOr<ReplicaTicket> StartShards(int d,
                                            const std::vector<int>& parameters);
  absl::StatusOr<std::vector<std::map<int, torch::Tensor>>> FinishShards(
      int d, const ReplicaTicket& ticket, const std::vector<int>& parameters);
  absl::StatusOr<std::vector<std::map<int, torch::Tensor>>> GatherWithPrefetch(
      int n, int d, const std::vector<std::vector<int>>& gathers);
  // ZeRO-3, before forward node n runs on device d: the parameters of
  // gathers_.forward[n], gathered whole into `copied`.
  absl::Status GatherBefore(int n, int d, std::map<int, torch::Tensor>* copied);
  // ZeRO-3, after forward node n of micro-batch j ran (under autograd when
  // `autograd`; `outputs` its results): the gathered parameters (in
  // `copied`) whose last reader in this pass it was are let go. Those its
  // saved graph holds have their storage freed and are parked for the
  // backward (parked_), unless an output shares their storage (`pinned`
  // since a node of this pass made one: left to reference counting).
  void ReleaseAfterForward(int n, int j, int d, bool autograd,
                           const std::vector<torch::Tensor>& outputs,
                           std::map<int, torch::Tensor>* copied,
                           std::set<int>* pinned);
  // ZeRO-3, before backward node b of micro-batch j on device d: the
  // parameters of gathers_.backward[b] are gathered, and those parked get
  // their storage back, filled from the shards (the step's parameters do
  // not change before its updates). After it: those it was the last to
  // need are let go.
  absl::Status RestoreBefore(int b, int j, int d);
  void ReleaseAfterBackward(int b, int j, int d);
  // ZeRO-2/3: replica `from`'s gradient of parameter p's shard `to` (of
  // tensor rank r's part), from micro-batch j, into gradient_rounds_ and
  // so into the shard's accumulator on its device.
  void Deliver(int s, int p, int j, int from, int to, int r, torch::Tensor g);
  // ZeRO-2/3: device d's gradient of parameter p from micro-batch j, cut
  // into each shard's part, a copy of its own (the send buffer), delivered
  // to those of its slot's replicas that are in this process.
  void DeliverShards(int s, int p, int j, int d, const torch::Tensor& g);
  // ZeRO-2/3, after stage s's backward of micro-batch j on device d: the
  // gradients it completed and has not delivered during the backward
  // (`completed`, parameter and part, taken) cut
  // into the shards' parts, delivered here or, for the replicas on other
  // ranks, exchanged by ReplicaAllToAll (which brings theirs for d's
  // shard); returns once the round's reduce-scatter has every replica's
  // parts (a wait, added to waited_seconds_[d]).
  absl::Status ReduceScatter(
      int s, int j, int d,
      std::vector<std::pair<int, torch::Tensor>>* completed);
  // Replica exchanges (strategy_replicas.cc): c10d's collectives on the
  // subgroup of the ranks of d's slot's replicas (its stage, slot and
  // tensor rank; replica_subgroup_, InitReplicaSubgroups), called by every
  // replica in the same order in a step; with every replica here they
  // return nothing at once (each reads the others' in memory). This
  // process's replicas leave their parts and the last to arrive runs the
  // collective for all (one call per rank). Returns, by replica, what each
  // one on another rank sent d's (undefined for this process's; 1-D on
  // the CPU, of the parts' dtype); waits add to waited_seconds_[d]; a
  // failure sets the step's.
  //  ReplicaAllGather: `mine` (1-D) from each; elements(k): replica k's.
  //  ReplicaAllToAll: to[q], d's part for replica q (others' ignored);
  //    elements(k, q): of replica k's for q.
  bool HasRemoteReplicas(int d) const {
    return replica_subgroup_[SlotKey(stage_of_device_[d], slot_of_device_[d],
                                     tensor_rank_of_device_[d])] >= 0;
  }
  // What an exchange got (`got`, by replica) as, per replica k on another
  // rank, its parameters_of(k) (the bucket's order): whole, or with
  // shard_of(k) >= 0 that replica's shard of each (flat), on device d.
  // DataLoss naming the rank and `what` when a bucket is not their size.
  absl::Status UnpackRemote(
      const std::vector<torch::Tensor>& got, int d, absl::string_view what,
      const std::function<std::vector<int>(int)>& parameters_of,
      const std::function<int(int)>& shard_of,
      std::vector<std::map<int, torch::Tensor>>* out) const;
  absl::Status InitReplicaSubgroups();
  // `parameters` (of a slot) in runs of at most exchange_chunk_bytes of the
  // view's bytes (a larger parameter alone), in order, the same on every
  // replica: what one exchange across ranks carries at a time.
  std::vector<std::vector<int>> ExchangeChunks(
      const std::vector<int>& parameters) const;
  absl::StatusOr<std::vector<torch::Tensor>> ReplicaAllGather(
      int d, const torch::Tensor& mine,
      const std::function<int64_t(int)>& elements);
  absl::StatusOr<std::vector<torch::Tensor>> ReplicaAllToAll(
      int d, std::vector<torch::Tensor> to,
      const std::function<int64_t(int, int)>& elements);
  // The two halves of both: StartReplicaExchange leaves d's parts and, for
  // the last of this process's replicas to arrive, issues the collective
  // (IssueReplicaExchange; nothing without replicas on other ranks);
  // FinishReplicaExchange waits for it (the first replica here to come
  // reads it for all) and returns what ReplicaAllGather/AllToAll would.
  // Between the two a worker computes while the transfer runs (ZeRO-3's
  // prefetch), every replica of the slot in the same order. A ticket
  // (ReplicaTicket): the exchange's key (SlotKey, ordinal; -1: none).
  absl::StatusOr<ReplicaTicket> StartReplicaExchange(
      int d, std::vector<torch::Tensor> to,
      const std::function<int64_t(int, int)>& elements, bool gather);
  absl::StatusOr<std::vector<torch::Tensor>> FinishReplicaExchange(
      int d, const ReplicaTicket& ticket);
  absl::Status IssueReplicaExchange(
      const ReplicaTicket& ticket, int d, torch::ScalarType dtype,
      const std::function<int64_t(int, int)>& elements, bool gather);
  size_t SlotKey(int s, int slot, int r) const {
    return (static_cast<size_t>(s) * W_ + slot) * T_ + r;
  }
  // After a task on local device d: what other ranks need from it.
  absl::Status SendAfter(int s, int j, int d, bool backward);
  // In one process, as stage s's backward of micro-batch j starts on
  // device d: the partials later stages on other devices made of its sums,
  // copied to d (d's memory from then; the maker's let go), as a
  // framework's pipeline receives them before the backward that reads
  // them. One slot and no tensor-parallel group only (others are read
  // where they were made). Called by d's worker.
  void ReceiveLocalSums(int s, int j, int d);
  void Worker(int d, double* busy);
  // After device d's last task: the allreduce of stage s's gradients and,
  // once every local task of the step has succeeded, d's update.
  void ReduceAndUpdate(int s, int d, double* busy);
  void Receiver(int src, int dst, int expected);
  void Fail(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void FailLocked(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With measure_allocations: reports this thread's allocations as device
  // d's (-1: frees only) until the guard goes.
  std::unique_ptr<c10::DebugInfoGuard> ReportAllocations(int d);

  const TrainingView& view_;
  const Graph& graph_;
  const Cluster cluster_;  // a copy: small, and callers pass temporaries
  // Per device, its worker's cores (pin_cpu_devices); empty: unpinned.
  std::vector<std::vector<int>> cores_;
  const Strategy strategy_;
  const ExecutorOptions options_;
  const std::vector<torch::Device> devices_;
  const int S_, M_, D_, V_;
  int W_ = 1;  // the widest stage's devices per replica
  int T_ = 1;  // devices per tensor-parallel group (every stage's)
  std::vector<int> tensor_rank_of_device_;
  TensorSharding sharding_;
  std::vector<std::vector<int64_t>> pieces_;  // per tensor (InitPieces)
  // Ops run split with other attributes than the graph's (a depthwise
  // convolution's groups), by op.
  std::map<int, Op> local_ops_;
  // [stage][replica]: the group's subgroup of ranks (RankGroup::AddSubgroup)
  // when its devices are one per rank; -1 when they are all in this
  // process (or none is).
  std::vector<std::vector<int>> tensor_subgroup_;
  int rank_ = 0;
  int step_ = 0;

  std::vector<std::vector<int>> forward_, backward_, update_;  // per stage
  std::vector<int> stage_of_device_, replica_of_device_, slot_of_device_;
  std::vector<int> group_of_parameter_;  // per value
  // Per node of a wide stage: the nodes of its task it reads from, on any
  // slot (values made, partial gradients summed, control edges).
  std::vector<std::vector<int>> task_deps_;
  std::vector<char> waited_on_;  // per node: in some node's task_deps_
  // Per node: the order a wide stage's slot takes its ready nodes in
  // (ExecutorOptions::priorities; without them the view's order), ties by
  // node key (NodeKeyRanks, as the simulator's ready queues break them).
  std::vector<double> node_priority_;
  std::vector<int> node_key_rank_;
  std::vector<int> value_of_tensor_;
  // [s][v]: how many times stage s's forward nodes read value v (an op
  // reading a tensor twice counts twice).
  std::vector<std::vector<int>> forward_reads_;
  // What the stages send each other per micro-batch.
  StageCrossings crossings_;
  // Distributed: messages per step on each (src, dst) channel into here.
  std::map<std::pair<int, int>, int> expected_;
  std::vector<std::vector<bool>> needs_gradient_;  // per op
  StepPrecision precision_;          // the view's, as ForwardOp casts
  std::vector<torch::Tensor> host_;  // constants, per value
  std::vector<HostValues> batches_;  // per micro-batch
  // [device][micro-batch][tensor]: loss targets on the devices that run
  // the micro-batch.
  std::vector<std::vector<std::vector<torch::Tensor>>> targets_;
  // Per device, per value: parameters, momentum, gradient accumulators
  // (for another rank's replica: its accumulators as received).
  std::vector<std::vector<torch::Tensor>> params_, accum_;
  std::vector<std::vector<std::unique_ptr<ParameterUpdate>>> updates_;

  // The step's state. What workers share is ABSL_GUARDED_BY(mu_) (clang
  // checks it: scripts/thread_safety.sh). Left unannotated, by design, is
  // what one worker alone touches during a step: an entry per device
  // (waited_seconds_, node_runs_, transfers_, copy_seconds_, prefetched_,
  // handoffs_), per lane and op (saved_, tensor_saved_, seeds_) or per
  // pass (parked_, parked_reruns_), each read and written by the worker
  // that runs it; Step() sets them before the workers start and clears
  // them after they are joined.
  absl::Mutex mu_;
  absl::CondVar cv_;
  // Waits for nodes of other slots within a wide replica's task and copies.
  absl::CondVar slots_cv_;
  StrategyLinkTables link_tables_;  // InitLinks'
  // A replica split over ranks (Init); forward_reads_ by a wide slot.
  bool split_replicas_ = false;
  std::vector<std::vector<std::vector<int>>> slot_reads_;
  std::vector<std::vector<MeasuredTransfer>> link_transfers_;  // per link
  StrategySlotLinks links_ ABSL_GUARDED_BY(mu_);
  absl::CondVar link_cv_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  // Per pass: this process's devices of its replica done with it, and
  // whether that is all of them (the pass has run here).
  PassTable<int> slots_done_ ABSL_GUARDED_BY(mu_);
  PassTable<char> done_ ABSL_GUARDED_BY(mu_);
  std::vector<char> node_done_ ABSL_GUARDED_BY(mu_);  // [j * nodes + n]
  std::vector<double> waited_seconds_;  // per device, in its current task
  // [device], then [D_ + link]: hand-offs (StepReport's), each from the
  // last give (below; a link's last queued copy) to the start on it.
  std::vector<std::vector<double>> handoffs_;
  SteadyClock::time_point slots_given_ ABSL_GUARDED_BY(mu_);  // wide
  SteadyClock::time_point tasks_given_ ABSL_GUARDED_BY(mu_);  // done, sent
  // Per device: its node runs and the copies it made in the step, and the
  // seconds of those copies so far.
  std::vector<std::vector<NodeRun>> node_runs_;
  std::vector<std::vector<MeasuredTransfer>> transfers_;
  std::vector<double> copy_seconds_;
  // [from stage], per pass of another stage: the items (values forward,
  // partial gradients backward) arrived from another rank.
  std::vector<PassTable<int>> arrived_ ABSL_GUARDED_BY(mu_);
  // [lane][value]; [lane * values + v] for the other two.
  std::vector<std::vector<torch::Tensor>> values_ ABSL_GUARDED_BY(mu_);
  std::vector<int> value_device_ ABSL_GUARDED_BY(mu_);
  std::vector<int> reads_left_ ABSL_GUARDED_BY(mu_);
  // Per lane: each stage's partial gradients of each sum, per slot, added
  // up.
  std::vector<StagePartials> partials_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<SavedOp>> saved_;                     // [lane][op]
  std::vector<std::vector<TensorParallelSaved>> tensor_saved_;  // [lane][op]
  // The tensor-parallel groups' collectives in flight, by (micro-batch,
  // node, site) (under mu_; group_cv_ wakes their waiters).
  std::map<std::tuple<int, int, int>, GroupExchange> group_exchanges_
      ABSL_GUARDED_BY(mu_);
  // The replica exchanges in flight, by ticket (under mu_; group_cv_
  // wakes their waiters).
  std::map<std::pair<size_t, int>, ReplicaExchange> replica_exchanges_
      ABSL_GUARDED_BY(mu_);
  std::vector<int> replica_exchanges_made_;  // per device, this step
  std::vector<int> replica_subgroup_;        // [SlotKey]; -1: none
  absl::CondVar group_cv_;
  // [KeptIndex(s, j, d)]: a recomputing stage's inputs made by other
  // stages, by value, from its forward until its backward reruns it (per
  // device of a tensor-parallel group).
  size_t KeptIndex(int s, int j, int d) const {
    return (static_cast<size_t>(s) * M_ + j) * T_ + tensor_rank_of_device_[d];
  }
  std::vector<std::map<int, torch::Tensor>> kept_ ABSL_GUARDED_BY(mu_);
  // Recomputing in part: [KeptIndex], per kept value, the rerun reads
  // still to come.
  std::vector<std::map<int, int>> kept_reads_ ABSL_GUARDED_BY(mu_);
  // Recomputing in part: [KeptIndex], per value a rerun node made, the
  // tensor a kept op saved, its storage freed from the forward pass's last
  // read of it until a rerun makes it again (ParkSaved, Unpark; what the
  // simulator counts rebuilt, not held). Only the worker of the index
  // touches an entry.
  std::vector<std::map<int, torch::Tensor>> parked_reruns_;
  SelectiveRecompute selective_;
  StrategyRerunTables reruns_;  // InitRecompute's
  // ZeRO-1/2: the replicas of a slot here that have updated their shards
  // ([(s * W + slot) * T + tensor rank]); each copies the others' shards
  // once they all have.
  std::vector<int> updated_ ABSL_GUARDED_BY(mu_);
  StrategyGatherTables gathers_;  // ZeRO-3's (InitSharding)
  // Per device, the gather started ahead (node, ticket; -1: none).
  std::vector<std::pair<int, ReplicaTicket>> prefetched_;
  // ZeRO-3: [j][v], a gathered parameter whose storage was freed after
  // micro-batch j's forward (or rerun) pass, its saved graph still holding
  // it; only the worker of j's replica of v's stage touches an entry.
  std::vector<std::vector<torch::Tensor>> parked_;
  // ZeRO-2/3: per parameter (value) and shard (replica * T_ + tensor
  // rank), the rounds delivered; the accumulators of sharded stages are
  // touched through it only.
  GradientRounds gradient_rounds_;
  // ZeRO-2/3: [RoundKey(s, slot, n, r)], the deliveries of round n's parts
  // to this process's replicas of stage s's slot (tensor rank r's), per
  // (sender, receiver) pair: each replica here delivers to all of them,
  // and each counts the other ranks' replicas' parts the all-to-all
  // brought it (under mu_); the round's reduce-scatter is done here when
  // every replica of the slot has delivered to every local one.
  std::vector<int> rounds_delivered_ ABSL_GUARDED_BY(mu_);
  size_t RoundKey(int s, int slot, int round, int r) const {
    return ((static_cast<size_t>(s) * W_ + slot) * T_ + r) * M_ + round;
  }
  // The devices of ReplicaDevices(d) in this process.
  int LocalReplicas(int d) const;
  // The parameters of stage s's slot in its update order (the order a
  // bucket between ranks carries them).
  std::vector<int> SlotParameters(int s, int slot) const;
  // A flat bucket from src (another rank) as one tensor per parameter of
  // `parameters` (with `shard` >= 0: that replica's shard of each, flat),
  // on dst; DataLoss naming the rank, the stage and `what` when its size
  // is not theirs.
  absl::StatusOr<std::vector<std::pair<int, torch::Tensor>>> Unpack(
      torch::Tensor bucket, const std::vector<int>& parameters, int src,
      int dst, absl::string_view what, int shard = -1) const;
  // [lane][tensor]: a graph output's loss gradient, set by the forward of
  // the op that makes it and taken by that op's backward: one worker's.
  std::vector<std::vector<torch::Tensor>> seeds_;
  std::vector<double> loss_ ABSL_GUARDED_BY(mu_);  // [j]
  // Per device: past its last task.
  std::vector<char> tasks_done_ ABSL_GUARDED_BY(mu_);
  int workers_finished_ ABSL_GUARDED_BY(mu_) = 0;
  int workers_ ABSL_GUARDED_BY(mu_) = 0;
  // Per device: what it holds before a step (parameters, optimizer state,
  // and on CPU devices the step's inputs and constants its stage reads,
  // which it reads in place); the base of allocated_peak_bytes.
  std::vector<int64_t> resident_bytes_;
  AllocationTracker allocations_;
  // An op placement's memory (PlacesOps); null for other strategies.
  std::unique_ptr<StrategyPlacementMemory> memory_ ABSL_PT_GUARDED_BY(mu_);
  // Any other strategy's memory, pass by pass; null for an op placement's.
  std::unique_ptr<StrategyPassMemory> pass_memory_ ABSL_PT_GUARDED_BY(mu_);
  // Per pass: this process's devices of its replica that have started it;
  // and when the step started.
  PassTable<int> slots_started_ ABSL_GUARDED_BY(mu_);
  SteadyClock::time_point step_started_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placer

#endif  // PLACER_RUNTIME_STRATEGY_EXECUTOR_IMPL_H_
