#include "simulator/gradient_partials.h"

namespace placer {

int PartialsByDevice::sources(int sum) const {
  auto at = sources_.find(sum);
  return at == sources_.end() ? 0 : at->second;
}

void PartialsByDevice::Add(int sum, int device, int value) {
  Made& made = by_pair_[Key(sum, device)];
  if (made.count++ == 0) {
    made.first = value;
    ++sources_[sum];
  }
}

PartialsByDevice CountPartials(const TrainingView& view,
                               const std::vector<int>& device_of_node,
                               int devices) {
  PartialsByDevice p(devices);
  for (int s = 0; s < static_cast<int>(view.gradient_sums().size()); ++s) {
    for (int v : view.gradient_sums()[s].partials) {
      p.Add(s, device_of_node[view.value(v).producer], v);
    }
  }
  return p;
}

}  // namespace placer
