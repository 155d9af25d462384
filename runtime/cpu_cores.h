// Which of the host's cores each CPU device runs on.
//
// A CPU device is a set of cores: its worker (and the intra-op threads it
// starts, which inherit its affinity) runs on threads_per_cpu_device cores
// of its own, as CPU training launchers pin each instance. Unpinned, the
// two devices of cpu2 move between cores, and where cores differ in speed
// (a virtual machine's cores did by 25-60%) each run's step time depends
// on where the scheduler happened to put them; pinned, the same placement
// measures the same (docs/calibration.md).
//
// Contract: CpuDeviceCores numbers each CPU device among the CPU devices of
// its host (Device::host; "" is one local host) in cluster order; the k-th
// gets the threads_per_cpu_device entries of `allowed` from
// k * threads_per_cpu_device on. Other devices get no cores. When a host's
// CPU devices need more cores than `allowed` has, returns
// FailedPrecondition naming the counts (the devices would share cores:
// left unpinned). AllowedCores is the calling thread's affinity (what
// `taskset` or a cgroup allows the process), ascending; PinThisThread
// restricts the calling thread to `cores` (empty: unchanged); a ScopedPin
// does so for its lifetime, then gives the thread back the affinity it had.
#ifndef PLACER_RUNTIME_CPU_CORES_H_
#define PLACER_RUNTIME_CPU_CORES_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profiles/cluster.h"

namespace placer {

std::vector<int> AllowedCores();

absl::StatusOr<std::vector<std::vector<int>>> CpuDeviceCores(
    const Cluster& cluster, int threads_per_cpu_device,
    const std::vector<int>& allowed);

absl::Status PinThisThread(const std::vector<int>& cores);

class ScopedPin {
 public:
  explicit ScopedPin(const std::vector<int>& cores);
  ~ScopedPin();
  ScopedPin(const ScopedPin&) = delete;
  ScopedPin& operator=(const ScopedPin&) = delete;

 private:
  std::vector<int> before_;  // empty: nothing to give back
};

}  // namespace placer

#endif  // PLACER_RUNTIME_CPU_CORES_H_
