#include "placer/policy_run.h"

#include <algorithm>

#include "base/stopwatch.h"

namespace placer {

PolicyRun RunPolicy(const std::string& name, const PolicyInput& input,
                    const PolicyOptions& options) {
  PolicyRun run;
  run.policy = name;
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> policy = NewPolicy(name);
  if (!policy.ok()) {
    run.status = policy.status();
    return run;
  }
  const SteadyClock::time_point start = SteadyClock::now();
  absl::StatusOr<Placement> p = (*policy)->Place(input, options);
  run.placement_seconds = SecondsSince(start);
  if (!p.ok()) {
    run.status = p.status();
    return run;
  }
  absl::StatusOr<SimulationResult> r = CheckPlacement(input, options, *p);
  if (!r.ok()) {
    run.status = r.status();
    return run;
  }
  run.placement = std::move(*p);
  run.result = std::move(*r);
  return run;
}

int64_t MaxPeakBytes(const SimulationResult& result) {
  int64_t peak = 0;
  for (int64_t b : result.peak_memory_bytes) peak = std::max(peak, b);
  return peak;
}

}  // namespace placer
