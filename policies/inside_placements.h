// Op placements inside a strategy's replicas (policies/strategy_search.h):
// the whole model placed by a policy on some of the cluster's devices.
// Internal to policies/.
#ifndef PLACER_POLICIES_INSIDE_PLACEMENTS_H_
#define PLACER_POLICIES_INSIDE_PLACEMENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policies/policy.h"

namespace placer {

// The whole model placed by `policy` on `devices` of the cluster (a
// cluster of those alone, each limited to `limits[device]` bytes), within
// `budget_seconds`: per forward op, the index in `devices` of its device;
// the policy's error when it fails. Ops pinned to a device outside
// `devices` are left free. Thread-compatible.
absl::StatusOr<std::vector<int>> PlaceOnDevices(
    const PolicyInput& input, const PolicyOptions& options,
    const std::string& policy, const std::vector<int>& devices,
    const std::vector<int64_t>& limits, double budget_seconds);

}  // namespace placer

#endif  // PLACER_POLICIES_INSIDE_PLACEMENTS_H_
