// Over 600 lines, one idea: the threaded dataflow engine of one training
// step. Its per-step state, the device and link workers (those that send
// to and receive from other ranks too), and the bodies of forward,
// backward and update nodes all work under one lock and one set of
// invariants (what is present where, what is freed when, which buffer a
// partial gradient is added into); split apart they would have to expose
// that state. Parameter initialization (initial_values.h) and allocation
// tracking (allocation_tracker.h) are their own files.
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
#include "runtime/executor_ops.h"
#include "runtime/initial_values.h"
#include "runtime/op_autograd.h"
#include "runtime/step_exchange.h"
#include "runtime/torch_devices.h"
#include "runtime/torch_ops.h"
#include "simulator/gradient_partials.h"
#include "simulator/simulator.h"

namespace placer {
namespace {

using Clock = SteadyClock;

int64_t Bytes(const torch::Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.numel() * t.element_size()) : 0;
}

class TorchExecutor : public Executor {
 public:
  TorchExecutor(const TrainingView& view, const Cluster& cluster,
                const Placement& placement, const ExecutorOptions& options,
                std::vector<torch::Device> devices, std::vector<char> local)
      : view_(view),
        graph_(view.forward()),
        cluster_(cluster),
        options_(options),
        devices_(std::move(devices)),
        num_devices_(cluster.num_devices()),
        local_(std::move(local)) {
    device_of_node_ = DevicesOfNodes(view, placement);
  }

  ~TorchExecutor() override { StopWorkers(); }

  absl::Status Init();
  absl::StatusOr<StepReport> Step() override;
  absl::StatusOr<torch::Tensor> Resident(
      absl::string_view name) const override;

 private:
  struct LinkItem {
    int value = -1;  // a value, or for a gradient sum the first partial
    int sum = -1;    // the gradient sum whose buffer goes, or -1
  };
  // A worker waiting for work, and when another thread gave it some: the
  // hand-off lasts until the worker starts on it (StepReport's
  // handoff_seconds). Under mu_.
  struct Idle {
    bool waiting = false;
    std::optional<Clock::time_point> given;
    void Given() {
      if (waiting && !given) given = Clock::now();
    }
  };
  struct LinkQueue {
    std::deque<LinkItem> values;
    std::condition_variable cv;
    Idle idle;
  };
  // A worker's wait on `cv` until it has work (`has_work()` while a step
  // runs) or stop_; false on stop_. Records the hand-off that woke it, if
  // another thread did.
  template <typename HasWork>
  bool WaitForWorkLocked(std::unique_lock<std::mutex>& lock,
                         std::condition_variable& cv, Idle& idle,
                         HasWork has_work) {
    idle.waiting = true;
    cv.wait(lock, [&] { return stop_ || (running_ && has_work()); });
    if (stop_) return false;
    idle.waiting = false;
    if (idle.given) {
      report_.handoff_seconds.push_back(SecondsSince(*idle.given));
      idle.given.reset();
    }
    return true;
  }
  size_t SumSlot(int sum, int device) const {
    return static_cast<size_t>(sum) * num_devices_ + device;
  }
  // Adds `partial` (a partial gradient made on, or a buffer copied to,
  // `device`) into the device's buffer for `sum`, or makes it the buffer;
  // true when it was added (so its bytes are freed). Called without mu_:
  // the add runs outside the step's lock.
  bool Accumulate(int sum, int device, const torch::Tensor& partial,
                  bool owned);
  // Under mu_: one more contribution to `sum` is in `device`'s buffer: a
  // partial made there, or (`arrived`) another device's buffer.
  void ContributedLocked(int sum, int device, int64_t bytes, bool added,
                         bool arrived);

  void StartWorkers();
  void StopWorkers();
  void DeviceWorker(int d);
  void LinkWorker(int src, int dst);
  // Distributed: a link from one of this rank's devices to another rank's
  // (sends what its queue holds), and one into this rank (receives the
  // link's messages of each step).
  void SendWorker(int src, int dst);
  void RecvWorker(int src, int dst);
  bool Local(int d) const { return local_[d] != 0; }
  bool SameHost(int a, int b) const {
    return cluster_.device(a).host == cluster_.device(b).host;
  }
  bool Distributed() const { return options_.ranks != nullptr; }
  int Channel(int src, int dst) const { return 1 + src * num_devices_ + dst; }
  absl::Status LinkError(const absl::Status& s, int src, int dst) const {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (on the link ",
                                               cluster_.device(src).name, " -> ",
                                               cluster_.device(dst).name, ")"));
  }
  // Distributed: waits for the step's local work like Step, publishing a
  // local failure and aborting on another rank's.
  void WaitForStepLocked(std::unique_lock<std::mutex>& lock);

