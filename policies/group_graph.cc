#include "policies/group_graph.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <string_view>

namespace placer {
namespace {

void AddEdge(std::map<std::pair<int, int>, int64_t>& edges, int a, int b,
             int64_t bytes) {
  if (a != b) edges[{a, b}] += bytes;
}

// The group a value comes from: its producer's, or a parameter's home.
int SourceGroup(const SimulationContext& sim, int v) {
  const TrainingValue& value = sim.view().value(v);
  if (value.producer >= 0) return sim.view().node(value.producer).forward_op;
  if (value.kind == ValueKind::kParameter) return sim.home_group(v);
  return -1;
}

}  // namespace

GroupGraph::GroupGraph(const SimulationContext& sim)
    : devices_(sim.num_devices()) {
  unit_of_.resize(sim.view().num_groups());
  std::iota(unit_of_.begin(), unit_of_.end(), 0);
  Build(sim);
}

GroupGraph::GroupGraph(const SimulationContext& sim, std::vector<int> unit_of)
    : devices_(sim.num_devices()), unit_of_(std::move(unit_of)) {
  Build(sim);
}

void GroupGraph::Build(const SimulationContext& sim) {
  const TrainingView& view = sim.view();
  const int groups = view.num_groups();
  const int units =
      groups == 0 ? 0 : *std::max_element(unit_of_.begin(), unit_of_.end()) + 1;
  members_.assign(units, {});
  for (int g = 0; g < groups; ++g) members_[unit_of_[g]].push_back(g);
  seconds_.assign(static_cast<size_t>(units) * devices_, 0);
  min_seconds_.assign(units, 0);
  resident_.assign(units, 0);
  activation_.assign(units, 0);
  key_rank_.assign(units, sim.num_nodes());
  const double state = view.options().optimizer_state_per_parameter_byte();
  for (int g = 0; g < groups; ++g) {
    int u = unit_of_[g];
    key_rank_[u] = std::min(key_rank_[u], sim.key_rank(g));
    for (int n : view.group_nodes(g)) {
      for (int d = 0; d < devices_; ++d) {
        seconds_[u * devices_ + d] += sim.node_seconds(n, d);
      }
    }
    for (int v : view.group_parameters(g)) {
      resident_[u] += view.value(v).bytes +
                      static_cast<int64_t>(state * view.value(v).bytes);
    }
    for (int v : view.node(g).outputs) activation_[u] += view.value(v).bytes;
    activation_[u] += view.node(g).saved_workspace_bytes;
  }
  for (int u = 0; u < units; ++u) {
    min_seconds_[u] = *std::min_element(seconds_.begin() + u * devices_,
                                        seconds_.begin() + (u + 1) * devices_);
  }

  parameter_reads_.assign(units, {});
  std::map<std::pair<int, int>, int64_t> forward, all;
  for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
    int from_group = SourceGroup(sim, v);
    if (from_group < 0) continue;
    const TrainingValue& value = view.value(v);
    int from = unit_of_[from_group];
    bool from_forward = value.producer >= 0 &&
                        view.node(value.producer).kind == NodeKind::kForward;
    std::vector<int> seen;  // units this value reaches, counted once each
    for (int c : value.consumers) {
      int to = unit_of_[view.node(c).forward_op];
      if (to == from || std::find(seen.begin(), seen.end(), to) != seen.end()) {
        continue;
      }
      seen.push_back(to);
      if (value.kind == ValueKind::kParameter) {
        parameter_reads_[to].push_back({from, value.bytes, v});
      }
      AddEdge(all, std::min(from, to), std::max(from, to), value.bytes);
      if (from_forward && view.node(c).kind == NodeKind::kForward) {
        AddEdge(forward, from, to, value.bytes);
      }
    }
  }
  preds_.assign(units, {});
  succs_.assign(units, {});
  adjacent_.assign(units, {});
  for (const auto& [edge, bytes] : forward) {
    succs_[edge.first].push_back({edge.second, bytes});
    preds_[edge.second].push_back({edge.first, bytes});
  }
  for (const auto& [edge, bytes] : all) {
    adjacent_[edge.first].push_back({edge.second, bytes});
    adjacent_[edge.second].push_back({edge.first, bytes});
  }
  for (auto& list : adjacent_) {
    std::sort(list.begin(), list.end(),
              [](const GroupEdge& a, const GroupEdge& b) { return a.to < b.to; });
  }
  // Kahn over units, smallest key first.
  std::vector<int> pending(units, 0);
  for (int u = 0; u < units; ++u) pending[u] = static_cast<int>(preds_[u].size());
  using Entry = std::pair<int, int>;  // key rank, unit
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (int u = 0; u < units; ++u) {
    if (pending[u] == 0) ready.push({key_rank_[u], u});
  }
  order_.clear();
  while (!ready.empty()) {
    int u = ready.top().second;
    ready.pop();
    order_.push_back(u);
    for (const GroupEdge& e : succs_[u]) {
      if (--pending[e.to] == 0) ready.push({key_rank_[e.to], e.to});
    }
  }
  upward_rank_.assign(units, 0);
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    double tail = 0;
    for (const GroupEdge& e : succs_[*it]) {
      tail = std::max(tail, upward_rank_[e.to]);
    }
    upward_rank_[*it] = min_seconds_[*it] + tail;
  }
}

