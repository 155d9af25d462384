// List schedulers over colocation groups, memory-aware as in Baechi
// (Jeon et al. 2020): heft, m_etf, m_topo. They schedule the forward DAG of
// groups, each group costing its whole training work (forward, backward,
// update) on a device and each cut edge its transfer time, and only
// consider devices where the group's estimated memory still fits.
#include <algorithm>
#include <queue>

#include "absl/strings/str_cat.h"
#include "policies/device_loads.h"
#include "policies/group_graph.h"
#include "policies/policies.h"

namespace placer {
namespace {

// Shared state of a list schedule: where groups went and when they end.
class Schedule {
 public:
  Schedule(const PolicyInput& in, const PolicyOptions& o,
           const GroupGraph& groups)
      : in_(in),
        o_(o),
        groups_(groups),
        loads_(groups, in.cluster, o),
        device_(groups.num_units(), -1),
        finish_(groups.num_units(), 0),
        free_(in.cluster.num_devices(), 0) {}

  // When g's inputs would all be on device d.
  double DataReady(int g, int d) const {
    double ready = 0;
    for (const GroupEdge& e : groups_.predecessors(g)) {
      double t = finish_[e.to];
      if (device_[e.to] != d) {
        t += in_.costs.TransferSeconds(e.bytes, in_.cluster, device_[e.to], d);
      }
      ready = std::max(ready, t);
    }
    return ready;
  }

  // What placing g on d adds in the backward pass: a partial gradient
  // sent home for each parameter it reads from a unit on another device.
  double GradientSeconds(int g, int d) const {
    double total = 0;
    for (const GroupEdge& e : groups_.parameter_reads(g)) {
      int home = device_[e.to];
      if (home >= 0 && home != d) {
        total += in_.costs.TransferSeconds(e.bytes, in_.cluster, d, home);
      }
    }
    return total;
  }

  // The device where g finishes first, counting the gradients it would
  // send home, among those that fit (or its pinned device); -1 when none
  // fits.
  int BestDevice(int g, double* start_out) const {
    int pinned = UnitPinnedDevice(groups_, o_, g);
    int best = -1;
    double best_cost = 0, best_start = 0;
    for (int d = 0; d < in_.cluster.num_devices(); ++d) {
      if (pinned >= 0 ? d != pinned : !loads_.Fits(g, d)) continue;
      double start = std::max(free_[d], DataReady(g, d));
      double cost = start + groups_.seconds(g, d) + GradientSeconds(g, d);
      if (best < 0 || cost < best_cost) {
        best = d;
        best_cost = cost;
        best_start = start;
      }
    }
    if (start_out != nullptr) *start_out = best_start;
    return best;
  }

  void Assign(int g, int d, double start) {
    device_[g] = d;
    finish_[g] = start + groups_.seconds(g, d);
    free_[d] = finish_[g];
    loads_.Assign(g, d);
  }

  absl::Status NoDevice(const std::string& policy, int g) const {
    return absl::ResourceExhaustedError(absl::StrCat(
        policy, ": '", in_.view.forward().op(groups_.members(g)[0]).key,
        "' fits on no device (it needs ", groups_.memory_bytes(g),
        " more bytes; every device is full)"));
  }

  Placement placement() const { return groups_.Expand(device_); }
  const DeviceLoads& loads() const { return loads_; }

