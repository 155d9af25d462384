// Over 600 lines, one idea: the strategy executor's step — its workers'
// tasks and, when the devices are ranks of a distributed run, the
// messages that stand in for the shared memory between them (the same
// slots filled by a receiver instead of a local worker).
#include "runtime/strategy_executor.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/host_setup.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "profiles/signature.h"
#include "runtime/cpu_cores.h"
#include "runtime/initial_values.h"
#include "runtime/op_autograd.h"
#include "runtime/rank_group.h"
#include "runtime/step_exchange.h"
#include "runtime/torch_devices.h"

namespace placer {
namespace {

using Clock = SteadyClock;

// What a message between ranks carries: its id's low bits say the kind.
// A stage's values (or partial gradients) for another stage's device on
// another rank go packed, one index message and one data message per
// stage pair and micro-batch (GNMT-2's 2-stage pipeline as two processes:
// 0.131 s a step with a message per value, 0.112 s packed); a replica's
// accumulators as one flat bucket.
enum MessageKind { kPacked = 0, kAccumulator = 1 };
constexpr int kKinds = 2;
// Index words: count, from stage, to stage, micro-batch, backward; then
// per item: its value (or sum), dtype, rank (-1: undefined), 8 dims.
constexpr int kIndexHead = 5;
constexpr int kMaxPackedDims = 8;
constexpr int kItemWords = 3 + kMaxPackedDims;

class TorchStrategyExecutor : public StrategyExecutor {
 public:
  TorchStrategyExecutor(const TrainingView& view, const Cluster& cluster,
                        const Strategy& strategy,
                        const ExecutorOptions& options,
                        std::vector<torch::Device> devices)
      : view_(view),
        graph_(view.forward()),
        cluster_(cluster),
        strategy_(strategy),
        options_(options),
        devices_(std::move(devices)),
        S_(static_cast<int>(strategy.stages.size())),
        M_(strategy.micro_batches),
        D_(cluster.num_devices()),
        V_(static_cast<int>(view.values().size())) {}

  absl::Status Init();
  absl::StatusOr<StrategyStepReport> Step() override;
  absl::StatusOr<torch::Tensor> Parameter(absl::string_view name,
                                          int replica) const override;

 private:
  int StageOfNode(int n) const {
    return strategy_.stage_of_op[view_.node(n).forward_op];
  }
  bool Distributed() const { return options_.ranks != nullptr; }
  int RankOf(int d) const {
    return Distributed() ? options_.rank_of_device[d] : 0;
  }
  bool Local(int d) const { return RankOf(d) == rank_; }
  // The device that runs stage s's tasks for micro-batch j (a wide
  // stage's: the replica's first).
  int DeviceOf(int s, int j) const {
    const PipelineStage& stage = strategy_.stages[s];
    return stage.device(j % stage.num_replicas(), 0);
  }
  int SlotOfNode(int n) const {
    return SlotOfOp(strategy_, view_.node(n).forward_op);
  }
  // partials_[j][PartialIndex(sum, s, slot)]: the partial gradients of a
  // sum that stage s's nodes on `slot` made, added up.
  size_t PartialIndex(int sum, int s, int slot) const {
    return (static_cast<size_t>(sum) * S_ + s) * W_ + slot;
  }
  // The device holding parameter p (value) in replica k of its stage.
  int ParameterDevice(int p, int k) const {
    const int g = group_of_parameter_[p];
    return strategy_.stages[strategy_.stage_of_op[g]].device(
        k, SlotOfOp(strategy_, g));
  }
  // Waits (under the lock) until the nodes of micro-batch j that node n
  // reads from other slots of its task have run; false on a failure.
  // Adds the wait to waited_seconds_[d].
  bool WaitForOtherSlots(int n, int j, int d);
  void MarkNodeDone(int n, int j);
  // After the task (s, j) has ended on every slot of device d's replica:
  // the parameters of d's slot whose gradients it completed, into d's
  // accumulators (only d's worker touches them during the tasks).
  absl::Status Accumulate(int s, int j, int d);
  int Channel(int src, int dst) const { return 1 + src * D_ + dst; }
  // Arrivals from another rank: stage `from`'s messages for stage `to` and
  // micro-batch j (values forward, partial gradients backward).
  int ArrivalKey(int from, int to, int j, bool backward) const {
    return ((from * S_ + to) * M_ + j) * 2 + (backward ? 1 : 0);
  }
  // A copy on `device` when `tensor` was made on another device.
  torch::Tensor On(const torch::Tensor& tensor, int from, int device) const {
    if (from == device) return tensor;
    return tensor.to(devices_[device], /*non_blocking=*/false, /*copy=*/true);
  }
  // Whether task (s, j) of the given direction has every input here.
  bool ReadyLocked(int s, int j, bool backward) const;
  // options_.before_node (tests' fault injection), its error naming the
  // node.
  absl::Status BeforeNode(const TrainingNode& node);
  absl::Status RunForward(int s, int j, int d);
  absl::Status RunBackward(int s, int j, int d);
  // After a task on local device d: what other ranks need from it.
  absl::Status SendAfter(int s, int j, int d, bool backward);
  void Worker(int d, double* busy);
  // After device d's last task: the allreduce of stage s's gradients and,
  // once every local task of the step has succeeded, d's update.
  void ReduceAndUpdate(int s, int d, double* busy);
  void Receiver(int src, int dst, int expected);
  void Fail(const absl::Status& status);

  const TrainingView& view_;
  const Graph& graph_;
  const Cluster& cluster_;
  // Per device, the cores its worker runs on (pin_cpu_devices); empty:
  // unpinned.
  std::vector<std::vector<int>> cores_;
  const Strategy strategy_;
  const ExecutorOptions options_;
  const std::vector<torch::Device> devices_;
  const int S_, M_, D_, V_;
  int W_ = 1;  // the widest stage's devices per replica
  int rank_ = 0;
  int step_ = 0;

