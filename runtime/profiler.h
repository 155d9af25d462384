// Measures a MeasuredProfile on this machine's devices with LibTorch.
//
// Contract: for each measured device kind (CPU, GPU: the cluster's first
// device of that kind, mapped as runtime/torch_devices.h maps it), each
// distinct node signature of the view that has a LibTorch kernel is timed
// (forward: the op; backward: autograd gradients of the inputs that need
// them; update: SGD with momentum) with `warmup` runs discarded and the
// median of `repeats` kept; CPU work on `threads` threads, GPU work timed
// from a synchronized start to a synchronized end. Link fits come from
// copies of 1 B to 256 MiB (x4 steps) made as the executor makes them,
// one fit per pair of torch devices, and are recorded for every ordered
// pair of measured cluster devices. Work stops at the time budget; what
// was not measured is counted, and the cost model falls back to the
// roofline for it. Nothing is invented. A GPU kind needs a CUDA LibTorch
// that sees the cluster's GPUs (an error naming the device otherwise).
// Stopping and resuming: `stop` is asked before each link fit and each
// timing; once it says true nothing more is measured, the rest is counted
// (signatures_stopped) and the report is marked stopped. The op timings of
// `resume` (a stopped run's profile) that the view's nodes use are kept as
// they are and not timed again (resumed_signatures); links are measured
// anew. A `resume` measured with other settings (its source does not begin
// with this run's: other kinds, threads, warm-up or repeats) is a
// FailedPrecondition naming both.
#ifndef PLACER_RUNTIME_PROFILER_H_
#define PLACER_RUNTIME_PROFILER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "profiles/measured_cost_model.h"

namespace placer {

struct ProfilerOptions {
  int warmup = 2;
  int repeats = 5;
  int threads = 1;
  // Time CPU ops on the first CPU device's cores, as a pinned executor
  // runs that device (runtime/cpu_cores.h; unpinned when the process may
  // not use enough cores).
  bool pin_cores = false;
  double budget_seconds = 600;
  int64_t max_link_bytes = int64_t{256} << 20;
  // Kinds to measure; empty: every kind the cluster has.
  std::vector<DeviceKind> kinds;
  // Empty: never stops.
  std::function<bool()> stop;
  // An earlier run's profile whose op timings to keep.
  std::optional<MeasuredProfile> resume;
};

struct ProfileReport {
  MeasuredProfile profile;
  int measured_signatures = 0;
  int nodes_without_kernel = 0;  // left to the fallback model
  int signatures_over_budget = 0;
  int failed_signatures = 0;     // kernel errors (listed in `failures`)
  std::vector<std::string> failures;
  int resumed_signatures = 0;  // kept from `resume`, not timed again
  int signatures_stopped = 0;  // not reached: `stop` said so first
  bool stopped = false;
};

// `view` may be null (links only). `progress` receives one line per step.
absl::StatusOr<ProfileReport> ProfileDevices(
    const TrainingView* view, const Cluster& cluster,
    const ProfilerOptions& options,
    const std::function<void(const std::string&)>& progress);

}  // namespace placer

#endif  // PLACER_RUNTIME_PROFILER_H_
