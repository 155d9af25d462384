// The one memory check: is every device's peak within its limit?
//
// Contract: CheckMemory returns OK when peak_bytes[d] <= limit_bytes[d] for
// every device; else ResourceExhausted naming the device furthest over its
// limit (ties: the lowest index): "out of memory: <device> needs N bytes, M
// over its limit of L"; Internal when the vectors are not one entry per
// device. What the limit means is the caller's: the
// simulator's evaluator passes the devices' capacities (what would fail on
// the hardware); policies and the RL trainer pass MemoryLimits(options)
// (policies/policy.h: capacity less the headroom, or explicit limits).
#ifndef PLACER_SIMULATOR_MEMORY_CHECK_H_
#define PLACER_SIMULATOR_MEMORY_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "profiles/cluster.h"

namespace placer {

absl::Status CheckMemory(const Cluster& cluster,
                         const std::vector<int64_t>& peak_bytes,
                         const std::vector<int64_t>& limit_bytes);

// The same, with when(device) appended as it is to the error for the
// device it names (what that device held or when it peaked, e.g. ", " and
// DescribePeakMoment).
absl::Status CheckMemory(const Cluster& cluster,
                         const std::vector<int64_t>& peak_bytes,
                         const std::vector<int64_t>& limit_bytes,
                         const std::function<std::string(int device)>& when);

// Each device's memory_bytes.
std::vector<int64_t> DeviceCapacities(const Cluster& cluster);

}  // namespace placer

#endif  // PLACER_SIMULATOR_MEMORY_CHECK_H_