  std::vector<std::vector<int>> forward_, backward_, update_;  // per stage
  std::vector<std::vector<int>> forward_sources_, gradient_sources_;
  std::vector<int> stage_of_device_, replica_of_device_, slot_of_device_;
  std::vector<int> group_of_parameter_;  // per value
  // Per node of a wide stage: the nodes of its task on other slots it
  // reads from (values made, partial gradients summed).
  std::vector<std::vector<int>> waits_for_;
  std::vector<char> waited_on_;  // per node: in some node's waits_for_
  std::vector<int> value_of_tensor_;
  // [s][v]: how many times stage s's forward nodes read value v (an op
  // reading a tensor twice counts twice).
  std::vector<std::vector<int>> forward_reads_;
  // [a * S + b]: values stage a makes that stage b's forward reads;
  // gradient sums stage a makes partials of for a sink in stage b.
  std::vector<std::vector<int>> cross_values_, cross_sums_;
  // Distributed: messages per step on each (src, dst) channel into this
  // rank.
  std::map<std::pair<int, int>, int> expected_;
  std::vector<std::vector<bool>> needs_gradient_;  // per op
  StepPrecision precision_;  // the view's, as ForwardOp casts
  std::vector<torch::Tensor> host_;                // constants, per value
  std::vector<HostValues> batches_;                // per micro-batch
  // [device][micro-batch][tensor]: loss targets on the devices that run
  // the micro-batch.
  std::vector<std::vector<std::vector<torch::Tensor>>> targets_;
  // Per device, per value: parameters, momentum, gradient accumulators
  // (for another rank's replica: its accumulators as received).
  std::vector<std::vector<torch::Tensor>> params_, accum_;
  std::vector<std::vector<std::unique_ptr<ParameterUpdate>>> updates_;

