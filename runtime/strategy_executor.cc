// The strategy executor (runtime/strategy_executor.h): the tables Init
// builds from the strategy, where parameters are, and Create. A step is
// strategy_step.cc's, a device's tasks strategy_tasks.cc's, messages
// between ranks strategy_messages.cc's.
#include "runtime/strategy_executor.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/host_setup.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "profiles/signature.h"
#include "runtime/cpu_cores.h"
#include "runtime/executor_ops.h"
#include "runtime/initial_values.h"
#include "runtime/op_autograd.h"
#include "runtime/rank_group.h"
#include "runtime/step_exchange.h"
#include "runtime/strategy_executor_impl.h"
#include "runtime/torch_devices.h"
#include "simulator/slot_copies.h"
#include "simulator/view_index.h"

namespace placer {

TorchStrategyExecutor::TorchStrategyExecutor(const TrainingView& view,
                                             const Cluster& cluster,
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

absl::Status TorchStrategyExecutor::Init() {
  if (Distributed()) rank_ = options_.ranks->rank();
  forward_.assign(S_, {});
  backward_.assign(S_, {});
  update_.assign(S_, {});
  for (int n : view_.topological_order()) {
    switch (view_.node(n).kind) {
      case NodeKind::kForward:
        forward_[StageOfNode(n)].push_back(n);
        break;
      case NodeKind::kBackward:
        backward_[StageOfNode(n)].push_back(n);
        break;
      case NodeKind::kUpdate:
        update_[StageOfNode(n)].push_back(n);
        break;
    }
  }
  value_of_tensor_.assign(graph_.tensors().size(), -1);
  for (int v = 0; v < V_; ++v) {
    const TrainingValue& value = view_.value(v);
    if (value.kind != ValueKind::kGradient && value.tensor >= 0) {
      value_of_tensor_[value.tensor] = v;
    }
  }
  crossings_ = StageCrossings(view_, strategy_);
  // Reads.
  forward_reads_.assign(S_, std::vector<int>(V_, 0));
  slot_reads_.assign(S_, {});
  for (int s = 0; s < S_; ++s) {
    const int width = strategy_.stages[s].width();
    if (width > 1) slot_reads_[s].assign(width, std::vector<int>(V_, 0));
    for (int n : forward_[s]) {
      const Op& op = graph_.op(view_.node(n).forward_op);
      for (int t : op.inputs) {
        const int v = t >= 0 ? value_of_tensor_[t] : -1;
        if (v < 0) continue;
        ++forward_reads_[s][v];
        if (width > 1) ++slot_reads_[s][SlotOfNode(n)][v];
      }
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
  RETURN_IF_ERROR(InitTensorParallelism());
  RETURN_IF_ERROR(InitReplicaSubgroups());
  const ViewIndex index = ViewIndex::Of(view_);
  group_of_parameter_ = index.home_groups();
  // Within a wide stage's task: what each node waits for, on any slot, and
  // what crosses slots (InitLinks).
  StageSlotLinks slot_links = StageSlotCopies(index, strategy_);
  task_deps_ = std::move(slot_links.waits);
  waited_on_.assign(view_.nodes().size(), 0);
  for (const std::vector<int>& from : task_deps_) {
    for (int p : from) waited_on_[p] = 1;
  }
  node_priority_.assign(view_.nodes().size(), 0);
  if (options_.priorities.size() == view_.nodes().size()) {
    node_priority_ = options_.priorities;
  } else {
    const std::vector<int>& order = view_.topological_order();
    for (size_t k = 0; k < order.size(); ++k) {
      node_priority_[order[k]] = static_cast<double>(k);
    }
  }
  node_key_rank_ = index.key_ranks();
  // Across ranks, a wide replica of a pipeline runs in one process (its
  // first device sends what its tasks make for other ranks); the replicas
  // of a strategy of one stage (an op placement's, say) may be split over
  // ranks, their slots' copies crossing by the links' channels. Their
  // slots' allreduce may cross ranks either way.
  if (Distributed()) {
    for (int s = 0; s < S_; ++s) {
      const PipelineStage& stage = strategy_.stages[s];
      if (stage.width() == 1) continue;
      for (int k = 0; k < stage.num_replicas(); ++k) {
        const int first = stage.device(k, 0);
        for (int slot = 1; slot < stage.width(); ++slot) {
          const int d = stage.device(k, slot);
          if (RankOf(d) == RankOf(first)) continue;
          if (S_ == 1 && T_ == 1 && strategy_.zero == ZeroStage::kNone) {
            split_replicas_ = true;
            continue;
          }
          return absl::UnimplementedError(absl::StrCat(
              "stage ", s, "'s replica ", k, " spans ranks ", RankOf(first),
              " and ", RankOf(d), " (", cluster_.device(first).name, ", ",
              cluster_.device(d).name,
              "): a replica whose ops are placed over several devices runs "
              "in one rank unless its stage is the strategy's only one and "
              "nothing is sharded (ZeRO)"));
        }
      }
    }
  }
  InitSharding();
  RETURN_IF_ERROR(InitRecompute());
  InitLinks(slot_links.copies);
  {
    std::vector<char> local(D_);
    for (int d = 0; d < D_; ++d) local[d] = Local(d);
    memory_ = StrategyPlacementMemory::Create(
        view_, cluster_, strategy_, link_tables_.sends, link_tables_.weights,
        local, options_.enforce_memory);
    if (memory_ == nullptr) {
      ASSIGN_OR_RETURN(pass_memory_,
                       StrategyPassMemory::Create(view_, cluster_, strategy_,
                                                  std::move(local),
                                                  options_.enforce_memory));
    }
  }
  // Messages into this rank per step and channel.
  if (Distributed()) {
    auto expect = [&](int src, int dst, int count) {
      if (count > 0 && !Local(src) && Local(dst))
        expected_[{src, dst}] += count;
    };
    for (int j = 0; j < M_; ++j) {
      for (int a = 0; a < S_; ++a) {
        for (int b = 0; b < S_; ++b) {
          // Packed: an index and a data message per direction.
          expect(DeviceOf(a, j), DeviceOf(b, j),
                 crossings_.values(a, b).empty() ? 0 : 2);
          expect(DeviceOf(a, j), DeviceOf(b, j),
                 crossings_.sums(a, b).empty() ? 0 : 2);
        }
      }
    }
  }
  precision_ = StepPrecisionFor(graph_, view_.options().precision);
  needs_gradient_.assign(graph_.ops().size(), {});
  for (size_t op = 0; op < graph_.ops().size(); ++op) {
    const int backward = view_.backward_node(static_cast<int>(op));
    if (backward >= 0)
      needs_gradient_[op] = InputsNeedingGradient(view_, backward);
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
    const PipelineStage& stage = strategy_.stages[s];
    for (int p : view_.group_parameters(g)) {
      // Each replica's device of its slot, or each device of its group.
      std::vector<int> holders;
      for (int k = 0; k < stage.num_replicas(); ++k) {
        for (int r = 0; r < stage.tensor(); ++r) {
          holders.push_back(ParameterDevice(p, k, r));
        }
      }
      for (int d : holders) {
        if (!Local(d)) continue;
        params_[d][p] = PartOf(host_[p], HeldLayout(view_.value(p).tensor),
                               tensor_rank_of_device_[d], view_.value(p).tensor)
                            .to(devices_[d], false, /*copy=*/true);
        if (ShardsStateOf(s)) {
          // ZeRO: the replica updates its shard of every parameter
          // (ZeRO-3: and holds only that).
          torch::Tensor shard = Shard(params_[d][p], p, replica_of_device_[d]);
          if (ShardsParametersOf(s)) params_[d][p] = shard = shard.clone();
          if (shard.numel() > 0) {
            updates_[d][p] = std::make_unique<ParameterUpdate>(
                view_.options().optimizer, options_.update, shard);
          }
          continue;
        }
        updates_[d][p] = std::make_unique<ParameterUpdate>(
            view_.options().optimizer, options_.update, params_[d][p]);
      }
    }
  }
  // What each device holds before a step.
  const double state = view_.options().optimizer_state_per_parameter_byte();
  resident_bytes_.assign(D_, 0);
  for (int d = 0; d < D_; ++d) {
    for (int p = 0; p < V_; ++p) {
      const double w = static_cast<double>(TensorBytes(params_[d][p]));
      // The optimizer's state is of what the replica updates (its shard
      // under ZeRO).
      const double updated =
          updates_[d][p] == nullptr ? 0
          : ShardsStateOf(stage_of_device_[d])
              ? static_cast<double>(
                    ShardRange(p, replica_of_device_[d]).second *
                    params_[d][p].element_size())
              : w;
      resident_bytes_[d] += static_cast<int64_t>(w + state * updated);
    }
    const int s = stage_of_device_[d];
    if (s < 0 || !Local(d) || !devices_[d].is_cpu()) continue;
    const PipelineStage& stage = strategy_.stages[s];
    for (int v = 0; v < V_; ++v) {
      if (forward_reads_[s][v] == 0) continue;
      const TrainingValue& value = view_.value(v);
      if (value.kind == ValueKind::kGraphInput) {
        for (int j = replica_of_device_[d]; j < M_; j += stage.num_replicas()) {
          resident_bytes_[d] += TensorBytes(batches_[j].value[v]);
        }
      } else if (value.kind != ValueKind::kParameter && value.producer < 0) {
        resident_bytes_[d] += TensorBytes(host_[v]);
      }
    }
  }
  SetBlasThreads(options_.threads_per_cpu_device);
  // As the profiler does: freed blocks stay in the
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

std::vector<int> TorchStrategyExecutor::SlotParameters(int s, int slot) const {
  std::vector<int> parameters;
  for (int u : update_[s]) {
    if (SlotOfNode(u) == slot) parameters.push_back(view_.node(u).parameter);
  }
  return parameters;
}

absl::StatusOr<TorchStrategyExecutor::LocalParameterAt>
TorchStrategyExecutor::LocalParameter(absl::string_view name, int replica,
                                      int rank) const {
  for (int g = 0; g < view_.num_groups(); ++g) {
    for (int p : view_.group_parameters(g)) {
      if (view_.value(p).name != name) continue;
      const int replicas =
          strategy_.stages[strategy_.stage_of_op[g]].num_replicas();
      if (replica < 0 || replica >= replicas) {
        return absl::NotFoundError(
            absl::StrCat("parameter '", name, "' has ", replicas, " replicas"));
      }
      if (rank < 0 || rank >= T_) {
        return absl::NotFoundError(
            absl::StrCat("parameter '", name, "' has no tensor rank ", rank));
      }
      const int d = ParameterDevice(p, replica, rank);
      if (!Local(d)) {
        return absl::NotFoundError(absl::StrCat("parameter '", name,
                                                "' replica ", replica,
                                                " is on rank ", RankOf(d)));
      }
      return LocalParameterAt{p, d};
    }
  }
  return absl::NotFoundError(absl::StrCat("no parameter '", name, "'"));
}

int TorchStrategyExecutor::ParameterDevice(int p, int k, int r) const {
  const int g = group_of_parameter_[p];
  const PipelineStage& stage = strategy_.stages[strategy_.stage_of_op[g]];
  if (T_ > 1) return stage.TensorGroup(k)[r];
  return stage.device(k, SlotOfOp(strategy_, g));
}

std::vector<int> TorchStrategyExecutor::ReplicaMembers(int d) const {
  const PipelineStage& stage = strategy_.stages[stage_of_device_[d]];
  const int k = replica_of_device_[d];
  return T_ > 1 ? stage.TensorGroup(k) : stage.replicas[k].device_of_slot;
}

std::unique_ptr<c10::DebugInfoGuard> TorchStrategyExecutor::ReportAllocations(
    int d) {
  if (!options_.measure_allocations) return nullptr;
  return std::make_unique<c10::DebugInfoGuard>(
      c10::DebugInfoKind::PROFILER_STATE,
      std::make_shared<ThreadAllocationReporter>(&allocations_, d));
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::Resident(
    absl::string_view name) const {
  const int t = graph_.FindTensor(name);
  const int v = t < 0 ? -1 : value_of_tensor_[t];
  if (v < 0 || view_.value(v).producer >= 0) {
    return absl::NotFoundError(
        absl::StrCat("no parameter, graph input or constant '", name, "'"));
  }
  if (view_.value(v).kind == ValueKind::kParameter) return Parameter(name, 0);
  if (!host_[v].defined()) {
    return absl::NotFoundError(absl::StrCat("'", name, "' has no value"));
  }
  return host_[v].to(torch::kCPU).clone();
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::Parameter(
    absl::string_view name, int replica) const {
  ASSIGN_OR_RETURN(LocalParameterAt at, LocalParameter(name, replica));
  const int s = strategy_.stage_of_op[group_of_parameter_[at.value]];
  // ZeRO-3: the replica's shard holds part of it; gathered whole.
  if (ShardsParametersOf(s)) {
    const PipelineStage& stage = strategy_.stages[s];
    for (int k = 0; k < stage.num_replicas(); ++k) {
      for (int r = 0; r < T_; ++r) {
        const int d = ParameterDevice(at.value, k, r);
        if (!Local(d)) {
          return absl::FailedPreconditionError(
              absl::StrCat("parameter '", name, "' (ZeRO-3): replica ", k,
                           "'s shard of it is on rank ", RankOf(d),
                           "; ParameterShard gives this rank's shards"));
        }
      }
    }
    if (T_ == 1) return Gather(at.value, at.device).to(torch::kCPU);
  }
  if (T_ > 1) return WholeParameter(at.value, replica);
  return params_[at.device][at.value].to(torch::kCPU).clone();
}

std::vector<std::vector<int>> TorchStrategyExecutor::ReplicaLists(int s) const {
  const PipelineStage& stage = strategy_.stages[s];
  std::vector<std::vector<int>> lists;
  if (stage.tensor() > 1) {
    for (int d : stage.TensorGroup(0)) lists.push_back(ReplicaDevices(d));
    return lists;
  }
  for (int slot = 0; slot < stage.width(); ++slot) {
    lists.push_back(SlotDevices(stage, slot));
  }
  return lists;
}

std::vector<int> TorchStrategyExecutor::ReplicaDevices(int d) const {
  const PipelineStage& stage = strategy_.stages[stage_of_device_[d]];
  if (T_ == 1) return SlotDevices(stage, slot_of_device_[d]);
  std::vector<int> devices;
  for (int k = 0; k < stage.num_replicas(); ++k) {
    devices.push_back(stage.TensorGroup(k)[tensor_rank_of_device_[d]]);
  }
  return devices;
}

absl::StatusOr<std::unique_ptr<StrategyExecutor>> StrategyExecutor::Create(
    const TrainingView& view, const Cluster& cluster, const Strategy& strategy,
    const ExecutorOptions& options) {
  RETURN_IF_ERROR(CheckStrategy(view, cluster, strategy));
  RETURN_IF_ERROR(CheckRunnable(view.forward()));
  for (size_t s = 0; s < strategy.stages.size(); ++s) {
    if (strategy.stages[s].recompute == Recompute::kNone) continue;
    if (strategy.stages[s].width() > 1) {
      return absl::UnimplementedError(absl::StrCat(
          "stage ", s, " recomputes over ", strategy.stages[s].width(),
          " devices per replica; the strategy executor recomputes stages "
          "of one device per replica"));
    }
    for (size_t op = 0; op < strategy.stage_of_op.size(); ++op) {
      const Op& o = view.forward().op(static_cast<int>(op));
      if (strategy.stage_of_op[op] == static_cast<int>(s) &&
          DrawsRandomNumbers(view.forward(), o)) {
        return absl::UnimplementedError(absl::StrCat(
            "stage ", s, " recomputes '", o.key, "' (", o.op_type,
            "), which draws random numbers: a rerun would draw others"));
      }
    }
  }
  // Devices this process drives: another rank's GPUs need not be visible
  // here (a placeholder stands in for them, as TorchDevices says).
  std::vector<char> local;
  if (options.ranks != nullptr) {
    if (static_cast<int>(options.rank_of_device.size()) !=
        cluster.num_devices()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank_of_device has ", options.rank_of_device.size(),
          " entries; the cluster has ", cluster.num_devices(), " devices"));
    }
    bool drives = false;
    for (int d = 0; d < cluster.num_devices(); ++d) {
      const int r = options.rank_of_device[d];
      if (r < 0 || r >= options.ranks->world_size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("device ", cluster.device(d).name, " has rank ", r,
                         ", not in [0, ", options.ranks->world_size(), ")"));
      }
      local.push_back(r == options.ranks->rank());
      drives = drives || local.back();
    }
    if (!drives) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", options.ranks->rank(), " drives no device"));
    }
  }
  ASSIGN_OR_RETURN(std::vector<torch::Device> devices,
                   TorchDevices(cluster, local));
  RETURN_IF_ERROR(CheckStepPrecision(view.options(), cluster, devices, local));
  auto executor = std::make_unique<TorchStrategyExecutor>(
      view, cluster, strategy, options, std::move(devices));
  RETURN_IF_ERROR(
      CatchExceptions("strategy executor: ", [&] { return executor->Init(); }));
  return std::unique_ptr<StrategyExecutor>(std::move(executor));
}

absl::StatusOr<std::unique_ptr<StrategyExecutor>> StrategyExecutor::Create(
    const TrainingView& view, const Cluster& cluster,
    const Placement& placement, const ExecutorOptions& options) {
  RETURN_IF_ERROR(CheckPlacementShape(view, placement, cluster.num_devices()));
  return Create(view, cluster, StrategyOfPlacement(placement), options);
}

}  // namespace placer
