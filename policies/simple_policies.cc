// single, hash, expert and critical_path: the baselines of the literature.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <limits>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/stable_hash.h"
#include "base/status_helpers.h"
#include "policies/device_loads.h"
#include "policies/group_graph.h"
#include "policies/policies.h"

namespace placer {
namespace {

int NumOps(const PolicyInput& in) {
  return static_cast<int>(in.view.forward().ops().size());
}

Placement AllOn(const PolicyInput& in, const PolicyOptions& o, int device) {
  Placement p{std::vector<int>(NumOps(in), device)};
  for (const auto& [op, d] : o.pinned) p.device_of_op[op] = d;
  return p;
}

// One device of each set that would run the model alone alike: with no op
// pinned, two devices whose every node takes the same time (alone and
// beside others) under the same memory limit give the same step and peaks,
// so only the first of them is simulated (a cluster of 1,024 identical
// GPUs: one simulation, not 1,024). With pins: every device.
std::vector<int> DistinctDevices(const PolicyInput& in, const PolicyOptions& o) {
  const int devices = in.cluster.num_devices();
  std::vector<int> all(devices);
  std::iota(all.begin(), all.end(), 0);
  if (!o.pinned.empty()) return all;
  const SimulationContext& c = in.simulation;
  const std::vector<int64_t> limits = MemoryLimits(in.cluster, o);
  auto same = [&](int a, int b) {
    if (limits[a] != limits[b]) return false;
    for (int i = 0; i < c.num_nodes(); ++i) {
      if (c.node_seconds(i, a) != c.node_seconds(i, b)) return false;
      if (c.has_alone_times() &&
          c.alone_node_seconds(i, a) != c.alone_node_seconds(i, b)) {
        return false;
      }
    }
    return true;
  };
  // Candidates by a hash of the node times, then compared in full.
  auto signature = [&](int d) {
    uint64_t h = static_cast<uint64_t>(limits[d]);
    for (int i = 0; i < c.num_nodes(); ++i) {
      double t = c.node_seconds(i, d);
      uint64_t bits;
      std::memcpy(&bits, &t, sizeof bits);
      h = (h ^ bits) * 1099511628211ull;
    }
    return h;
  };
  std::vector<int> distinct;
  std::map<uint64_t, std::vector<int>> by_signature;
  for (int d = 0; d < devices; ++d) {
    std::vector<int>& alike = by_signature[signature(d)];
    bool seen = false;
    for (int e : alike) {
      if (same(d, e)) {
        seen = true;
        break;
      }
    }
    if (seen) continue;
    alike.push_back(d);
    distinct.push_back(d);
  }
  return distinct;
}

class SinglePolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    std::optional<Placement> best;
    double best_seconds = 0;
    absl::Status first_error;
    const std::vector<int> devices = DistinctDevices(in, o);
    for (int d : devices) {
      Placement p = AllOn(in, o, d);
      absl::StatusOr<SimulationResult> r = CheckPlacement(in, o, p);
      if (!r.ok()) {
        if (first_error.ok()) first_error = r.status();
        continue;
      }
      if (!best || r->step_seconds < best_seconds) {
        best = p;
        best_seconds = r->step_seconds;
      }
    }
    if (!best) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "single: the model fits on no single device; e.g. ",
          first_error.message()));
    }
    return *best;
  }
};

class HashPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    Placement p{std::vector<int>(NumOps(in))};
    const uint64_t devices = in.cluster.num_devices();
    for (int g = 0; g < NumOps(in); ++g) {
      int pinned = PinnedDevice(o, g);
      p.device_of_op[g] =
          pinned >= 0 ? pinned
                      : static_cast<int>(
                            (StableHash(in.view.forward().op(g).key) ^ o.seed) %
                            devices);
    }
    return Checked(in, o, std::move(p), "hash");
  }
};

// The layer index a key names ("encoder.l3/...", "decoder/t5/l3/...",
// "/layers.2/..."), or -1.
int LayerOf(const std::string& key) {
  for (size_t i = 0; i < key.size(); ++i) {
    if (i > 0 && key[i - 1] != '.' && key[i - 1] != '/') continue;
    size_t j = i;
    if (key.compare(i, 7, "layers.") == 0) {
      j = i + 7;
    } else if (key[i] == 'l') {
      j = i + 1;
    } else {
      continue;
    }
    size_t k = j;
    while (k < key.size() && std::isdigit(static_cast<unsigned char>(key[k]))) {
      ++k;
    }
    if (k > j && (k == key.size() || key[k] == '.' || key[k] == '/')) {
      return std::stoi(key.substr(j, k - j));
    }
  }
  return -1;
}

bool Mentions(const std::string& key, std::initializer_list<const char*> words) {
  for (const char* w : words) {
    if (absl::StrContains(key, w)) return true;
  }
  return false;
}

class ExpertPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    const Graph& g = in.view.forward();
    const int n = NumOps(in);
    int layers = 0;
    for (const Op& op : g.ops()) layers = std::max(layers, LayerOf(op.key) + 1);
    if (layers == 0) {
      // CNNs and other unlayered models: one device, as experts do.
      absl::StatusOr<Placement> p = NewSinglePolicy()->Place(in, o);
      if (!p.ok()) {
        return WithContext(p.status(), "expert: ");
      }
      return p;
    }
    const int devices = in.cluster.num_devices();
    Placement p{std::vector<int>(n, 0)};
    for (int i : g.topological_order()) {
      const Op& op = g.op(i);
      int d = PinnedDevice(o, i);
      if (d < 0) {
        int layer = LayerOf(op.key);
        if (Mentions(op.key, {"softmax", "attention", "generator", "loss"})) {
          d = devices - 1;
        } else if (Mentions(op.key, {"embed"})) {
          d = 0;
        } else if (layer >= 0) {
          d = static_cast<int>(static_cast<int64_t>(layer) * devices / layers);
        } else {
          d = 0;  // follows its first placed input
          for (int t : op.inputs) {
            if (t >= 0 && g.tensor(t).producer >= 0) {
              d = p.device_of_op[g.tensor(t).producer];
              break;
            }
          }
        }
      }
      p.device_of_op[i] = d;
    }
    return Checked(in, o, std::move(p), "expert");
  }
};

class CriticalPathPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    const int n = groups.num_units();
    const std::vector<double>& rank = groups.upward_rank();
    auto key = [&](int g) { return groups.key_rank(g); };

    // The critical path: from the highest-ranked source along the
    // highest-ranked successor.
    std::vector<bool> on_path(n, false);
    int at = -1;
    for (int g = 0; g < n; ++g) {
      if (!groups.predecessors(g).empty()) continue;
      if (at < 0 || rank[g] > rank[at] ||
          (rank[g] == rank[at] && key(g) < key(at))) {
        at = g;
      }
    }
    while (at >= 0) {
      on_path[at] = true;
      int next = -1;
      for (const GroupEdge& e : groups.successors(at)) {
        if (next < 0 || rank[e.to] > rank[next] ||
            (rank[e.to] == rank[next] && key(e.to) < key(next))) {
          next = e.to;
        }
      }
      at = next;
    }

    DeviceLoads loads(groups, in.cluster, o);
    Placement p{std::vector<int>(n, -1)};
    for (int u = 0; u < n; ++u) {
      if (int d = UnitPinnedDevice(groups, o, u); d >= 0) {
        p.device_of_op[u] = d;
        loads.Assign(u, d);
      }
    }
    std::vector<int> fastest = DevicesBySpeed(in.cluster);
    for (int g : groups.order()) {
      if (!on_path[g] || p.device_of_op[g] >= 0) continue;
      for (int d : fastest) {
        if (loads.Fits(g, d)) {
          p.device_of_op[g] = d;
          loads.Assign(g, d);
          break;
        }
      }
    }
    // The rest, in topological order: beside the predecessor it exchanges
    // most bytes with, unless that device is past its share of the work
    // (by speed); else on the least loaded device that fits.
    double total = 0, speed = in.cluster.total_peak_flops();
    for (int g = 0; g < n; ++g) total += groups.min_seconds(g);
    for (int g : groups.order()) {
      if (p.device_of_op[g] >= 0) continue;
      int best = -1;
      int64_t heaviest = -1;
      for (const GroupEdge& e : groups.predecessors(g)) {
        int d = p.device_of_op[e.to];
        double share = total * in.cluster.device(d).peak_flops / speed;
        if (e.bytes > heaviest && loads.Fits(g, d) &&
            loads.seconds(d) + groups.seconds(g, d) <= share) {
          heaviest = e.bytes;
          best = d;
        }
      }
      for (int d = 0; best < 0 && d < in.cluster.num_devices(); ++d) {
        if (!loads.Fits(g, d)) continue;
        int least = -1;
        for (int k = 0; k < in.cluster.num_devices(); ++k) {
          if (loads.Fits(g, k) &&
              (least < 0 || loads.seconds(k) < loads.seconds(least))) {
            least = k;
          }
        }
        best = least;
      }
      if (best < 0) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "critical_path: '", in.view.forward().op(groups.members(g)[0]).key,
            "' fits on no device (it needs ", groups.memory_bytes(g),
            " bytes beside what is placed)"));
      }
      p.device_of_op[g] = best;
      loads.Assign(g, best);
    }
    return Checked(in, o, groups.Expand(p.device_of_op), "critical_path");
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewSinglePolicy() {
  return std::make_unique<SinglePolicy>();
}
std::unique_ptr<PlacementPolicy> NewHashPolicy() {
  return std::make_unique<HashPolicy>();
}
std::unique_ptr<PlacementPolicy> NewExpertPolicy() {
  return std::make_unique<ExpertPolicy>();
}
std::unique_ptr<PlacementPolicy> NewCriticalPathPolicy() {
  return std::make_unique<CriticalPathPolicy>();
}

}  // namespace placer
