// A step of the strategy executor (runtime/strategy_executor.h): its state
// reset, the workers and receivers run, their readiness and failure, and
// the step's report (merged across ranks).
#include <algorithm>
#include <iterator>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
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

namespace placer {

void TorchStrategyExecutor::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  FailLocked(status);
}

void TorchStrategyExecutor::FailLocked(const absl::Status& status) {
  if (failure_.ok()) failure_ = status;
  cv_.SignalAll();
  slots_cv_.SignalAll();
  group_cv_.SignalAll();
  link_cv_.SignalAll();
}

bool TorchStrategyExecutor::ReadyLocked(int s, int j, bool backward) const {
  for (int from :
       backward ? crossings_.sum_sources(s) : crossings_.value_sources(s)) {
    if (Local(DeviceOf(from, j))) {
      if (!done_.at(from, j, backward)) return false;
      continue;
    }
    const std::vector<int>& crossing =
        backward ? crossings_.sums(from, s) : crossings_.values(from, s);
    if (arrived_[from].at(s, j, backward) < static_cast<int>(crossing.size())) {
      return false;
    }
  }
  return true;
}

std::vector<int> TorchStrategyExecutor::SlotNodes(const std::vector<int>& nodes,
                                                 int d) const {
  std::vector<int> mine;
  for (int n : nodes) {
    if (SlotOfNode(n) == slot_of_device_[d]) mine.push_back(n);
  }
  // One slot: the view's order (NextNode takes them as they come). Wide:
  // by priority, ties by node key, which NextNode scans for the first
  // ready one. Last to take first, so that taking the next is a pop from
  // the back.
  if (strategy_.stages[stage_of_device_[d]].width() > 1) {
    std::sort(mine.begin(), mine.end(), [&](int a, int b) {
      return std::make_pair(node_priority_[a], node_key_rank_[a]) <
             std::make_pair(node_priority_[b], node_key_rank_[b]);
    });
  }
  std::reverse(mine.begin(), mine.end());
  return mine;
}

int TorchStrategyExecutor::NextNode(std::vector<int>* pending, int j, int d) {
  if (pending->empty()) return -1;
  if (strategy_.stages[stage_of_device_[d]].width() == 1) {
    // One slot: the view's order is the task's (no other device feeds it).
    const int n = pending->back();
    pending->pop_back();
    return n;
  }
  const size_t N = view_.nodes().size();
  const PipelineStage& stage = strategy_.stages[stage_of_device_[d]];
  const int k = replica_of_device_[d];
  const auto start = SteadyClock::now();
  bool waited = false;
  absl::MutexLock lock(&mu_);
  while (failure_.ok()) {
    // From the back: the order SlotNodes gives.
    for (auto at = pending->rbegin(); at != pending->rend(); ++at) {
      const int n = *at;
      bool ready = true;
      for (int p : task_deps_[n]) {
        // What another rank's slot makes comes by link (ArrivedLocked).
        if (!node_done_[j * N + p] &&
            (!split_replicas_ || Local(stage.device(k, SlotOfNode(p))))) {
          ready = false;
          break;
        }
      }
      if (!ready || !ArrivedLocked(n, Lane(j, d), d)) continue;
      pending->erase(std::next(at).base());
      waited_seconds_[d] += SecondsSince(start);
      // Made ready by another thread since it began to wait.
      if (waited) handoffs_[d].push_back(SecondsSince(slots_given_));
      return n;
    }
    slots_cv_.Wait(&mu_);
    waited = true;
  }
  waited_seconds_[d] += SecondsSince(start);
  return -1;
}

absl::Status TorchStrategyExecutor::CheckMemory(int n, int j, int d) {
  if (!options_.enforce_memory || !options_.measure_allocations) {
    return absl::OkStatus();
  }
  const int64_t limit = cluster_.device(d).memory_bytes;
  const int64_t held = allocations_.peak(d);
  if (limit <= 0 || held <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory: ", cluster_.device(d).name, " held ", held,
      " bytes (what it held before the step and what LibTorch allocated "
      "in it), over its ", limit, " at '", view_.node(n).key,
      "' (micro-batch ", j, ")"));
}

void TorchStrategyExecutor::MarkNodeDone(int n, int j) {
  if (!waited_on_[n]) return;
  absl::MutexLock lock(&mu_);
  node_done_[j * view_.nodes().size() + n] = 1;
  GiveToSlotsLocked();
}

void TorchStrategyExecutor::GiveToSlotsLocked() {
  slots_given_ = SteadyClock::now();
  // Only the workers of a wide replica wait on slots_cv_.
  slots_cv_.SignalAll();
}

absl::Status TorchStrategyExecutor::BeforeNode(const TrainingNode& node) {
  if (!options_.before_node) return absl::OkStatus();
  absl::Status s = options_.before_node(node);
  if (s.ok()) return s;
  return WithContext(s, absl::StrCat("'", node.key, "': "));
}