  // Runs node i on its device; fills `outputs` (per node output value).
  absl::Status RunNode(int i, std::vector<torch::Tensor>* outputs,
                       double* loss);
  absl::Status RunForward(int i, std::vector<torch::Tensor>* outputs,
                          double* loss);
  absl::Status RunBackward(int i, std::vector<torch::Tensor>* outputs);
  absl::Status RunUpdate(int i);
  torch::Tensor Present(int value, int device) const {
    return copies_[static_cast<size_t>(value) * num_devices_ + device];
  }
  torch::Tensor& Slot(int value, int device) {
    return copies_[static_cast<size_t>(value) * num_devices_ + device];
  }
  int& Uses(int value, int device) {
    return uses_[static_cast<size_t>(value) * num_devices_ + device];
  }

  // Under mu_: a value arrived on (or was produced on) device d.
  void ArriveLocked(int value, int d, torch::Tensor t);
  void ReleaseLocked(int value, int d);
  // Under mu_: `item` has left src (copied or sent): the sum's buffer there
  // is freed, or the value's use there released.
  void SentLocked(const LinkItem& item, int src);
  void ReadyLocked(int node);
  void FailLocked(absl::Status s);
  // `bytes`: the value's tensor's, counted on dst from now.
  void SendLocked(int value, int src, int dst, int64_t bytes);
  void SendSumLocked(int sum, int src, int dst);
  void WakeAllLocked();
  void MaybeDoneLocked();
  void AddBytesLocked(int d, int64_t bytes, int node);
  // With measure_allocations: reports this thread's allocations as
  // device d's (-1: frees only) until the guard goes.
  std::unique_ptr<c10::DebugInfoGuard> ReportAllocations(int d) {
    if (!options_.measure_allocations) return nullptr;
    return std::make_unique<c10::DebugInfoGuard>(
        c10::DebugInfoKind::PROFILER_STATE,
        std::make_shared<ThreadAllocationReporter>(&allocations_, d));
  }

  const TrainingView& view_;
  const Graph& graph_;
  const Cluster cluster_;  // a copy: small, and callers pass temporaries
  // Per device, the cores its worker runs on (pin_cpu_devices); empty:
  // unpinned.
  std::vector<std::vector<int>> cores_;
  ExecutorOptions options_;
  std::vector<torch::Device> devices_;
  const int num_devices_;
  const std::vector<char> local_;  // per device: driven by this process
  std::vector<int> device_of_node_;
  std::vector<double> priority_;
  std::vector<int> key_rank_;  // NodeKeyRanks
  std::vector<int> value_of_tensor_;            // forward tensors -> value
  std::vector<std::vector<int>> consumer_devices_;  // per value, distinct
  std::vector<int> home_;                       // per value: resident device or -1
  std::vector<torch::Tensor> resident_;         // per value x device
  std::vector<std::unique_ptr<ParameterUpdate>> updates_;  // per value
  std::vector<torch::Tensor> seed_grad_;        // per tensor: loss gradient
  std::vector<torch::Tensor> targets_;          // per tensor: labels/targets
  std::vector<std::vector<bool>> needs_gradient_;  // per op, by input
  StepPrecision precision_;  // the view's, as ForwardOp casts
  std::vector<std::vector<int>> control_dependents_;
  std::vector<int64_t> resident_bytes_;         // per device
  // Per (gradient sum, device): the partials made there, the first of them.
  PartialsByDevice partials_;

  // Per-step state, guarded by mu_ (copies_ entries are written under mu_
  // before the node that reads them becomes ready).
  std::mutex mu_;
  // One per device worker, one per link (in LinkQueue), one for Step: each
  // completion wakes only the threads that have new work.
  std::vector<std::unique_ptr<std::condition_variable>> device_cv_;
  std::vector<Idle> device_idle_;
  std::condition_variable done_cv_;
  bool stop_ = false;
  bool running_ = false;
  absl::Status failure_;
  int remaining_nodes_ = 0;
  int in_flight_ = 0;  // nodes and transfers running now
  std::vector<torch::Tensor> copies_;
  std::vector<int> uses_;
  // Per (gradient sum, device): the buffer, whether it is ours to add into
  // in place (a partial that became the buffer may alias another gradient:
  // the first add makes a new tensor), contributions so far. A buffer is
  // written under its sum's lock, by one contributor at a time.
  std::vector<torch::Tensor> sum_buffer_;
  std::vector<char> sum_owned_;
  std::vector<int> sum_done_;
  std::unique_ptr<std::mutex[]> sum_mu_;
  std::vector<int> pending_;
  std::vector<SavedOp> saved_;  // per op
  // (priority, key rank, node): ties broken by node key, as the simulator.
  using ReadyEntry = std::tuple<double, int, int>;
  std::vector<std::priority_queue<ReadyEntry, std::vector<ReadyEntry>,
                                  std::greater<ReadyEntry>>>
      ready_;
  std::map<std::pair<int, int>, LinkQueue> links_;
  // Distributed: per link into this rank, messages per step and so far;
  // items queued on links out of this rank and not yet sent.
  std::map<std::pair<int, int>, int> expected_, received_;
  int sends_pending_ = 0;
  int local_nodes_ = 0;
  int step_index_ = 0;
  bool broken_ = false;
  std::vector<int64_t> live_bytes_, peak_bytes_;
  StepReport report_;
  AllocationTracker allocations_;
  double loss_ = 0;
  std::vector<std::thread> threads_;
};

