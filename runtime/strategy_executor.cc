#include "runtime/strategy_executor.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/host_setup.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "profiles/signature.h"
#include "runtime/initial_values.h"
#include "runtime/op_autograd.h"
#include "runtime/torch_devices.h"

namespace placer {
namespace {

using Clock = SteadyClock;

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
        D_(cluster.num_devices()) {}

  absl::Status Init();
  absl::StatusOr<StrategyStepReport> Step() override;
  absl::StatusOr<torch::Tensor> Parameter(absl::string_view name,
                                          int replica) const override;

 private:
  int StageOfNode(int n) const {
    return strategy_.stage_of_op[view_.node(n).forward_op];
  }
  // A copy on `device` when `tensor` was made on another device.
  torch::Tensor On(const torch::Tensor& tensor, int from, int device) const {
    if (from == device) return tensor;
    return tensor.to(devices_[device], /*non_blocking=*/false, /*copy=*/true);
  }
  // Waits until `done[stage * M + j]` for every stage in `stages`; false
  // when the step failed meanwhile.
  bool WaitFor(const std::vector<char>& done, const std::vector<int>& stages,
               int j);
  absl::Status RunForward(int s, int j, int d);
  absl::Status RunBackward(int s, int j, int d);
  void Worker(int d, double* busy);
  // After device d's last task: the allreduce of stage s's gradients and,
  // once the whole step has succeeded, d's update.
  void ReduceAndUpdate(int s, int d, double* busy);
  void Fail(const absl::Status& status);

  const TrainingView& view_;
  const Graph& graph_;
  const Cluster& cluster_;
  const Strategy strategy_;
  const ExecutorOptions options_;
  const std::vector<torch::Device> devices_;
  const int S_, M_, D_;

  std::vector<std::vector<int>> forward_, backward_, update_;  // per stage
  std::vector<std::vector<int>> forward_sources_, gradient_sources_;
  std::vector<int> stage_of_device_, replica_of_device_;
  std::vector<int> value_of_tensor_;
  // Per value: how many times forward nodes read it (an op reading a tensor
  // twice counts twice); a micro-batch's copy is freed after its last read.
  std::vector<int> forward_reads_;
  std::vector<std::vector<bool>> needs_gradient_;  // per op
  std::vector<torch::Tensor> host_;                // constants, per value
  std::vector<HostValues> batches_;                // per micro-batch
  // [device][micro-batch][tensor]: loss targets on the devices that run
  // the micro-batch.
  std::vector<std::vector<std::vector<torch::Tensor>>> targets_;
  // Per device, per value: parameters, momentum, gradient accumulators.
  std::vector<std::vector<torch::Tensor>> params_, momentum_, accum_;

