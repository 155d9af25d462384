#include "profiles/cost_model.h"

#include <algorithm>

namespace placer {
namespace {

class RooflineCostModel : public CostModel {
 public:
  double NodeSeconds(const TrainingView& view, int node,
                     const Device& device) const override {
    const OpCost& c = view.node(node).cost;
    return device.op_overhead_seconds +
           std::max(c.flops / device.peak_flops,
                    static_cast<double>(c.bytes_accessed) /
                        device.memory_bandwidth);
  }

  double TransferSeconds(int64_t bytes, const Cluster& cluster, int src,
                         int dst) const override {
    const LinkParams& link = cluster.link(src, dst);
    return link.latency_seconds + static_cast<double>(bytes) / link.bandwidth;
  }

  bool IsGuess(const TrainingView& view, int node) const override {
    return view.node(node).cost.status != CostStatus::kExact;
  }
};

}  // namespace

std::unique_ptr<CostModel> NewRooflineCostModel() {
  return std::make_unique<RooflineCostModel>();
}

}  // namespace placer