absl::Status TorchExecutor::Init() {
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
  consumer_devices_.assign(values, {});
  for (int v = 0; v < values; ++v) {
    for (int c : view_.value(v).consumers) {
      int d = device_of_node_[c];
      auto& list = consumer_devices_[v];
      if (std::find(list.begin(), list.end(), d) == list.end()) list.push_back(d);
    }
    std::sort(consumer_devices_[v].begin(), consumer_devices_[v].end());
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
          static_cast<double>(Bytes(w)));
    } else {
      for (int d : consumer_devices_[v]) {
        if (!Local(d)) continue;
        torch::Tensor c = host.to(devices_[d]);
        resident_[static_cast<size_t>(v) * num_devices_ + d] = c;
        resident_bytes_[d] += Bytes(c);
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
  uses_.assign(static_cast<size_t>(values) * num_devices_, 0);
  pending_.assign(n, 0);
  saved_.assign(graph_.ops().size(), SavedOp());
  ready_.resize(num_devices_);
  for (int d = 0; d < num_devices_; ++d) {
    device_cv_.push_back(std::make_unique<std::condition_variable>());
  }
  device_idle_.assign(num_devices_, Idle());
  for (int v = 0; v < values; ++v) {
    int src = view_.value(v).producer >= 0
                  ? device_of_node_[view_.value(v).producer]
                  : home_[v];
    if (src < 0) continue;
    for (int d : consumer_devices_[v]) {
      if (d == src || (!Local(src) && !Local(d))) continue;
      links_[{src, d}];
      // What crosses into this rank each step: every value once per
      // reading device, and (below) one buffer per gradient sum and device.
      if (!Local(src) && view_.sum_of(v) < 0) ++expected_[{src, d}];
    }
  }
  for (int sum = 0; sum < sums; ++sum) {
    const int sink_device = device_of_node_[view_.gradient_sums()[sum].sink];
    for (int e = 0; e < num_devices_; ++e) {
      if (e == sink_device || partials_.count[SumSlot(sum, e)] == 0) continue;
      if (!Local(e) && !Local(sink_device)) continue;
      links_[{e, sink_device}];
      if (!Local(e)) ++expected_[{e, sink_device}];
    }
  }
  for (auto& [pair, count] : expected_) received_[pair] = 0;
  local_nodes_ = 0;
  for (int i = 0; i < n; ++i) {
    if (!Local(device_of_node_[i])) continue;
    ++local_nodes_;
    for (int c : view_.node(i).control_inputs) {
      if (device_of_node_[c] != device_of_node_[i]) {
        return absl::InternalError(absl::StrCat(
            "control edge between devices at '", view_.node(i).key, "'"));
      }
    }
  }
  StartWorkers();
  return absl::OkStatus();
}

void TorchExecutor::StartWorkers() {
  SetBlasThreads(options_.threads_per_cpu_device);
  KeepFreedHostMemory();
  if (options_.pin_cpu_devices) {
    absl::StatusOr<std::vector<std::vector<int>>> cores = CpuDeviceCores(
        cluster_, options_.threads_per_cpu_device, AllowedCores());
    if (cores.ok()) cores_ = std::move(*cores);
  }
  for (int d = 0; d < num_devices_; ++d) {
    if (Local(d)) threads_.emplace_back([this, d] { DeviceWorker(d); });
  }
  for (auto& [pair, queue] : links_) {
    int src = pair.first, dst = pair.second;
    if (Local(src) && Local(dst)) {
      threads_.emplace_back([this, src, dst] { LinkWorker(src, dst); });
    } else if (Local(src)) {
      threads_.emplace_back([this, src, dst] { SendWorker(src, dst); });
    } else {
      threads_.emplace_back([this, src, dst] { RecvWorker(src, dst); });
    }
  }
}

void TorchExecutor::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    WakeAllLocked();
  }
  // Receivers may be blocked in the transport.
  if (Distributed()) options_.ranks->AbortPending();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void TorchExecutor::FailLocked(absl::Status s) {
  if (failure_.ok()) failure_ = std::move(s);
  WakeAllLocked();
  MaybeDoneLocked();
}

void TorchExecutor::WakeAllLocked() {
  for (auto& cv : device_cv_) cv->notify_all();
  for (auto& [pair, queue] : links_) queue.cv.notify_all();
}