  // The step's state.
  std::mutex mu_;
  std::condition_variable cv_;
  absl::Status failure_;
  std::vector<char> forward_done_, backward_done_;  // [s * M + j]
  std::vector<std::vector<torch::Tensor>> values_;  // [j][value]
  std::vector<int> value_device_;                   // [j * values + v]
  std::vector<int> reads_left_;                     // [j * values + v]
  std::vector<std::vector<torch::Tensor>> sums_;    // [j][gradient sum]
  std::vector<std::vector<SavedOp>> saved_;         // [j][op]
  std::vector<std::vector<torch::Tensor>> seeds_;   // [j][tensor]
  std::vector<double> loss_;                        // [j]
  std::vector<int> stage_finished_;  // per stage: replicas past their tasks
  int workers_finished_ = 0, workers_ = 0;
};

absl::Status TorchStrategyExecutor::Init() {
  const int values = static_cast<int>(view_.values().size());
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
  // Which stages each stage waits for, per micro-batch.
  std::vector<std::set<int>> forward_from(S_), gradient_from(S_);
  for (int v = 0; v < values; ++v) {
    const TrainingValue& value = view_.value(v);
    if (value.kind != ValueKind::kActivation || value.producer < 0) continue;
    const int from = StageOfNode(value.producer);
    for (int c : value.consumers) {
      if (StageOfNode(c) != from) forward_from[StageOfNode(c)].insert(from);
    }
  }
  for (const GradientSum& sum : view_.gradient_sums()) {
    const int to = StageOfNode(sum.sink);
    for (int p : sum.partials) {
      const int from = StageOfNode(view_.value(p).producer);
      if (from != to) gradient_from[to].insert(from);
    }
  }
  for (int s = 0; s < S_; ++s) {
    forward_sources_.emplace_back(forward_from[s].begin(), forward_from[s].end());
    gradient_sources_.emplace_back(gradient_from[s].begin(),
                                   gradient_from[s].end());
  }
  stage_of_device_.assign(D_, -1);
  replica_of_device_.assign(D_, -1);
  for (int s = 0; s < S_; ++s) {
    for (size_t k = 0; k < strategy_.stages[s].devices.size(); ++k) {
      stage_of_device_[strategy_.stages[s].devices[k]] = s;
      replica_of_device_[strategy_.stages[s].devices[k]] = static_cast<int>(k);
    }
  }
  value_of_tensor_.assign(graph_.tensors().size(), -1);
  for (int v = 0; v < values; ++v) {
    const TrainingValue& value = view_.value(v);
    if (value.kind != ValueKind::kGradient && value.tensor >= 0) {
      value_of_tensor_[value.tensor] = v;
    }
  }
  forward_reads_.assign(values, 0);
  for (int s = 0; s < S_; ++s) {
    for (int n : forward_[s]) {
      const Op& op = graph_.op(view_.node(n).forward_op);
      if (AllOutputsFolded(graph_, op)) continue;
      for (int t : op.inputs) {
        if (t >= 0 && value_of_tensor_[t] >= 0) ++forward_reads_[value_of_tensor_[t]];
      }
    }
  }
  needs_gradient_.assign(graph_.ops().size(), {});
  for (size_t op = 0; op < graph_.ops().size(); ++op) {
    const int backward = view_.backward_node(static_cast<int>(op));
    if (backward >= 0) needs_gradient_[op] = InputsNeedingGradient(view_, backward);
  }

  absl::StatusOr<HostValues> first = DrawHostValues(view_, options_.seed);
  if (!first.ok()) return first.status();
  host_ = first->value;
  batches_.push_back(*first);
  for (int j = 1; j < M_; ++j) {
    absl::StatusOr<HostValues> batch = DrawBatch(view_, options_.seed + j);
    if (!batch.ok()) return batch.status();
    batches_.push_back(*std::move(batch));
  }
  targets_.assign(D_, {});
  for (int d = 0; d < D_; ++d) {
    if (stage_of_device_[d] < 0) continue;
    for (int j = 0; j < M_; ++j) {
      std::vector<torch::Tensor> on = batches_[j].target;
      for (torch::Tensor& t : on) {
        if (t.defined()) t = t.to(devices_[d]);
      }
      targets_[d].push_back(std::move(on));
    }
  }
  params_.assign(D_, std::vector<torch::Tensor>(values));
  momentum_.assign(D_, std::vector<torch::Tensor>(values));
  accum_.assign(D_, std::vector<torch::Tensor>(values));
  for (int g = 0; g < view_.num_groups(); ++g) {
    const int s = strategy_.stage_of_op[g];
    for (int p : view_.group_parameters(g)) {
      for (int d : strategy_.stages[s].devices) {
        params_[d][p] = host_[p].to(devices_[d], false, /*copy=*/true);
        momentum_[d][p] = torch::zeros_like(params_[d][p]);
      }
    }
  }
  SetBlasThreads(options_.threads_per_cpu_device);
  // As the placed executor and the profiler do: freed blocks stay in the
  // heap for reuse instead of page-faulting in fresh memory every step, so
  // the profile's node times hold here.
  KeepFreedHostMemory();
  return absl::OkStatus();
}

void TorchStrategyExecutor::Fail(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = status;
  cv_.notify_all();
}

bool TorchStrategyExecutor::WaitFor(const std::vector<char>& done,
                                    const std::vector<int>& stages, int j) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    if (!failure_.ok()) return true;
    for (int s : stages) {
      if (!done[s * M_ + j]) return false;
    }
    return true;
  });
  return failure_.ok();
}

