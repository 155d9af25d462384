#include "simulator/allreduce.h"

#include <algorithm>
#include <string>
#include <utility>

namespace placer {

namespace {

// One step of a ring over `devices`: the slowest link carrying
// ceil(bytes / p).
double RingStepSeconds(const CostModel& costs, const Cluster& cluster,
                       const std::vector<int>& devices, int64_t bytes) {
  const int p = static_cast<int>(devices.size());
  const int64_t chunk = (bytes + p - 1) / p;
  double step = 0;
  for (int i = 0; i < p; ++i) {
    step = std::max(step, costs.TransferSeconds(chunk, cluster, devices[i],
                                                devices[(i + 1) % p]));
  }
  return step;
}

// `devices` grouped by host, hosts in order of first appearance.
std::vector<std::vector<int>> ByHost(const Cluster& cluster,
                                     const std::vector<int>& devices) {
  std::vector<std::string> hosts;
  std::vector<std::vector<int>> groups;
  for (int d : devices) {
    const std::string& host = cluster.device(d).host;
    size_t h = 0;
    while (h < hosts.size() && hosts[h] != host) ++h;
    if (h == hosts.size()) {
      hosts.push_back(host);
      groups.emplace_back();
    }
    groups[h].push_back(d);
  }
  return groups;
}

// Two levels over devices l >= 2 on each of h >= 2 hosts: the slowest
// host's ring reduce-scatter of `bytes`, and per local rank the ring of
// its devices across hosts, each over `shard` = ceil(bytes / l).
struct TwoLevels {
  double inside = 0;
  std::vector<std::vector<int>> across;
  int64_t shard = 0;
};
TwoLevels SplitByHost(const CostModel& costs, const Cluster& cluster,
                      const std::vector<int>& devices, int64_t bytes) {
  const std::vector<std::vector<int>> hosts = ByHost(cluster, devices);
  const int l = static_cast<int>(hosts[0].size());
  TwoLevels levels;
  for (const std::vector<int>& host : hosts) {
    levels.inside = std::max(levels.inside,
                             ReduceScatterSeconds(costs, cluster, host, bytes));
  }
  levels.shard = (bytes + l - 1) / l;
  for (int i = 0; i < l; ++i) {
    std::vector<int> ring;
    for (const std::vector<int>& host : hosts) ring.push_back(host[i]);
    levels.across.push_back(std::move(ring));
  }
  return levels;
}

}  // namespace

bool SpansHostsEvenly(const Cluster& cluster, const std::vector<int>& devices) {
  const std::vector<std::vector<int>> hosts = ByHost(cluster, devices);
  if (hosts.size() < 2 || hosts[0].size() < 2) return false;
  for (const std::vector<int>& host : hosts) {
    if (host.size() != hosts[0].size()) return false;
  }
  return true;
}

double ReduceScatterSeconds(const CostModel& costs, const Cluster& cluster,
                            const std::vector<int>& devices, int64_t bytes) {
  const int p = static_cast<int>(devices.size());
  if (p <= 1 || bytes <= 0) return 0;
  return (p - 1) * RingStepSeconds(costs, cluster, devices, bytes);
}

double AllGatherSeconds(const CostModel& costs, const Cluster& cluster,
                        const std::vector<int>& devices, int64_t bytes) {
  return ReduceScatterSeconds(costs, cluster, devices, bytes);
}

double ReduceScatterSeconds(const CostModel& costs, const Cluster& cluster,
                            const std::vector<int>& devices, int64_t bytes,
                            AllreduceAlgorithm algorithm) {
  if (algorithm != AllreduceAlgorithm::kHierarchical || bytes <= 0 ||
      !SpansHostsEvenly(cluster, devices)) {
    return ReduceScatterSeconds(costs, cluster, devices, bytes);
  }
  const TwoLevels levels = SplitByHost(costs, cluster, devices, bytes);
  double across = 0;
  for (const std::vector<int>& ring : levels.across) {
    across = std::max(across,
                      ReduceScatterSeconds(costs, cluster, ring, levels.shard));
  }
  return levels.inside + across;
}

double AllGatherSeconds(const CostModel& costs, const Cluster& cluster,
                        const std::vector<int>& devices, int64_t bytes,
                        AllreduceAlgorithm algorithm) {
  return ReduceScatterSeconds(costs, cluster, devices, bytes, algorithm);
}

double AllToAllSeconds(const CostModel& costs, const Cluster& cluster,
                       const std::vector<int>& devices, int64_t bytes) {
  const int p = static_cast<int>(devices.size());
  if (p <= 1 || bytes <= 0) return 0;
  return (p - 1) *
         RingStepSeconds(costs, cluster, devices, (bytes + p - 1) / p);
}

int64_t CollectiveWireBytes(Collective kind, int p, int64_t bytes) {
  if (p <= 1) return 0;
  switch (kind) {
    case Collective::kAllreduce:
      return 2 * static_cast<int64_t>(p - 1) * bytes;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
      return static_cast<int64_t>(p - 1) * bytes;
    case Collective::kAllToAll:
      return static_cast<int64_t>(p - 1) * bytes / p;
  }
  return 0;
}

int CollectiveMessages(Collective kind, int p) {
  if (p <= 1) return 0;
  return (kind == Collective::kAllreduce ? 2 : 1) * (p - 1) * p;
}

double CollectiveSeconds(const CostModel& costs, const Cluster& cluster,
                         const std::vector<int>& devices, int64_t bytes,
                         Collective kind) {
  switch (kind) {
    case Collective::kAllreduce:
      return AllreduceSeconds(costs, cluster, devices, bytes,
                              AllreduceAlgorithm::kRing);
    case Collective::kReduceScatter:
      return ReduceScatterSeconds(costs, cluster, devices, bytes);
    case Collective::kAllGather:
      return AllGatherSeconds(costs, cluster, devices, bytes);
    case Collective::kAllToAll:
      return AllToAllSeconds(costs, cluster, devices, bytes);
  }
  return 0;
}

double AllreduceSeconds(const CostModel& costs, const Cluster& cluster,
                        const std::vector<int>& devices, int64_t bytes,
                        AllreduceAlgorithm algorithm) {
  const int p = static_cast<int>(devices.size());
  if (p <= 1 || bytes <= 0) return 0;
  if (algorithm == AllreduceAlgorithm::kHierarchical &&
      SpansHostsEvenly(cluster, devices)) {
    const TwoLevels levels = SplitByHost(costs, cluster, devices, bytes);
    double across = 0;
    for (const std::vector<int>& ring : levels.across) {
      across = std::max(across, AllreduceSeconds(costs, cluster, ring,
                                                 levels.shard,
                                                 AllreduceAlgorithm::kRing));
    }
    return 2 * levels.inside + across;  // the all-gather as long as the scatter
  }
  if (algorithm != AllreduceAlgorithm::kTree) {
    return 2.0 * (p - 1) * RingStepSeconds(costs, cluster, devices, bytes);
  }
  // Heap order: the parent of i is (i - 1) / 2; levels 1 .. height.
  auto depth = [](int i) {
    int d = 0;
    for (; i > 0; i = (i - 1) / 2) ++d;
    return d;
  };
  const int height = depth(p - 1);
  std::vector<double> up(height + 1, 0), down(height + 1, 0);
  for (int i = 1; i < p; ++i) {
    const int child = devices[i], parent = devices[(i - 1) / 2];
    up[depth(i)] = std::max(
        up[depth(i)], costs.TransferSeconds(bytes, cluster, child, parent));
    down[depth(i)] = std::max(
        down[depth(i)], costs.TransferSeconds(bytes, cluster, parent, child));
  }
  double total = 0;
  for (int level = 1; level <= height; ++level)
    total += up[level] + down[level];
  return total;
}

}  // namespace placer
