// DeviceLoads: what a greedy policy has put on each device so far, in
// seconds of work and estimated bytes (GroupGraph::memory_bytes), against
// each device's memory limit.
//
// Contract: the byte estimate counts each group's resident parameters and
// the activations its forward op writes, which training keeps until the
// backward pass, and, on a device that reads a parameter homed on another
// device, the parameter's copy and its gradient buffer (twice its bytes,
// once per parameter and device, as the simulator accumulates partial
// gradients). The simulator's exact peak is checked afterwards by
// CheckPlacement.
#ifndef PLACER_POLICIES_DEVICE_LOADS_H_
#define PLACER_POLICIES_DEVICE_LOADS_H_

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "policies/group_graph.h"
#include "policies/policy.h"

namespace placer {

class DeviceLoads {
 public:
  DeviceLoads(const GroupGraph& groups, const Cluster& cluster,
              const PolicyOptions& options);

  bool Fits(int unit, int device) const {
    return memory_[device] + groups_.memory_bytes(unit) +
               ReadBytes(unit, device) <=
           limit_[device];
  }
  // Whether `bytes` more (beyond what is assigned) fit on the device.
  bool FitsBytes(int64_t bytes, int device) const {
    return memory_[device] + bytes <= limit_[device];
  }
  // The copies and gradient buffers of parameters homed on other devices
  // that `unit` would add on `device` (twice each parameter's bytes, for
  // those not there yet; a home not placed yet counts as local).
  int64_t ReadBytes(int unit, int device) const;
  // Whether parameter value `value` is already copied to `device`.
  bool Copied(int value, int device) const {
    return copied_.count({value, device}) > 0;
  }
  void Assign(int unit, int device);
  double seconds(int device) const { return seconds_[device]; }
  int64_t memory(int device) const { return memory_[device]; }

 private:
  const GroupGraph& groups_;
  std::vector<double> seconds_;
  std::vector<int64_t> memory_, limit_;
  std::vector<int> device_of_unit_;
  std::set<std::pair<int, int>> copied_;  // (parameter value, device)
};

// The device op `group` is pinned to, or -1.
int PinnedDevice(const PolicyOptions& options, int group);
// The device a member of `unit` is pinned to, or -1.
int UnitPinnedDevice(const GroupGraph& units, const PolicyOptions& options,
                     int unit);

// ParameterFamilies of the units, each unit with a pinned op a family of
// its own.
std::vector<int> PlacementFamilies(const PolicyInput& input,
                                   const PolicyOptions& options,
                                   const GroupGraph& units);

// The units policies place: small groups coarsened into their producers,
// pinned groups alone.
GroupGraph PlacementUnits(const PolicyInput& input,
                          const PolicyOptions& options);

// The devices ordered fastest first (peak FLOP/s, then index).
std::vector<int> DevicesBySpeed(const Cluster& cluster);

}  // namespace placer

#endif  // PLACER_POLICIES_DEVICE_LOADS_H_
