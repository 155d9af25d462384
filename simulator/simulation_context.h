// What a simulation needs that does not depend on the plan: per-device node
// times, ready-queue priorities, partial-add times, hosts, the lower bound.
// A search builds it once and simulates many placements or strategies.
//
// Contract: Create is a pure function of its arguments and keeps pointers
// to view, cluster and costs (they must outlive the context); a built
// context is read-only and may be shared across threads.
#ifndef PLACER_SIMULATOR_SIMULATION_CONTEXT_H_
#define PLACER_SIMULATOR_SIMULATION_CONTEXT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/view_index.h"

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
  int key_rank(int node) const { return index_.key_rank(node); }
  const std::vector<int>& control_dependents(int node) const {
    return index_.control_dependents(node);
  }
  NodeKind kind(int node) const { return index_.kind(node); }
  // The update nodes, ascending.
  const std::vector<int>& update_nodes() const { return index_.update_nodes(); }
  // Nodes whose time the cost model could only guess.
  int inaccurate_nodes() const { return inaccurate_nodes_; }
  // max(total FLOPs / total peak FLOP/s, sum of each node's fastest time /
  // devices, the longest path at fastest times with free communication):
  // no placement can beat it.
  double lower_bound_seconds() const { return lower_bound_seconds_; }
  // The device group g's parameters live on under `placement`.
  int home_group(int value) const { return index_.home_group(value); }

  // The view's structure (view_index.h), what lowering and memory read per
  // node and value.
  const ViewIndex& index() const { return index_; }
  absl::Span<const int> consumers(int value) const {
    return index_.consumers(value);
  }
  absl::Span<const int> inputs(int node) const { return index_.inputs(node); }
  absl::Span<const int> outputs(int node) const { return index_.outputs(node); }
  int64_t value_bytes(int value) const { return index_.value_bytes(value); }
  int total_consumers() const { return index_.total_consumers(); }

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
  ViewIndex index_;
  int inaccurate_nodes_ = 0;
  double lower_bound_seconds_ = 0;
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_SIMULATION_CONTEXT_H_
