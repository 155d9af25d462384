// CostModel: how long a training-view node takes on a device, and how long
// a tensor takes to cross a link. The simulator takes one; it never looks
// at costs any other way (the split of TensorFlow Grappler's costs/ and
// FlexFlow's simulator).
//
// Contract: both functions are pure (same arguments, same answer) and
// return seconds >= 0. IsGuess says whether the model could only guess a
// node's time (an op with an unknown or estimated cost and no measurement);
// reports count those as inaccurate.
#ifndef PLACER_PROFILES_COST_MODEL_H_
#define PLACER_PROFILES_COST_MODEL_H_

#include <cstdint>
#include <memory>

#include "graph/training_view.h"
#include "profiles/cluster.h"

namespace placer {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual double NodeSeconds(const TrainingView& view, int node,
                             const Device& device) const = 0;
  // Sending `bytes` from device src to device dst of `cluster`.
  virtual double TransferSeconds(int64_t bytes, const Cluster& cluster,
                                 int src, int dst) const = 0;
  virtual bool IsGuess(const TrainingView& view, int node) const = 0;
};

// Roofline: op_overhead_seconds + max(flops / peak_flops,
// bytes_accessed / memory_bandwidth); transfers: latency + bytes /
// bandwidth. Guesses: nodes whose cost status is not kExact.
std::unique_ptr<CostModel> NewRooflineCostModel();

}  // namespace placer

#endif  // PLACER_PROFILES_COST_MODEL_H_
