#include <algorithm>
#include <memory>
#include <queue>
#include <vector>

#include "policies/group_graph.h"
#include "policies/list_schedule.h"
#include "policies/policies.h"

namespace placer {
namespace {

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
    ListSchedule s(in, o, groups, PlacementFamilies(in, o, groups));
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

}  // namespace

std::unique_ptr<PlacementPolicy> NewHeftPolicy() {
  return std::make_unique<HeftPolicy>();
}

}  // namespace placer
