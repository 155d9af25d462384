#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "base/status_helpers.h"
#include "policies/device_loads.h"
#include "policies/etf.h"
#include "policies/group_graph.h"
#include "policies/policies.h"
#include "policies/sct_relaxation.h"

namespace placer {
namespace {

// m-SCT (Baechi, after Hanen and Munier's small-communication-time
// scheduling): the LP relaxation of "each unit keeps at most one child and
// one parent on its own device" (policies/sct_relaxation.h) over the unit
// DAG, with p the units' fastest times and c the edges' transfer times on
// the slowest link (both in milliseconds, to keep the LP well
// conditioned); an edge inside a parameter family may not cross (families
// are placed whole). An edge with x < 1/2 makes j the favorite child of i.
// Then ETF (policies/etf.h), keeping favorite children with parents.
class MSctPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    std::vector<int> family = PlacementFamilies(in, o, groups);
    ASSIGN_OR_RETURN(std::vector<int> favorite,
                     FavoriteParents(in, groups, family));
    return EtfSchedule(in, o, groups, family, &favorite, "m_sct");
  }

 private:
  static absl::StatusOr<std::vector<int>> FavoriteParents(
      const PolicyInput& in, const GroupGraph& groups,
      const std::vector<int>& family) {
    const int n = groups.num_units();
    std::vector<int> favorite(n, -1);
    if (in.cluster.num_devices() < 2) return favorite;
    double latency = 0, bandwidth = 0;
    for (int a = 0; a < in.cluster.num_devices(); ++a) {
      for (int b = 0; b < in.cluster.num_devices(); ++b) {
        if (a == b) continue;
        latency = std::max(latency, in.cluster.link(a, b).latency_seconds);
        double bw = in.cluster.link(a, b).bandwidth;
        bandwidth = bandwidth == 0 ? bw : std::min(bandwidth, bw);
      }
    }
    // Seconds are scaled to milliseconds to keep the LP well conditioned.
    const double scale = 1e3;
    // Separating i and j also sends weight gradients home when both read
    // the same parameters (unrolled steps of one layer): count those bytes.
    std::vector<std::map<int, int64_t>> reads(n);  // home unit -> bytes
    for (int u = 0; u < n; ++u) {
      for (const GroupEdge& e : groups.parameter_reads(u)) reads[u][e.to] += e.bytes;
    }
    std::vector<std::pair<int, int>> edges;  // (i, j)
    std::vector<double> comm;
    for (int i = 0; i < n; ++i) {
      for (const GroupEdge& e : groups.successors(i)) {
        int64_t bytes = e.bytes;
        for (const auto& [home, b] : reads[e.to]) {
          if (home == i || reads[i].count(home)) bytes += b;
        }
        edges.push_back({i, e.to});
        comm.push_back(scale * (latency + static_cast<double>(bytes) / bandwidth));
      }
    }
    SctProblem problem;
    problem.seconds.resize(n);
    for (int i = 0; i < n; ++i) problem.seconds[i] = scale * groups.min_seconds(i);
    problem.order = groups.order();
    problem.edges = edges;
    problem.comm = comm;
    for (auto [i, j] : edges) problem.may_cross.push_back(family[i] != family[j]);
    absl::StatusOr<SctRelaxation> relaxation = SolveSctRelaxation(problem);
    if (!relaxation.ok()) return relaxation.status();
    const std::vector<double>* x = &relaxation->x;
    std::vector<double> best(n, 0.5);
    for (size_t e = 0; e < edges.size(); ++e) {
      auto [i, j] = edges[e];
      if (family[i] != family[j] && (*x)[e] < best[j]) {
        best[j] = (*x)[e];
        favorite[j] = i;
      }
    }
    return favorite;
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewMSctPolicy() {
  return std::make_unique<MSctPolicy>();
}

}  // namespace placer
