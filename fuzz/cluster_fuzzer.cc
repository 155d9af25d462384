// Cluster descriptions in (files, service requests): protobuf text when the
// first byte is even, JSON when odd.
#include <string>

#include "fuzz/fuzz_target.h"
#include "profiles/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string source = data[0] % 2 == 0 ? "fuzz.pbtxt" : "fuzz.json";
  absl::StatusOr<placer::Cluster> cluster = placer::ParseCluster(
      std::string(reinterpret_cast<const char*>(data) + 1, size - 1), source);
  if (cluster.ok()) {
    double seconds = 0;
    for (int a = 0; a < cluster->num_devices(); ++a) {
      for (int b = 0; b < cluster->num_devices(); ++b) {
        if (a == b) continue;
        const placer::LinkParams& l = cluster->link(a, b);
        seconds += l.latency_seconds + (1 << 20) / l.bandwidth;
      }
    }
    (void)seconds;
  }
  return 0;
}
