// Measures a MeasuredProfile on this machine's CPU with LibTorch.
//
// Contract: each distinct node signature of the view that has a LibTorch
// kernel is timed (forward: the op; backward: autograd gradients of the
// inputs that need them; update: SGD with momentum) with `warmup` runs
// discarded and the median of `repeats` kept, on `threads` threads (one CPU
// device). Link fits come from copies of 1 B to 256 MiB (x4 steps) and are
// recorded for every ordered pair of CPU devices of the cluster. Work stops
// at the time budget; what was not measured is counted, and the cost model
// falls back to the roofline for it. Nothing is invented.
#ifndef PLACER_PROFILES_PROFILER_H_
#define PLACER_PROFILES_PROFILER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "profiles/measured_cost_model.h"

namespace placer {

struct ProfilerOptions {
  int warmup = 2;
  int repeats = 5;
  int threads = 1;
  double budget_seconds = 600;
  int64_t max_link_bytes = int64_t{256} << 20;
};

struct ProfileReport {
  MeasuredProfile profile;
  int measured_signatures = 0;
  int nodes_without_kernel = 0;  // left to the fallback model
  int signatures_over_budget = 0;
  int failed_signatures = 0;     // kernel errors (listed in `failures`)
  std::vector<std::string> failures;
};

// `view` may be null (links only). `progress` receives one line per step.
absl::StatusOr<ProfileReport> ProfileCpu(
    const TrainingView* view, const Cluster& cluster,
    const ProfilerOptions& options,
    const std::function<void(const std::string&)>& progress);

}  // namespace placer

#endif  // PLACER_PROFILES_PROFILER_H_
