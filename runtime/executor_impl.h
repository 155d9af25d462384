// The op-placement executor's worker state (runtime/executor.h): one class
// whose step is split over three files — executor.cc (the tables Init
// builds, Step, Create), executor_workers.cc (the device and link workers,
// those that send to and receive from other ranks too, and the step's
// bookkeeping under one lock: what is present where, what is freed when,
// which buffer a partial gradient is added into), executor_nodes.cc (the
// bodies of forward, backward and update nodes). Internal to runtime/:
// included by those three files only.
#ifndef PLACER_RUNTIME_EXECUTOR_IMPL_H_
#define PLACER_RUNTIME_EXECUTOR_IMPL_H_

#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "base/stopwatch.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "runtime/allocation_tracker.h"
#include "runtime/executor.h"
#include "runtime/op_autograd.h"
#include "runtime/parameter_update.h"
#include "simulator/gradient_partials.h"
#include "runtime/placement_memory.h"
#include "simulator/memory_timeline.h"
#include "simulator/placement.h"
#include "simulator/placement_lowering.h"
#include "simulator/simulation_context.h"

namespace placer {

class TorchExecutor : public Executor {
 public:
  using Clock = SteadyClock;

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
    memory_ = std::make_unique<PlacementMemory>(view_, cluster_, placement);
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
  // A link's queue; `values` and `idle` under mu_.
  struct LinkQueue {
    std::deque<LinkItem> values;
    absl::CondVar cv;
    Idle idle;
  };
  // A worker's wait on `cv` until it has work (`has_work()` while a step
  // runs) or stop_; false on stop_. Records the hand-off that woke it, if
  // another thread did.
  template <typename HasWork>
  bool WaitForWorkLocked(absl::CondVar& cv, Idle& idle, HasWork has_work)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    idle.waiting = true;
    while (!stop_ && !(running_ && has_work())) cv.Wait(&mu_);
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
  // `device`) into the device's buffer for `sum`, or makes it the buffer.
  // Called without mu_: the add runs outside the step's lock.
  void Accumulate(int sum, int device, const torch::Tensor& partial,
                  bool owned);
  // Under mu_: one more contribution to `sum` is in `device`'s buffer: a
  // partial made there, or (`arrived`) another device's buffer.
  void ContributedLocked(int sum, int device, bool arrived)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The memory's lowering and copy tables, which nothing changes after
  // construction: read by any thread without mu_ (its timeline is mu_'s).
  const PlacementMemory& Lowering() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return *memory_;
  }
  int ValueCopyTask(int value, int dst) const {
    return Lowering().ValueCopyTask(value, dst);
  }
  int SumCopyTask(int sum, int src) const {
    return Lowering().SumCopyTask(sum, src);
  }
  double StepSecondsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return SecondsSince(step_start_);
  }

  // Init's tables (StartWorkers follows).
  absl::Status InitTablesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
  void WaitForStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

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

  // Under mu_: a value arrived on (or was produced on) device d.
  void ArriveLocked(int value, int d, torch::Tensor t)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_: the tensors of the values the memory timeline freed since
  // the last call (freed_) let go, but those resident for the next step.
  // The timeline decides when a value dies on a device; the executor holds
  // what it has not freed.
  void DropFreedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_: `item` has left src for dst (copied or sent): the sum's
  // buffer there is freed, or the value's use there released.
  void SentLocked(const LinkItem& item, int src, int dst)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadyLocked(int node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(absl::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counted on dst from now (its size as its producer measured it).
  void SendLocked(int value, int src, int dst)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendSumLocked(int sum, int src, int dst)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WakeAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_, after the memory timeline counted more on device d (at
  // `node`, or -1: a transfer): fails the step when d is over its memory
  // (`live` bytes; -1: what the timeline holds there now).
  void CheckMemoryLocked(int d, int node, int64_t live = -1)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
  std::vector<int> home_;                       // per value: resident device or -1
  std::vector<torch::Tensor> resident_;         // per value x device
  std::vector<std::unique_ptr<ParameterUpdate>> updates_;  // per value
  std::vector<torch::Tensor> seed_grad_;        // per tensor: loss gradient
  std::vector<torch::Tensor> targets_;          // per tensor: labels/targets
  std::vector<std::vector<bool>> needs_gradient_;  // per op, by input
  StepPrecision precision_;  // the view's, as ForwardOp casts
  std::vector<std::vector<int>> control_dependents_;
  // Per device: the tensors resident before a step (AllocationTracker's
  // base).
  std::vector<int64_t> resident_bytes_;
  // The step's memory: the simulator's timeline over its lowering of the
  // placement, whose copies are the step's (its tables: Lowering()).
  std::unique_ptr<PlacementMemory> memory_ ABSL_PT_GUARDED_BY(mu_);
  // Per (gradient sum, device): the partials made there, the first of them.
  PartialsByDevice partials_;

  // Per-step state under mu_. Not annotated: copies_ (its entries are
  // written under mu_ before the node that reads them becomes ready, which
  // then reads them without it), sum_buffer_ and sum_owned_ (under each
  // sum's sum_mu_), saved_ (a forward node's, read by its backward node
  // after it), links_ (fixed after Init; a queue's items under mu_).
  absl::Mutex mu_;
  // One per device worker, one per link (in LinkQueue), one for Step: each
  // completion wakes only the threads that have new work.
  std::vector<std::unique_ptr<absl::CondVar>> device_cv_;
  std::vector<Idle> device_idle_ ABSL_GUARDED_BY(mu_);
  absl::CondVar done_cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int remaining_nodes_ ABSL_GUARDED_BY(mu_) = 0;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // nodes and transfers running now
  std::vector<torch::Tensor> copies_;
  // Per (gradient sum, device): the buffer, whether it is ours to add into
  // in place (a partial that became the buffer may alias another gradient:
  // the first add makes a new tensor), contributions so far. A buffer is
  // written under its sum's lock, by one contributor at a time.
  std::vector<torch::Tensor> sum_buffer_;
  std::vector<char> sum_owned_;
  std::vector<int> sum_done_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<std::mutex[]> sum_mu_;
  std::vector<int> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<SavedOp> saved_;  // per op
  // (priority, key rank, node): ties broken by node key, as the simulator.
  using ReadyEntry = std::tuple<double, int, int>;
  std::vector<std::priority_queue<ReadyEntry, std::vector<ReadyEntry>,
                                  std::greater<ReadyEntry>>>
      ready_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, int>, LinkQueue> links_;
  // Distributed: per link into this rank, messages per step (fixed after
  // Init) and so far; items queued on links out of this rank and not yet
  // sent.
  std::map<std::pair<int, int>, int> expected_;
  std::map<std::pair<int, int>, int> received_ ABSL_GUARDED_BY(mu_);
  int sends_pending_ ABSL_GUARDED_BY(mu_) = 0;
  int local_nodes_ = 0;  // fixed after Init
  // Per node (fixed after Init): its GPU worker waits for it to end even
  // when GPU nodes are not timed: values it makes cross to another device,
  // or it reads a value or a sum copied from another (a copy's memory is
  // the link stream's to reuse once dropped).
  std::vector<char> waits_untimed_;
  // Per device: its nodes in a step (fixed after Init), and those not yet
  // taken this step; the last one taken is waited for.
  std::vector<int> local_nodes_on_device_;
  std::vector<int> nodes_left_ ABSL_GUARDED_BY(mu_);
  int step_index_ ABSL_GUARDED_BY(mu_) = 0;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  // What the step's memory timeline freed, as it reports it.
  std::vector<ValueOnDevice> freed_ ABSL_GUARDED_BY(mu_);
  Clock::time_point step_start_ ABSL_GUARDED_BY(mu_);
  StepReport report_ ABSL_GUARDED_BY(mu_);
  AllocationTracker allocations_;
  double loss_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace placer

#endif  // PLACER_RUNTIME_EXECUTOR_IMPL_H_