  // The step's state.
  std::mutex mu_;
  std::condition_variable cv_;
  // Waits for nodes of other slots within a wide replica's task.
  std::condition_variable slots_cv_;
  absl::Status failure_;
  std::vector<char> forward_done_, backward_done_;  // [s * M + j], local
  // Wide stages: [(s * M + j) * 2 + backward]: slots done with the task.
  std::vector<int> slots_done_;
  std::vector<char> node_done_;         // [j * nodes + n]
  std::vector<double> waited_seconds_;  // per device, in its current task
  std::vector<int> arrived_;                        // [ArrivalKey]
  std::vector<std::vector<torch::Tensor>> values_;  // [j][value]
  std::vector<int> value_device_;                   // [j * values + v]
  std::vector<int> reads_left_;                     // [j * values + v]
  // [j][sum * S + s]: stage s's partial gradients of a sum, added up.
  std::vector<std::vector<torch::Tensor>> partials_;
  std::vector<std::vector<SavedOp>> saved_;        // [j][op]
  std::vector<std::vector<torch::Tensor>> seeds_;  // [j][tensor]
  std::vector<double> loss_;                       // [j]
  std::vector<char> tasks_done_;   // per device: past its last task
  std::vector<int> accum_arrived_;  // per device of another rank
  int workers_finished_ = 0, workers_ = 0;
};

absl::Status TorchStrategyExecutor::Init() {
  if (Distributed()) rank_ = options_.ranks->rank();
  forward_.assign(S_, {});
  backward_.assign(S_, {});
  update_.assign(S_, {});
  for (int n : view_.topological_order()) {
    switch (view_.node(n).kind) {
      case NodeKind::kForward: forward_[StageOfNode(n)].push_back(n); break;
      case NodeKind::kBackward: backward_[StageOfNode(n)].push_back(n); break;
      case NodeKind::kUpdate: update_[StageOfNode(n)].push_back(n); break;
    }
  }
  value_of_tensor_.assign(graph_.tensors().size(), -1);
  for (int v = 0; v < V_; ++v) {
    const TrainingValue& value = view_.value(v);
    if (value.kind != ValueKind::kGradient && value.tensor >= 0) {
      value_of_tensor_[value.tensor] = v;
    }
  }
  // Reads, and the values and gradient buffers crossing stages.
  forward_reads_.assign(S_, std::vector<int>(V_, 0));
  std::vector<std::set<int>> crossing(static_cast<size_t>(S_) * S_);
  for (int s = 0; s < S_; ++s) {
    for (int n : forward_[s]) {
      const Op& op = graph_.op(view_.node(n).forward_op);
      if (AllOutputsFolded(graph_, op)) continue;
      for (int t : op.inputs) {
        const int v = t >= 0 ? value_of_tensor_[t] : -1;
        if (v < 0) continue;
        ++forward_reads_[s][v];
        const TrainingValue& value = view_.value(v);
        if (value.kind == ValueKind::kActivation && value.producer >= 0 &&
            StageOfNode(value.producer) != s) {
          crossing[StageOfNode(value.producer) * S_ + s].insert(v);
        }
      }
    }
  }
  std::vector<std::set<int>> crossing_sums(static_cast<size_t>(S_) * S_);
  const int sums = static_cast<int>(view_.gradient_sums().size());
  for (int sm = 0; sm < sums; ++sm) {
    const GradientSum& sum = view_.gradient_sums()[sm];
    const int to = StageOfNode(sum.sink);
    for (int p : sum.partials) {
      const int from = StageOfNode(view_.value(p).producer);
      if (from != to) crossing_sums[from * S_ + to].insert(sm);
    }
  }
  cross_values_.assign(static_cast<size_t>(S_) * S_, {});
  cross_sums_.assign(static_cast<size_t>(S_) * S_, {});
  forward_sources_.assign(S_, {});
  gradient_sources_.assign(S_, {});
  for (int a = 0; a < S_; ++a) {
    for (int b = 0; b < S_; ++b) {
      cross_values_[a * S_ + b].assign(crossing[a * S_ + b].begin(),
                                       crossing[a * S_ + b].end());
      cross_sums_[a * S_ + b].assign(crossing_sums[a * S_ + b].begin(),
                                     crossing_sums[a * S_ + b].end());
      if (!cross_values_[a * S_ + b].empty()) forward_sources_[b].push_back(a);
      if (!cross_sums_[a * S_ + b].empty()) gradient_sources_[b].push_back(a);
    }
  }
  stage_of_device_.assign(D_, -1);
  replica_of_device_.assign(D_, -1);
  slot_of_device_.assign(D_, -1);
  for (int s = 0; s < S_; ++s) {
    const PipelineStage& stage = strategy_.stages[s];
    W_ = std::max(W_, stage.width());
    for (int k = 0; k < stage.num_replicas(); ++k) {
      for (int slot = 0; slot < stage.width(); ++slot) {
        const int d = stage.device(k, slot);
        stage_of_device_[d] = s;
        replica_of_device_[d] = k;
        slot_of_device_[d] = slot;
      }
    }
  }
  group_of_parameter_.assign(V_, -1);
  for (int g = 0; g < view_.num_groups(); ++g) {
    for (int p : view_.group_parameters(g)) group_of_parameter_[p] = g;
  }
  // Within a wide stage's task: what each node waits for on other slots.
  waits_for_.assign(view_.nodes().size(), {});
  for (int n = 0; n < static_cast<int>(view_.nodes().size()); ++n) {
    const TrainingNode& node = view_.node(n);
    if ((strategy_.stages[StageOfNode(n)]).width() == 1) continue;
    std::set<int> from;
    if (node.kind == NodeKind::kForward) {
      for (int v : node.inputs) {
        const int producer = view_.value(v).producer;
        if (producer >= 0 && view_.node(producer).kind == NodeKind::kForward &&
            StageOfNode(producer) == StageOfNode(n) &&
            SlotOfNode(producer) != SlotOfNode(n)) {
          from.insert(producer);
        }
      }
    } else if (node.kind == NodeKind::kBackward) {
      for (int sm : view_.sums_read_by(n)) {
        for (int p : view_.gradient_sums()[sm].partials) {
          const int producer = view_.value(p).producer;
          if (StageOfNode(producer) == StageOfNode(n) &&
              SlotOfNode(producer) != SlotOfNode(n)) {
            from.insert(producer);
          }
        }
      }
    }
    waits_for_[n].assign(from.begin(), from.end());
  }
  waited_on_.assign(view_.nodes().size(), 0);
  for (const std::vector<int>& from : waits_for_) {
    for (int p : from) waited_on_[p] = 1;
  }
  // Across ranks, a wide replica runs in one process (its slots share
  // values and partials through memory); its first device sends what its
  // tasks make for other ranks, and its slots' allreduce may cross ranks.
  if (Distributed()) {
    for (int s = 0; s < S_; ++s) {
      const PipelineStage& stage = strategy_.stages[s];
      if (stage.width() == 1) continue;
      for (int k = 0; k < stage.num_replicas(); ++k) {
        const int first = stage.device(k, 0);
        for (int slot = 1; slot < stage.width(); ++slot) {
          const int d = stage.device(k, slot);
          if (RankOf(d) != RankOf(first)) {
            return absl::UnimplementedError(absl::StrCat(
                "stage ", s, "'s replica ", k, " spans ranks ", RankOf(first),
                " and ", RankOf(d), " (", cluster_.device(first).name, ", ",
                cluster_.device(d).name,
                "): a replica whose ops are placed over several devices "
                "runs in one rank"));
          }
        }
      }
    }
  }
  // Messages into this rank per step and channel.
  if (Distributed()) {
    auto expect = [&](int src, int dst, int count) {
      if (count > 0 && !Local(src) && Local(dst)) expected_[{src, dst}] += count;
    };
    for (int j = 0; j < M_; ++j) {
      for (int a = 0; a < S_; ++a) {
        for (int b = 0; b < S_; ++b) {
          // Packed: an index and a data message per direction.
          expect(DeviceOf(a, j), DeviceOf(b, j),
                 cross_values_[a * S_ + b].empty() ? 0 : 2);
          expect(DeviceOf(a, j), DeviceOf(b, j),
                 cross_sums_[a * S_ + b].empty() ? 0 : 2);
        }
      }
    }
    // Accumulators: every replica's device of a slot with parameters to
    // the first replica's device of that slot on each other rank.
    for (int s = 0; s < S_; ++s) {
      const PipelineStage& stage = strategy_.stages[s];
      for (int slot = 0; slot < stage.width(); ++slot) {
        bool updates = false;
        for (int u : update_[s]) updates |= SlotOfNode(u) == slot;
        if (!updates) continue;
        const std::vector<int> devices = SlotDevices(stage, slot);
        for (int r : devices) {
          std::set<int> ranks_done{RankOf(r)};
          for (int q : devices) {
            if (ranks_done.insert(RankOf(q)).second) {
              expect(r, q, 1);  // one flat bucket
            }
          }
        }
      }
    }
  }
  precision_ = StepPrecisionFor(graph_, view_.options().precision);
  needs_gradient_.assign(graph_.ops().size(), {});
  for (size_t op = 0; op < graph_.ops().size(); ++op) {
    const int backward = view_.backward_node(static_cast<int>(op));
    if (backward >= 0) needs_gradient_[op] = InputsNeedingGradient(view_, backward);
  }

  ASSIGN_OR_RETURN(HostValues first,
                   DrawHostValues(view_, options_.seed, options_.input_values));
  host_ = first.value;
  batches_.push_back(first);
  for (int j = 1; j < M_; ++j) {
    ASSIGN_OR_RETURN(HostValues batch, DrawBatch(view_, options_.seed + j,
                                                 options_.input_values));
    batches_.push_back(std::move(batch));
  }
  targets_.assign(D_, {});
  for (int d = 0; d < D_; ++d) {
    if (stage_of_device_[d] < 0 || !Local(d)) continue;
    for (int j = 0; j < M_; ++j) {
      std::vector<torch::Tensor> on = batches_[j].target;
      for (torch::Tensor& t : on) {
        if (t.defined()) t = t.to(devices_[d]);
      }
      targets_[d].push_back(std::move(on));
    }
  }
  params_.assign(D_, std::vector<torch::Tensor>(V_));
  updates_.clear();
  updates_.resize(D_);
  for (auto& per_value : updates_) per_value.resize(V_);
  accum_.assign(D_, std::vector<torch::Tensor>(V_));
  for (int g = 0; g < view_.num_groups(); ++g) {
    const int s = strategy_.stage_of_op[g];
    for (int p : view_.group_parameters(g)) {
      for (int d : SlotDevices(strategy_.stages[s], SlotOfOp(strategy_, g))) {
        if (!Local(d)) continue;
        params_[d][p] = host_[p].to(devices_[d], false, /*copy=*/true);
        updates_[d][p] = std::make_unique<ParameterUpdate>(
            view_.options().optimizer, options_.update, params_[d][p]);
      }
    }
  }
  SetBlasThreads(options_.threads_per_cpu_device);
  // As the placed executor and the profiler do: freed blocks stay in the
  // heap for reuse instead of page-faulting in fresh memory every step, so
  // the profile's node times hold here.
  KeepFreedHostMemory();
  if (options_.pin_cpu_devices) {
    absl::StatusOr<std::vector<std::vector<int>>> cores = CpuDeviceCores(
        cluster_, options_.threads_per_cpu_device, AllowedCores());
    if (cores.ok()) cores_ = std::move(*cores);
  }
  return absl::OkStatus();
}

void TorchStrategyExecutor::Fail(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = status;
  cv_.notify_all();
  slots_cv_.notify_all();
}

bool TorchStrategyExecutor::ReadyLocked(int s, int j, bool backward) const {
  for (int from : backward ? gradient_sources_[s] : forward_sources_[s]) {
    if (Local(DeviceOf(from, j))) {
      if (!(backward ? backward_done_ : forward_done_)[from * M_ + j]) {
        return false;
      }
      continue;
    }
    const std::vector<int>& crossing =
        (backward ? cross_sums_ : cross_values_)[from * S_ + s];
    if (arrived_[ArrivalKey(from, s, j, backward)] <
        static_cast<int>(crossing.size())) {
      return false;
    }
  }
  return true;
}

bool TorchStrategyExecutor::WaitForOtherSlots(int n, int j, int d) {
  if (waits_for_[n].empty()) return true;
  const size_t N = view_.nodes().size();
  const auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  slots_cv_.wait(lock, [&] {
    if (!failure_.ok()) return true;
    for (int p : waits_for_[n]) {
      if (!node_done_[j * N + p]) return false;
    }
    return true;
  });
  waited_seconds_[d] += SecondsSince(start);
  return failure_.ok();
}

void TorchStrategyExecutor::MarkNodeDone(int n, int j) {
  if (!waited_on_[n]) return;
  std::lock_guard<std::mutex> lock(mu_);
  node_done_[j * view_.nodes().size() + n] = 1;
  // Only the workers of a wide replica wait on slots_cv_.
  slots_cv_.notify_all();
}

absl::Status TorchStrategyExecutor::BeforeNode(const TrainingNode& node) {
  if (!options_.before_node) return absl::OkStatus();
  absl::Status s = options_.before_node(node);
  if (s.ok()) return s;
  return WithContext(s, absl::StrCat("'", node.key, "': "));
}

absl::Status TorchStrategyExecutor::RunForward(int s, int j, int d) {
  const int replica = replica_of_device_[d];
  // Values and weights made on other devices, copied here once per task.
  std::map<int, torch::Tensor> copied;
  for (int n : forward_[s]) {
    if (SlotOfNode(n) != slot_of_device_[d]) continue;
    if (!WaitForOtherSlots(n, j, d)) {
      return absl::OkStatus();  // failed elsewhere
    }
    const TrainingNode& node = view_.node(n);
    RETURN_IF_ERROR(BeforeNode(node));
    const Op& op = graph_.op(node.forward_op);
    std::vector<torch::Tensor> inputs;
    if (!AllOutputsFolded(graph_, op)) {
      for (int t : op.inputs) {
        if (t < 0) {
          inputs.emplace_back();
          continue;
        }
        const int v = value_of_tensor_[t];
        const TrainingValue& value = view_.value(v);
        torch::Tensor in;
        if (value.kind == ValueKind::kParameter) {
          const int holder = ParameterDevice(v, replica);
          if (holder == d) {
            in = params_[d][v];
          } else {
            auto [at, fresh] = copied.emplace(v, torch::Tensor());
            if (fresh) at->second = On(params_[holder][v], holder, d);
            in = at->second;
          }
        } else if (value.kind == ValueKind::kGraphInput) {
          in = batches_[j].value[v].to(devices_[d]);
        } else if (value.producer < 0) {
          in = host_[v].to(devices_[d]);
        } else {
          std::lock_guard<std::mutex> lock(mu_);
          torch::Tensor& held = values_[j][v];
          const int from = value_device_[j * V_ + v];
          if (from == d || copied.count(v) == 0) {
            in = On(held, from, d);
            if (from != d) copied[v] = in;
          } else {
            in = copied[v];
          }
          // Freed after its last read, as a framework frees it (what is
          // not freed early page-faults in fresh memory every step).
          if (--reads_left_[j * V_ + v] == 0) held = torch::Tensor();
        }
        if (!in.defined()) {
          return absl::InternalError(absl::StrCat(
              "'", graph_.tensor(t).name, "' is not there for micro-batch ",
              j));
        }
        inputs.push_back(in);
      }
    }
    const bool backward = view_.backward_node(node.forward_op) >= 0;
    absl::StatusOr<std::vector<torch::Tensor>> results =
        ForwardOp(graph_, op, std::move(inputs), devices_[d], precision_,
                  backward ? &needs_gradient_[node.forward_op] : nullptr,
                  &saved_[j][node.forward_op]);
    if (!results.ok()) {
      return WithContext(results.status(),
                         absl::StrCat(node.key, " (micro-batch ", j, "): "));
    }
    const double loss = OutputLosses(graph_, op, *results, targets_[d][j],
                                     1.0 / M_, &seeds_[j]);
    {
      std::lock_guard<std::mutex> lock(mu_);
      loss_[j] += loss;
      for (int v : node.outputs) {
        const int t = view_.value(v).tensor;
        for (size_t k = 0; k < op.outputs.size() && k < results->size(); ++k) {
          // Kept while a reader of this process, or a send, needs it.
          if (op.outputs[k] == t && reads_left_[j * V_ + v] > 0) {
            values_[j][v] = (*results)[k];
            value_device_[j * V_ + v] = d;
          }
        }
      }
    }
    MarkNodeDone(n, j);
  }
  return absl::OkStatus();
}

absl::Status TorchStrategyExecutor::RunBackward(int s, int j, int d) {
  // Tensors are only moved in and out of the shared slots under the lock;
  // the additions run outside it, so that workers do not wait for each
  // other's arithmetic. A slot PartialIndex(sum, s, slot) has one writer:
  // the device running that slot of stage s's micro-batch j.
  const int my_slot = slot_of_device_[d];
  for (int n : backward_[s]) {
    if (SlotOfNode(n) != my_slot) continue;
    if (!WaitForOtherSlots(n, j, d)) {
      return absl::OkStatus();  // failed elsewhere
    }
    const TrainingNode& node = view_.node(n);
    RETURN_IF_ERROR(BeforeNode(node));
    const Op& op = graph_.op(node.forward_op);
    std::vector<std::vector<torch::Tensor>> parts(op.outputs.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        const int t = op.outputs[k];
        if (t < 0) continue;
        parts[k].push_back(std::move(seeds_[j][t]));
        seeds_[j][t] = torch::Tensor();
        for (int sm : view_.sums_read_by(n)) {
          if (view_.gradient_sums()[sm].tensor != t) continue;
          // This node is the sum's only reader (its sink).
          for (int x = 0; x < S_; ++x) {
            for (int slot = 0; slot < W_; ++slot) {
              torch::Tensor& part = partials_[j][PartialIndex(sm, x, slot)];
              parts[k].push_back(std::move(part));
              part = torch::Tensor();
            }
          }
        }
      }
    }
    std::vector<torch::Tensor> output_gradients(op.outputs.size());
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      torch::Tensor& sum = output_gradients[k];
      for (const torch::Tensor& g : parts[k]) {
        if (!g.defined()) continue;
        torch::Tensor here = g.to(devices_[d]);
        sum = sum.defined() ? sum + here : here;
      }
    }
    parts.clear();
    std::vector<int> tensors;
    for (int v : node.outputs) tensors.push_back(view_.value(v).tensor);
    absl::StatusOr<std::vector<torch::Tensor>> grads =
        BackwardOp(graph_, op, std::move(saved_[j][node.forward_op]),
                   output_gradients, tensors);
    saved_[j][node.forward_op] = SavedOp();
    if (!grads.ok()) {
      return WithContext(grads.status(),
                         absl::StrCat(node.key, " (micro-batch ", j, "): "));
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int sm = view_.sum_of(node.outputs[k]);
      if (sm < 0) continue;
      torch::Tensor buffer;
      {
        std::lock_guard<std::mutex> lock(mu_);
        buffer = std::move(partials_[j][PartialIndex(sm, s, my_slot)]);
        partials_[j][PartialIndex(sm, s, my_slot)] = torch::Tensor();
      }
      buffer = buffer.defined() ? buffer + (*grads)[k] : (*grads)[k];
      std::lock_guard<std::mutex> lock(mu_);
      partials_[j][PartialIndex(sm, s, my_slot)] = std::move(buffer);
    }
    MarkNodeDone(n, j);
  }
  return absl::OkStatus();
}

