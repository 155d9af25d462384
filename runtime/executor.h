// Executor: runs training steps of a placed TrainingView with LibTorch on
// real devices (CPU devices of one machine, CUDA devices where LibTorch has
// CUDA) and measures them.
//
// Contract:
//  - One step is the view's dataflow: every node runs on its group's device
//    when each of its input values is present there (a worker per device,
//    running the ready node with the lowest priority first, ties by node
//    key, as the simulator: NodeKeyRanks); a value is copied at most once to
//    each other device that reads it, right after it is produced (parameters:
//    at the step's start), by a worker per link direction in FIFO order. This
//    is the simulator's model (simulator/simulator.h), so measured and
//    simulated steps describe the same schedule.
//  - Forward nodes run the op's LibTorch kernel (runtime/torch_ops.h);
//    tensors the importer folded to constants are taken as they are. The
//    backward node of an op computes, with autograd over that op alone, the
//    partial gradients of its inputs from its outputs' summed gradients;
//    update nodes apply the view's optimizer (runtime/parameter_update.h:
//    torch::optim's SGD, SGD with momentum, AdamW) to the parameter on its
//    home device.
//  - Partial gradients are accumulated where they are made (the view's
//    gradient sums, graph/training_view.h): per device, the first partial
//    becomes the buffer and later ones are added into it (outside the
//    step's lock); a device that has made all of its partials sends its one
//    buffer to the sink's device, where it is added again.
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
//  - Memory per device is the simulator's MemoryTimeline
//    (simulator/memory_timeline.h: the liveness rules, written there only)
//    over the simulator's lowering of the same placement, told the step
//    as it runs: each node when it has run (its outputs at the sizes of
//    the tensors its kernel made, all counted before its inputs are
//    released), each copy when it is queued on its link and when it has
//    gone (one from another rank: on its arrival). A value's tensor on a
//    device is let go when the timeline frees it there (its last reader
//    or outgoing copy done, or nobody reads it), unless it stays for the
//    next step (parameters at home, inputs, constants). A step that goes over a
//    device's memory_bytes fails with a ResourceExhausted error naming the
//    device and the node, never a crash. Kernel errors fail the step with
//    the node's key. A failed step leaves nothing behind but what its
//    update nodes that ran did to their parameters (none has run while any
//    forward node is pending); the next step starts clean.
//  - Create fails before anything runs when an op has no kernel (every such
//    op is listed), a device kind is not available in this LibTorch, or the
//    placement does not fit the view and cluster.
//  - Distributed (options.ranks set): this process is one rank of a run
//    and drives only the devices that options.rank_of_device gives it; every
//    rank creates an executor over the same view, cluster, placement and
//    options and calls Step as often. Values and gradient buffers that
//    cross ranks go by send/recv on the rank group (one channel per link,
//    in the order the link's worker sends them); within a rank, as above.
//    Initial values are drawn as in one process (the same seeded sequence,
//    each rank keeping its own devices'), so losses and parameters do not
//    depend on the process layout. A copy from another rank counts on its
//    destination from its arrival (the receiver cannot know when it was
//    queued). Each step ends with an exchange through the rank group's
//    store: every rank's StepReport has the run's loss, the slowest rank's
//    seconds, every device's busy time, peak and node times, and every
//    rank's transfers (a transfer between ranks timed by its sender, from
//    the start of its send to its completion). A failing rank publishes its
//    error; the others abort their step within ~50 ms with that error, which
//    names it; a rank that dies or stalls is named by the first rank that waits
//    on it (after at most the group's timeout). After a failed step the ranks'
//    channels are out of step: later steps fail at once (FailedPrecondition).
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
#include "profiles/cluster.h"
#include "runtime/input_values.h"
#include "runtime/parameter_update.h"
#include "runtime/rank_group.h"
#include "runtime/torch_devices.h"
#include "simulator/placement.h"

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
  // context's; empty: the view's topological order. The strategy
  // executor's wide stages take their slots' ready nodes by them.
  std::vector<double> priorities;
  // On GPUs: wait for each node and copy to finish, so that StepReport's
  // node runs, busy times and copies there are real times (profiles and
  // calibration need them). Off, a GPU's worker queues its nodes on its
  // stream and waits only where the work must have ended: the strategy
  // executor once per task; the op executor after a node whose values
  // cross to another device or that read one copied from another, and
  // after its last node of the step; and they report no node runs or busy
  // time of those GPUs. CPU devices are timed either way (their kernels
  // end when they return).
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
  // The strategy executor across ranks: the most one exchange among a
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

// One training step as either executor ran it (this one, or the strategy
// executor: runtime/strategy_executor.h).
struct StepReport {
  double seconds = 0;  // wall time of the step
  // The sum of the graph's losses before the update (a strategy: its mean
  // over the micro-batches).
  double loss = 0;
  // Per device, tracked (the memory timeline's: runtime/placement_memory.h);
  // for a strategy, an op placement's only (PlacesOps), else empty.
  std::vector<int64_t> peak_memory_bytes;
  // With measure_allocations, per device: the tensors resident before the
  // step (parameters, momentum, inputs, constants) plus the peak of the
  // bytes LibTorch allocated during the step on that device's threads
  // (its worker, and the copies arriving there), freed wherever they are
  // freed. Empty otherwise.
  std::vector<int64_t> allocated_peak_bytes;
  std::vector<double> busy_seconds;        // per device: time in kernels
  // The node runs of the step, in no particular order: each of an op
  // placement's nodes once; a strategy's as strategy_executor.h says (a
  // forward or backward node once per micro-batch, on the device of its
  // replica's slot).
  std::vector<NodeRun> node_runs;
  // The copies between devices: this one's, every one; the strategy
  // executor's, those its workers made in one process.
  std::vector<MeasuredTransfer> transfers;
  // Each time a worker waiting for work was given some by another thread
  // (a value to copy, a node made ready by an arrival or another device;
  // a strategy's: a task made ready by another stage or a receiver, a
  // wide replica's node by another slot's node or copy, a link's copy):
  // seconds until it started on it. A transfer through a link's worker
  // costs two (the link's, then the reader's), on top of the copy; one
  // between CPU devices in a strategy, which the sender makes, one; this
  // rank's only.
  std::vector<double> handoff_seconds;
};

// What runs training steps: an op placement's Executor or a strategy's
// StrategyExecutor, measured alike (runtime/measurement.h).
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Runs one training step (forward, backward, update). A failed step
  // returns its error; what it leaves is each executor's to say.
  virtual absl::StatusOr<StepReport> Step() = 0;

  // The current value of a tensor that exists before the step: a
  // parameter (as updated so far; a strategy's: its first replica's), a
  // graph input as fed (a strategy's: micro-batch 0's), or a constant; a
  // copy on the CPU. NotFound for any other name; each executor says what
  // else it refuses (another rank's, a sharded parameter's).
  virtual absl::StatusOr<torch::Tensor> Resident(
      absl::string_view name) const = 0;
};

class Executor : public StepRunner {
 public:
  // `view` (and its graph) must outlive the executor.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(
      const TrainingView& view, const Cluster& cluster,
      const Placement& placement, const ExecutorOptions& options = {});

  // StepRunner's; distributed, NotFound unless it lives on one of this
  // rank's devices.
  absl::StatusOr<torch::Tensor> Resident(
      absl::string_view name) const override = 0;
};

// Every op of `graph` that the executor cannot run (no LibTorch kernel and
// outputs not folded to constants); OK when there is none.
absl::Status CheckRunnable(const Graph& graph);

}  // namespace placer

#endif  // PLACER_RUNTIME_EXECUTOR_H_