Placement GroupGraph::Expand(const std::vector<int>& device_of_unit) const {
  Placement p{std::vector<int>(unit_of_.size(), 0)};
  for (size_t g = 0; g < unit_of_.size(); ++g) {
    p.device_of_op[g] = device_of_unit[unit_of_[g]];
  }
  return p;
}

std::vector<int> CoarsenSmallGroups(const SimulationContext& sim,
                                    const std::vector<bool>& pinned) {
  GroupGraph groups(sim);
  const int n = groups.num_units();
  const Cluster& cluster = sim.cluster();
  // The slowest link: the cost of a cut, pessimistically.
  double latency = 0, bandwidth = 0;
  for (int a = 0; a < cluster.num_devices(); ++a) {
    for (int b = 0; b < cluster.num_devices(); ++b) {
      if (a == b) continue;
      const LinkParams& l = cluster.link(a, b);
      latency = std::max(latency, l.latency_seconds);
      bandwidth = bandwidth == 0 ? l.bandwidth : std::min(bandwidth, l.bandwidth);
    }
  }
  std::vector<int> unit(n);
  std::iota(unit.begin(), unit.end(), 0);
  if (bandwidth == 0) return unit;  // one device: nothing to cut
  for (int g : groups.order()) {
    if (pinned[g] || groups.predecessors(g).empty()) continue;
    int only = -1;
    int64_t largest = 0;
    bool single = true;
    for (const GroupEdge& e : groups.predecessors(g)) {
      int u = unit[e.to];
      if (pinned[e.to]) single = false;
      if (only >= 0 && u != only) single = false;
      only = u;
      largest = std::max(largest, e.bytes);
    }
    double send = latency + static_cast<double>(largest) / bandwidth;
    if (single && groups.min_seconds(g) < send) unit[g] = only;
  }
  // Renumber units densely in group order.
  std::vector<int> id(n, -1), out(n);
  int next = 0;
  for (int g = 0; g < n; ++g) {
    int root = unit[g];
    if (id[root] < 0) id[root] = next++;
    out[g] = id[root];
  }
  return out;
}

