#include "policies/policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "simulator/memory_check.h"

namespace placer {

int64_t MemoryLimit(const Cluster& cluster, const PolicyOptions& options,
                    int device) {
  if (device < static_cast<int>(options.memory_limit_bytes.size())) {
    return options.memory_limit_bytes[device];
  }
  const int64_t capacity = cluster.device(device).memory_bytes;
  const double headroom = std::clamp(options.memory_headroom, 0.0, 1.0);
  return capacity - static_cast<int64_t>(headroom * static_cast<double>(capacity));
}

std::vector<int64_t> MemoryLimits(const Cluster& cluster,
                                  const PolicyOptions& options) {
  std::vector<int64_t> limits(cluster.num_devices());
  for (int d = 0; d < cluster.num_devices(); ++d) {
    limits[d] = MemoryLimit(cluster, options, d);
  }
  return limits;
}

absl::StatusOr<SimulationResult> CheckPlacement(const PolicyInput& input,
                                                const PolicyOptions& options,
                                                const Placement& placement) {
  for (const auto& [op, device] : options.pinned) {
    if (placement.device_of_op[op] != device) {
      return absl::InternalError(absl::StrCat(
          "'", input.view.forward().op(op).key, "' is pinned to ",
          input.cluster.device(device).name, " but was placed on ",
          input.cluster.device(placement.device_of_op[op]).name));
    }
  }
  ASSIGN_OR_RETURN(SimulationResult r, Simulate(input.simulation, placement));
  RETURN_IF_ERROR(CheckMemory(input.cluster, r.peak_memory_bytes,
                              MemoryLimits(input.cluster, options), [&](int d) {
                                return absl::StrCat(
                                    ", ", DescribePeakMoment(
                                              input.view, r.peak_moments[d]));
                              }));
  return r;
}

absl::StatusOr<Placement> Checked(const PolicyInput& input,
                                  const PolicyOptions& options,
                                  Placement placement,
                                  const std::string& policy) {
  absl::StatusOr<SimulationResult> r =
      CheckPlacement(input, options, placement);
  if (!r.ok()) {
    return WithContext(r.status(), absl::StrCat(policy, ": "));
  }
  return placement;
}

}  // namespace placer
