// The op-placement executor's workers (runtime/executor_impl.h): one per
// device running its ready nodes in priority order, one per link copying
// values and gradient buffers, and over ranks one sending and one
// receiving per link; the step's bookkeeping under mu_ (arrivals,
// releases, accumulation into gradient buffers, bytes live per device).
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
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  {
    absl::MutexLock lock(&mu_);
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
  for (auto& cv : device_cv_) cv->SignalAll();
  for (auto& [pair, queue] : links_) queue.cv.SignalAll();
}

void TorchExecutor::MaybeDoneLocked() {
  if ((remaining_nodes_ == 0 && sends_pending_ == 0) ||
      (!failure_.ok() && in_flight_ == 0)) {
    done_cv_.SignalAll();
  }
}

// A copy's bytes count on its destination from when it is queued, as the
// simulator counts them, not from its arrival; one for another rank, from
// its arrival there (RecvWorker).
void TorchExecutor::SendLocked(int value, int src, int dst) {
  memory_->CopyStarted(ValueCopyTask(value, dst), -1, StepSecondsLocked());
  if (Local(dst)) {
    CheckMemoryLocked(dst, -1);
  } else {
    ++sends_pending_;
  }
  LinkQueue& queue = links_.at({src, dst});
  queue.idle.Given();
  queue.values.push_back({value, -1});
  queue.cv.Signal();
}

void TorchExecutor::SendSumLocked(int sum, int src, int dst) {
  memory_->CopyStarted(SumCopyTask(sum, src), -1, StepSecondsLocked());
  if (Local(dst)) {
    CheckMemoryLocked(dst, -1);
  } else {
    ++sends_pending_;
  }
  LinkQueue& queue = links_.at({src, dst});
  queue.idle.Given();
  queue.values.push_back({partials_.first(sum, src), sum});
  queue.cv.Signal();
}

