#include "simulator/gradient_partials.h"

namespace placer {

int PartialsByDevice::sources(int sum) const {
  int n = 0;
  for (int d = 0; d < devices; ++d) n += count[slot(sum, d)] > 0;
  return n;
}

PartialsByDevice CountPartials(const TrainingView& view,
                               const std::vector<int>& device_of_node,
                               int devices) {
  PartialsByDevice p;
  p.devices = devices;
  const size_t slots = view.gradient_sums().size() * devices;
  p.count.assign(slots, 0);
  p.first.assign(slots, -1);
  for (int s = 0; s < static_cast<int>(view.gradient_sums().size()); ++s) {
    for (int v : view.gradient_sums()[s].partials) {
      size_t k = p.slot(s, device_of_node[view.value(v).producer]);
      if (p.count[k]++ == 0) p.first[k] = v;
    }
  }
  return p;
}

}  // namespace placer
