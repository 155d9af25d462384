// The execution simulator: one training step of a placed TrainingView.
//
// Contract: Simulate is a pure function of (context, placement, options):
// the same inputs give the same result, bit for bit. It is event driven:
//  - One compute queue per device. A node becomes ready when each of its
//    input values is present on its device and its control inputs are done;
//    an idle device runs the ready node that the context's ReadyOrder ranks
//    first (lowest priority value), ties broken by node key. A node takes
//    the cost model's NodeSeconds, or its AloneNodeSeconds on a device that
//    is the only one of its host (Device::host) the placement uses: a
//    device in use slows its host's others down for the whole step (its
//    threads, its copies), not only while it runs a node.
//  - A value is sent at most once to each device that needs it, right when
//    it is produced (parameters: at time 0 from their group's device).
//    Transfers are serialized per link direction (FIFO) and take the cost
//    model's TransferSeconds. Graph inputs and constants are present on
//    every device that reads them from the start (fed by the host).
//  - Partial gradients are accumulated where they are made (the view's
//    gradient sums): when a device has made the last of its partials of a
//    sum, its one buffer is sent to the sink's device (a single transfer of
//    the tensor's bytes, however many partials it holds); the sink is ready
//    when every device's buffer is there. A node whose partial is added
//    into a buffer its device holds when it starts takes the cost model's
//    PartialAddSeconds more (the add follows the node on its device; an
//    arriving buffer's add is not charged).
//  - Memory per device: resident for the whole step are the parameters
//    homed there times (1 + optimizer state per parameter byte). Every other
//    value is allocated
//    when its producer starts (or, for a copy, when it is queued on its
//    link: when its producer ends, or at time 0 for a parameter; it may
//    start later, when the link is free) and
//    freed when the last node or outgoing transfer on that device that uses
//    it has finished: activations thus live until their backward use.
//    Graph inputs and constants are allocated from the start on each device
//    that reads them and freed after their last use there. A partial
//    gradient is allocated when its node starts; when the node finishes it
//    becomes its device's buffer for the sum, or, when that device has one
//    already, is added into it and freed. An arriving buffer is likewise
//    kept or added and freed. A device's buffer lives until it is sent (the
//    transfer's end) or, on the sink's device, until the sink finishes.
//    A forward node's saved_workspace_bytes (graph/training_view.h) are
//    allocated when it starts and freed when its backward node finishes;
//    a node's scratch_bytes when it starts, freed when it finishes.
// SimulationContext holds everything that does not depend on the placement
// (per-device node times, priorities, the lower bound), so a search builds
// it once and simulates many placements.
#ifndef PLACER_SIMULATOR_SIMULATOR_H_
#define PLACER_SIMULATOR_SIMULATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/placement.h"

namespace placer {

class SimulationContext;

// Orders a device's ready queue: lower priority runs first.
class ReadyOrder {
 public:
  virtual ~ReadyOrder() = default;
  virtual std::vector<double> Priorities(
      const SimulationContext& context) const = 0;
};

// Nodes in the view's topological order.
std::unique_ptr<ReadyOrder> NewTopologicalReadyOrder();
// Longest remaining path first (HEFT's upward rank, with each node at its
// fastest device's time and free communication).
std::unique_ptr<ReadyOrder> NewCriticalPathReadyOrder();
// The orders above by name ("topological", "critical_path"); NotFound
// listing the names otherwise.
absl::StatusOr<std::unique_ptr<ReadyOrder>> NewReadyOrder(
    const std::string& name);

class SimulationContext {
 public:
  // `view`, `cluster` and `costs` must outlive the context.
  static SimulationContext Create(const TrainingView& view,
                                  const Cluster& cluster,
                                  const CostModel& costs,
                                  const ReadyOrder& order);

