#include "policies/etf.h"

#include <functional>
#include <memory>
#include <queue>
#include <tuple>
#include <utility>

#include "policies/list_schedule.h"
#include "policies/policies.h"

namespace placer {
namespace {

// One ETF list schedule: repeatedly schedules the ready unit that can
// start earliest, on the device of least ListSchedule::Cost, ties by node key.
// With `favorite_parent` (m-SCT), a unit whose favorite parent is placed
// goes to that parent's device when it fits there. Returns a device per
// unit.
absl::StatusOr<std::vector<int>> EtfPass(const PolicyInput& in,
                                         const PolicyOptions& o,
                                         const GroupGraph& groups,
                                         const std::vector<int>& family,
                                         std::vector<int> hint,
                                         const std::vector<int>* favorite_parent,
                                         const std::string& policy) {
  const int n = groups.num_units();
  ListSchedule s(in, o, groups, family, std::move(hint));
  std::vector<int> pending(n, 0);
  for (int g = 0; g < n; ++g) {
    pending[g] = static_cast<int>(groups.predecessors(g).size());
  }
  auto choose = [&](int g, double* start) {
    if (favorite_parent != nullptr && (*favorite_parent)[g] >= 0 &&
        s.Decides(g)) {
      // Only when the parent's device is free by the time g's data is
      // there (as in Hanen and Munier: the favorite never waits in line)
      // and costs no more than ETF's own choice.
      int d = s.device((*favorite_parent)[g]);
      double best_start;
      int best = s.BestDevice(g, &best_start);
      if (d >= 0 && best >= 0 && d != best && s.Fits(g, d) &&
          s.StartOn(g, d) <= s.DataReady(g, d) &&
          s.Cost(g, d) <= s.Cost(g, best)) {
        *start = s.StartOn(g, d);
        return d;
      }
    }
    return s.BestDevice(g, start);
  };
  // Ready units keyed by their earliest start when they became ready; the
  // key is refreshed (lazily) when popped, since devices fill up.
  using Entry = std::tuple<double, int, int>;  // start, key rank, unit
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  auto push = [&](int g) {
    double start;
    choose(g, &start);
    ready.push({start, groups.key_rank(g), g});
  };
  for (int g = 0; g < n; ++g) {
    if (pending[g] == 0) push(g);
  }
  while (!ready.empty()) {
    auto [key_start, key, g] = ready.top();
    ready.pop();
    double start;
    int d = choose(g, &start);
    if (d < 0) return s.NoDevice(policy, g);
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
  return s.devices();
}

constexpr int kEtfPasses = 3;

class MEtfPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    return EtfSchedule(in, o, groups, PlacementFamilies(in, o, groups),
                       nullptr, "m_etf");
  }
};

}  // namespace

absl::StatusOr<Placement> EtfSchedule(const PolicyInput& in,
                                      const PolicyOptions& o,
                                      const GroupGraph& groups,
                                      const std::vector<int>& family,
                                      const std::vector<int>* favorite_parent,
                                      const std::string& policy) {
  std::vector<int> hint;
  absl::StatusOr<Placement> best = absl::InternalError("no pass ran");
  double best_seconds = 0;
  for (int pass = 0; pass < kEtfPasses; ++pass) {
    absl::StatusOr<std::vector<int>> devices =
        EtfPass(in, o, groups, family, hint, favorite_parent, policy);
    if (!devices.ok()) {
      if (pass == 0) return devices.status();
      break;
    }
    hint = *devices;
    Placement placement = groups.Expand(*devices);
    absl::StatusOr<SimulationResult> sim = CheckPlacement(in, o, placement);
    if (!sim.ok()) {
      if (pass == 0) best = Checked(in, o, std::move(placement), policy);
      continue;
    }
    if (!best.ok() || sim->step_seconds < best_seconds) {
      best = std::move(placement);
      best_seconds = sim->step_seconds;
    }
  }
  return best;
}

std::unique_ptr<PlacementPolicy> NewMEtfPolicy() {
  return std::make_unique<MEtfPolicy>();
}

}  // namespace placer