absl::Status TorchStrategyExecutor::Accumulate(int s, int j, int d) {
  // Parameters whose sums this backward completed (a weight's readers are
  // all in its stage, on any of its slots).
  std::vector<std::pair<int, torch::Tensor>> completed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int u : update_[s]) {
      if (SlotOfNode(u) != slot_of_device_[d]) continue;
      const int p = view_.node(u).parameter;
      for (int sm : view_.sums_read_by(u)) {
        for (int slot = 0; slot < W_; ++slot) {
          torch::Tensor& part = partials_[j][PartialIndex(sm, s, slot)];
          if (!part.defined()) continue;
          completed.emplace_back(p, std::move(part));
          part = torch::Tensor();
        }
      }
    }
  }
  std::set<int> made_here;  // buffers that are this call's first part
  for (auto& [p, g] : completed) {
    if (g.device() != devices_[d]) g = g.to(devices_[d]);
    // The first micro-batch's gradient becomes the buffer; later ones are
    // added in place (PyTorch's AccumulateGrad; the strategy simulator
    // charges the cost model's AccumulateSeconds for each). A wide stage's
    // second slot part of the same micro-batch is added out of place: the
    // first part may be a tensor its backward op also handed elsewhere.
    torch::Tensor& acc = accum_[d][p];
    if (!acc.defined()) {
      acc = g;
      made_here.insert(p);
    } else if (made_here.count(p) > 0) {
      acc = acc + g;
      made_here.erase(p);
    } else {
      acc.add_(g);
    }
  }
  return absl::OkStatus();
}

