// BusyCoresWarning: two ranks whose devices' workers take every core of
// the host are warned about; spare cores, one rank, or ranks elsewhere
// are not.
#include "placer/cli/host_cores.h"

#include <string>

#include "gtest/gtest.h"
#include "profiles/cluster.h"

namespace placer {
namespace {

Cluster CpusAndGpu() {
  absl::StatusOr<Cluster> c = ParseCluster(
      "name: \"mixed\"\n"
      "devices { name: \"/cpu:0\" kind: CPU peak_flops: 1e11 "
      "memory_bandwidth: 1e10 memory_bytes: 1000000000 }\n"
      "devices { name: \"/cpu:1\" kind: CPU peak_flops: 1e11 "
      "memory_bandwidth: 1e10 memory_bytes: 1000000000 }\n"
      "devices { name: \"/gpu:0\" kind: GPU peak_flops: 1e13 "
      "memory_bandwidth: 1e12 memory_bytes: 1000000000 }\n"
      "default_link { latency_seconds: 1e-5 bandwidth: 1e10 }\n",
      "mixed.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(HostCoresTest, RanksFillingTheCoresAreWarnedAbout) {
  const Cluster cluster = CpusAndGpu();
  // Ranks 0, 1, 2: two CPU devices at 1 thread and a GPU: 3 busy threads.
  const std::string full = BusyCoresWarning(cluster, {0, 1, 2}, 3, 1, 3);
  EXPECT_NE(full.find("the 3 ranks started here run 3 devices on 3 busy "
                      "threads (--threads 1 per CPU device) and this host "
                      "has 3 cores"),
            std::string::npos)
      << full;
  EXPECT_EQ(BusyCoresWarning(cluster, {0, 1, 2}, 3, 1, 4), "");
  // 8 threads per CPU device: 17 busy threads on 17 cores, not 18.
  EXPECT_NE(BusyCoresWarning(cluster, {0, 1, 2}, 3, 8, 17), "");
  EXPECT_EQ(BusyCoresWarning(cluster, {0, 1, 2}, 3, 8, 18), "");
  // One rank: threads of one process (hand-offs are measured there).
  EXPECT_EQ(BusyCoresWarning(cluster, {0, 0, 0}, 1, 8, 2), "");
  // Only ranks 0 and 1 start here; rank 2's GPU is on another host.
  EXPECT_EQ(BusyCoresWarning(cluster, {0, 1, 2}, 2, 1, 3), "");
  EXPECT_NE(BusyCoresWarning(cluster, {0, 1, 2}, 2, 1, 2), "");
}

TEST(HostCoresTest, CpuDevicesWithoutCoresOfTheirOwnAreNoted) {
  const Cluster cluster = CpusAndGpu();  // two CPU devices and a GPU
  EXPECT_EQ(UnpinnedNote(cluster, 1, {0, 1}), "");
  EXPECT_EQ(UnpinnedNote(cluster, 2, {0, 1, 2, 3}), "");
  const std::string note = UnpinnedNote(cluster, 2, {0, 1, 2});
  EXPECT_NE(note.find("CPU devices run unpinned (--pin_cores): 2 CPU "
                      "devices x 2 thread(s) need 4 cores and this process "
                      "may use 3"),
            std::string::npos)
      << note;
}

}  // namespace
}  // namespace placer
