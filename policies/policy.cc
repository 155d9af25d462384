#include "policies/policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

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
  absl::StatusOr<SimulationResult> r =
      Simulate(input.simulation, placement);
  if (!r.ok()) return r.status();
  int worst = -1;
  int64_t worst_over = 0;
  for (int d = 0; d < input.cluster.num_devices(); ++d) {
    int64_t over = r->peak_memory_bytes[d] - MemoryLimit(input.cluster, options, d);
    if (over > worst_over) {
      worst_over = over;
      worst = d;
    }
  }
  if (worst >= 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory: ", input.cluster.device(worst).name, " needs ",
        r->peak_memory_bytes[worst], " bytes, ", worst_over,
        " over its limit of ", MemoryLimit(input.cluster, options, worst)));
  }
  return r;
}

absl::StatusOr<Placement> Checked(const PolicyInput& input,
                                  const PolicyOptions& options,
                                  Placement placement,
                                  const std::string& policy) {
  absl::StatusOr<SimulationResult> r =
      CheckPlacement(input, options, placement);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat(policy, ": ", r.status().message()));
  }
  return placement;
}

}  // namespace placer
