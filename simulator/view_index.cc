#include "simulator/view_index.h"

#include <algorithm>
#include <numeric>

namespace placer {

ViewIndex ViewIndex::Of(const TrainingView& view) {
  ViewIndex index;
  index.view_ = &view;
  const int n = static_cast<int>(view.nodes().size());
  index.kind_.resize(n);
  index.control_dependents_.assign(n, {});
  for (int i = 0; i < n; ++i) {
    index.kind_[i] = view.node(i).kind;
    if (index.kind_[i] == NodeKind::kUpdate) index.update_nodes_.push_back(i);
    for (int p : view.node(i).control_inputs) {
      index.control_dependents_[p].push_back(i);
    }
  }
  index.key_rank_ = NodeKeyRanks(view);

  auto flatten = [](int count, auto&& list_of) {
    FlatLists lists;
    size_t items = 0;
    for (int i = 0; i < count; ++i) items += list_of(i).size();
    lists.items.reserve(items);
    lists.first.reserve(count + 1);
    lists.first.push_back(0);
    for (int i = 0; i < count; ++i) {
      const std::vector<int>& list = list_of(i);
      lists.items.insert(lists.items.end(), list.begin(), list.end());
      lists.first.push_back(static_cast<int>(lists.items.size()));
    }
    return lists;
  };
  const int num_values = static_cast<int>(view.values().size());
  index.consumers_ = flatten(
      num_values, [&](int v) -> const auto& {
        return view.value(v).consumers;
      });
  index.inputs_ = flatten(
      n, [&](int i) -> const auto& { return view.node(i).inputs; });
  index.outputs_ = flatten(
      n, [&](int i) -> const auto& { return view.node(i).outputs; });
  index.value_bytes_.resize(num_values);
  for (int v = 0; v < num_values; ++v) {
    index.value_bytes_[v] = view.value(v).bytes;
  }
  index.home_group_.assign(num_values, -1);
  for (int g = 0; g < view.num_groups(); ++g) {
    for (int v : view.group_parameters(g)) index.home_group_[v] = g;
  }
  return index;
}

std::vector<int> NodeKeyRanks(const TrainingView& view) {
  const int n = static_cast<int>(view.nodes().size());
  std::vector<int> by_key(n);
  std::iota(by_key.begin(), by_key.end(), 0);
  std::sort(by_key.begin(), by_key.end(),
            [&](int a, int b) { return view.node(a).key < view.node(b).key; });
  std::vector<int> rank(n);
  for (int k = 0; k < n; ++k) rank[by_key[k]] = k;
  return rank;
}

}  // namespace placer