absl::Status TorchStrategyExecutor::RunForward(int s, int j, int d) {
  const int values = static_cast<int>(view_.values().size());
  for (int n : forward_[s]) {
    const TrainingNode& node = view_.node(n);
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
          in = params_[d][v];
        } else if (value.kind == ValueKind::kGraphInput) {
          in = batches_[j].value[v].to(devices_[d]);
        } else if (value.producer < 0) {
          in = host_[v].to(devices_[d]);
        } else {
          std::lock_guard<std::mutex> lock(mu_);
          torch::Tensor& held = values_[j][v];
          in = On(held, value_device_[j * values + v], d);
          // Freed after its last read, as a framework frees it (what is
          // not freed early page-faults in fresh memory every step).
          if (--reads_left_[j * values + v] == 0) held = torch::Tensor();
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
        ForwardOp(graph_, op, std::move(inputs), devices_[d],
                  backward ? &needs_gradient_[node.forward_op] : nullptr,
                  &saved_[j][node.forward_op]);
    if (!results.ok()) {
      return absl::Status(results.status().code(),
                          absl::StrCat(node.key, " (micro-batch ", j,
                                       "): ", results.status().message()));
    }
    const double loss = OutputLosses(graph_, op, *results, targets_[d][j],
                                     1.0 / M_, &seeds_[j]);
    std::lock_guard<std::mutex> lock(mu_);
    loss_[j] += loss;
    for (int v : node.outputs) {
      const int t = view_.value(v).tensor;
      for (size_t k = 0; k < op.outputs.size() && k < results->size(); ++k) {
        if (op.outputs[k] == t && forward_reads_[v] > 0) {
          values_[j][v] = (*results)[k];
          value_device_[j * values + v] = d;
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TorchStrategyExecutor::RunBackward(int s, int j, int d) {
  // Tensors are only moved in and out of the shared slots under the lock;
  // the additions run outside it, so that workers do not wait for each
  // other's arithmetic.
  for (int n : backward_[s]) {
    const TrainingNode& node = view_.node(n);
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
          parts[k].push_back(std::move(sums_[j][sm]));
          sums_[j][sm] = torch::Tensor();
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
      return absl::Status(grads.status().code(),
                          absl::StrCat(node.key, " (micro-batch ", j,
                                       "): ", grads.status().message()));
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int sm = view_.sum_of(node.outputs[k]);
      if (sm < 0) continue;
      torch::Tensor partial = (*grads)[k];
      torch::Tensor buffer;
      {
        std::lock_guard<std::mutex> lock(mu_);
        buffer = std::move(sums_[j][sm]);
        sums_[j][sm] = torch::Tensor();
      }
      if (buffer.defined()) partial = buffer + partial;
      std::lock_guard<std::mutex> lock(mu_);
      // Another stage's partial may have come meanwhile (rare).
      torch::Tensor& slot = sums_[j][sm];
      slot = slot.defined() ? slot + partial : partial;
    }
  }
  // Parameters whose sums this backward completed: into this device's
  // accumulators (only this worker touches them during the tasks).
  std::vector<std::pair<int, torch::Tensor>> completed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int u : update_[s]) {
      const int p = view_.node(u).parameter;
      for (int sm : view_.sums_read_by(u)) {
        if (!sums_[j][sm].defined()) continue;
        completed.emplace_back(p, std::move(sums_[j][sm]));
        sums_[j][sm] = torch::Tensor();
      }
    }
  }
  for (auto& [p, g] : completed) {
    if (g.device() != devices_[d]) g = g.to(devices_[d]);
    // The first micro-batch's gradient becomes the buffer; later ones are
    // added in place (PyTorch's AccumulateGrad; the strategy simulator
    // charges the cost model's AccumulateSeconds for each).
    torch::Tensor& acc = accum_[d][p];
    if (acc.defined()) {
      acc.add_(g);
    } else {
      acc = g;
    }
  }
  return absl::OkStatus();
}

void TorchStrategyExecutor::Worker(int d, double* busy) {
  if (devices_[d].is_cpu()) at::set_num_threads(options_.threads_per_cpu_device);
  const int s = stage_of_device_[d];
  for (const ReplicaTask& task :
       ReplicaTaskOrder(strategy_, s, replica_of_device_[d])) {
    const int j = task.micro_batch;
    if (!WaitFor(task.backward ? backward_done_ : forward_done_,
                 task.backward ? gradient_sources_[s] : forward_sources_[s],
                 j)) {
      return;
    }
    const auto start = Clock::now();
    absl::Status status = CatchExceptions("", [&] {
      return task.backward ? RunBackward(s, j, d) : RunForward(s, j, d);
    });
    *busy += SecondsSince(start);
    if (!status.ok()) {
      Fail(status);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    (task.backward ? backward_done_ : forward_done_)[s * M_ + j] = 1;
    cv_.notify_all();
  }
  ReduceAndUpdate(s, d, busy);
}

void TorchStrategyExecutor::ReduceAndUpdate(int s, int d, double* busy) {
  const std::vector<int>& replicas = strategy_.stages[s].devices;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ++stage_finished_[s];
    ++workers_finished_;
    cv_.notify_all();
    cv_.wait(lock, [&] {
      return !failure_.ok() ||
             stage_finished_[s] == static_cast<int>(replicas.size());
    });
    if (!failure_.ok()) return;
  }
  // The allreduce, as soon as the stage's replicas are done: every replica
  // sums the replicas' accumulators in replica order on its own device
  // (the same additions in the same order: the same bits everywhere).
  std::vector<torch::Tensor> totals(update_[s].size());
  absl::Status status = CatchExceptions("allreduce: ", [&] {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < update_[s].size(); ++i) {
      const int p = view_.node(update_[s][i]).parameter;
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
  // Updates once every task of the step has succeeded (a failed step
  // updates nothing), each device its own replica's parameters.
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
    for (size_t i = 0; i < update_[s].size(); ++i) {
      if (!totals[i].defined()) continue;
      const int p = view_.node(update_[s][i]).parameter;
      momentum_[d][p].mul_(options_.momentum).add_(totals[i]);
      params_[d][p].add_(momentum_[d][p], -options_.learning_rate);
    }
    return absl::OkStatus();
  });
  *busy += SecondsSince(start);
  if (!status.ok()) Fail(status);
}

absl::StatusOr<StrategyStepReport> TorchStrategyExecutor::Step() {
  const int values = static_cast<int>(view_.values().size());
  failure_ = absl::OkStatus();
  forward_done_.assign(static_cast<size_t>(S_) * M_, 0);
  backward_done_.assign(static_cast<size_t>(S_) * M_, 0);
  values_.assign(M_, std::vector<torch::Tensor>(values));
  value_device_.assign(static_cast<size_t>(M_) * values, -1);
  reads_left_.clear();
  for (int j = 0; j < M_; ++j) {
    reads_left_.insert(reads_left_.end(), forward_reads_.begin(),
                       forward_reads_.end());
  }
  sums_.assign(M_, std::vector<torch::Tensor>(view_.gradient_sums().size()));
  saved_.assign(M_, std::vector<SavedOp>(graph_.ops().size()));
  seeds_.assign(M_, std::vector<torch::Tensor>(graph_.tensors().size()));
  loss_.assign(M_, 0);
  for (int d = 0; d < D_; ++d) {
    for (torch::Tensor& a : accum_[d]) a = torch::Tensor();
  }
  stage_finished_.assign(S_, 0);
  workers_finished_ = 0;
  workers_ = 0;
  for (int d = 0; d < D_; ++d) workers_ += stage_of_device_[d] >= 0;
  StrategyStepReport report;
  report.busy_seconds.assign(D_, 0);
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int d = 0; d < D_; ++d) {
    if (stage_of_device_[d] < 0) continue;
    workers.emplace_back(&TorchStrategyExecutor::Worker, this, d,
                         &report.busy_seconds[d]);
  }
  for (std::thread& t : workers) t.join();
  if (!failure_.ok()) {
    values_.clear();
    saved_.clear();
    return failure_;
  }
  report.seconds = SecondsSince(start);
  for (double l : loss_) report.loss += l;
  report.loss /= M_;
  values_.clear();
  saved_.clear();
  sums_.clear();
  return report;
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::Parameter(
    absl::string_view name, int replica) const {
  for (int g = 0; g < view_.num_groups(); ++g) {
    for (int p : view_.group_parameters(g)) {
      if (view_.value(p).name != name) continue;
      const std::vector<int>& replicas =
          strategy_.stages[strategy_.stage_of_op[g]].devices;
      if (replica < 0 || replica >= static_cast<int>(replicas.size())) {
        return absl::NotFoundError(absl::StrCat(
            "parameter '", name, "' has ", replicas.size(), " replicas"));
      }
      return params_[replicas[replica]][p].to(torch::kCPU).clone();
    }
  }
  return absl::NotFoundError(absl::StrCat("no parameter '", name, "'"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<StrategyExecutor>> StrategyExecutor::Create(
    const TrainingView& view, const Cluster& cluster,
    const Strategy& strategy, const ExecutorOptions& options) {
  if (absl::Status s = CheckStrategy(view, cluster, strategy); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRunnable(view.forward()); !s.ok()) return s;
  absl::StatusOr<std::vector<torch::Device>> devices = TorchDevices(cluster);
  if (!devices.ok()) return devices.status();
  auto executor = std::make_unique<TorchStrategyExecutor>(
      view, cluster, strategy, options, *std::move(devices));
  absl::Status init =
      CatchExceptions("strategy executor: ", [&] { return executor->Init(); });
  if (!init.ok()) return init;
  return std::unique_ptr<StrategyExecutor>(std::move(executor));
}

}  // namespace placer