 private:
  const PolicyInput& in_;
  const PolicyOptions& o_;
  const GroupGraph& groups_;
  DeviceLoads loads_;
  std::vector<int> device_;
  std::vector<double> finish_;
  std::vector<double> free_;
};

// HEFT (Topcuoglu et al. 2002): groups by decreasing upward rank, each on
// the device where it finishes first.
class HeftPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    const int n = groups.num_units();
    std::vector<int> position(n);
    for (int k = 0; k < n; ++k) position[groups.order()[k]] = k;
    std::vector<int> order = groups.order();
    const std::vector<double>& rank = groups.upward_rank();
    // Decreasing rank keeps predecessors first; equal ranks (zero-time
    // groups) keep topological order.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return rank[a] > rank[b];
    });
    // Repair any predecessor that a tie placed later.
    std::vector<int> pending(n, 0);
    for (int g = 0; g < n; ++g) {
      pending[g] = static_cast<int>(groups.predecessors(g).size());
    }
    auto later = [&](int a, int b) {  // a after b in the rank order
      if (rank[a] != rank[b]) return rank[a] < rank[b];
      return position[a] > position[b];
    };
    std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
    for (int g = 0; g < n; ++g) {
      if (pending[g] == 0) ready.push(g);
    }
    Schedule s(in, o, groups);
    while (!ready.empty()) {
      int g = ready.top();
      ready.pop();
      double start;
      int d = s.BestDevice(g, &start);
      if (d < 0) return s.NoDevice("heft", g);
      s.Assign(g, d, start);
      for (const GroupEdge& e : groups.successors(g)) {
        if (--pending[e.to] == 0) ready.push(e.to);
      }
    }
    return Checked(in, o, s.placement(), "heft");
  }
};

// m-ETF: repeatedly schedules the ready group that can start earliest (on
// the device where it starts earliest), ties by node key.
class MEtfPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    const int n = groups.num_units();
    Schedule s(in, o, groups);
    std::vector<int> pending(n, 0);
    for (int g = 0; g < n; ++g) {
      pending[g] = static_cast<int>(groups.predecessors(g).size());
    }
    // Ready groups keyed by their earliest start when they became ready;
    // the key is refreshed (lazily) when popped, since devices fill up.
    using Entry = std::tuple<double, int, int>;  // start, key rank, group
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
    auto push = [&](int g) {
      double start;
      s.BestDevice(g, &start);
      ready.push({start, groups.key_rank(g), g});
    };
    for (int g = 0; g < n; ++g) {
      if (pending[g] == 0) push(g);
    }
    while (!ready.empty()) {
      auto [key_start, key, g] = ready.top();
      ready.pop();
      double start;
      int d = s.BestDevice(g, &start);
      if (d < 0) return s.NoDevice("m_etf", g);
      if (start > key_start && !ready.empty() &&
          std::get<0>(ready.top()) < start) {
        ready.push({start, key, g});  // stale: another can start earlier
        continue;
      }
      s.Assign(g, d, start);
      for (const GroupEdge& e : groups.successors(g)) {
        if (--pending[e.to] == 0) push(e.to);
      }
    }
    return Checked(in, o, s.placement(), "m_etf");
  }
};

// m-TOPO: topological order, filling each device up to its share of the
// work (by peak FLOP/s) before moving to the next, skipping devices whose
// memory is full.
class MTopoPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    const int devices = in.cluster.num_devices();
    double total = 0;
    for (int g = 0; g < groups.num_units(); ++g) total += groups.min_seconds(g);
    DeviceLoads loads(groups, in.cluster, o);
    Placement p{std::vector<int>(groups.num_units(), -1)};
    int current = 0;
    for (int g : groups.order()) {
      int d = UnitPinnedDevice(groups, o, g);
      if (d < 0) {
        double share =
            total * in.cluster.device(current).peak_flops /
            in.cluster.total_peak_flops();
        while (current < devices - 1 &&
               (loads.seconds(current) + groups.seconds(g, current) > share ||
                !loads.Fits(g, current))) {
          ++current;
          share = total * in.cluster.device(current).peak_flops /
                  in.cluster.total_peak_flops();
        }
        d = current;
        if (!loads.Fits(g, d)) {
          for (d = 0; d < devices && !loads.Fits(g, d); ++d) {
          }
          if (d == devices) {
            return absl::ResourceExhaustedError(absl::StrCat(
                "m_topo: '", in.view.forward().op(groups.members(g)[0]).key,
                "' fits on no device"));
          }
        }
      }
      p.device_of_op[g] = d;
      loads.Assign(g, d);
    }
    return Checked(in, o, groups.Expand(p.device_of_op), "m_topo");
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewHeftPolicy() {
  return std::make_unique<HeftPolicy>();
}
std::unique_ptr<PlacementPolicy> NewMEtfPolicy() {
  return std::make_unique<MEtfPolicy>();
}
std::unique_ptr<PlacementPolicy> NewMTopoPolicy() {
  return std::make_unique<MTopoPolicy>();
}

}  // namespace placer