void TorchStrategyExecutor::ResetStepLocked() {
  const int sums = static_cast<int>(view_.gradient_sums().size());
  failure_ = absl::OkStatus();
  done_ = PassTable<char>(S_, M_, 0);
  arrived_.assign(S_, PassTable<int>(S_, M_, 0));
  const int lanes = M_ * T_;
  values_.assign(lanes, std::vector<torch::Tensor>(V_));
  value_device_.assign(static_cast<size_t>(lanes) * V_, -1);
  // Reads by this process's tasks, and one per send to another rank.
  reads_left_.assign(static_cast<size_t>(lanes) * V_, 0);
  for (int j = 0; j < M_; ++j) {
    for (int b = 0; b < S_; ++b) {
      const PipelineStage& stage = strategy_.stages[b];
      const std::vector<int> group =
          stage.TensorGroup(j % stage.num_replicas());
      if (stage.width() > 1) {
        // Reads by this process's slots of what they hold: what another
        // slot of the stage made is read from its link's copy, let go
        // after its last read there (RunForward).
        const int k = j % stage.num_replicas();
        for (int slot = 0; slot < stage.width(); ++slot) {
          if (!Local(stage.device(k, slot))) continue;
          for (int v = 0; v < V_; ++v) {
            const int producer = view_.value(v).producer;
            if (producer >= 0 && StageOfNode(producer) == b &&
                SlotOfNode(producer) != slot) {
              continue;
            }
            reads_left_[static_cast<size_t>(j) * T_ * V_ + v] +=
                slot_reads_[b][slot][v];
          }
        }
        if (split_replicas_) continue;
      } else {
        for (int r = 0; r < T_; ++r) {
          if (!Local(group[r])) continue;
          for (int v = 0; v < V_; ++v) {
            reads_left_[(j * T_ + r) * V_ + v] += forward_reads_[b][v];
          }
        }
      }
      if (Local(DeviceOf(b, j))) continue;
      for (int a = 0; a < S_; ++a) {
        if (!Local(DeviceOf(a, j))) continue;
        // Sent by the replica's first device (its lane).
        for (int v : crossings_.values(a, b)) {
          ++reads_left_[static_cast<size_t>(j) * T_ * V_ + v];
        }
      }
    }
  }
  partials_.assign(lanes, StagePartials(sums, S_, W_));
  slots_done_ = PassTable<int>(S_, M_, 0);
  slots_started_ = PassTable<int>(S_, M_, 0);
  waited_seconds_.assign(D_, 0);
  handoffs_.assign(D_ + link_tables_.devices.size(), {});
  links_.given.assign(link_tables_.devices.size(), {});
  node_runs_.assign(D_, {});
  transfers_.assign(D_, {});
  copy_seconds_.assign(D_, 0);
  links_.queued.assign(link_tables_.devices.size(), {});
  links_.arrived.clear();
  link_transfers_.assign(link_tables_.devices.size(), {});
  node_done_.assign(W_ > 1 ? static_cast<size_t>(M_) * view_.nodes().size() : 0,
                    0);
  saved_.assign(lanes, std::vector<SavedOp>(graph_.ops().size()));
  tensor_saved_.assign(T_ > 1 ? lanes : 0,
                       std::vector<TensorParallelSaved>(graph_.ops().size()));
  group_exchanges_.clear();
  kept_.assign(static_cast<size_t>(S_) * M_ * T_, {});
  kept_reads_.assign(static_cast<size_t>(S_) * M_ * T_, {});
  parked_reruns_.assign(static_cast<size_t>(S_) * M_ * T_, {});
  if (strategy_.zero == ZeroStage::kParameters) {
    parked_.assign(lanes, std::vector<torch::Tensor>(V_));
  }
  rounds_delivered_.assign(static_cast<size_t>(S_) * W_ * T_ * M_, 0);
  replica_exchanges_.clear();
  replica_exchanges_made_.assign(D_, 0);
  prefetched_.assign(D_, {-1, ReplicaTicket{0, -1}});
  if (ShardsGradients(strategy_.zero)) {
    std::vector<int> shards(V_, 0);
    for (int p = 0; p < V_; ++p) {
      if (group_of_parameter_[p] < 0) continue;
      shards[p] = strategy_.stages[strategy_.stage_of_op[group_of_parameter_[p]]]
                      .num_replicas() *
                  T_;
    }
    gradient_rounds_.Reset(shards);
  }
  seeds_.assign(lanes, std::vector<torch::Tensor>(graph_.tensors().size()));
  loss_.assign(M_, 0);
  for (int d = 0; d < D_; ++d) {
    for (torch::Tensor& a : accum_[d]) a = torch::Tensor();
  }
  tasks_done_.assign(D_, 0);
  updated_.assign(static_cast<size_t>(S_) * W_ * T_, 0);
  workers_finished_ = 0;
  workers_ = 0;
  for (int d = 0; d < D_; ++d) workers_ += stage_of_device_[d] >= 0 && Local(d);
}

