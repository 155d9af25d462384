// A training view's structure in flat arrays, what lowering, memory and
// the executor read per node and value, whatever the cluster, costs or
// plan: kinds, control dependents, node-key ranks, parameters' groups,
// consumers, inputs, outputs and bytes.
//
// Contract: Of is a pure function of the view and keeps a pointer to it
// (the view must outlive the index); a built index is read-only and may be
// shared across threads.
#ifndef PLACER_SIMULATOR_VIEW_INDEX_H_
#define PLACER_SIMULATOR_VIEW_INDEX_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "graph/training_view.h"

namespace placer {

class ViewIndex {
 public:
  // `view` must outlive the index.
  static ViewIndex Of(const TrainingView& view);

  const TrainingView& view() const { return *view_; }
  int num_nodes() const { return static_cast<int>(kind_.size()); }
  NodeKind kind(int node) const { return kind_[node]; }
  // The update nodes, ascending.
  const std::vector<int>& update_nodes() const { return update_nodes_; }
  const std::vector<int>& control_dependents(int node) const {
    return control_dependents_[node];
  }
  // The node's rank in the order of node keys (NodeKeyRanks).
  int key_rank(int node) const { return key_rank_[node]; }
  const std::vector<int>& key_ranks() const { return key_rank_; }
  // A parameter's group (the forward op its home follows), else -1; per
  // value.
  int home_group(int value) const { return home_group_[value]; }
  const std::vector<int>& home_groups() const { return home_group_; }
  // The same as view().value(v).consumers, view().node(n).inputs /
  // outputs and view().value(v).bytes.
  absl::Span<const int> consumers(int value) const {
    return Slice(consumers_, value);
  }
  absl::Span<const int> inputs(int node) const { return Slice(inputs_, node); }
  absl::Span<const int> outputs(int node) const {
    return Slice(outputs_, node);
  }
  int64_t value_bytes(int value) const { return value_bytes_[value]; }
  // Every value's consumers counted.
  int total_consumers() const {
    return static_cast<int>(consumers_.items.size());
  }

 private:
  // Lists of ints by index, flat: list i is items[first[i] .. first[i+1]).
  struct FlatLists {
    std::vector<int> first;
    std::vector<int> items;
  };
  static absl::Span<const int> Slice(const FlatLists& lists, int i) {
    return absl::MakeConstSpan(lists.items.data() + lists.first[i],
                               lists.first[i + 1] - lists.first[i]);
  }

  const TrainingView* view_ = nullptr;
  std::vector<NodeKind> kind_;
  std::vector<int> update_nodes_;
  std::vector<std::vector<int>> control_dependents_;
  std::vector<int> key_rank_;
  std::vector<int> home_group_;  // parameters: their group; else -1
  FlatLists consumers_, inputs_, outputs_;
  std::vector<int64_t> value_bytes_;
};

// Each view node's rank in the order of node keys: the tie-break of every
// ready queue (the simulator's and the executor's), computed once so ties
// are broken by name without string compares.
std::vector<int> NodeKeyRanks(const TrainingView& view);

}  // namespace placer

#endif  // PLACER_SIMULATOR_VIEW_INDEX_H_