absl::Status TorchStrategyExecutor::SendAfter(int s, int j, int d,
                                              bool backward) {
  if (!Distributed()) return absl::OkStatus();
  for (int to = 0; to < S_; ++to) {
    const int dst = DeviceOf(to, j);
    if (Local(dst)) continue;
    const std::vector<int>& items =
        (backward ? cross_sums_ : cross_values_)[s * S_ + to];
    if (items.empty()) continue;
    // Per item: the value, or the stage's partials of the sum per slot.
    std::vector<std::vector<torch::Tensor>> slot_parts;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int item : items) {
        slot_parts.emplace_back();
        if (!backward) {
          slot_parts.back().push_back(values_[j][item]);
          continue;
        }
        for (int slot = 0; slot < W_; ++slot) {
          slot_parts.back().push_back(
              partials_[j][PartialIndex(item, s, slot)]);
        }
      }
    }
    absl::Status sent = CatchExceptions("sending: ", [&]() -> absl::Status {
      // A wide stage's slots' partials, added up here in slot order.
      std::vector<torch::Tensor> parts;
      for (const std::vector<torch::Tensor>& of_item : slot_parts) {
        torch::Tensor sum;
        for (const torch::Tensor& part : of_item) {
          if (!part.defined()) continue;
          sum = sum.defined() ? sum + part.to(sum.device()) : part;
        }
        parts.push_back(sum);
      }
      torch::Tensor index = torch::zeros(
          {kIndexHead + kItemWords * static_cast<int64_t>(items.size())},
          torch::kLong);
      int64_t* w = index.data_ptr<int64_t>();
      w[0] = static_cast<int64_t>(items.size());
      w[1] = s;
      w[2] = to;
      w[3] = j;
      w[4] = backward ? 1 : 0;
      int64_t total = 0;
      for (size_t k = 0; k < items.size(); ++k) {
        int64_t* it = w + kIndexHead + kItemWords * k;
        it[0] = items[k];
        if (!parts[k].defined()) {  // no gradient flowed
          it[2] = -1;
          continue;
        }
        parts[k] = parts[k].to(torch::kCPU).contiguous();
        if (parts[k].dim() > kMaxPackedDims) {
          return absl::InvalidArgumentError(absl::StrCat(
              "a tensor of rank ", parts[k].dim(), " crosses ranks (at most ",
              kMaxPackedDims, ")"));
        }
        it[1] = static_cast<int64_t>(parts[k].scalar_type());
        it[2] = parts[k].dim();
        for (int64_t x = 0; x < parts[k].dim(); ++x) it[3 + x] = parts[k].size(x);
        total += parts[k].numel() * parts[k].element_size();
      }
      torch::Tensor data = torch::empty({total}, torch::kByte);
      int64_t at = 0;
      for (const torch::Tensor& t : parts) {
        if (!t.defined()) continue;
        const int64_t bytes = t.numel() * t.element_size();
        std::memcpy(data.data_ptr<uint8_t>() + at, t.data_ptr(), bytes);
        at += bytes;
      }
      RETURN_IF_ERROR(options_.ranks->SendTensor(index, kPacked, RankOf(dst),
                                                 Channel(d, dst)));
      return options_.ranks->SendTensor(data, kPacked, RankOf(dst),
                                        Channel(d, dst));
    });
    if (!sent.ok()) {
      return absl::Status(
          sent.code(), absl::StrCat(sent.message(), " (", cluster_.device(d).name,
                                    " -> ", cluster_.device(dst).name, ")"));
    }
  }
  // A send counts as a read; a partial buffer sent is done with here.
  std::lock_guard<std::mutex> lock(mu_);
  for (int to = 0; to < S_; ++to) {
    if (Local(DeviceOf(to, j))) continue;
    for (int item : (backward ? cross_sums_ : cross_values_)[s * S_ + to]) {
      if (backward) {
        for (int slot = 0; slot < W_; ++slot) {
          partials_[j][PartialIndex(item, s, slot)] = torch::Tensor();
        }
      } else if (--reads_left_[j * V_ + item] == 0) {
        values_[j][item] = torch::Tensor();
      }
    }
  }
  return absl::OkStatus();
}

