#include "placer/cli/host_cores.h"

#include "absl/strings/str_cat.h"
#include "runtime/cpu_cores.h"

namespace placer {

std::string BusyCoresWarning(const Cluster& cluster,
                             const std::vector<int>& rank_of_device,
                             int local_ranks, int threads_per_cpu_device,
                             int cores) {
  if (local_ranks < 2 || cores <= 0) return "";
  int busy = 0, devices = 0;
  for (int d = 0; d < cluster.num_devices(); ++d) {
    if (d >= static_cast<int>(rank_of_device.size()) ||
        rank_of_device[d] >= local_ranks) {
      continue;
    }
    ++devices;
    busy += cluster.device(d).kind == DeviceKind::kCpu
                ? threads_per_cpu_device
                : 1;
  }
  if (busy < cores) return "";
  return absl::StrCat(
      "warning: the ", local_ranks, " ranks started here run ", devices,
      " devices on ", busy, " busy threads (--threads ",
      threads_per_cpu_device, " per CPU device) and this host has ", cores,
      " cores: the ranks' send and receive threads will wait for cores, "
      "and steps will take longer than simulated (docs/distributed.md, "
      "\"Processes and hosts\")");
}

std::string UnpinnedNote(const Cluster& cluster, int threads_per_cpu_device,
                         const std::vector<int>& allowed_cores) {
  absl::StatusOr<std::vector<std::vector<int>>> cores =
      CpuDeviceCores(cluster, threads_per_cpu_device, allowed_cores);
  if (cores.ok()) return "";
  return absl::StrCat("note: CPU devices run unpinned (--pin_cores): ",
                      cores.status().message());
}

}  // namespace placer