std::vector<int> ParameterFamilies(const TrainingView& view,
                                   const GroupGraph& units,
                                   const std::vector<bool>& alone) {
  const int n = units.num_units();
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto root = [&](int u) {
    while (parent[u] != u) u = parent[u] = parent[parent[u]];
    return u;
  };
  auto join = [&](int u, int v) {
    int a = root(u), b = root(v);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  };
  // Homes of one module's parameters.
  std::map<std::string_view, int> module_home;
  for (int g = 0; g < view.num_groups(); ++g) {
    int u = units.unit_of(g);
    if (alone[u]) continue;
    for (int v : view.group_parameters(g)) {
      std::string_view name = view.value(v).name;
      size_t cut = name.find_last_of("./");
      if (cut != std::string_view::npos) name = name.substr(0, cut);
      auto [it, added] = module_home.emplace(name, u);
      if (!added) join(u, it->second);
    }
  }
  for (int u = 0; u < n; ++u) {
    if (alone[u]) continue;
    for (const GroupEdge& e : units.parameter_reads(u)) {
      if (!alone[e.to]) join(u, e.to);
    }
  }
  // A unit that reads and homes no parameter joins the family of its
  // forward predecessors when they all are in one (the parameter-free
  // tail of a layer's step: its gate activations, cell and state).
  std::vector<bool> touches(n, false);
  for (int u = 0; u < n; ++u) {
    for (const GroupEdge& e : units.parameter_reads(u)) {
      touches[u] = touches[e.to] = true;
    }
  }
  for (int g = 0; g < view.num_groups(); ++g) {
    if (!view.group_parameters(g).empty()) touches[units.unit_of(g)] = true;
  }
  for (int u : units.order()) {
    if (alone[u] || touches[u] || units.predecessors(u).empty()) continue;
    int r = -1;
    for (const GroupEdge& e : units.predecessors(u)) {
      int p = alone[e.to] ? -1 : root(e.to);
      if (p < 0 || (r >= 0 && p != r)) {
        r = -1;
        break;
      }
      r = p;
    }
    if (r >= 0) parent[u] = r;
  }
  std::vector<int> id_of_root(n, -1), family(n);
  int next = 0;
  for (int u : units.order()) {
    int r = root(u);
    if (id_of_root[r] < 0) id_of_root[r] = next++;
    family[u] = id_of_root[r];
  }
  return family;
}

std::vector<int> MergeFamilies(const GroupGraph& units,
                               const std::vector<int>& family, int parts,
                               const std::vector<int>* key) {
  const int n = units.num_units();
  int count = 0;
  for (int f : family) count = std::max(count, f + 1);
  std::vector<double> seconds(count, 0);
  std::vector<std::map<int, int64_t>> bytes(count);
  for (int u = 0; u < n; ++u) {
    seconds[family[u]] += units.min_seconds(u);
    for (const GroupEdge& e : units.neighbours(u)) {
      if (family[e.to] != family[u]) bytes[family[u]][family[e.to]] += e.bytes;
    }
  }
  std::vector<int> into(count);
  std::iota(into.begin(), into.end(), 0);
  std::set<std::pair<double, int>> lightest;
  for (int f = 0; f < count; ++f) lightest.insert({seconds[f], f});
  while (static_cast<int>(lightest.size()) > std::max(parts, 1)) {
    const int a = lightest.begin()->second;
    lightest.erase(lightest.begin());
    // With keys: a group of the same key first (its most bytes, else the
    // lightest), then any.
    auto same = [&](int f) { return key == nullptr || (*key)[f] == (*key)[a]; };
    int b = -1;
    for (bool keyed : {true, false}) {
      for (const auto& [to, crossing] : bytes[a]) {
        if (keyed && !same(to)) continue;
        if (b < 0 || crossing > bytes[a][b]) b = to;
      }
      if (b < 0) {
        for (const auto& [s, f] : lightest) {
          if (keyed && !same(f)) continue;
          b = f;
          break;
        }
      }
      if (b >= 0) break;
    }
    lightest.erase({seconds[b], b});
    seconds[b] += seconds[a];
    lightest.insert({seconds[b], b});
    into[a] = b;
    for (const auto& [to, crossing] : bytes[a]) {
      bytes[to].erase(a);
      if (to == b) continue;
      bytes[b][to] += crossing;
      bytes[to][b] += crossing;
    }
    bytes[a].clear();
  }
  auto root = [&](int f) {
    while (into[f] != f) f = into[f];
    return f;
  };
  std::map<int, int> number;
  std::vector<int> out(n);
  for (int u : units.order()) {
    const int next = static_cast<int>(number.size());
    out[u] = number.try_emplace(root(family[u]), next).first->second;
  }
  return out;
}

}  // namespace placer