void TorchStrategyExecutor::Receiver(int src, int dst, int expected) {
  auto receive = [&]() -> absl::StatusOr<std::pair<int64_t, torch::Tensor>> {
    absl::StatusOr<std::pair<int64_t, torch::Tensor>> got =
        options_.ranks->RecvTensor(RankOf(src), Channel(src, dst));
    if (!got.ok()) {
      return absl::Status(got.status().code(),
                          absl::StrCat(got.status().message(), " (",
                                       cluster_.device(src).name, " -> ",
                                       cluster_.device(dst).name, ")"));
    }
    return got;
  };
  auto foreign = [&](int64_t what) {
    return absl::DataLossError(absl::StrCat(
        "rank ", RankOf(src), " sent item ", what, ", which the link ",
        cluster_.device(src).name, " -> ", cluster_.device(dst).name,
        " does not carry"));
  };
  const int ss = stage_of_device_[src], ds = stage_of_device_[dst];
  int k = 0;
  while (k < expected) {
    absl::StatusOr<std::pair<int64_t, torch::Tensor>> got = receive();
    if (!got.ok()) {
      Fail(got.status());
      return;
    }
    ++k;
    if (got->first == static_cast<int64_t>(ss) * kKinds + kAccumulator &&
        ss == ds) {
      // A replica's bucket: its accumulators of src's slot, in the stage's
      // update order.
      torch::Tensor t = got->second;
      absl::Status status = CatchExceptions("receiving: ", [&]() -> absl::Status {
        t = t.to(devices_[dst]);
        int64_t at = 0;
        std::vector<std::pair<int, torch::Tensor>> parts;
        for (int u : update_[ss]) {
          if (SlotOfNode(u) != slot_of_device_[src]) continue;
          const int p = view_.node(u).parameter;
          const int64_t n = graph_.tensor(p).num_elements();
          if (at + n > t.numel()) break;
          parts.emplace_back(p, t.narrow(0, at, n).reshape(graph_.tensor(p).shape));
          at += n;
        }
        if (at != t.numel()) {
          return absl::DataLossError(absl::StrCat(
              "rank ", RankOf(src), " sent a gradient bucket of ", t.numel(),
              " elements for stage ", ss, ", which has ", at, " (or more)"));
        }
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& [p, g] : parts) accum_[src][p] = std::move(g);
        ++accum_arrived_[src];
        cv_.notify_all();
        return absl::OkStatus();
      });
      if (!status.ok()) {
        Fail(status);
        return;
      }
      continue;
    }
    if (got->first != kPacked || got->second.dim() != 1 ||
        got->second.scalar_type() != torch::kLong ||
        got->second.numel() < kIndexHead || k >= expected) {
      Fail(foreign(got->first));
      return;
    }
    // A stage pair's packed values (or partial gradients) of a micro-batch:
    // the index, then the data.
    const torch::Tensor index = got->second;
    absl::StatusOr<std::pair<int64_t, torch::Tensor>> data = receive();
    if (!data.ok()) {
      Fail(data.status());
      return;
    }
    ++k;
    absl::Status status = CatchExceptions("receiving: ", [&]() -> absl::Status {
      const int64_t* w = index.data_ptr<int64_t>();
      const int64_t count = w[0];
      const int from = static_cast<int>(w[1]), to = static_cast<int>(w[2]);
      const int j = static_cast<int>(w[3]);
      const bool backward = w[4] != 0;
      if (from < 0 || from >= S_ || to < 0 || to >= S_ || j < 0 || j >= M_ ||
          DeviceOf(from, j) != src || DeviceOf(to, j) != dst ||
          index.numel() != kIndexHead + kItemWords * count ||
          count != static_cast<int64_t>(
                       (backward ? cross_sums_ : cross_values_)[from * S_ + to]
                           .size())) {
        return foreign(w[0]);
      }
      const std::vector<int>& expected_items =
          (backward ? cross_sums_ : cross_values_)[from * S_ + to];
      const torch::Tensor bytes = data->second;
      int64_t at = 0;
      std::vector<torch::Tensor> parts(count);
      for (int64_t x = 0; x < count; ++x) {
        const int64_t* it = w + kIndexHead + kItemWords * x;
        if (it[0] != expected_items[x]) return foreign(it[0]);
        if (it[2] < 0) continue;  // undefined
        if (it[2] > kMaxPackedDims || it[1] < 0 ||
            it[1] >= static_cast<int64_t>(c10::ScalarType::NumOptions)) {
          return foreign(it[0]);
        }
        std::vector<int64_t> shape(it + 3, it + 3 + it[2]);
        torch::Tensor t = torch::empty(
            shape, torch::TensorOptions().dtype(static_cast<c10::ScalarType>(it[1])));
        const int64_t n = t.numel() * t.element_size();
        if (at + n > bytes.numel()) return foreign(it[0]);
        std::memcpy(t.data_ptr(), bytes.data_ptr<uint8_t>() + at, n);
        at += n;
        parts[x] = t.to(devices_[dst]);
      }
      std::lock_guard<std::mutex> lock(mu_);
      for (int64_t x = 0; x < count; ++x) {
        const int item = expected_items[x];
        if (backward) {
          if (parts[x].defined()) {
            partials_[j][PartialIndex(item, from, 0)] = parts[x];
          }
        } else {
          values_[j][item] = parts[x];
          value_device_[j * V_ + item] = dst;
        }
      }
      arrived_[ArrivalKey(from, to, j, backward)] += static_cast<int>(count);
      cv_.notify_all();
      return absl::OkStatus();
    });
    if (!status.ok()) {
      Fail(status);
      return;
    }
  }
}