void TorchExecutor::Accumulate(int sum, int device,
                               const torch::Tensor& partial, bool owned) {
  std::lock_guard<std::mutex> guard(sum_mu_[sum]);
  size_t slot = SumSlot(sum, device);
  torch::Tensor& buffer = sum_buffer_[slot];
  if (!buffer.defined()) {
    buffer = partial;
    sum_owned_[slot] = owned;
    return;
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
}

void TorchExecutor::ContributedLocked(int sum, int device, bool arrived) {
  size_t slot = SumSlot(sum, device);
  const int sink = view_.gradient_sums()[sum].sink;
  const int sink_device = device_of_node_[sink];
  if (!arrived && ++sum_done_[slot] < partials_.count(sum, device)) return;
  if (device != sink_device) {
    SendSumLocked(sum, device, sink_device);  // this device's partials, once
  } else if (--pending_[sink] == 0) {
    ReadyLocked(sink);
  }
}

void TorchExecutor::CheckMemoryLocked(int d, int node, int64_t live) {
  if (!options_.enforce_memory || !failure_.ok()) return;
  if (absl::Status s = memory_->Check(
          d, live >= 0 ? live : memory_->bytes(d),
          node >= 0 ? absl::string_view(view_.node(node).key) : "");
      !s.ok()) {
    FailLocked(s);
  }
}

void TorchExecutor::ReadyLocked(int node) {
  int d = device_of_node_[node];
  device_idle_[d].Given();
  ready_[d].push({priority_[node], key_rank_[node], node});
  device_cv_[d]->Signal();
}

void TorchExecutor::ArriveLocked(int value, int d, torch::Tensor t) {
  Slot(value, d) = std::move(t);
  for (int c : view_.value(value).consumers) {
    if (device_of_node_[c] == d && --pending_[c] == 0) ReadyLocked(c);
  }
}

void TorchExecutor::DropFreedLocked() {
  for (const ValueOnDevice& freed : freed_) {
    const size_t slot =
        static_cast<size_t>(freed.value) * num_devices_ + freed.device;
    if (!resident_[slot].defined()) copies_[slot] = torch::Tensor();
  }
  freed_.clear();
}

void TorchExecutor::SentLocked(const LinkItem& item, int src, int dst) {
  if (item.sum >= 0) {
    sum_buffer_[SumSlot(item.sum, src)] = torch::Tensor();
    memory_->CopyEnded(SumCopyTask(item.sum, src), StepSecondsLocked());
  } else {
    memory_->CopyEnded(ValueCopyTask(item.value, dst), StepSecondsLocked());
    DropFreedLocked();
  }
}

void TorchExecutor::DeviceWorker(int d) {
  auto reporting = ReportAllocations(d);
  if (!cores_.empty()) (void)PinThisThread(cores_[d]);  // else as before
  if (devices_[d].is_cpu()) at::set_num_threads(options_.threads_per_cpu_device);
  // A GPU's worker makes its device current (LibTorch's handles need it)
  // and queues its nodes on a stream of its own.
  OwnStreams streams({devices_[d]});
  absl::MutexLock lock(&mu_);
  while (true) {
    if (!WaitForWorkLocked(*device_cv_[d], device_idle_[d],
                           [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                             return !ready_[d].empty();
                           })) {
      return;
    }
    int node = std::get<2>(ready_[d].top());
    ready_[d].pop();
    // Untimed, a GPU's worker waits only where the work must have ended
    // (ExecutorOptions::time_gpu_nodes).
    const bool timed = devices_[d].is_cpu() || options_.time_gpu_nodes;
    const bool last = --nodes_left_[d] == 0;
    const bool wait = timed || waits_untimed_[node] || last;
    if (!failure_.ok()) continue;
    ++in_flight_;
    mu_.Unlock();
    std::vector<torch::Tensor> outputs;
    double loss = 0;
    Clock::time_point start = Clock::now();
    absl::Status s;
    try {
      if (options_.before_node) s = options_.before_node(view_.node(node));
      if (s.ok()) s = RunNode(node, &outputs, &loss);
      if (s.ok() && wait) Synchronize(devices_[d]);
    } catch (const std::exception& e) {
      s = TorchErrorStatus(e, "");
    }
    double seconds = SecondsSince(start);
    // Partial gradients go into this device's buffers outside the lock.
    const TrainingNode& tn = view_.node(node);
    if (s.ok()) {
      s = CatchExceptions("accumulating gradients: ", [&] {
        for (size_t k = 0; k < tn.outputs.size() && k < outputs.size(); ++k) {
          int sum = view_.sum_of(tn.outputs[k]);
          if (sum >= 0) {
            Accumulate(sum, d, outputs[k], /*owned=*/false);
          }
        }
        return absl::OkStatus();
      });
    }
    mu_.Lock();
    if (timed) {
      report_.node_runs.push_back({node, d, seconds});
      report_.busy_seconds[d] += seconds;
    }
    loss_ += loss;
    if (!s.ok()) {
      FailLocked(
          WithContext(s, absl::StrCat("node '", view_.node(node).key, "' on ",
                                      cluster_.device(d).name, ": ")));
    } else {
      // The node, as it ran, to the memory timeline: its outputs at their
      // measured sizes, all counted before any input is freed.
      std::vector<int64_t> made(tn.outputs.size(), 0);
      for (size_t k = 0; k < made.size() && k < outputs.size(); ++k) {
        made[k] = TensorBytes(outputs[k]);
      }
      CheckMemoryLocked(d, node,
                        memory_->NodeRan(node, made, StepSecondsLocked()));
      for (int sum : view_.sums_read_by(node)) {
        sum_buffer_[SumSlot(sum, d)] = torch::Tensor();
      }
      for (size_t k = 0; k < tn.outputs.size(); ++k) {
        int v = tn.outputs[k];
        torch::Tensor t = k < outputs.size() ? outputs[k] : torch::Tensor();
        if (int sum = view_.sum_of(v); sum >= 0) {
          ContributedLocked(sum, d, /*arrived=*/false);
          continue;
        }
        for (int e : memory_->copy_destinations(v)) SendLocked(v, d, e);
        ArriveLocked(v, d, std::move(t));
      }
      // Its inputs read for the last time here, and outputs nobody reads.
      DropFreedLocked();
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
  absl::MutexLock lock(&mu_);
  while (true) {
    if (!WaitForWorkLocked(queue.cv, queue.idle,
                           [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                             return !queue.values.empty();
                           })) {
      return;
    }
    const LinkItem item = queue.values.front();
    queue.values.pop_front();
    if (!failure_.ok()) continue;
    const int v = item.value;
    torch::Tensor t = item.sum >= 0 ? sum_buffer_[SumSlot(item.sum, src)]
                                    : Present(v, src);
    ++in_flight_;
    mu_.Unlock();
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
    if (s.ok() && item.sum >= 0) {
      s = CatchExceptions("accumulating gradients: ", [&] {
        Accumulate(item.sum, dst, copy, /*owned=*/true);
        return absl::OkStatus();
      });
    }
    mu_.Lock();
    --in_flight_;
    if (!s.ok()) FailLocked(s);
    if (!failure_.ok()) {
      MaybeDoneLocked();
      continue;
    }
    report_.transfers.push_back({v, src, dst, TensorBytes(copy), seconds});
    // Its bytes on dst were counted when it was queued (SendLocked).
    if (item.sum >= 0) {
      ContributedLocked(item.sum, dst, /*arrived=*/true);
    } else {
      ArriveLocked(v, dst, std::move(copy));
    }
    SentLocked(item, src, dst);
    MaybeDoneLocked();
  }
}

void TorchExecutor::SendWorker(int src, int dst) {
  OwnStreams streams({devices_[src]});  // a GPU value leaves through the host
  LinkQueue& queue = links_.at({src, dst});
  const int rank = options_.rank_of_device[dst];
  absl::MutexLock lock(&mu_);
  while (true) {
    if (!WaitForWorkLocked(queue.cv, queue.idle,
                           [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                             return !queue.values.empty();
                           })) {
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
    mu_.Unlock();
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
    mu_.Lock();
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
      report_.transfers.push_back(
          {item.value, src, dst, TensorBytes(t), seconds});
    }
    t = torch::Tensor();
    SentLocked(item, src, dst);
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
  absl::MutexLock lock(&mu_);
  while (true) {
    while (!stop_ &&
           !(running_ && failure_.ok() && received_.at(link) < expected)) {
      queue.cv.Wait(&mu_);
    }
    if (stop_) return;
    mu_.Unlock();
    Clock::time_point sent_at;
    absl::StatusOr<std::pair<int64_t, torch::Tensor>> got =
        options_.ranks->RecvTensor(rank, Channel(src, dst), &sent_at);
    absl::Status s = got.status();
    int value = -1, sum = -1;
    torch::Tensor copy;
    if (s.ok()) {
      // Only what the lowering copies on this link: a value produced (or
      // homed) on src and read on dst, or a sum's buffer from src for a
      // sink on dst.
      const int64_t id = got->first;
      auto carried = [&](int task) {
        return task >= 0 && Lowering().lowered().copy(task).src == src &&
               Lowering().lowered().copy(task).dst == dst;
      };
      if (id >= 0 && id < values &&
          carried(ValueCopyTask(static_cast<int>(id), dst))) {
        value = static_cast<int>(id);
      } else if (id < 0 && -1 - id < sums &&
                 carried(SumCopyTask(static_cast<int>(-1 - id), src))) {
        sum = static_cast<int>(-1 - id);
        value = partials_.first(sum, src);
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
    if (s.ok() && sum >= 0) {
      s = CatchExceptions("accumulating gradients: ", [&] {
        Accumulate(sum, dst, copy, /*owned=*/true);
        return absl::OkStatus();
      });
    }
    mu_.Lock();
    if (stop_) return;
    ++received_.at(link);
    if (!s.ok()) FailLocked(LinkError(s, src, dst));
    if (!failure_.ok()) {
      MaybeDoneLocked();
      continue;
    }
    if (SameHost(src, dst)) {
      report_.transfers.push_back(
          {value, src, dst, TensorBytes(copy), seconds});
    }
    // Counted on dst from its arrival: this rank cannot see when the
    // sender queued it.
    const int task = sum >= 0 ? SumCopyTask(sum, src) : ValueCopyTask(value, dst);
    memory_->CopyStarted(task, TensorBytes(copy), StepSecondsLocked());
    CheckMemoryLocked(dst, -1);
    memory_->CopyEnded(task, StepSecondsLocked());
    DropFreedLocked();  // the sender's copy, of no tensor here
    if (sum >= 0) {
      ContributedLocked(sum, dst, /*arrived=*/true);
    } else {
      ArriveLocked(value, dst, std::move(copy));
    }
    MaybeDoneLocked();
  }
}

}  // namespace placer
