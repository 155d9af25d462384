#include "simulator/gradient_partials.h"

namespace placer {

void PartialsByDevice::Add(int sum, int device, int value) {
  Made& made = by_pair_.at(sum, device);
  if (made.count++ == 0) {
    made.first = value;
    ++sources_[sum];
  }
}

PartialsByDevice CountPartials(const TrainingView& view,
                               const std::vector<int>& device_of_node,
                               int devices) {
  const int sums = static_cast<int>(view.gradient_sums().size());
  PartialsByDevice p(sums, devices);
  for (int s = 0; s < sums; ++s) {
    for (int v : view.gradient_sums()[s].partials) {
      p.Add(s, device_of_node[view.value(v).producer], v);
    }
  }
  return p;
}

}  // namespace placer
