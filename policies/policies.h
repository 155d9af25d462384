// Factories of the placement policies. Use NewPolicy(name) (policy.h)
// unless a specific one is meant.
#ifndef PLACER_POLICIES_POLICIES_H_
#define PLACER_POLICIES_POLICIES_H_

#include <functional>
#include <memory>
#include <string>

#include "policies/policy.h"

namespace placer {

std::unique_ptr<PlacementPolicy> NewSinglePolicy();
std::unique_ptr<PlacementPolicy> NewExpertPolicy();
std::unique_ptr<PlacementPolicy> NewHashPolicy();
std::unique_ptr<PlacementPolicy> NewCriticalPathPolicy();
std::unique_ptr<PlacementPolicy> NewMetisPolicy();
std::unique_ptr<PlacementPolicy> NewHeftPolicy();
std::unique_ptr<PlacementPolicy> NewMEtfPolicy();
std::unique_ptr<PlacementPolicy> NewMSctPolicy();
std::unique_ptr<PlacementPolicy> NewMTopoPolicy();
std::unique_ptr<PlacementPolicy> NewLocalSearchPolicy();
std::unique_ptr<PlacementPolicy> NewBestPolicy();
// Memory before speed: layers dealt out by memory share, else devices
// filled in turn along the layers by simulation; repaired by simulation
// until every device fits (policies/memory_first.cc). What BestHeuristic
// falls back on when no heuristic fits, and looks at when one is over a
// limit.
std::unique_ptr<PlacementPolicy> NewMemoryFirstPolicy();

// The heuristic policies' (PolicyKind::kHeuristic) placement with the
// shortest simulated step within the memory limits, and which policy gave
// it; `after_each` (may be empty) hears, after each heuristic, its name,
// the best step so far (0: none yet) and the placements evaluated. When no
// heuristic fits, memory_first is run before giving up; the error then
// names a node or parameter no device can hold, or the smallest overshoot
// it reached and on which device. When some fit and some are over a
// memory limit (a tight cluster), memory_first is also run with a tenth of
// the budget and wins when faster.
// What `best` refines and the RL placer warm-starts from.
struct HeuristicWinner {
  Placement placement;
  double step_seconds = 0;
  std::string policy;
  int64_t evaluations = 0;
};
absl::StatusOr<HeuristicWinner> BestHeuristic(
    const PolicyInput& input, const PolicyOptions& options,
    const std::function<void(const std::string&, double, int64_t)>&
        after_each = {});

}  // namespace placer

#endif  // PLACER_POLICIES_POLICIES_H_
