#include "simulator/memory_check.h"

#include "absl/strings/str_cat.h"

namespace placer {

namespace {

// The device furthest over its limit (ties: the lowest index), or -1.
int Worst(const std::vector<int64_t>& peak_bytes,
          const std::vector<int64_t>& limit_bytes) {
  int worst = -1;
  int64_t worst_over = 0;
  for (size_t d = 0; d < peak_bytes.size(); ++d) {
    const int64_t over = peak_bytes[d] - limit_bytes[d];
    if (over > worst_over) {
      worst_over = over;
      worst = static_cast<int>(d);
    }
  }
  return worst;
}

}  // namespace

absl::Status CheckMemory(const Cluster& cluster,
                         const std::vector<int64_t>& peak_bytes,
                         const std::vector<int64_t>& limit_bytes) {
  const size_t devices = static_cast<size_t>(cluster.num_devices());
  if (peak_bytes.size() != devices || limit_bytes.size() != devices) {
    return absl::InternalError(absl::StrCat(
        "memory check: ", peak_bytes.size(), " peaks and ",
        limit_bytes.size(), " limits for ", devices, " devices"));
  }
  const int worst = Worst(peak_bytes, limit_bytes);
  if (worst < 0) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory: ", cluster.device(worst).name, " needs ",
      peak_bytes[worst], " bytes, ", peak_bytes[worst] - limit_bytes[worst],
      " over its limit of ", limit_bytes[worst]));
}

absl::Status CheckMemory(const Cluster& cluster,
                         const std::vector<int64_t>& peak_bytes,
                         const std::vector<int64_t>& limit_bytes,
                         const std::function<std::string(int device)>& when) {
  absl::Status status = CheckMemory(cluster, peak_bytes, limit_bytes);
  if (status.code() != absl::StatusCode::kResourceExhausted) return status;
  return absl::ResourceExhaustedError(
      absl::StrCat(status.message(), when(Worst(peak_bytes, limit_bytes))));
}

std::vector<int64_t> DeviceCapacities(const Cluster& cluster) {
  std::vector<int64_t> capacity(cluster.num_devices());
  for (int d = 0; d < cluster.num_devices(); ++d) {
    capacity[d] = cluster.device(d).memory_bytes;
  }
  return capacity;
}

}  // namespace placer
