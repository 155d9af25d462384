// The op-placement executor (runtime/executor.h): the tables Init builds
// from the placement, the step itself, Resident, CheckRunnable and Create.
// The workers and the step's bookkeeping are executor_workers.cc's, the
// nodes' bodies executor_nodes.cc's; the class is executor_impl.h.
#include "runtime/executor.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/host_setup.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "profiles/signature.h"
#include "runtime/allocation_tracker.h"
#include "runtime/cpu_cores.h"
#include "runtime/executor_impl.h"
#include "runtime/executor_ops.h"
#include "runtime/initial_values.h"
#include "runtime/op_autograd.h"
#include "runtime/step_exchange.h"
#include "runtime/torch_devices.h"
#include "runtime/torch_ops.h"
#include "simulator/gradient_partials.h"
#include "simulator/simulator.h"

namespace placer {

absl::Status TorchExecutor::Init() {
  {
    // No worker runs yet; the tables' per-step parts are mu_'s.
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(InitTablesLocked());
  }
  StartWorkers();
  return absl::OkStatus();
}

absl::Status TorchExecutor::InitTablesLocked() {
  const int n = static_cast<int>(view_.nodes().size());
  const int values = static_cast<int>(view_.values().size());
  key_rank_ = NodeKeyRanks(view_);
  priority_ = options_.priorities;
  if (priority_.empty()) {
    priority_.resize(n);
    for (size_t k = 0; k < view_.topological_order().size(); ++k) {
      priority_[view_.topological_order()[k]] = static_cast<double>(k);
    }
  } else if (static_cast<int>(priority_.size()) != n) {
    return absl::InvalidArgumentError("executor: priorities must cover every node");
  }
  precision_ = StepPrecisionFor(graph_, view_.options().precision);
  needs_gradient_.assign(graph_.ops().size(), {});
  for (size_t op = 0; op < graph_.ops().size(); ++op) {
    int backward = view_.backward_node(static_cast<int>(op));
    if (backward >= 0) needs_gradient_[op] = InputsNeedingGradient(view_, backward);
  }
  control_dependents_.assign(n, {});
  for (int i = 0; i < n; ++i) {
    for (int c : view_.node(i).control_inputs) control_dependents_[c].push_back(i);
  }
  value_of_tensor_.assign(graph_.tensors().size(), -1);
  for (int v = 0; v < values; ++v) {
    const TrainingValue& value = view_.value(v);
    if (value.kind != ValueKind::kGradient && value.tensor >= 0) {
      value_of_tensor_[value.tensor] = v;
    }
  }
  const int sums = static_cast<int>(view_.gradient_sums().size());
  partials_ = CountPartials(view_, device_of_node_, num_devices_);
  sum_buffer_.assign(static_cast<size_t>(sums) * num_devices_, torch::Tensor());
  sum_owned_.assign(static_cast<size_t>(sums) * num_devices_, 0);
  sum_done_.assign(static_cast<size_t>(sums) * num_devices_, 0);
  sum_mu_ = std::make_unique<std::mutex[]>(std::max(1, sums));
  home_.assign(values, -1);
  for (int g = 0; g < view_.num_groups(); ++g) {
    for (int p : view_.group_parameters(g)) {
      home_[p] = device_of_node_[view_.group_nodes(g)[0]];
    }
  }

  resident_.assign(static_cast<size_t>(values) * num_devices_, torch::Tensor());
  updates_.clear();
  updates_.resize(values);
  resident_bytes_.assign(num_devices_, 0);
  seed_grad_.assign(graph_.tensors().size(), torch::Tensor());
  ASSIGN_OR_RETURN(HostValues drawn,
                   DrawHostValues(view_, options_.seed, options_.input_values));
  for (int v = 0; v < values; ++v) {
    const torch::Tensor& host = drawn.value[v];
    if (!host.defined()) continue;
    if (view_.value(v).kind == ValueKind::kParameter) {
      int d = home_[v];
      if (d < 0 || !Local(d)) continue;  // no group reads it, or another rank's
      torch::Tensor w = host.to(devices_[d]);
      resident_[static_cast<size_t>(v) * num_devices_ + d] = w;
      const Optimizer optimizer = view_.options().optimizer;
      updates_[v] =
          std::make_unique<ParameterUpdate>(optimizer, options_.update, w);
      // The state the view counts (TrainingOptions), which ParameterUpdate
      // makes up front.
      resident_bytes_[d] += static_cast<int64_t>(
          (1 + view_.options().optimizer_state_per_parameter_byte()) *
          static_cast<double>(TensorBytes(w)));
    } else {
      // Inputs and constants: on each device that reads them, from the
      // start (the lowering copies none).
      std::set<int> readers;
      for (int c : view_.value(v).consumers) readers.insert(device_of_node_[c]);
      for (int d : readers) {
        if (!Local(d)) continue;
        torch::Tensor c = host.to(devices_[d]);
        resident_[static_cast<size_t>(v) * num_devices_ + d] = c;
        resident_bytes_[d] += TensorBytes(c);
      }
    }
  }
  // Loss targets, on the device of the output's producer.
  targets_ = std::move(drawn.target);
  for (int out : graph_.outputs()) {
    int producer = graph_.tensor(out).producer;
    if (targets_[out].defined() && producer >= 0 &&
        Local(device_of_node_[producer])) {
      targets_[out] = targets_[out].to(devices_[device_of_node_[producer]]);
    }
  }
  // Made on each GPU's default stream: whole before the workers read it on
  // theirs.
  for (int d = 0; d < num_devices_; ++d) {
    if (Local(d)) Synchronize(devices_[d]);
  }
  copies_.assign(static_cast<size_t>(values) * num_devices_, torch::Tensor());
  pending_.assign(n, 0);
  saved_.assign(graph_.ops().size(), SavedOp());
  ready_.resize(num_devices_);
  for (int d = 0; d < num_devices_; ++d) {
    device_cv_.push_back(std::make_unique<absl::CondVar>());
  }
  device_idle_.assign(num_devices_, Idle());
  // A link worker per direction the lowering copies on (one end here);
  // what crosses into this rank each step: each of its copies, once.
  for (const CopyTask& copy : memory_->lowered().copies) {
    if (!Local(copy.src) && !Local(copy.dst)) continue;
    links_[{copy.src, copy.dst}];
    if (!Local(copy.src)) ++expected_[{copy.src, copy.dst}];
  }
  for (auto& [pair, count] : expected_) received_[pair] = 0;
  local_nodes_ = 0;
  local_nodes_on_device_.assign(num_devices_, 0);
  waits_untimed_.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    if (!Local(device_of_node_[i])) continue;
    ++local_nodes_;
    const int d = device_of_node_[i];
    ++local_nodes_on_device_[d];
    char& waits = waits_untimed_[i];
    for (int v : view_.node(i).outputs) {
      waits |= !memory_->copy_destinations(v).empty();
      const int sum = view_.sum_of(v);
      waits |= sum >= 0 && device_of_node_[view_.gradient_sums()[sum].sink] != d;
    }
    for (int v : view_.node(i).inputs) {
      waits |= ValueCopyTask(v, d) >= 0;
    }
    waits |= !view_.sums_read_by(i).empty();
    for (int c : view_.node(i).control_inputs) {
      if (device_of_node_[c] != device_of_node_[i]) {
        return absl::InternalError(absl::StrCat(
            "control edge between devices at '", view_.node(i).key, "'"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StepReport> TorchExecutor::Step() {
  const int n = static_cast<int>(view_.nodes().size());
  const int values = static_cast<int>(view_.values().size());
  auto reporting = ReportAllocations(-1);  // what this thread frees
  absl::MutexLock lock(&mu_);
  if (broken_) {
    return absl::FailedPreconditionError(
        "an earlier step failed across ranks, which leaves their channels out "
        "of step: start the run again");
  }
  allocations_.Start(resident_bytes_);
  failure_ = absl::OkStatus();
  report_ = StepReport();
  report_.node_runs.reserve(n);
  report_.busy_seconds.assign(num_devices_, 0);
  loss_ = 0;
  freed_.clear();
  memory_->StartStep(&freed_);
  std::fill(seed_grad_.begin(), seed_grad_.end(), torch::Tensor());
  std::fill(sum_done_.begin(), sum_done_.end(), 0);
  for (int i = 0; i < n; ++i) {
    const TrainingNode& node = view_.node(i);
    int d = device_of_node_[i];
    int pending = static_cast<int>(node.control_inputs.size());
    for (int v : node.inputs) {
      // Graph inputs, constants and parameters at home are there already.
      if (view_.sum_of(v) < 0 &&
          !resident_[static_cast<size_t>(v) * num_devices_ + d].defined()) {
        ++pending;
      }
    }
    // A gradient sum: one buffer from each device that makes partials.
    for (int s : view_.sums_read_by(i)) pending += partials_.sources(s);
    pending_[i] = pending;
  }
  // Resident values where they live.
  for (int v = 0; v < values; ++v) {
    const TrainingValue& value = view_.value(v);
    if (value.producer >= 0) continue;
    for (int d = 0; d < num_devices_; ++d) {
      const torch::Tensor& r = resident_[static_cast<size_t>(v) * num_devices_ + d];
      if (r.defined()) Slot(v, d) = r;
    }
  }
  remaining_nodes_ = local_nodes_;
  nodes_left_ = local_nodes_on_device_;
  sends_pending_ = 0;
  for (auto& [pair, count] : received_) count = 0;
  step_start_ = Clock::now();
  // Parameters go to remote readers at the start.
  for (int v = 0; v < values; ++v) {
    if (view_.value(v).kind != ValueKind::kParameter || home_[v] < 0 ||
        !Local(home_[v])) {
      continue;
    }
    for (int e : memory_->copy_destinations(v)) SendLocked(v, home_[v], e);
  }
  for (int i = 0; i < n; ++i) {
    if (pending_[i] == 0 && Local(device_of_node_[i])) ReadyLocked(i);
  }
  running_ = true;
  WakeAllLocked();
  if (Distributed()) {
    WaitForStepLocked();
  } else {
    while (remaining_nodes_ != 0 && (failure_.ok() || in_flight_ != 0)) {
      done_cv_.Wait(&mu_);
    }
  }
  running_ = false;
  report_.seconds = SecondsSince(step_start_);
  // Drain what a failure left behind.
  for (auto& [pair, queue] : links_) queue.values.clear();
  for (auto& q : ready_) {
    while (!q.empty()) q.pop();
  }
  std::fill(copies_.begin(), copies_.end(), torch::Tensor());
  std::fill(sum_buffer_.begin(), sum_buffer_.end(), torch::Tensor());
  std::fill(saved_.begin(), saved_.end(), SavedOp());
  report_.loss = loss_;
  // This rank's devices (the others' are theirs to report).
  report_.peak_memory_bytes = memory_->peak_bytes();
  for (int d = 0; d < num_devices_; ++d) {
    if (!Local(d)) report_.peak_memory_bytes[d] = 0;
  }
  if (options_.measure_allocations) {
    report_.allocated_peak_bytes = allocations_.peaks();
  }
  if (Distributed()) {
    absl::StatusOr<StepReport> merged = ExchangeStepReports(
        *options_.ranks, step_index_++, report_, failure_);
    if (!merged.ok()) {
      broken_ = true;
      return merged.status();
    }
    report_ = std::move(*merged);
  }
  if (!failure_.ok()) return failure_;
  return std::move(report_);
}

void TorchExecutor::WaitForStepLocked() {
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (remaining_nodes_ == 0 && sends_pending_ == 0) ||
           (!failure_.ok() && in_flight_ == 0);
  };
  bool published = false;
  // A local failure (or one seen below): tell the other ranks, and wake
  // this rank's sends and receives, which will never complete now.
  auto publish = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Status failure = failure_;
    mu_.Unlock();
    options_.ranks->PublishFailure(failure);
    options_.ranks->AbortPending();
    mu_.Lock();
    published = true;
  };
  while (!done()) {
    if (!failure_.ok() && !published) {
      publish();
      continue;
    }
    // Until done, or 50 ms without: then the store is asked.
    const absl::Time deadline = absl::Now() + absl::Milliseconds(50);
    while (!done() && !done_cv_.WaitWithDeadline(&mu_, deadline)) {
    }
    if (done() || !failure_.ok()) continue;
    mu_.Unlock();
    std::optional<absl::Status> remote = options_.ranks->PublishedFailure();
    mu_.Lock();
    if (remote.has_value()) FailLocked(*remote);
  }
  if (!failure_.ok() && !published) publish();
}

absl::StatusOr<torch::Tensor> TorchExecutor::Resident(
    absl::string_view name) const {
  int t = graph_.FindTensor(name);
  int v = t < 0 ? -1 : value_of_tensor_[t];
  if (v < 0 || view_.value(v).producer >= 0) {
    return absl::NotFoundError(
        absl::StrCat("no parameter, graph input or constant '", name, "'"));
  }
  for (int d = 0; d < num_devices_; ++d) {
    const torch::Tensor& r = resident_[static_cast<size_t>(v) * num_devices_ + d];
    if (r.defined()) return r.to(torch::kCPU).clone();
  }
  return absl::NotFoundError(absl::StrCat("'", name, "' is read by no op"));
}

absl::Status CheckRunnable(const Graph& graph) {
  std::vector<std::string> missing;
  for (int i : OpsUnsupportedByExecutor(graph)) {
    const Op& op = graph.op(i);
    missing.push_back(absl::StrCat("'", op.key, "' (",
                                   op.domain.empty() ? "" : op.domain + ":",
                                   op.op_type, ")"));
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "no LibTorch kernel for ", missing.size(), " op(s): ",
      absl::StrJoin(missing.begin(),
                    missing.begin() + std::min<size_t>(missing.size(), 20), ", "),
      missing.size() > 20 ? ", ..." : ""));
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(
    const TrainingView& view, const Cluster& cluster,
    const Placement& placement, const ExecutorOptions& options) {
  const Graph& g = view.forward();
  RETURN_IF_ERROR(CheckPlacementShape(view, placement, cluster.num_devices()));
  RETURN_IF_ERROR(CheckRunnable(g));
  std::vector<char> local(cluster.num_devices(), 1);
  if (options.ranks != nullptr) {
    if (static_cast<int>(options.rank_of_device.size()) !=
        cluster.num_devices()) {
      return absl::InvalidArgumentError(
          "executor: rank_of_device must give every device's rank");
    }
    bool any = false;
    for (int d = 0; d < cluster.num_devices(); ++d) {
      const int r = options.rank_of_device[d];
      if (r < 0 || r >= options.ranks->world_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "executor: device ", cluster.device(d).name, " has rank ", r,
            ", not in [0, ", options.ranks->world_size(), ")"));
      }
      local[d] = r == options.ranks->rank();
      any = any || local[d];
    }
    if (!any) {
      return absl::InvalidArgumentError(absl::StrCat(
          "executor: rank ", options.ranks->rank(), " drives no device"));
    }
  }
  ASSIGN_OR_RETURN(std::vector<torch::Device> devices,
                   TorchDevices(cluster, local));
  RETURN_IF_ERROR(
      CheckStepPrecision(view.options(), cluster, devices, local));
  auto executor = std::make_unique<TorchExecutor>(
      view, cluster, placement, options, std::move(devices), std::move(local));
  // Init copies every parameter to its device: LibTorch throws there on
  // out of memory, which comes back as a status like every other failure.
  RETURN_IF_ERROR(
      CatchExceptions("executor: ", [&] { return executor->Init(); }));
  return executor;
}

}  // namespace placer