void TorchExecutor::MaybeDoneLocked() {
  if ((remaining_nodes_ == 0 && sends_pending_ == 0) ||
      (!failure_.ok() && in_flight_ == 0)) {
    done_cv_.notify_all();
  }
}

// A copy's bytes count on its destination from when it is queued, as the
// simulator counts them (QueueTransfer), not from its arrival.
void TorchExecutor::SendLocked(int value, int src, int dst, int64_t bytes) {
  ++Uses(value, src);
  if (Local(dst)) {
    AddBytesLocked(dst, bytes, -1);
  } else {
    ++sends_pending_;
  }
  LinkQueue& queue = links_.at({src, dst});
  queue.idle.Given();
  queue.values.push_back({value, -1});
  queue.cv.notify_one();
}

void TorchExecutor::SendSumLocked(int sum, int src, int dst) {
  if (Local(dst)) {
    AddBytesLocked(dst, Bytes(sum_buffer_[SumSlot(sum, src)]), -1);
  } else {
    ++sends_pending_;
  }
  LinkQueue& queue = links_.at({src, dst});
  queue.idle.Given();
  queue.values.push_back({partials_.first[SumSlot(sum, src)], sum});
  queue.cv.notify_one();
}

bool TorchExecutor::Accumulate(int sum, int device,
                               const torch::Tensor& partial, bool owned) {
  std::lock_guard<std::mutex> guard(sum_mu_[sum]);
  size_t slot = SumSlot(sum, device);
  torch::Tensor& buffer = sum_buffer_[slot];
  if (!buffer.defined()) {
    buffer = partial;
    sum_owned_[slot] = owned;
    return false;
  }
  torch::NoGradGuard no_grad;
  if (sum_owned_[slot]) {
    buffer.add_(partial);
  } else {
    buffer = buffer + partial;
    sum_owned_[slot] = 1;
  }
  // Workers add on their own streams: done before the next one adds, or
  // the buffer is sent, on another.
  Synchronize(devices_[device]);
  return true;
}

void TorchExecutor::ContributedLocked(int sum, int device, int64_t bytes,
                                      bool added, bool arrived) {
  if (added) live_bytes_[device] -= bytes;  // added into the buffer, freed
  size_t slot = SumSlot(sum, device);
  const int sink = view_.gradient_sums()[sum].sink;
  const int sink_device = device_of_node_[sink];
  if (!arrived && ++sum_done_[slot] < partials_.count[slot]) return;
  if (device != sink_device) {
    SendSumLocked(sum, device, sink_device);  // this device's partials, once
  } else if (--pending_[sink] == 0) {
    ReadyLocked(sink);
  }
}

void TorchExecutor::AddBytesLocked(int d, int64_t bytes, int node) {
  live_bytes_[d] += bytes;
  peak_bytes_[d] = std::max(peak_bytes_[d], live_bytes_[d]);
  const int64_t limit = cluster_.device(d).memory_bytes;
  if (options_.enforce_memory && live_bytes_[d] > limit && failure_.ok()) {
    FailLocked(absl::ResourceExhaustedError(absl::StrCat(
        "out of memory: ", cluster_.device(d).name, " needs ", live_bytes_[d],
        " bytes, over its ", limit, " at '",
        node >= 0 ? view_.node(node).key : std::string("a transfer"), "'")));
  }
}

void TorchExecutor::ReadyLocked(int node) {
  int d = device_of_node_[node];
  device_idle_[d].Given();
  ready_[d].push({priority_[node], key_rank_[node], node});
  device_cv_[d]->notify_one();
}

void TorchExecutor::ArriveLocked(int value, int d, torch::Tensor t) {
  Slot(value, d) = std::move(t);
  for (int c : view_.value(value).consumers) {
    if (device_of_node_[c] == d && --pending_[c] == 0) ReadyLocked(c);
  }
}

void TorchExecutor::ReleaseLocked(int value, int d) {
  if (--Uses(value, d) > 0) return;
  const torch::Tensor& resident =
      resident_[static_cast<size_t>(value) * num_devices_ + d];
  if (resident.defined()) {
    // Graph inputs and constants are counted until their last use here, as
    // the simulator counts them (the tensor stays for the next step).
    if (view_.value(value).kind != ValueKind::kParameter) {
      live_bytes_[d] -= Bytes(resident);
    }
    return;
  }
  torch::Tensor& slot = Slot(value, d);
  live_bytes_[d] -= Bytes(slot);
  slot = torch::Tensor();
}

void TorchExecutor::SentLocked(const LinkItem& item, int src) {
  if (item.sum >= 0) {
    torch::Tensor& sent = sum_buffer_[SumSlot(item.sum, src)];
    live_bytes_[src] -= Bytes(sent);
    sent = torch::Tensor();
  } else {
    ReleaseLocked(item.value, src);
  }
}

