// RlGraph: what the hierarchical RL placer sees of one training view on one
// cluster, as plain numbers (no LibTorch here).
//
// Contract: the placer works on placement units (GroupGraph over
// CoarsenSmallGroups: small ops ride with their producers, pinned ops stay
// alone). Every unit has kBaseFeatures numbers that do not depend on the
// graph's size or scale (times and bytes relative to the graph's mean,
// positions as fractions, counts as log1p), the mean of those numbers over
// its forward predecessors and over its successors (one step of
// neighbourhood), a histogram of its members' op types hashed into
// kOpTypeBuckets buckets (the op-type embedding's input), and per device
// its time there over its fastest time, minus one. So a model trained on
// some graphs reads any other graph for the same number of devices; with
// the device-count-free rows (kAgnosticFeatures) and the devices' own
// numbers (device_features), any cluster.
// `links` lists each pair of units that exchange bytes once, with the
// bytes as a fraction of all such bytes; the placer turns them into
// group-to-group adjacency. StructuralGroups(G) is the graph's own cut into
// G groups that keeps each layer whole (parameter families, merged by
// MergeFamilies): the Grouper reads it as a one-hot input and starts from
// it, since no per-unit number tells an LSTM layer's time steps from the
// next layer's. `start_device`, when set, is a start placement the Placer
// reads (RlModelOptions::heuristic_input).
#ifndef PLACER_POLICIES_RL_FEATURES_H_
#define PLACER_POLICIES_RL_FEATURES_H_

#include <cstdint>
#include <vector>

#include "policies/group_graph.h"
#include "policies/policy.h"

namespace placer {

struct RlLink {
  int a = -1, b = -1;     // units, a < b
  float byte_fraction = 0;
};

struct RlGraph {
  static constexpr int kBaseFeatures = 10;
  static constexpr int kOpTypeBuckets = 32;
  static int FeatureCount(int devices) {
    return 3 * kBaseFeatures + kOpTypeBuckets + devices;
  }
  // Device-count-free unit rows (a model that places on any cluster): the
  // rows above without the per-device columns, plus their least, mean and
  // largest value.
  static constexpr int kAgnosticFeatures = 3 * kBaseFeatures + kOpTypeBuckets + 3;
  // Per device, relative to the cluster's mean (logarithms of ratios):
  // peak FLOP/s, memory bandwidth, memory limit, the mean bandwidth of its
  // links out, the units' mean time there over their fastest time; and 1
  // for a GPU.
  static constexpr int kDeviceFeatures = 6;

  GroupGraph units;
  int num_devices = 0;
  std::vector<float> features;          // num_units x FeatureCount, rows
  std::vector<float> device_features;   // num_devices x kDeviceFeatures
  std::vector<float> compute_fraction;  // per unit: min seconds / total
  std::vector<float> memory_fraction;   // per unit: bytes / total
  // Per device: the share of the units' bytes (memory_fraction's scale)
  // that the Placer's memory mask lets it hold: 85% of its memory limit over
  // the simulated peak of the whole graph on one device.
  std::vector<float> device_capacity;
  std::vector<RlLink> links;
  std::vector<int> pinned_device;       // per unit; -1: free
  std::vector<int> family;              // per unit: ParameterFamilies
  // Per unit, the device a start placement gives it (the best heuristic's,
  // for a model with heuristic_input; RlModelOptions); empty: none.
  std::vector<int> start_device;

  int num_units() const { return units.num_units(); }
  // Expands a device per unit into a placement of every op, pinned ops on
  // their devices.
  Placement Expand(const std::vector<int>& device_of_unit) const;
  // A group in [0, groups) per unit, numbered by topological order. With
  // a start placement, the families are first cut by start device and
  // merged within a device while there are more groups than devices, so
  // the groups can hold the start placement exactly.
  std::vector<int> StructuralGroups(int groups) const;
};

RlGraph BuildRlGraph(const PolicyInput& input, const PolicyOptions& options);

}  // namespace placer

#endif  // PLACER_POLICIES_RL_FEATURES_H_
