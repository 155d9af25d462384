// The LP relaxation behind m-SCT (Baechi, after Hanen and Munier's
// small-communication-time scheduling), on any DAG of units:
//   minimize w
//   w >= sum over P's units of p_i + sum over P's edges of c_e x_e
//                                 for each path P of the DAG
//   sum of x over i's out-edges >= out-degree - 1
//   sum of x over j's in-edges  >= in-degree - 1
//   x_e in [0, 1] (0: the edge stays on one device)
// An edge that may not cross has x = 0 and is left out of the degree rows.
// This is the usual formulation with start times s_j >= s_i + p_i + c_e x_e
// with the s eliminated; it is solved with COIN-OR CLP by row generation:
// start with no path row, and while the longest path under the LP's x is
// longer than its w, add the longest path through each of the 500 most
// violated edges (one row per distinct path) and re-solve (dual simplex,
// warm). The restricted LP's w is a lower bound and its x then meets every
// path row, so it is optimal. On the 111k-node view two rounds suffice
// where the start-time LP took ~3 s in CLP.
#ifndef PLACER_POLICIES_SCT_RELAXATION_H_
#define PLACER_POLICIES_SCT_RELAXATION_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace placer {

struct SctProblem {
  std::vector<double> seconds;  // p per unit (any unit of time, as c)
  std::vector<int> order;       // a topological order of the units
  std::vector<std::pair<int, int>> edges;  // (i, j): i before j
  std::vector<double> comm;                // c per edge
  std::vector<bool> may_cross;             // per edge; false: x = 0
};

struct SctRelaxation {
  double makespan = 0;    // the optimal w
  std::vector<double> x;  // per edge
};

// Errors: Internal when CLP does not prove optimality or the row
// generation does not converge.
absl::StatusOr<SctRelaxation> SolveSctRelaxation(const SctProblem& problem);

}  // namespace placer

#endif  // PLACER_POLICIES_SCT_RELAXATION_H_