void TorchStrategyExecutor::Worker(int d, double* busy) {
  if (!cores_.empty()) (void)PinThisThread(cores_[d]);  // else as before
  if (devices_[d].is_cpu()) at::set_num_threads(options_.threads_per_cpu_device);
  // A GPU's worker makes its device current and queues on its default
  // stream, which orders its tasks with the copies other workers make to
  // and from it; it waits for each task, so that busy times are real.
  std::optional<c10::DeviceGuard> current;
  if (!devices_[d].is_cpu()) current.emplace(devices_[d]);
  const int s = stage_of_device_[d];
  const int width = strategy_.stages[s].width();
  for (const ReplicaTask& task :
       ReplicaTaskOrder(strategy_, s, replica_of_device_[d])) {
    const int j = task.micro_batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return !failure_.ok() || ReadyLocked(s, j, task.backward);
      });
      if (!failure_.ok()) return;
    }
    const auto start = Clock::now();
    waited_seconds_[d] = 0;
    absl::Status status = CatchExceptions("", [&] {
      absl::Status ran = task.backward ? RunBackward(s, j, d) : RunForward(s, j, d);
      Synchronize(devices_[d]);
      return ran;
    });
    // Not busy while it waited for another slot of its replica.
    *busy += SecondsSince(start) - waited_seconds_[d];
    // A wide replica's task is sent on by its first device once every
    // slot is done (below); others' as soon as it ends.
    if (status.ok() && width == 1) status = SendAfter(s, j, d, task.backward);
    if (!status.ok()) {
      Fail(status);
      return;
    }
    {
      // The task ends when every slot of the replica has run its part.
      std::unique_lock<std::mutex> lock(mu_);
      const size_t key =
          (static_cast<size_t>(s) * M_ + j) * 2 + (task.backward ? 1 : 0);
      if (++slots_done_[key] == width) {
        (task.backward ? backward_done_ : forward_done_)[s * M_ + j] = 1;
        cv_.notify_all();
      }
      cv_.wait(lock,
               [&] { return !failure_.ok() || slots_done_[key] == width; });
      if (!failure_.ok()) return;
    }
    if (width > 1 && slot_of_device_[d] == 0) {
      status = SendAfter(s, j, d, task.backward);
      if (!status.ok()) {
        Fail(status);
        return;
      }
    }
    if (task.backward) {
      const auto added = Clock::now();
      status = CatchExceptions("", [&] {
        absl::Status result = Accumulate(s, j, d);
        Synchronize(devices_[d]);
        return result;
      });
      *busy += SecondsSince(added);
      if (!status.ok()) {
        Fail(status);
        return;
      }
    }
  }
  ReduceAndUpdate(s, d, busy);
}

void TorchStrategyExecutor::ReduceAndUpdate(int s, int d, double* busy) {
  // The devices of d's slot in every replica of the stage, and the
  // updates of that slot's parameters.
  const std::vector<int> replicas =
      SlotDevices(strategy_.stages[s], slot_of_device_[d]);
  std::vector<int> updates;
  for (int u : update_[s]) {
    if (SlotOfNode(u) == slot_of_device_[d]) updates.push_back(u);
  }
  // The allreduce. Across ranks: this replica's accumulators, flattened
  // into one bucket as DDP's (a 2-replica zoo:chain step as two processes:
  // 9 ms with a message per parameter, 1.4-2.8 ms with one), go to the
  // first replica of the stage on every other rank (from this worker, the
  // only sender on d's channels), which files them under d.
  if (Distributed() && !updates.empty()) {
    std::set<int> ranks_done{rank_};
    torch::Tensor bucket;
    for (int q : replicas) {
      if (!ranks_done.insert(RankOf(q)).second) continue;
      absl::Status sent = CatchExceptions("allreduce: ", [&] {
        if (!bucket.defined()) {
          std::vector<torch::Tensor> flat;
          for (int u : updates) {
            const int p = view_.node(u).parameter;
            const torch::Tensor& g = accum_[d][p];
            flat.push_back(g.defined() ? g.reshape({-1})
                                       : torch::zeros({params_[d][p].numel()},
                                                      params_[d][p].options()));
          }
          bucket = torch::cat(flat);
        }
        return options_.ranks->SendTensor(
            bucket, static_cast<int64_t>(s) * kKinds + kAccumulator,
            RankOf(q), Channel(d, q));
      });
      if (!sent.ok()) {
        Fail(absl::Status(sent.code(),
                          absl::StrCat(sent.message(), " (allreduce ",
                                       cluster_.device(d).name, " -> ",
                                       cluster_.device(q).name, ")")));
        return;
      }
    }
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    tasks_done_[d] = 1;
    ++workers_finished_;
    cv_.notify_all();
    cv_.wait(lock, [&] {
      if (!failure_.ok()) return true;
      for (int r : replicas) {
        if (Local(r) ? !tasks_done_[r]
                     : !updates.empty() && accum_arrived_[r] < 1) {
          return false;
        }
      }
      return true;
    });
    if (!failure_.ok()) return;
  }
  // As soon as the stage's replicas are done (overlapping other stages'
  // tasks), every replica sums the replicas' accumulators in replica order
  // on its own device: the same additions in the same order, the same bits
  // everywhere.
  std::vector<torch::Tensor> totals(updates.size());
  absl::Status status = CatchExceptions("allreduce: ", [&] {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < updates.size(); ++i) {
      const int p = view_.node(updates[i]).parameter;
      for (int r : replicas) {
        const torch::Tensor& g = accum_[r][p];
        if (!g.defined()) continue;
        torch::Tensor here = g.to(devices_[d]);
        totals[i] = totals[i].defined() ? totals[i] + here : here;
      }
    }
    return absl::OkStatus();
  });
  if (!status.ok()) {
    Fail(status);
    return;
  }
  // Updates once every task of this process has succeeded (a failed step
  // updates nothing here), each device its own replica's parameters.
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      return !failure_.ok() || workers_finished_ == workers_;
    });
    if (!failure_.ok()) return;
  }
  const auto start = Clock::now();
  status = CatchExceptions("update: ", [&] {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < updates.size(); ++i) {
      if (!totals[i].defined()) continue;
      const int p = view_.node(updates[i]).parameter;
      updates_[d][p]->Apply(totals[i]);
    }
    Synchronize(devices_[d]);
    return absl::OkStatus();
  });
  *busy += SecondsSince(start);
  if (!status.ok()) Fail(status);
}