absl::StatusOr<StepReport> TorchStrategyExecutor::Step() {
  {
    absl::MutexLock lock(&mu_);
    ResetStepLocked();
    if (memory_ != nullptr) memory_->StartStep();
    if (pass_memory_ != nullptr) pass_memory_->StartStep();
    step_started_ = SteadyClock::now();
  }
  auto reporting = ReportAllocations(-1);  // what this thread frees
  allocations_.Start(resident_bytes_);
  StepReport report;
  report.busy_seconds.assign(D_, 0);
  const auto start = SteadyClock::now();
  // What runs a step: each device's worker, each link's receiver and link
  // worker.
  std::vector<std::function<void()>> bodies;
  for (int d = 0; d < D_; ++d) {
    if (stage_of_device_[d] < 0 || !Local(d)) continue;
    double* busy = &report.busy_seconds[d];
    bodies.push_back([this, d, busy] { Worker(d, busy); });
  }
  for (const auto& [link, expected] : expected_) {
    const int src = link.first, dst = link.second, n = expected;
    bodies.push_back([this, src, dst, n] { Receiver(src, dst, n); });
  }
  for (int link = 0; link < static_cast<int>(link_tables_.devices.size());
       ++link) {
    bodies.push_back([this, link] { LinkWorker(link); });
  }
  // One worker and nothing else (one device, not distributed, not pinned):
  // it runs on this thread, which no other thread could hand work to; its
  // intra-op thread count is put back after.
  const bool inline_worker =
      bodies.size() == 1 && !Distributed() && cores_.empty();
  int running = 0;
  std::vector<std::thread> threads;
  if (inline_worker) {
    const int intra_op_threads = at::get_num_threads();
    bodies[0]();
    if (at::get_num_threads() != intra_op_threads) {
      at::set_num_threads(intra_op_threads);
    }
    bodies.clear();
  }
  {
    // Threads start under the lock, so `running` is counted before any
    // of them can end.
    absl::MutexLock lock(&mu_);
    for (std::function<void()>& body : bodies) {
      ++running;
      threads.emplace_back([this, body = std::move(body), &running] {
        body();
        absl::MutexLock lock(&mu_);
        --running;
        cv_.SignalAll();
      });
    }
    // Distributed: a failure here is published (and this rank's sends and
    // receives woken); one published elsewhere stops this rank's threads.
    bool published = false;
    while (running > 0) {
      if (Distributed() && !failure_.ok() && !published) {
        const absl::Status failure = failure_;
        mu_.Unlock();
        options_.ranks->PublishFailure(failure);
        options_.ranks->AbortPending();
        mu_.Lock();
        published = true;
        continue;
      }
      // The store is asked only after 50 ms without news from this
      // rank's threads (a rank that waits on another one).
      const bool quiet = cv_.WaitWithTimeout(&mu_, absl::Milliseconds(50));
      if (Distributed() && quiet && failure_.ok() && running > 0) {
        mu_.Unlock();
        std::optional<absl::Status> remote = options_.ranks->PublishedFailure();
        mu_.Lock();
        if (remote.has_value() && failure_.ok()) {
          FailLocked(*remote);
          mu_.Unlock();
          options_.ranks->AbortPending();
          mu_.Lock();
          published = true;
        }
      }
    }
  }
  for (std::thread& t : threads) t.join();
  report.seconds = SecondsSince(start);
  if (options_.measure_allocations) {
    report.allocated_peak_bytes = allocations_.peaks();
    for (int d = 0; d < D_; ++d) {
      if (!Local(d) || stage_of_device_[d] < 0) {
        report.allocated_peak_bytes[d] = 0;
      }
    }
  }
  absl::Status failure;
  {
    absl::MutexLock lock(&mu_);
    for (double l : loss_) report.loss += l;
    if (memory_ != nullptr) report.peak_memory_bytes = memory_->peak_bytes();
    if (pass_memory_ != nullptr) {
      report.peak_memory_bytes = pass_memory_->peak_bytes();
    }
    values_.clear();
    partials_.clear();
    failure = failure_;
  }
  saved_.clear();
  tensor_saved_.clear();
  parked_.clear();
  for (int d = 0; d < D_; ++d) {
    report.node_runs.insert(report.node_runs.end(), node_runs_[d].begin(),
                            node_runs_[d].end());
    report.transfers.insert(report.transfers.end(), transfers_[d].begin(),
                            transfers_[d].end());
  }
  for (const std::vector<MeasuredTransfer>& link : link_transfers_) {
    report.transfers.insert(report.transfers.end(), link.begin(), link.end());
  }
  for (const std::vector<double>& given : handoffs_) {
    report.handoff_seconds.insert(report.handoff_seconds.end(),
                                  given.begin(), given.end());
  }
  if (Distributed()) {
    // Each rank's devices' allocated peaks (zeros for the others'), summed.
    ASSIGN_OR_RETURN(
        StepReport merged,
        ExchangeStepReports(*options_.ranks, step_++, report, failure));
    report.seconds = merged.seconds;
    report.loss = merged.loss;
    report.busy_seconds = merged.busy_seconds;
    report.allocated_peak_bytes = merged.allocated_peak_bytes;
    if (memory_ != nullptr || pass_memory_ != nullptr) {
      report.peak_memory_bytes = merged.peak_memory_bytes;
    }
    report.node_runs = std::move(merged.node_runs);
    report.transfers = std::move(merged.transfers);
  }
  if (!failure.ok()) return failure;
  report.loss /= M_;
  return report;
}

}  // namespace placer
