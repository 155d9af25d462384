// Where a placement makes each gradient sum's partials: the simulator and
// the executor both plan gradient accumulation with this, so they agree on
// which device holds which buffer and how many transfers a sum takes.
//
// Contract: per (sum, device) of the view's gradient_sums(), how many
// partial gradients that device makes and the first of them (a value
// index; -1 for none). On each device the first partial becomes the
// buffer and later ones are added into it; one buffer per device goes to
// the sink's device.
#ifndef PLACER_SIMULATOR_GRADIENT_PARTIALS_H_
#define PLACER_SIMULATOR_GRADIENT_PARTIALS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/training_view.h"
#include "simulator/pair_table.h"

namespace placer {

class PartialsByDevice {
 public:
  PartialsByDevice() = default;
  PartialsByDevice(int sums, int devices)
      : by_pair_(sums, devices, Made()), sources_(sums, 0) {}
  // How many partials of `sum` `device` makes, and the first (-1: none).
  int count(int sum, int device) const {
    return by_pair_.get(sum, device).count;
  }
  int first(int sum, int device) const {
    return by_pair_.get(sum, device).first;
  }
  // The devices that make partials of `sum`: the buffers the sink waits for.
  int sources(int sum) const { return sources_[sum]; }
  // One more partial, `value`, of `sum` made on `device`.
  void Add(int sum, int device, int value);

 private:
  struct Made {
    int count = 0;
    int first = -1;
  };
  PairTable<Made> by_pair_;
  std::vector<int> sources_;  // per sum
};

// `device_of_node`: one device per view node (DevicesOfNodes).
PartialsByDevice CountPartials(const TrainingView& view,
                               const std::vector<int>& device_of_node,
                               int devices);

}  // namespace placer

#endif  // PLACER_SIMULATOR_GRADIENT_PARTIALS_H_