void TorchExecutor::DeviceWorker(int d) {
  auto reporting = ReportAllocations(d);
  if (!cores_.empty()) (void)PinThisThread(cores_[d]);  // else as before
  if (devices_[d].is_cpu()) at::set_num_threads(options_.threads_per_cpu_device);
  // A GPU's worker makes its device current (LibTorch's handles need it)
  // and queues its nodes on a stream of its own.
  OwnStreams streams({devices_[d]});
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!WaitForWorkLocked(lock, *device_cv_[d], device_idle_[d],
                           [&] { return !ready_[d].empty(); })) {
      return;
    }
    int node = std::get<2>(ready_[d].top());
    ready_[d].pop();
    if (!failure_.ok()) continue;
    ++in_flight_;
    lock.unlock();
    std::vector<torch::Tensor> outputs;
    double loss = 0;
    Clock::time_point start = Clock::now();
    absl::Status s;
    try {
      if (options_.before_node) s = options_.before_node(view_.node(node));
      if (s.ok()) s = RunNode(node, &outputs, &loss);
      if (s.ok()) Synchronize(devices_[d]);
    } catch (const std::exception& e) {
      s = TorchErrorStatus(e, "");
    }
    double seconds = SecondsSince(start);
    // Partial gradients go into this device's buffers outside the lock.
    const TrainingNode& tn = view_.node(node);
    std::vector<char> added(tn.outputs.size(), 0);
    if (s.ok()) {
      s = CatchExceptions("accumulating gradients: ", [&] {
        for (size_t k = 0; k < tn.outputs.size() && k < outputs.size(); ++k) {
          int sum = view_.sum_of(tn.outputs[k]);
          if (sum >= 0) {
            added[k] = Accumulate(sum, d, outputs[k], /*owned=*/false);
          }
        }
        return absl::OkStatus();
      });
    }
    lock.lock();
    report_.node_seconds[node] = seconds;
    report_.busy_seconds[d] += seconds;
    loss_ += loss;
    if (!s.ok()) {
      FailLocked(
          WithContext(s, absl::StrCat("node '", view_.node(node).key, "' on ",
                                      cluster_.device(d).name, ": ")));
    } else {
      // Every output is counted before any is freed, as the simulator
      // counts a node's outputs from its start.
      for (size_t k = 0; k < tn.outputs.size(); ++k) {
        AddBytesLocked(d, k < outputs.size() ? Bytes(outputs[k]) : 0, node);
      }
      // What autograd keeps for the op's backward besides values (a fused
      // recurrent layer's steps), until that backward has run.
      if (tn.saved_workspace_bytes > 0) {
        AddBytesLocked(d, tn.saved_workspace_bytes, node);
      }
      // And what it needed only while it ran (counted with the rest).
      if (tn.scratch_bytes > 0) {
        AddBytesLocked(d, tn.scratch_bytes, node);
        live_bytes_[d] -= tn.scratch_bytes;
      }
      for (int in : tn.inputs) {
        if (view_.sum_of(in) < 0) ReleaseLocked(in, d);
      }
      for (int sum : view_.sums_read_by(node)) {
        torch::Tensor& buffer = sum_buffer_[SumSlot(sum, d)];
        live_bytes_[d] -= Bytes(buffer);
        buffer = torch::Tensor();
      }
      if (tn.kind == NodeKind::kBackward) {
        live_bytes_[d] -= view_.node(tn.forward_op).saved_workspace_bytes;
      }
      for (size_t k = 0; k < tn.outputs.size(); ++k) {
        int v = tn.outputs[k];
        torch::Tensor t = k < outputs.size() ? outputs[k] : torch::Tensor();
        if (int sum = view_.sum_of(v); sum >= 0) {
          ContributedLocked(sum, d, Bytes(t), added[k], /*arrived=*/false);
          continue;
        }
        for (int e : consumer_devices_[v]) {
          if (e != d) SendLocked(v, d, e, Bytes(t));
        }
        ArriveLocked(v, d, std::move(t));
        if (Uses(v, d) == 0) {  // nobody reads it here
          ++Uses(v, d);
          ReleaseLocked(v, d);
        }
      }
      for (int c : control_dependents_[node]) {
        if (--pending_[c] == 0) ReadyLocked(c);
      }
    }
    --in_flight_;
    --remaining_nodes_;
    MaybeDoneLocked();
  }
}

