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
#include <vector>

#include "graph/training_view.h"

namespace placer {

struct PartialsByDevice {
  int devices = 0;
  std::vector<int> count;
  std::vector<int> first;
  size_t slot(int sum, int device) const {
    return static_cast<size_t>(sum) * devices + device;
  }
  // The devices that make partials of `sum`: the buffers the sink waits for.
  int sources(int sum) const;
};

// `device_of_node`: one device per view node (DevicesOfNodes).
PartialsByDevice CountPartials(const TrainingView& view,
                               const std::vector<int>& device_of_node,
                               int devices);

}  // namespace placer

#endif  // PLACER_SIMULATOR_GRADIENT_PARTIALS_H_
