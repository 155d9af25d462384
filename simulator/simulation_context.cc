#include "simulator/simulation_context.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placer {
namespace {

// Longest path to the end (inclusive) with each node at `seconds`.
std::vector<double> UpwardRanks(const ViewIndex& index,
                                const std::vector<double>& seconds) {
  const TrainingView& view = index.view();
  const auto& topo = view.topological_order();
  std::vector<double> rank(view.nodes().size(), 0);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    int n = *it;
    double tail = 0;
    for (int out : view.node(n).outputs) {
      for (int c : view.value(out).consumers) tail = std::max(tail, rank[c]);
    }
    for (int c : index.control_dependents(n)) tail = std::max(tail, rank[c]);
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
    for (int n = 0; n < c.num_nodes(); ++n) seconds[n] = c.min_node_seconds(n);
    std::vector<double> rank = UpwardRanks(c.index(), seconds);
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
  c.index_ = ViewIndex::Of(view);
  c.min_seconds_.resize(n);
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
    flops_at[static_cast<int>(view.node(i).compute_precision)] +=
        view.node(i).cost.flops;
    c.inaccurate_nodes_ += costs.IsGuess(view, i);
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
  std::vector<double> ranks = UpwardRanks(c.index_, c.min_seconds_);
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

}  // namespace placer