absl::StatusOr<StrategyStepReport> TorchStrategyExecutor::Step() {
  const int sums = static_cast<int>(view_.gradient_sums().size());
  failure_ = absl::OkStatus();
  forward_done_.assign(static_cast<size_t>(S_) * M_, 0);
  backward_done_.assign(static_cast<size_t>(S_) * M_, 0);
  arrived_.assign(static_cast<size_t>(S_) * S_ * M_ * 2, 0);
  values_.assign(M_, std::vector<torch::Tensor>(V_));
  value_device_.assign(static_cast<size_t>(M_) * V_, -1);
  // Reads by this process's tasks, and one per send to another rank.
  reads_left_.assign(static_cast<size_t>(M_) * V_, 0);
  for (int j = 0; j < M_; ++j) {
    for (int b = 0; b < S_; ++b) {
      if (Local(DeviceOf(b, j))) {
        for (int v = 0; v < V_; ++v) {
          reads_left_[j * V_ + v] += forward_reads_[b][v];
        }
        continue;
      }
      for (int a = 0; a < S_; ++a) {
        if (!Local(DeviceOf(a, j))) continue;
        for (int v : cross_values_[a * S_ + b]) ++reads_left_[j * V_ + v];
      }
    }
  }
  partials_.assign(
      M_, std::vector<torch::Tensor>(static_cast<size_t>(sums) * S_ * W_));
  slots_done_.assign(static_cast<size_t>(S_) * M_ * 2, 0);
  waited_seconds_.assign(D_, 0);
  node_done_.assign(W_ > 1 ? static_cast<size_t>(M_) * view_.nodes().size() : 0,
                    0);
  saved_.assign(M_, std::vector<SavedOp>(graph_.ops().size()));
  seeds_.assign(M_, std::vector<torch::Tensor>(graph_.tensors().size()));
  loss_.assign(M_, 0);
  for (int d = 0; d < D_; ++d) {
    for (torch::Tensor& a : accum_[d]) a = torch::Tensor();
  }
  tasks_done_.assign(D_, 0);
  accum_arrived_.assign(D_, 0);
  workers_finished_ = 0;
  workers_ = 0;
  for (int d = 0; d < D_; ++d) workers_ += stage_of_device_[d] >= 0 && Local(d);
  StrategyStepReport report;
  report.busy_seconds.assign(D_, 0);
  const auto start = Clock::now();
  int running = 0;
  std::vector<std::thread> threads;
  auto spawn = [&](auto body) {
    ++running;
    threads.emplace_back([this, body, &running] {
      body();
      std::lock_guard<std::mutex> lock(mu_);
      --running;
      cv_.notify_all();
    });
  };
  {
    // Threads start under the lock, so `running` is counted before any
    // of them can end.
    std::unique_lock<std::mutex> lock(mu_);
    for (int d = 0; d < D_; ++d) {
      if (stage_of_device_[d] < 0 || !Local(d)) continue;
      double* busy = &report.busy_seconds[d];
      spawn([this, d, busy] { Worker(d, busy); });
    }
    for (const auto& [link, expected] : expected_) {
      const int src = link.first, dst = link.second, n = expected;
      spawn([this, src, dst, n] { Receiver(src, dst, n); });
    }
    // Distributed: a failure here is published (and this rank's sends and
    // receives woken); one published elsewhere stops this rank's threads.
    bool published = false;
    while (running > 0) {
      if (Distributed() && !failure_.ok() && !published) {
        const absl::Status failure = failure_;
        lock.unlock();
        options_.ranks->PublishFailure(failure);
        options_.ranks->AbortPending();
        lock.lock();
        published = true;
        continue;
      }
      // The store is asked only after 50 ms without news from this
      // rank's threads (a rank that waits on another one).
      const bool quiet = cv_.wait_for(lock, std::chrono::milliseconds(50)) ==
                         std::cv_status::timeout;
      if (Distributed() && quiet && failure_.ok() && running > 0) {
        lock.unlock();
        std::optional<absl::Status> remote = options_.ranks->PublishedFailure();
        lock.lock();
        if (remote.has_value() && failure_.ok()) {
          failure_ = *remote;
          cv_.notify_all();
          slots_cv_.notify_all();
          lock.unlock();
          options_.ranks->AbortPending();
          lock.lock();
          published = true;
        }
      }
    }
  }
  for (std::thread& t : threads) t.join();
  report.seconds = SecondsSince(start);
  for (double l : loss_) report.loss += l;
  values_.clear();
  saved_.clear();
  partials_.clear();
  if (Distributed()) {
    StepReport mine;
    mine.seconds = report.seconds;
    mine.loss = report.loss;
    mine.busy_seconds = report.busy_seconds;
    mine.peak_memory_bytes.assign(D_, 0);
    ASSIGN_OR_RETURN(
        StepReport merged,
        ExchangeStepReports(*options_.ranks, step_++, mine, failure_));
    report.seconds = merged.seconds;
    report.loss = merged.loss;
    report.busy_seconds = merged.busy_seconds;
  }
  if (!failure_.ok()) return failure_;
  report.loss /= M_;
  return report;
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::Parameter(
    absl::string_view name, int replica) const {
  for (int g = 0; g < view_.num_groups(); ++g) {
    for (int p : view_.group_parameters(g)) {
      if (view_.value(p).name != name) continue;
      const int replicas =
          strategy_.stages[strategy_.stage_of_op[g]].num_replicas();
      if (replica < 0 || replica >= replicas) {
        return absl::NotFoundError(
            absl::StrCat("parameter '", name, "' has ", replicas, " replicas"));
      }
      const int d = ParameterDevice(p, replica);
      if (!Local(d)) {
        return absl::NotFoundError(absl::StrCat("parameter '", name,
                                                "' replica ", replica,
                                                " is on rank ", RankOf(d)));
      }
      return params_[d][p].to(torch::kCPU).clone();
    }
  }
  return absl::NotFoundError(absl::StrCat("no parameter '", name, "'"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<StrategyExecutor>> StrategyExecutor::Create(
    const TrainingView& view, const Cluster& cluster,
    const Strategy& strategy, const ExecutorOptions& options) {
  RETURN_IF_ERROR(CheckStrategy(view, cluster, strategy));
  RETURN_IF_ERROR(CheckRunnable(view.forward()));
  for (size_t s = 0; s < strategy.stages.size(); ++s) {
    if (strategy.stages[s].recompute != Recompute::kNone) {
      return absl::UnimplementedError(absl::StrCat(
          "stage ", s, " recomputes its forward (", DescribeStrategy(strategy),
          "); the strategy executor keeps every activation: simulate the "
          "plan, or run it with recomputation off"));
    }
  }
  if (options.ranks != nullptr &&
      static_cast<int>(options.rank_of_device.size()) != cluster.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank_of_device has ", options.rank_of_device.size(),
        " entries; the cluster has ", cluster.num_devices(), " devices"));
  }
  ASSIGN_OR_RETURN(std::vector<torch::Device> devices, TorchDevices(cluster));
  RETURN_IF_ERROR(
      CheckStepPrecision(view.options().precision, cluster, devices));
  auto executor = std::make_unique<TorchStrategyExecutor>(
      view, cluster, strategy, options, std::move(devices));
  RETURN_IF_ERROR(
      CatchExceptions("strategy executor: ", [&] { return executor->Init(); }));
  return std::unique_ptr<StrategyExecutor>(std::move(executor));
}

}  // namespace placer
