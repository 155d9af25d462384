// CostModel: how long a training-view node takes on a device, and how long
// a tensor takes to cross a link. The simulator takes one; it never looks
// at costs any other way (the split of TensorFlow Grappler's costs/ and
// FlexFlow's simulator).
//
// Contract: the functions are pure (same arguments, same answer) and
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
  // The node's time on a device that is the only one of its host in use
  // (devices of one host slow each other down: cores, memory, a GPU's
  // launching thread, copies); by default NodeSeconds. Only measured
  // profiles tell the two apart.
  virtual double AloneNodeSeconds(const TrainingView& view, int node,
                                  const Device& device) const {
    return NodeSeconds(view, node, device);
  }
  // Sending `bytes` from device src to device dst of `cluster`.
  virtual double TransferSeconds(int64_t bytes, const Cluster& cluster,
                                 int src, int dst) const = 0;
  virtual bool IsGuess(const TrainingView& view, int node) const = 0;
  // Adding one more micro-batch's gradient of `update_node`'s parameter
  // into its gradient buffer, in place (PyTorch's AccumulateGrad: the
  // buffer and the gradient read, the buffer written), on `device`: what
  // gradient accumulation costs per micro-batch after the first.
  virtual double AccumulateSeconds(const TrainingView& view, int update_node,
                                   const Device& device) const = 0;
  // Adding one partial gradient of the view's gradient sum `sum` into the
  // buffer its device already holds for that sum (the executor does it on
  // the device's worker right after the node that made the partial). By
  // default 0: the roofline does not charge it; a measured profile does
  // where it timed the addition for the tensor's shape.
  virtual double PartialAddSeconds(const TrainingView& view, int sum,
                                   const Device& device) const {
    return 0;
  }
};

// Roofline: op_overhead_seconds + max(flops / the device's AchievedFlops at
// the node's compute_precision (tensor cores for autocast's lower-precision
// ops, at the device's tensor-core or, for fused attention, attention
// fraction of their peak), bytes_accessed / AchievedBandwidth), plus
// fp8_cast_bytes / AchievedBandwidth (fp8 casts are kernels of their own);
// transfers:
// latency + bytes / bandwidth; accumulation: op_overhead_seconds +
// max(elements / peak_flops, 3 x bytes / AchievedBandwidth) of the
// parameter. Devices that say no fractions run at their peaks. Guesses:
// nodes whose cost status is not kExact.
std::unique_ptr<CostModel> NewRooflineCostModel();

}  // namespace placer

#endif  // PLACER_PROFILES_COST_MODEL_H_
