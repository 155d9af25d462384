// The strategy search's names for its options, and the devices it searches
// over (strategy_search.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "policies/strategy_search.h"

namespace placer {
namespace {

constexpr int kMaxPoolDevices = 32;

}  // namespace

std::string ParallelismName(Parallelism parallelism) {
  switch (parallelism) {
    case Parallelism::kModel: return "model";
    case Parallelism::kPipeline: return "pipeline";
    case Parallelism::kData: return "data";
    case Parallelism::kHybrid: return "hybrid";
    case Parallelism::kTensor:
      return "tensor";
    case Parallelism::kAuto: return "auto";
  }
  return "?";
}

absl::StatusOr<Parallelism> ParseParallelism(const std::string& name) {
  for (Parallelism p :
       {Parallelism::kAuto, Parallelism::kModel, Parallelism::kPipeline,
        Parallelism::kData, Parallelism::kHybrid, Parallelism::kTensor}) {
    if (ParallelismName(p) == name) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown parallelism '", name,
                   "'; known: auto, model, pipeline, data, hybrid, tensor"));
}

absl::StatusOr<StageRecompute> ParseStageRecompute(const std::string& name) {
  if (name == "auto") return StageRecompute::kAuto;
  if (name == "none") return StageRecompute::kNone;
  if (name == "full") return StageRecompute::kFull;
  if (name == "selective") return StageRecompute::kSelective;
  if (name == "selective-op") return StageRecompute::kSelectiveOp;
  if (name == "layers") return StageRecompute::kLayers;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown recomputation '", name,
      "'; known: auto, none, full, selective, selective-op, layers"));
}

std::vector<int> IdenticalDevices(const Cluster& cluster) {
  std::vector<std::vector<int>> groups;
  for (int d = 0; d < cluster.num_devices(); ++d) {
    auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return cluster.device(g.front()).SameRates(cluster.device(d));
    });
    if (same == groups.end()) {
      groups.push_back({d});
    } else {
      same->push_back(d);
    }
  }
  std::vector<int> best;
  double best_flops = -1;
  for (const std::vector<int>& devices : groups) {
    const double flops =
        cluster.device(devices.front()).peak_flops * devices.size();
    if (flops > best_flops ||
        (flops == best_flops && devices.front() < best.front())) {
      best = devices;
      best_flops = flops;
    }
  }
  return best;
}

std::vector<int> IdenticalDevicePool(const Cluster& cluster) {
  std::vector<int> best = IdenticalDevices(cluster);
  if (best.size() > kMaxPoolDevices) best.resize(kMaxPoolDevices);
  return best;
}

}  // namespace placer