void TorchExecutor::LinkWorker(int src, int dst) {
  auto reporting = ReportAllocations(dst);
  // Copies on a stream of the link's own on each GPU end.
  OwnStreams streams({devices_[dst], devices_[src]});
  LinkQueue& queue = links_.at({src, dst});
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!WaitForWorkLocked(lock, queue.cv, queue.idle,
                           [&] { return !queue.values.empty(); })) {
      return;
    }
    const LinkItem item = queue.values.front();
    queue.values.pop_front();
    if (!failure_.ok()) continue;
    const int v = item.value;
    torch::Tensor t = item.sum >= 0 ? sum_buffer_[SumSlot(item.sum, src)]
                                    : Present(v, src);
    ++in_flight_;
    lock.unlock();
    torch::Tensor copy;
    absl::Status s;
    Clock::time_point start = Clock::now();
    try {
      copy = devices_[dst].is_cpu() && devices_[src].is_cpu()
                 ? t.clone()
                 : t.to(devices_[dst], /*non_blocking=*/false, /*copy=*/true);
      Synchronize(devices_[src]);
      Synchronize(devices_[dst]);
    } catch (const std::exception& e) {
      s = TorchErrorStatus(e, absl::StrCat("copying '", view_.value(v).name,
                                           "' to ", cluster_.device(dst).name,
                                           ": "));
    }
    double seconds = SecondsSince(start);
    bool added = false;
    if (s.ok() && item.sum >= 0) {
      s = CatchExceptions("accumulating gradients: ", [&] {
        added = Accumulate(item.sum, dst, copy, /*owned=*/true);
        return absl::OkStatus();
      });
    }
    lock.lock();
    --in_flight_;
    if (!s.ok()) FailLocked(s);
    if (!failure_.ok()) {
      MaybeDoneLocked();
      continue;
    }
    report_.transfers.push_back({v, src, dst, Bytes(copy), seconds});
    // Its bytes on dst were counted when it was queued (SendLocked).
    if (item.sum >= 0) {
      ContributedLocked(item.sum, dst, Bytes(copy), added, /*arrived=*/true);
    } else {
      ArriveLocked(v, dst, std::move(copy));
    }
    SentLocked(item, src);
    MaybeDoneLocked();
  }
}

absl::Status TorchExecutor::RunNode(int i, std::vector<torch::Tensor>* outputs,
                                    double* loss) {
  switch (view_.node(i).kind) {
    case NodeKind::kForward:
      return RunForward(i, outputs, loss);
    case NodeKind::kBackward:
      return RunBackward(i, outputs);
    case NodeKind::kUpdate:
      return RunUpdate(i);
  }
  return absl::InternalError("unknown node kind");
}

absl::Status TorchExecutor::RunForward(int i, std::vector<torch::Tensor>* outputs,
                                       double* loss) {
  const TrainingNode& node = view_.node(i);
  const int d = device_of_node_[i];
  const Op& op = graph_.op(node.forward_op);
  std::vector<torch::Tensor> inputs;
  if (!AllOutputsFolded(graph_, op)) {
    for (int in : op.inputs) {
      inputs.push_back(in < 0 ? torch::Tensor()
                              : Present(value_of_tensor_[in], d));
    }
  }
  const bool backward = view_.backward_node(node.forward_op) >= 0;
  ASSIGN_OR_RETURN(
      std::vector<torch::Tensor> results,
      ForwardOp(graph_, op, std::move(inputs), devices_[d], precision_,
                backward ? &needs_gradient_[node.forward_op] : nullptr,
                &saved_[node.forward_op]));
  // Losses of graph outputs written here.
  *loss += OutputLosses(graph_, op, results, targets_, 1.0, &seed_grad_);
  // One tensor per node output value, in the node's order.
  outputs->clear();
  for (int v : node.outputs) {
    int t = view_.value(v).tensor;
    torch::Tensor found;
    for (size_t k = 0; k < op.outputs.size() && k < results.size(); ++k) {
      if (op.outputs[k] == t) found = results[k];
    }
    outputs->push_back(found);
  }
  return absl::OkStatus();
}

absl::Status TorchExecutor::RunBackward(int i,
                                        std::vector<torch::Tensor>* outputs) {
  const TrainingNode& node = view_.node(i);
  const int d = device_of_node_[i];
  const Op& op = graph_.op(node.forward_op);
  SavedOp saved = std::move(saved_[node.forward_op]);
  saved_[node.forward_op] = SavedOp();
  // The gradient of each output: its partial gradients plus the loss seed.
  std::vector<torch::Tensor> output_gradients(op.outputs.size());
  for (size_t k = 0; k < op.outputs.size(); ++k) {
    int t = op.outputs[k];
    if (t < 0) continue;
    torch::Tensor sum = seed_grad_[t];
    for (int s : view_.sums_read_by(i)) {
      if (view_.gradient_sums()[s].tensor != t) continue;
      const torch::Tensor& g = sum_buffer_[SumSlot(s, d)];
      if (g.defined()) sum = sum.defined() ? sum + g : g;
    }
    output_gradients[k] = sum;
  }
  std::vector<int> tensors;
  for (int v : node.outputs) tensors.push_back(view_.value(v).tensor);
  ASSIGN_OR_RETURN(
      std::vector<torch::Tensor> grads,
      BackwardOp(graph_, op, std::move(saved), output_gradients, tensors));
  *outputs = std::move(grads);
  return absl::OkStatus();
}

