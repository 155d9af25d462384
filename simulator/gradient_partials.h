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

#include "absl/container/flat_hash_map.h"

#include "graph/training_view.h"

namespace placer {

class PartialsByDevice {
 public:
  PartialsByDevice() = default;
  explicit PartialsByDevice(int devices) : devices_(devices) {}
  // How many partials of `sum` `device` makes, and the first (-1: none).
  int count(int sum, int device) const {
    auto at = by_pair_.find(Key(sum, device));
    return at == by_pair_.end() ? 0 : at->second.count;
  }
  int first(int sum, int device) const {
    auto at = by_pair_.find(Key(sum, device));
    return at == by_pair_.end() ? -1 : at->second.first;
  }
  // The devices that make partials of `sum`: the buffers the sink waits for.
  int sources(int sum) const;
  // One more partial, `value`, of `sum` made on `device`.
  void Add(int sum, int device, int value);

 private:
  struct Made {
    int count = 0;
    int first = -1;
  };
  int64_t Key(int sum, int device) const {
    return static_cast<int64_t>(sum) * devices_ + device;
  }
  int devices_ = 0;
  // Only the (sum, device) pairs that make partials: a sum's partials lie
  // on few of a cluster's devices.
  absl::flat_hash_map<int64_t, Made> by_pair_;
  absl::flat_hash_map<int, int> sources_;  // per sum with partials
};

// `device_of_node`: one device per view node (DevicesOfNodes).
PartialsByDevice CountPartials(const TrainingView& view,
                               const std::vector<int>& device_of_node,
                               int devices);

}  // namespace placer

#endif  // PLACER_SIMULATOR_GRADIENT_PARTIALS_H_