  const TrainingView& view() const { return *view_; }
  const Cluster& cluster() const { return *cluster_; }
  const CostModel& costs() const { return *costs_; }
  int num_nodes() const { return static_cast<int>(view_->nodes().size()); }
  int num_devices() const { return cluster_->num_devices(); }
  double node_seconds(int node, int device) const {
    return node_seconds_[static_cast<size_t>(node) * num_devices() + device];
  }
  // On a device that is the only one of its host a placement uses
  // (CostModel::AloneNodeSeconds); node_seconds where the cost model does
  // not tell the two apart.
  double alone_node_seconds(int node, int device) const {
    return alone_seconds_.empty()
               ? node_seconds(node, device)
               : alone_seconds_[static_cast<size_t>(node) * num_devices() +
                                device];
  }
  bool has_alone_times() const { return !alone_seconds_.empty(); }
  // Adding a partial gradient of gradient sum `sum` into the buffer
  // `device` holds for it (CostModel::PartialAddSeconds).
  bool has_partial_adds() const { return !add_seconds_.empty(); }
  double partial_add_seconds(int sum, int device) const {
    return add_seconds_.empty()
               ? 0
               : add_seconds_[static_cast<size_t>(sum) * num_devices() +
                              device];
  }
  // Devices on one host share an index (Device::host; unsaid is one host).
  int host_of(int device) const { return host_of_[device]; }
  // The node's fastest time over devices, alone or not.
  double min_node_seconds(int node) const { return min_seconds_[node]; }
  double priority(int node) const { return priority_[node]; }
  const std::vector<double>& priorities() const { return priority_; }
  int key_rank(int node) const { return key_rank_[node]; }
  const std::vector<int>& control_dependents(int node) const {
    return control_dependents_[node];
  }
  // Nodes whose time the cost model could only guess.
  int inaccurate_nodes() const { return inaccurate_nodes_; }
  // max(total FLOPs / total peak FLOP/s, sum of each node's fastest time /
  // devices, the longest path at fastest times with free communication):
  // no placement can beat it.
  double lower_bound_seconds() const { return lower_bound_seconds_; }
  // The device group g's parameters live on under `placement`.
  int home_group(int value) const { return home_group_[value]; }

 private:
  const TrainingView* view_ = nullptr;
  const Cluster* cluster_ = nullptr;
  const CostModel* costs_ = nullptr;
  std::vector<double> node_seconds_;
  std::vector<double> alone_seconds_;  // empty: the same as node_seconds_
  std::vector<double> add_seconds_;    // per (sum, device); empty: all 0
  std::vector<int> host_of_;
  std::vector<double> min_seconds_;
  std::vector<double> priority_;
  std::vector<int> key_rank_;
  std::vector<std::vector<int>> control_dependents_;
  std::vector<int> home_group_;  // parameters: their group; else -1
  int inaccurate_nodes_ = 0;
  double lower_bound_seconds_ = 0;
};

struct SimulationOptions {
  // Keep every node's and transfer's times (for traces).
  bool record_schedule = false;
};

struct ScheduledNode {
  int node = -1;
  int device = -1;
  double start_seconds = 0;
  double end_seconds = 0;
};

struct ScheduledTransfer {
  int value = -1;  // for a gradient sum: the first partial made on src
  int gradient_sum = -1;  // the view's gradient sum sent, or -1
  int src = -1;
  int dst = -1;
  int64_t bytes = 0;
  double start_seconds = 0;
  double end_seconds = 0;
};

// A device's memory after a change, at a moment of the step.
struct MemorySample {
  double seconds = 0;
  int device = -1;
  int64_t bytes = 0;
};

// One step of the critical path: a node or a transfer (an index into
// SimulationResult::transfers).
struct CriticalStep {
  bool is_transfer = false;
  int index = -1;
  double start_seconds = 0;
  double end_seconds = 0;
};

struct SimulationResult {
  double step_seconds = 0;
  double lower_bound_seconds = 0;
  std::vector<double> busy_seconds;        // per device
  std::vector<int64_t> peak_memory_bytes;  // per device
  bool oom = false;                        // some device over capacity
  int64_t bytes_moved = 0;                 // across devices
  int transfers_count = 0;
  int inaccurate_nodes = 0;
  std::vector<CriticalStep> critical_path;  // first step first
  std::vector<ScheduledTransfer> transfers;  // every transfer
  std::vector<ScheduledNode> schedule;  // with record_schedule, by node
  // With record_schedule: every change of a device's memory, in the order
  // the simulation made them (times ascending); resident memory at 0.
  std::vector<MemorySample> memory;
};

// Each view node's rank in the order of node keys: the tie-break of every
// ready queue (the simulator's and the executor's), computed once so ties
// are broken by name without string compares.
std::vector<int> NodeKeyRanks(const TrainingView& view);

// What a transfer carries, for reports and traces: the value's name, or
// for a device's summed partial gradients "grad:<tensor> (summed)".
std::string TransferName(const TrainingView& view,
                         const ScheduledTransfer& transfer);

// Errors: a placement of the wrong size or naming a device out of range.
absl::StatusOr<SimulationResult> Simulate(
    const SimulationContext& context, const Placement& placement,
    const SimulationOptions& options = {});

}  // namespace placer

#endif  // PLACER_SIMULATOR_SIMULATOR_H_
