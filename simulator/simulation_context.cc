#include "simulator/simulation_context.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placer {
namespace {

// Longest path to the end (inclusive) with each node at `seconds`.
std::vector<double> UpwardRanks(const TrainingView& view,
                                const std::vector<double>& seconds,
                                const std::vector<std::vector<int>>& control) {
  const auto& topo = view.topological_order();
  std::vector<double> rank(view.nodes().size(), 0);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    int n = *it;
    double tail = 0;
    for (int out : view.node(n).outputs) {
      for (int c : view.value(out).consumers) tail = std::max(tail, rank[c]);
    }
    for (int c : control[n]) tail = std::max(tail, rank[c]);
    rank[n] = seconds[n] + tail;
  }
  return rank;
}

class TopologicalReadyOrder : public ReadyOrder {
 public:
  std::vector<double> Priorities(const SimulationContext& c) const override {
    std::vector<double> p(c.num_nodes());
    const auto& topo = c.view().topological_order();
    for (size_t k = 0; k < topo.size(); ++k)
      p[topo[k]] = static_cast<double>(k);
    return p;
  }
};

class CriticalPathReadyOrder : public ReadyOrder {
 public:
  std::vector<double> Priorities(const SimulationContext& c) const override {
    std::vector<double> seconds(c.num_nodes());
    std::vector<std::vector<int>> control(c.num_nodes());
    for (int n = 0; n < c.num_nodes(); ++n) {
      seconds[n] = c.min_node_seconds(n);
      control[n] = c.control_dependents(n);
    }
    std::vector<double> rank = UpwardRanks(c.view(), seconds, control);
    for (double& r : rank) r = -r;
    return rank;
  }
};

}  // namespace

std::unique_ptr<ReadyOrder> NewTopologicalReadyOrder() {
  return std::make_unique<TopologicalReadyOrder>();
}

std::unique_ptr<ReadyOrder> NewCriticalPathReadyOrder() {
  return std::make_unique<CriticalPathReadyOrder>();
}

absl::StatusOr<std::unique_ptr<ReadyOrder>> NewReadyOrder(
    const std::string& name) {
  static const auto* orders = new std::vector<
      std::pair<std::string, std::unique_ptr<ReadyOrder> (*)()>>{
      {"critical_path", NewCriticalPathReadyOrder},
      {"topological", NewTopologicalReadyOrder}};
  std::vector<std::string> names;
  for (const auto& [known, make] : *orders) {
    if (known == name) return make();
    names.push_back(known);
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown ready order '", name, "'; known: ", absl::StrJoin(names, ", ")));
}

SimulationContext SimulationContext::Create(const TrainingView& view,
                                            const Cluster& cluster,
                                            const CostModel& costs,
                                            const ReadyOrder& order) {
  SimulationContext c;
  c.view_ = &view;
  c.cluster_ = &cluster;
  c.costs_ = &costs;
  const int n = c.num_nodes(), d = c.num_devices();
  c.node_seconds_.resize(static_cast<size_t>(n) * d);
  c.alone_seconds_.resize(static_cast<size_t>(n) * d);
  c.min_seconds_.resize(n);
  c.kind_.resize(n);
  c.control_dependents_.assign(n, {});
  std::vector<std::string> hosts;
  for (const Device& device : cluster.devices()) {
    auto it = std::find(hosts.begin(), hosts.end(), device.host);
    c.host_of_.push_back(static_cast<int>(it - hosts.begin()));
    if (it == hosts.end()) hosts.push_back(device.host);
  }
  double flops_at[4] = {0, 0, 0, 0}, min_sum = 0;  // flops per Precision
  bool any_alone = false;
  for (int i = 0; i < n; ++i) {
    double best = 0;
    for (int k = 0; k < d; ++k) {
      double s = costs.NodeSeconds(view, i, cluster.device(k));
      double alone = costs.AloneNodeSeconds(view, i, cluster.device(k));
      c.node_seconds_[static_cast<size_t>(i) * d + k] = s;
      c.alone_seconds_[static_cast<size_t>(i) * d + k] = alone;
      any_alone |= alone != s;
      best = k == 0 ? std::min(s, alone) : std::min({best, s, alone});
    }
    c.min_seconds_[i] = best;
    min_sum += best;
    c.kind_[i] = view.node(i).kind;
    if (c.kind_[i] == NodeKind::kUpdate) c.update_nodes_.push_back(i);
    flops_at[static_cast<int>(view.node(i).compute_precision)] +=
        view.node(i).cost.flops;
    c.inaccurate_nodes_ += costs.IsGuess(view, i);
    for (int p : view.node(i).control_inputs) {
      c.control_dependents_[p].push_back(i);
    }
  }
  if (!any_alone) c.alone_seconds_.clear();
  const int sums = static_cast<int>(view.gradient_sums().size());
  c.add_seconds_.assign(static_cast<size_t>(sums) * d, 0);
  bool any_add = false;
  for (int s = 0; s < sums; ++s) {
    if (view.gradient_sums()[s].partials.size() < 2) continue;
    for (int k = 0; k < d; ++k) {
      double add = costs.PartialAddSeconds(view, s, cluster.device(k));
      c.add_seconds_[static_cast<size_t>(s) * d + k] = add;
      any_add |= add != 0;
    }
  }
  if (!any_add) c.add_seconds_.clear();
  c.key_rank_ = NodeKeyRanks(view);

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
  c.consumers_ = flatten(
      num_values, [&](int v) -> const auto& {
        return view.value(v).consumers;
      });
  c.inputs_ = flatten(
      n, [&](int i) -> const auto& { return view.node(i).inputs; });
  c.outputs_ = flatten(
      n, [&](int i) -> const auto& { return view.node(i).outputs; });
  c.value_bytes_.resize(num_values);
  for (int v = 0; v < num_values; ++v) {
    c.value_bytes_[v] = view.value(v).bytes;
  }

  c.home_group_.assign(view.values().size(), -1);
  for (int g = 0; g < view.num_groups(); ++g) {
    for (int v : view.group_parameters(g)) c.home_group_[v] = g;
  }

  std::vector<double> ranks =
      UpwardRanks(view, c.min_seconds_, c.control_dependents_);
  double path = 0;
  for (double r : ranks) path = std::max(path, r);
  // The cluster's whole compute at each precision's rate.
  double flops_seconds = 0;
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16,
                      Precision::kFp8}) {
    const double at = flops_at[static_cast<int>(p)];
    if (at == 0) continue;
    double rate = 0;
    for (const Device& device : cluster.devices()) {
      rate += device.PeakFlops(p);
    }
    flops_seconds += at / rate;
  }
  c.lower_bound_seconds_ = std::max({flops_seconds, min_sum / d, path});
  c.priority_ = order.Priorities(c);
  return c;
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
