#include "profiles/cost_model.h"

#include <algorithm>

namespace placer {
namespace {

class RooflineCostModel : public CostModel {
 public:
  double NodeSeconds(const TrainingView& view, int node,
                     const Device& device) const override {
    const TrainingNode& n = view.node(node);
    const OpCost& c = n.cost;
    return device.op_overhead_seconds +
           std::max(
               c.flops / device.AchievedFlops(n.compute_precision,
                                              n.fused_attention),
               static_cast<double>(c.bytes_accessed) /
                   device.AchievedBandwidth()) +
           static_cast<double>(n.fp8_cast_bytes) / device.AchievedBandwidth();
  }

  double TransferSeconds(int64_t bytes, const Cluster& cluster, int src,
                         int dst) const override {
    const LinkParams& link = cluster.link(src, dst);
    return link.latency_seconds + static_cast<double>(bytes) / link.bandwidth;
  }

  bool IsGuess(const TrainingView& view, int node) const override {
    return view.node(node).cost.status != CostStatus::kExact;
  }

  // The buffer and the gradient read, the buffer written.
  double AccumulateSeconds(const TrainingView& view, int update_node,
                           const Device& device) const override {
    const int p = view.node(update_node).parameter;
    const double elements =
        static_cast<double>(view.forward().tensor(p).num_elements());
    const double bytes = static_cast<double>(view.value(p).bytes);
    return device.op_overhead_seconds +
           std::max(elements / device.peak_flops,
                    3 * bytes / device.AchievedBandwidth());
  }
};

}  // namespace

std::unique_ptr<CostModel> NewRooflineCostModel() {
  return std::make_unique<RooflineCostModel>();
}

}  // namespace placer