absl::Status TorchExecutor::RunUpdate(int i) {
  const TrainingNode& node = view_.node(i);
  const int d = device_of_node_[i];
  torch::NoGradGuard no_grad;
  int p = -1;
  for (int v : node.inputs) {
    if (view_.value(v).kind == ValueKind::kParameter) p = v;
  }
  if (p < 0) return absl::InternalError("update node without its parameter");
  torch::Tensor sum;
  for (int s : view_.sums_read_by(i)) {
    const torch::Tensor& g = sum_buffer_[SumSlot(s, d)];
    if (g.defined()) sum = sum.defined() ? sum + g : g;
  }
  if (!sum.defined()) return absl::OkStatus();
  updates_[p]->Apply(sum);
  return absl::OkStatus();
}

absl::StatusOr<StepReport> TorchExecutor::Step() {
  const int n = static_cast<int>(view_.nodes().size());
  const int values = static_cast<int>(view_.values().size());
  auto reporting = ReportAllocations(-1);  // what this thread frees
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) {
    return absl::FailedPreconditionError(
        "an earlier step failed across ranks, which leaves their channels out "
        "of step: start the run again");
  }
  allocations_.Start(resident_bytes_);
  failure_ = absl::OkStatus();
  report_ = StepReport();
  report_.node_seconds.assign(n, 0);
  report_.busy_seconds.assign(num_devices_, 0);
  loss_ = 0;
  live_bytes_ = resident_bytes_;
  peak_bytes_ = resident_bytes_;
  std::fill(seed_grad_.begin(), seed_grad_.end(), torch::Tensor());
  std::fill(uses_.begin(), uses_.end(), 0);
  for (int v = 0; v < values; ++v) {
    if (view_.sum_of(v) >= 0) continue;  // accumulated, not read as such
    for (int c : view_.value(v).consumers) ++Uses(v, device_of_node_[c]);
  }
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
  sends_pending_ = 0;
  for (auto& [pair, count] : received_) count = 0;
  Clock::time_point start = Clock::now();
  // Parameters go to remote readers at the start.
  for (int v = 0; v < values; ++v) {
    if (view_.value(v).kind != ValueKind::kParameter || home_[v] < 0 ||
        !Local(home_[v])) {
      continue;
    }
    for (int e : consumer_devices_[v]) {
      if (e != home_[v]) {
        SendLocked(v, home_[v], e, Bytes(Present(v, home_[v])));
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    if (pending_[i] == 0 && Local(device_of_node_[i])) ReadyLocked(i);
  }
  running_ = true;
  WakeAllLocked();
  if (Distributed()) {
    WaitForStepLocked(lock);
  } else {
    done_cv_.wait(lock, [&] {
      return remaining_nodes_ == 0 || (!failure_.ok() && in_flight_ == 0);
    });
  }
  running_ = false;
  report_.seconds = SecondsSince(start);
  // Drain what a failure left behind.
  for (auto& [pair, queue] : links_) queue.values.clear();
  for (auto& q : ready_) {
    while (!q.empty()) q.pop();
  }
  std::fill(copies_.begin(), copies_.end(), torch::Tensor());
  std::fill(sum_buffer_.begin(), sum_buffer_.end(), torch::Tensor());
  std::fill(saved_.begin(), saved_.end(), SavedOp());
  report_.loss = loss_;
  report_.peak_memory_bytes = peak_bytes_;
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

void TorchExecutor::WaitForStepLocked(std::unique_lock<std::mutex>& lock) {
  auto done = [&] {
    return (remaining_nodes_ == 0 && sends_pending_ == 0) ||
           (!failure_.ok() && in_flight_ == 0);
  };
  bool published = false;
  // A local failure (or one seen below): tell the other ranks, and wake
  // this rank's sends and receives, which will never complete now.
  auto publish = [&] {
    absl::Status failure = failure_;
    lock.unlock();
    options_.ranks->PublishFailure(failure);
    options_.ranks->AbortPending();
    lock.lock();
    published = true;
  };
  while (!done()) {
    if (!failure_.ok() && !published) {
      publish();
      continue;
    }
    done_cv_.wait_for(lock, std::chrono::milliseconds(50), done);
    if (done() || !failure_.ok()) continue;
    lock.unlock();
    std::optional<absl::Status> remote = options_.ranks->PublishedFailure();
    lock.lock();
    if (remote.has_value()) FailLocked(*remote);
  }
  if (!failure_.ok() && !published) publish();
}

void TorchExecutor::SendWorker(int src, int dst) {
  OwnStreams streams({devices_[src]});  // a GPU value leaves through the host
  LinkQueue& queue = links_.at({src, dst});
  const int rank = options_.rank_of_device[dst];
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!WaitForWorkLocked(lock, queue.cv, queue.idle,
                           [&] { return !queue.values.empty(); })) {
      return;
    }
    const LinkItem item = queue.values.front();
    queue.values.pop_front();
    if (!failure_.ok()) {
      --sends_pending_;
      continue;
    }
    torch::Tensor t = item.sum >= 0 ? sum_buffer_[SumSlot(item.sum, src)]
                                    : Present(item.value, src);
    ++in_flight_;
    lock.unlock();
    Clock::time_point start = Clock::now();
    absl::Status s = CatchExceptions("", [&] {
      Synchronize(devices_[src]);
      return absl::OkStatus();
    });
    // The id tells the receiver what it is: a value, or a sum's buffer.
    if (s.ok()) {
      s = options_.ranks->SendTensor(
          t, item.sum >= 0 ? -1 - static_cast<int64_t>(item.sum) : item.value,
          rank, Channel(src, dst));
    }
    const double seconds = SecondsSince(start);
    lock.lock();
    --in_flight_;
    --sends_pending_;
    if (!s.ok()) FailLocked(LinkError(s, src, dst));
    if (!failure_.ok()) {
      MaybeDoneLocked();
      continue;
    }
    // Timed by the receiver where the two clocks are one (the whole
    // transfer: both ranks' threads and the transport); by the sender
    // otherwise (until its send completes).
    if (!SameHost(src, dst)) {
      report_.transfers.push_back({item.value, src, dst, Bytes(t), seconds});
    }
    t = torch::Tensor();
    SentLocked(item, src);
    MaybeDoneLocked();
  }
}

