// GroupGraph: the training view folded onto placement units. A unit is a
// colocation group (one per forward op) or, after coarsening, a cluster of
// such groups that policies move together.
//
// Contract: seconds(u, d) is the sum of the simulator's times of the nodes
// of u's groups on device d; resident_bytes(u) the parameters homed there
// times (1 + optimizer state); activation_bytes(u) the bytes its forward
// ops write (kept until their backward use). predecessors/successors are
// forward edges between units (a DAG), weighted by the bytes that cross if
// the units are apart; neighbours counts every crossing (forward values,
// gradients, parameters), both ways, sorted, without self loops. Expand
// turns a device per unit into a placement of every group.
#ifndef PLACER_POLICIES_GROUP_GRAPH_H_
#define PLACER_POLICIES_GROUP_GRAPH_H_

#include <cstdint>
#include <vector>

#include "simulator/simulator.h"

namespace placer {

struct GroupEdge {
  int to = -1;
  int64_t bytes = 0;
  int value = -1;  // parameter_reads: the parameter's value
};

class GroupGraph {
 public:
  // One unit per colocation group.
  explicit GroupGraph(const SimulationContext& simulation);
  // Units given by unit_of[group] in [0, units); the clustering must keep
  // the forward graph between units acyclic (CoarsenSmallGroups does).
  GroupGraph(const SimulationContext& simulation, std::vector<int> unit_of);

  int num_units() const { return static_cast<int>(members_.size()); }
  int num_devices() const { return devices_; }
  int unit_of(int group) const { return unit_of_[group]; }
  const std::vector<int>& members(int unit) const { return members_[unit]; }
  double seconds(int u, int d) const { return seconds_[u * devices_ + d]; }
  double min_seconds(int u) const { return min_seconds_[u]; }
  int64_t resident_bytes(int u) const { return resident_[u]; }
  int64_t activation_bytes(int u) const { return activation_[u]; }
  int64_t memory_bytes(int u) const { return resident_[u] + activation_[u]; }
  const std::vector<GroupEdge>& predecessors(int u) const { return preds_[u]; }
  const std::vector<GroupEdge>& successors(int u) const { return succs_[u]; }
  const std::vector<GroupEdge>& neighbours(int u) const { return adjacent_[u]; }
  // Parameters u's forward ops read that live in another unit: (home unit,
  // bytes, value), one entry per parameter. When u is placed away from the
  // home, the parameter is copied to u's device and one weight-sized
  // gradient (the sum of every partial made on that device) goes home:
  // once per device, however many of its units read the parameter.
  const std::vector<GroupEdge>& parameter_reads(int u) const {
    return parameter_reads_[u];
  }
  // Units in topological order (ties: smallest member key first).
  const std::vector<int>& order() const { return order_; }
  // Longest path to the end through successors, at min_seconds.
  const std::vector<double>& upward_rank() const { return upward_rank_; }
  // The smallest key rank of the unit's members (for tie breaks).
  int key_rank(int u) const { return key_rank_[u]; }

  Placement Expand(const std::vector<int>& device_of_unit) const;

 private:
  void Build(const SimulationContext& simulation);

  int devices_;
  std::vector<int> unit_of_;
  std::vector<std::vector<int>> members_;
  std::vector<double> seconds_, min_seconds_;
  std::vector<int64_t> resident_, activation_;
  std::vector<std::vector<GroupEdge>> preds_, succs_, adjacent_,
      parameter_reads_;
  std::vector<int> order_, key_rank_;
  std::vector<double> upward_rank_;
};

// Clusters groups for placement: in topological order, a group that is
// faster on its fastest device than sending its largest input over the
// slowest link joins the unit of its predecessors when they all are one
// unit (so no cycle can form). Groups with a pinned device stay alone.
std::vector<int> CoarsenSmallGroups(const SimulationContext& simulation,
                                    const std::vector<bool>& pinned);

// Parameter families: units joined (transitively) when one reads a
// parameter homed in the other, as an unrolled recurrent layer's time steps
// all read the layer's weights, or when they home parameters of one module
// (the name before its last '.' or '/': encoder.l1 for encoder.l1.W and
// encoder.l1.R, as PyTorch names a module's parameters); then a unit that
// reads and homes no parameter joins the family of its forward
// predecessors when they all are in one. Returns a family id per unit,
// numbered by first unit in topological order; units with `alone` set are
// families of their own.
std::vector<int> ParameterFamilies(const TrainingView& view,
                                   const GroupGraph& units,
                                   const std::vector<bool>& alone);

// Families merged into at most `parts` groups: the family with the least
// compute (min seconds; ties: the lower id) joins the group it exchanges
// the most bytes with (ties: the lower id) or, when it has no neighbour,
// the lightest other group; until `parts` remain. A family is never split,
// so the layers stay whole. With `key` (one number per family), a family
// joins a group of its own key while one exists (the same rule among
// them), so groups mix keys only when `parts` is fewer than the keys.
// Returns a group per unit, numbered by first unit in topological order.
std::vector<int> MergeFamilies(const GroupGraph& units,
                               const std::vector<int>& family, int parts,
                               const std::vector<int>* key = nullptr);

}  // namespace placer

#endif  // PLACER_POLICIES_GROUP_GRAPH_H_
