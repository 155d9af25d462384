// What the executor (runtime/strategy_executor.h, which runs any plan: an
// op placement is its one-stage, one-replica, one-micro-batch strategy)
// takes and reports: its options, the report of one training step, and
// StepRunner, the interface that measurement and the CLI run steps through.
//
// Contract (what every plan's step does, whatever its stages):
//  - Forward nodes run the op's LibTorch kernel (runtime/torch_ops.h);
//    what the importer folded is a constant, not a node (graph.h). The
//    backward node of an op computes, with autograd over that op alone, the
//    partial gradients of its inputs from its outputs' summed gradients
//    (runtime/op_autograd.h); updates apply the view's optimizer
//    (runtime/parameter_update.h: torch::optim's SGD, SGD with momentum,
//    AdamW).
//  - The loss: a scalar floating-point graph output is a loss as it is
//    (gradient 1). Any other floating-point output gets one: cross-entropy
//    against seeded synthetic labels when it is [batch, classes], else half
//    the mean squared error against a seeded synthetic target.
//  - Inputs: floating-point graph inputs are seeded normal data; integer
//    inputs are seeded indices within the range that their consumers accept
//    (Gather: the table's rows; SoftmaxCrossEntropyLoss: the classes). An
//    integer input with no such consumer is an error at Create. The same
//    batch is fed every step, so the loss of a learnable model falls.
//  - Parameters come from the initializers, or, when the file has no data
//    (external data left out), from a seeded initialization (uniform in
//    +-1/sqrt(fan-in) for matrices and kernels; normalization scales and
//    vectors that multiply 1; other vectors 0).
//  - CheckRunnable(graph) lists every op without a kernel; Create fails
//    with it before anything runs.
#ifndef PLACER_RUNTIME_EXECUTOR_H_
#define PLACER_RUNTIME_EXECUTOR_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/training_view.h"
#include "runtime/input_values.h"
#include "runtime/parameter_update.h"
#include "runtime/rank_group.h"

namespace placer {

struct ExecutorOptions {
  // Graph inputs whose values the user gave (runtime/input_values.h), by
  // name; the others are drawn (initial_values.h).
  std::map<std::string, InputValues> input_values;
  // The update nodes' optimizer settings; which optimizer is the view's
  // (TrainingOptions::optimizer).
  UpdateHyperparameters update;
  uint64_t seed = 1;
  // Intra-op threads of each CPU device's worker (LibTorch's, and
  // OpenBLAS's, whose thread count is process-wide: the executor sets it).
  int threads_per_cpu_device = 1;
  // Run each CPU device's worker on cores of its own (runtime/cpu_cores.h)
  // where the process may use enough of them; else leave it unpinned.
  bool pin_cpu_devices = false;
  // Ready-queue priorities per node (lower first), e.g. the simulation
  // context's; empty: the view's topological order. A stage over several
  // devices (an op placement's) takes its slots' ready nodes by them.
  std::vector<double> priorities;
  // On GPUs: wait for each node and copy to finish, so that StepReport's
  // node runs, busy times and copies there are real times (profiles and
  // calibration need them). Off, a GPU's worker queues its nodes on its
  // stream and waits only where the work must have ended (once per
  // task), and reports no node runs or busy time of those GPUs. CPU
  // devices are timed either way (their kernels end when they return).
  bool time_gpu_nodes = true;
  // Fail a step whose tracked memory on a device exceeds its memory_bytes.
  bool enforce_memory = true;
  // Also measure what LibTorch's allocators really hand out during a step
  // (StepReport::allocated_peak_bytes), through c10's memory reporting
  // hook on every worker thread. Costs a lock per allocation.
  bool measure_allocations = false;
  // Fault injection (tests): called on the device's worker before each
  // node runs; a non-OK status fails that node as a kernel error would.
  std::function<absl::Status(const TrainingNode& node)> before_node;
  // Across ranks: the most one exchange among a
  // slot's replicas carries (a run of its parameters' gradients, or of
  // what ZeRO-1/2 updated; a larger parameter alone), so that the staging
  // of an exchange holds a chunk, not a replica's every gradient.
  int64_t exchange_chunk_bytes = int64_t{4} << 20;
  // A distributed run: this process's rank group, and the rank that drives
  // each cluster device (RanksOfDevices). Null: one process, every device.
  std::shared_ptr<RankGroup> ranks;
  std::vector<int> rank_of_device;
};

// A copy between two devices in a step, timed from its start to its end
// (between ranks: by its sender, until its send completes).
struct MeasuredTransfer {
  int value = -1;  // the value copied (a gradient sum's buffer: its value)
  int src = -1;
  int dst = -1;
  int64_t bytes = 0;
  double seconds = 0;
};

// One run of a view node in a step: its device and the seconds its kernel
// took there (on a GPU, until the device finished it), without the copies
// and waits for other devices it made before.
struct NodeRun {
  int node = -1;
  int device = -1;
  double seconds = 0;
};

// One training step as the executor ran it.
struct StepReport {
  double seconds = 0;  // wall time of the step
  // The sum of the graph's losses before the update (a strategy: its mean
  // over the micro-batches).
  double loss = 0;
  // Per device, tracked: an op placement's strategy's node by node (the
  // memory timeline's: runtime/placement_memory.h), any other strategy's
  // pass by pass (the strategy memory timeline's: runtime/pass_memory.h);
  // zero for devices of other processes and devices without a stage.
  std::vector<int64_t> peak_memory_bytes;
  // With measure_allocations, per device: the tensors resident before the
  // step (parameters, momentum, inputs, constants) plus the peak of the
  // bytes LibTorch allocated during the step on that device's threads
  // (its worker, and the copies arriving there), freed wherever they are
  // freed. Empty otherwise.
  std::vector<int64_t> allocated_peak_bytes;
  std::vector<double> busy_seconds;        // per device: time in kernels
  // The node runs of the step, in no particular order, as
  // strategy_executor.h says (a forward or backward node once per
  // micro-batch, on the device of its replica's slot: an op placement's
  // nodes once each).
  std::vector<NodeRun> node_runs;
  // The copies between devices that the workers and links made (what
  // crosses ranks between stages or replicas goes packed and is not
  // among them; between the slots of a replica split over ranks, it is).
  std::vector<MeasuredTransfer> transfers;
  // Each time a worker waiting for work was given some by another thread
  // (a task made ready by another stage or a receiver, a wide replica's
  // node by another slot's node or copy, a link's copy): seconds until it
  // started on it. A transfer through a link's worker costs two (the
  // link's, then the reader's), on top of the copy; one between CPU
  // devices, which the sender makes, one; this rank's only.
  std::vector<double> handoff_seconds;
};

// What runs training steps (the StrategyExecutor; runtime/measurement.h
// measures through it).
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Runs one training step (forward, backward, update). A failed step
  // returns its error; what it leaves is the implementation's to say.
  virtual absl::StatusOr<StepReport> Step() = 0;

  // The current value of a tensor that exists before the step: a
  // parameter (as updated so far; a strategy's: its first replica's), a
  // graph input as fed (a strategy's: micro-batch 0's), or a constant; a
  // copy on the CPU. NotFound for any other name; the implementation says
  // what else it refuses (another rank's, a sharded parameter's).
  virtual absl::StatusOr<torch::Tensor> Resident(
      absl::string_view name) const = 0;
};

// Every op of `graph` that the executor cannot run (no LibTorch kernel);
// OK when there is none.
absl::Status CheckRunnable(const Graph& graph);

}  // namespace placer

#endif  // PLACER_RUNTIME_EXECUTOR_H_
