// Test helpers shared by the runtime's tests: a cluster of identical CPU
// devices, and a placement that deals ops round-robin over them.
#ifndef PLACER_TESTS_RUNTIME_CPU_CLUSTER_H_
#define PLACER_TESTS_RUNTIME_CPU_CLUSTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "graph/graph.h"
#include "profiles/cluster.h"
#include "simulator/placement.h"

namespace placer {

inline Cluster Cpus(int devices, int64_t memory_bytes = int64_t{8} << 30) {
  std::string text = "name: \"cpus\"\n";
  for (int d = 0; d < devices; ++d) {
    text += "devices { name: \"/cpu:" + std::to_string(d) +
            "\" kind: CPU peak_flops: 8e10 memory_bandwidth: 1e10 "
            "memory_bytes: " + std::to_string(memory_bytes) + " }\n";
  }
  text += "default_link { latency_seconds: 2e-6 bandwidth: 5e9 }\n";
  absl::StatusOr<Cluster> c = ParseCluster(text, "test.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// Ops dealt round-robin over the devices in topological order: every edge
// of a chain crosses devices (and, with ranks, processes).
inline Placement RoundRobin(const Graph& g, int devices) {
  Placement p{std::vector<int>(g.ops().size(), 0)};
  int k = 0;
  for (int op : g.topological_order()) p.device_of_op[op] = k++ % devices;
  return p;
}

}  // namespace placer

#endif  // PLACER_TESTS_RUNTIME_CPU_CLUSTER_H_
