#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "policies/device_loads.h"
#include "policies/group_graph.h"
#include "policies/policies.h"

namespace placer {
namespace {

// m-TOPO: topological order, filling each device up to its share of the
// work (by peak FLOP/s) before moving to the next, skipping devices whose
// memory is full.
class MTopoPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    const int devices = in.cluster.num_devices();
    double total = 0;
    for (int g = 0; g < groups.num_units(); ++g) total += groups.min_seconds(g);
    DeviceLoads loads(groups, in.cluster, o);
    Placement p{std::vector<int>(groups.num_units(), -1)};
    int current = 0;
    for (int g : groups.order()) {
      int d = UnitPinnedDevice(groups, o, g);
      if (d < 0) {
        double share =
            total * in.cluster.device(current).peak_flops /
            in.cluster.total_peak_flops();
        while (current < devices - 1 &&
               (loads.seconds(current) + groups.seconds(g, current) > share ||
                !loads.Fits(g, current))) {
          ++current;
          share = total * in.cluster.device(current).peak_flops /
                  in.cluster.total_peak_flops();
        }
        d = current;
        if (!loads.Fits(g, d)) {
          for (d = 0; d < devices && !loads.Fits(g, d); ++d) {
          }
          if (d == devices) {
            return absl::ResourceExhaustedError(absl::StrCat(
                "m_topo: '", in.view.forward().op(groups.members(g)[0]).key,
                "' fits on no device"));
          }
        }
      }
      p.device_of_op[g] = d;
      loads.Assign(g, d);
    }
    return Checked(in, o, groups.Expand(p.device_of_op), "m_topo");
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewMTopoPolicy() {
  return std::make_unique<MTopoPolicy>();
}

}  // namespace placer
