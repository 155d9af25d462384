#include "runtime/cpu_cores.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"

namespace placer {

std::vector<int> AllowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  return cores;
}

absl::StatusOr<std::vector<std::vector<int>>> CpuDeviceCores(
    const Cluster& cluster, int threads_per_cpu_device,
    const std::vector<int>& allowed) {
  if (threads_per_cpu_device < 1) {
    return absl::InvalidArgumentError("threads per CPU device must be >= 1");
  }
  std::vector<std::vector<int>> cores(cluster.num_devices());
  std::map<std::string, int> cpus_on_host;
  for (int d = 0; d < cluster.num_devices(); ++d) {
    const Device& device = cluster.device(d);
    if (device.kind != DeviceKind::kCpu) continue;
    const int first = cpus_on_host[device.host]++ * threads_per_cpu_device;
    if (first + threads_per_cpu_device > static_cast<int>(allowed.size())) {
      int on_host = 0;
      for (const Device& e : cluster.devices()) {
        on_host += e.kind == DeviceKind::kCpu && e.host == device.host;
      }
      return absl::FailedPreconditionError(
          absl::StrCat(on_host, " CPU devices x ", threads_per_cpu_device,
                       " thread(s) need ", on_host * threads_per_cpu_device,
                       " cores and this process may use ", allowed.size()));
    }
    cores[d].assign(allowed.begin() + first,
                    allowed.begin() + first + threads_per_cpu_device);
  }
  return cores;
}

absl::Status PinThisThread(const std::vector<int>& cores) {
  if (cores.empty()) return absl::OkStatus();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) {
    if (c < 0 || c >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("no core ", c));
    }
    CPU_SET(c, &set);
  }
  if (int e = pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) {
    return absl::InternalError(
        absl::StrCat("pinning a thread to its cores: ", std::strerror(e)));
  }
  return absl::OkStatus();
}

ScopedPin::ScopedPin(const std::vector<int>& cores) {
  if (cores.empty()) return;
  std::vector<int> before = AllowedCores();
  if (PinThisThread(cores).ok()) before_ = std::move(before);
}

ScopedPin::~ScopedPin() { (void)PinThisThread(before_); }

}  // namespace placer
