#include "policies/device_loads.h"

#include <algorithm>
#include <numeric>

namespace placer {

DeviceLoads::DeviceLoads(const GroupGraph& groups, const Cluster& cluster,
                         const PolicyOptions& options)
    : groups_(groups),
      seconds_(cluster.num_devices(), 0),
      memory_(cluster.num_devices(), 0),
      device_of_unit_(groups.num_units(), -1) {
  for (int d = 0; d < cluster.num_devices(); ++d) {
    limit_.push_back(MemoryLimit(cluster, options, d));
  }
}

int64_t DeviceLoads::ReadBytes(int unit, int device) const {
  int64_t bytes = 0;
  for (const GroupEdge& e : groups_.parameter_reads(unit)) {
    int home = device_of_unit_[e.to];
    if (home >= 0 && home != device && !Copied(e.value, device)) {
      bytes += 2 * e.bytes;
    }
  }
  return bytes;
}

void DeviceLoads::Assign(int unit, int device) {
  seconds_[device] += groups_.seconds(unit, device);
  memory_[device] += groups_.memory_bytes(unit) + ReadBytes(unit, device);
  device_of_unit_[unit] = device;
  for (const GroupEdge& e : groups_.parameter_reads(unit)) {
    int home = device_of_unit_[e.to];
    if (home >= 0 && home != device) copied_.insert({e.value, device});
  }
}

int PinnedDevice(const PolicyOptions& options, int group) {
  auto it = options.pinned.find(group);
  return it == options.pinned.end() ? -1 : it->second;
}

int UnitPinnedDevice(const GroupGraph& units, const PolicyOptions& options,
                     int unit) {
  for (int g : units.members(unit)) {
    int d = PinnedDevice(options, g);
    if (d >= 0) return d;
  }
  return -1;
}

std::vector<int> PlacementFamilies(const PolicyInput& input,
                                   const PolicyOptions& options,
                                   const GroupGraph& units) {
  std::vector<bool> pinned(units.num_units());
  for (int u = 0; u < units.num_units(); ++u) {
    pinned[u] = UnitPinnedDevice(units, options, u) >= 0;
  }
  return ParameterFamilies(input.view, units, pinned);
}

GroupGraph PlacementUnits(const PolicyInput& input,
                          const PolicyOptions& options) {
  std::vector<bool> pinned(input.view.num_groups(), false);
  for (const auto& [op, d] : options.pinned) pinned[op] = true;
  return GroupGraph(input.simulation,
                    CoarsenSmallGroups(input.simulation, pinned));
}

std::vector<int> DevicesBySpeed(const Cluster& cluster) {
  std::vector<int> order(cluster.num_devices());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return cluster.device(a).peak_flops > cluster.device(b).peak_flops;
  });
  return order;
}

}  // namespace placer