void TorchExecutor::RecvWorker(int src, int dst) {
  auto reporting = ReportAllocations(dst);
  OwnStreams streams({devices_[dst]});
  const std::pair<int, int> link{src, dst};
  LinkQueue& queue = links_.at(link);
  const int rank = options_.rank_of_device[src];
  const int expected = expected_.count(link) ? expected_.at(link) : 0;
  const int values = static_cast<int>(view_.values().size());
  const int sums = static_cast<int>(view_.gradient_sums().size());
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    queue.cv.wait(lock, [&] {
      return stop_ ||
             (running_ && failure_.ok() && received_.at(link) < expected);
    });
    if (stop_) return;
    lock.unlock();
    Clock::time_point sent_at;
    absl::StatusOr<std::pair<int64_t, torch::Tensor>> got =
        options_.ranks->RecvTensor(rank, Channel(src, dst), &sent_at);
    absl::Status s = got.status();
    int value = -1, sum = -1;
    torch::Tensor copy;
    if (s.ok()) {
      // Only what this link carries: a value produced (or homed) on src and
      // read on dst, or a sum's buffer from src for a sink on dst.
      const int64_t id = got->first;
      if (id >= 0 && id < values &&
          std::find(consumer_devices_[id].begin(), consumer_devices_[id].end(),
                    dst) != consumer_devices_[id].end()) {
        value = static_cast<int>(id);
      } else if (id < 0 && -1 - id < sums &&
                 device_of_node_[view_.gradient_sums()[-1 - id].sink] == dst) {
        sum = static_cast<int>(-1 - id);
        value = partials_.first[SumSlot(sum, src)];
      } else {
        s = absl::DataLossError(absl::StrCat(
            "rank ", rank, " sent item ", id, ", which this link does not carry"));
      }
    }
    if (s.ok()) {
      s = CatchExceptions("receiving: ", [&] {
        copy = got->second.to(devices_[dst]);
        Synchronize(devices_[dst]);
        return absl::OkStatus();
      });
    }
    // From the sender's start to here, its clock being this one's.
    const double seconds = SecondsSince(sent_at);
    bool added = false;
    if (s.ok() && sum >= 0) {
      s = CatchExceptions("accumulating gradients: ", [&] {
        added = Accumulate(sum, dst, copy, /*owned=*/true);
        return absl::OkStatus();
      });
    }
    lock.lock();
    if (stop_) return;
    ++received_.at(link);
    if (!s.ok()) FailLocked(LinkError(s, src, dst));
    if (!failure_.ok()) {
      MaybeDoneLocked();
      continue;
    }
    if (SameHost(src, dst)) {
      report_.transfers.push_back({value, src, dst, Bytes(copy), seconds});
    }
    // Counted on dst from its arrival: this rank cannot see when the
    // sender queued it.
    AddBytesLocked(dst, Bytes(copy), -1);
    if (sum >= 0) {
      ContributedLocked(sum, dst, Bytes(copy), added, /*arrived=*/true);
    } else {
      ArriveLocked(value, dst, std::move(copy));
    }
    MaybeDoneLocked();
  }
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

}  // namespace

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
