#include "policies/memory_savers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace placer {

std::vector<int> ReplicasOfDevices(const Strategy& strategy, int num_devices) {
  std::vector<int> replicas(num_devices, 0);
  for (const PipelineStage& stage : strategy.stages) {
    for (const Replica& replica : stage.replicas) {
      for (const std::vector<int>* devices :
           {&replica.device_of_slot, &replica.tensor_devices}) {
        for (int d : *devices) {
          if (d >= 0 && d < num_devices) replicas[d] = stage.num_replicas();
        }
      }
    }
  }
  return replicas;
}

bool SaversCouldFit(const TriedMemory& tried,
                    const std::vector<int64_t>& limits,
                    const std::vector<int>& replicas_of_device,
                    const SaverTry& saver) {
  const size_t devices = std::min({tried.peak_bytes.size(), tried.parts.size(),
                                   limits.size(), replicas_of_device.size()});
  for (size_t d = 0; d < devices; ++d) {
    if (tried.peak_bytes[d] <= limits[d]) continue;
    const MemoryBreakdown& b = tried.parts[d];
    const int replicas = replicas_of_device[d];
    const double sharded = replicas > 1 ? 1.0 - 1.0 / replicas : 0;
    double freed = 0;
    if (saver.tried_zero == ZeroStage::kNone) {
      const double state = b.parameters * saver.state_fraction;
      switch (saver.zero) {
        case ZeroStage::kNone:
          break;
        case ZeroStage::kOptimizerState:
          freed = state * sharded;
          break;
        case ZeroStage::kGradients:
          freed = (state + b.gradients) * sharded;
          break;
        case ZeroStage::kParameters:
          freed = static_cast<double>(b.parameters + b.gradients) * sharded;
          break;
      }
    }
    if (saver.recompute) freed += b.activations + b.workspace;
    if (tried.peak_bytes[d] - freed > limits[d]) return false;
  }
  return true;
}

std::string PeakParts(const std::vector<MemoryBreakdown>& breakdown,
                      const std::vector<int64_t>& peaks,
                      const std::vector<int64_t>& limits) {
  int worst = -1;
  int64_t most = 0;
  for (size_t d = 0; d < peaks.size() && d < limits.size(); ++d) {
    if (peaks[d] - limits[d] > most) {
      most = peaks[d] - limits[d];
      worst = static_cast<int>(d);
    }
  }
  if (worst < 0 || worst >= static_cast<int>(breakdown.size())) return "";
  const MemoryBreakdown& b = breakdown[worst];
  std::vector<std::pair<int64_t, std::string>> parts = {
      {b.parameters, "parameters and optimizer state"},
      {b.activations, "activations kept for the backward"},
      {b.gradients, "accumulated gradients"},
      {b.workspace, "the rest of a micro-batch's peak"}};
  std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) {
    return x.first > y.first;
  });
  std::vector<std::string> named;
  for (const auto& [bytes, what] : parts) {
    if (bytes > 0) {
      named.push_back(absl::StrFormat("%s %.1f GB", what, bytes / 1e9));
    }
  }
  return named.empty() ? ""
                       : absl::StrCat(" (", absl::StrJoin(named, ", "), ")");
}

}  // namespace placer
