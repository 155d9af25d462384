#include "policies/rl/features.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "base/stable_hash.h"
#include "simulator/simulator.h"
#include "policies/device_loads.h"

namespace placer {
namespace {

float LogRatio(double value, double mean) {
  return static_cast<float>(std::log1p(mean > 0 ? value / mean : 0.0));
}

}  // namespace

RlGraph BuildRlGraph(const PolicyInput& input, const PolicyOptions& options) {
  RlGraph g{PlacementUnits(input, options)};
  const GroupGraph& u = g.units;
  const int n = u.num_units();
  const int devices = u.num_devices();
  g.num_devices = devices;
  const int width = RlGraph::FeatureCount(devices);
  constexpr int kBase = RlGraph::kBaseFeatures;

  double total_seconds = 0, total_resident = 0, total_activation = 0,
         total_edge_bytes = 0, max_rank = 0;
  int64_t edges = 0;
  std::vector<double> in_bytes(n, 0), out_bytes(n, 0);
  for (int a = 0; a < n; ++a) {
    total_seconds += u.min_seconds(a);
    total_resident += static_cast<double>(u.resident_bytes(a));
    total_activation += static_cast<double>(u.activation_bytes(a));
    max_rank = std::max(max_rank, u.upward_rank()[a]);
    for (const GroupEdge& e : u.successors(a)) {
      out_bytes[a] += static_cast<double>(e.bytes);
      in_bytes[e.to] += static_cast<double>(e.bytes);
      total_edge_bytes += static_cast<double>(e.bytes);
      ++edges;
    }
  }
  const double mean_seconds = n ? total_seconds / n : 0;
  const double mean_resident = n ? total_resident / n : 0;
  const double mean_activation = n ? total_activation / n : 0;
  const double mean_edge = edges ? total_edge_bytes / edges : 0;

  std::vector<int> position(n, 0);
  for (int i = 0; i < n; ++i) position[u.order()[i]] = i;

  std::vector<float> base(static_cast<size_t>(n) * kBase, 0);
  for (int a = 0; a < n; ++a) {
    float* f = &base[static_cast<size_t>(a) * kBase];
    f[0] = LogRatio(u.min_seconds(a), mean_seconds);
    f[1] = LogRatio(static_cast<double>(u.resident_bytes(a)), mean_resident);
    f[2] = LogRatio(static_cast<double>(u.activation_bytes(a)),
                    mean_activation);
    f[3] = n > 1 ? static_cast<float>(position[a]) / (n - 1) : 0;
    f[4] = max_rank > 0 ? static_cast<float>(u.upward_rank()[a] / max_rank)
                        : 0;
    f[5] = LogRatio(in_bytes[a], mean_edge);
    f[6] = LogRatio(out_bytes[a], mean_edge);
    f[7] = static_cast<float>(std::log1p(u.predecessors(a).size()));
    f[8] = static_cast<float>(std::log1p(u.successors(a).size()));
    f[9] = static_cast<float>(std::log1p(u.members(a).size()));
  }

  g.features.assign(static_cast<size_t>(n) * width, 0);
  const Graph& forward = input.view.forward();
  for (int a = 0; a < n; ++a) {
    float* row = &g.features[static_cast<size_t>(a) * width];
    const float* own = &base[static_cast<size_t>(a) * kBase];
    std::copy(own, own + kBase, row);
    auto mean_of = [&](const std::vector<GroupEdge>& list, float* out) {
      if (list.empty()) return;
      for (const GroupEdge& e : list) {
        const float* other = &base[static_cast<size_t>(e.to) * kBase];
        for (int k = 0; k < kBase; ++k) out[k] += other[k];
      }
      for (int k = 0; k < kBase; ++k) out[k] /= list.size();
    };
    mean_of(u.predecessors(a), row + kBase);
    mean_of(u.successors(a), row + 2 * kBase);
    float* types = row + 3 * kBase;
    for (int op : u.members(a)) {
      types[StableHash(forward.op(op).op_type) % RlGraph::kOpTypeBuckets] +=
          1.0f / u.members(a).size();
    }
    float* speed = types + RlGraph::kOpTypeBuckets;
    for (int d = 0; d < devices; ++d) {
      speed[d] = u.min_seconds(a) > 0
                     ? static_cast<float>(u.seconds(a, d) / u.min_seconds(a) - 1)
                     : 0;
    }
  }

  // The devices' own numbers, relative to the cluster's means.
  g.device_features.assign(static_cast<size_t>(devices) * RlGraph::kDeviceFeatures,
                           0);
  {
    const Cluster& c = input.cluster;
    std::vector<double> flops(devices), bandwidth(devices), limit(devices),
        links(devices, 0), slowness(devices, 0);
    for (int d = 0; d < devices; ++d) {
      flops[d] = c.device(d).peak_flops;
      bandwidth[d] = c.device(d).memory_bandwidth;
      limit[d] = static_cast<double>(MemoryLimit(c, options, d));
      for (int e = 0; e < devices; ++e) {
        if (e != d) links[d] += c.link(d, e).bandwidth / (devices - 1);
      }
      int counted = 0;
      for (int a = 0; a < n; ++a) {
        if (u.min_seconds(a) <= 0) continue;
        slowness[d] += u.seconds(a, d) / u.min_seconds(a);
        ++counted;
      }
      slowness[d] = counted ? slowness[d] / counted : 1;
    }
    auto mean = [](const std::vector<double>& v) {
      double sum = 0;
      for (double x : v) sum += x;
      return v.empty() ? 0.0 : sum / v.size();
    };
    auto log_ratio = [](double x, double m) {
      return static_cast<float>(x > 0 && m > 0 ? std::log(x / m) : 0.0);
    };
    const double mf = mean(flops), mb = mean(bandwidth), ml = mean(limit),
                 mk = mean(links), ms = mean(slowness);
    for (int d = 0; d < devices; ++d) {
      float* f = &g.device_features[static_cast<size_t>(d) *
                                    RlGraph::kDeviceFeatures];
      f[0] = log_ratio(flops[d], mf);
      f[1] = log_ratio(bandwidth[d], mb);
      f[2] = log_ratio(limit[d], ml);
      f[3] = log_ratio(links[d], mk);
      f[4] = log_ratio(slowness[d], ms);
      f[5] = c.device(d).kind == DeviceKind::kGpu ? 1.0f : 0.0f;
    }
  }

  g.compute_fraction.resize(n);
  g.memory_fraction.resize(n);
  const double total_memory = total_resident + total_activation;
  for (int a = 0; a < n; ++a) {
    g.compute_fraction[a] =
        total_seconds > 0 ? static_cast<float>(u.min_seconds(a) / total_seconds)
                          : 0;
    g.memory_fraction[a] =
        total_memory > 0
            ? static_cast<float>(u.memory_bytes(a) / total_memory)
            : 0;
  }

  std::map<std::pair<int, int>, double> pairs;
  double total_link_bytes = 0;
  for (int a = 0; a < n; ++a) {
    for (const GroupEdge& e : u.neighbours(a)) {
      if (e.to <= a) continue;  // each pair once
      pairs[{a, e.to}] += static_cast<double>(e.bytes);
      total_link_bytes += static_cast<double>(e.bytes);
    }
  }
  for (const auto& [ab, bytes] : pairs) {
    g.links.push_back(
        {ab.first, ab.second,
         total_link_bytes > 0 ? static_cast<float>(bytes / total_link_bytes)
                              : 0});
  }

  g.pinned_device.assign(n, -1);
  for (int a = 0; a < n; ++a) {
    g.pinned_device[a] = UnitPinnedDevice(u, options, a);
  }
  g.family = PlacementFamilies(input, options, u);

  // The units' byte estimate (resident parameters and forward outputs)
  // leaves out what the simulator also holds: gradient buffers, backward
  // temporaries, received copies (of parameters and activations, with
  // their gradients). The mask's scale is measured once, as the largest
  // ratio of a device's simulated peak to the estimate of its units: with
  // every unit on device 0, and with the families dealt round-robin over
  // the devices (a spread placement's copies). The mask keeps 15% of each
  // device free on top.
  constexpr double kMaskHeadroom = 0.85;
  double scale = 1;
  if (total_memory > 0) {
    std::vector<int> spread(n);
    for (int a = 0; a < n; ++a) spread[a] = g.family[a] % devices;
    for (const std::vector<int>& where :
         {std::vector<int>(n, 0), spread}) {
      absl::StatusOr<SimulationResult> r =
          Simulate(input.simulation, g.Expand(where));
      if (!r.ok()) continue;
      std::vector<double> estimate(devices, 0);
      for (int a = 0; a < n; ++a) {
        estimate[where[a]] += static_cast<double>(u.memory_bytes(a));
      }
      for (int d = 0; d < devices; ++d) {
        if (estimate[d] <= 0) continue;
        scale = std::max(
            scale, static_cast<double>(r->peak_memory_bytes[d]) / estimate[d]);
      }
    }
  }
  g.device_capacity.resize(devices);
  for (int d = 0; d < devices; ++d) {
    const double bytes =
        static_cast<double>(MemoryLimit(input.cluster, options, d));
    g.device_capacity[d] =
        total_memory > 0
            ? static_cast<float>(kMaskHeadroom * bytes / (scale * total_memory))
            : std::numeric_limits<float>::infinity();
  }
  return g;
}

std::vector<int> RlGraph::StructuralGroups(int groups) const {
  if (static_cast<int>(start_device.size()) != num_units()) {
    return MergeFamilies(units, family, groups);
  }
  // Each family cut by start device, merged within a device first.
  std::map<std::pair<int, int>, int> ids;
  std::vector<int> cut(num_units());
  std::vector<int> key;
  for (int u = 0; u < num_units(); ++u) {
    auto [at, added] = ids.try_emplace({family[u], start_device[u]},
                                       static_cast<int>(ids.size()));
    if (added) key.push_back(start_device[u]);
    cut[u] = at->second;
  }
  return MergeFamilies(units, cut, groups, &key);
}

Placement RlGraph::Expand(const std::vector<int>& device_of_unit) const {
  std::vector<int> devices = device_of_unit;
  for (int a = 0; a < num_units(); ++a) {
    if (pinned_device[a] >= 0) devices[a] = pinned_device[a];
  }
  return units.Expand(devices);
}

}  // namespace placer
