#include "runtime/cpu_cores.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"

namespace placer {
namespace {

using ::testing::HasSubstr;

// Devices as "kind@host" ("CPU@" is the local host).
Cluster Devices(const std::vector<std::string>& devices) {
  std::string text = "name: \"t\"\n";
  for (size_t d = 0; d < devices.size(); ++d) {
    const size_t at = devices[d].find('@');
    text += "devices { name: \"d" + std::to_string(d) +
            "\" kind: " + devices[d].substr(0, at) +
            " peak_flops: 1e10 memory_bandwidth: 1e10 memory_bytes: 1000 "
            "host: \"" +
            devices[d].substr(at + 1) + "\" }\n";
  }
  text += "default_link { latency_seconds: 1e-6 bandwidth: 1e9 }\n";
  absl::StatusOr<Cluster> c = ParseCluster(text, "t.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(CpuCoresTest, EachCpuDeviceGetsTheNextCoresOfItsHost) {
  using Cores = std::vector<std::vector<int>>;
  auto two = CpuDeviceCores(Devices({"CPU@", "CPU@"}), 1, {0, 1});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, (Cores{{0}, {1}}));
  // Two threads each, from what the process may use (taskset 4-7).
  auto wide = CpuDeviceCores(Devices({"CPU@", "CPU@"}), 2, {4, 5, 6, 7});
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(*wide, (Cores{{4, 5}, {6, 7}}));
  // A GPU gets none and takes none; each host numbers its own devices.
  auto mixed = CpuDeviceCores(Devices({"CPU@a", "GPU@a", "CPU@b", "CPU@a"}), 1,
                              {0, 1, 2});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(*mixed, (Cores{{0}, {}, {0}, {1}}));
}

TEST(CpuCoresTest, TooFewCoresIsSaidAndNothingPinned) {
  auto few = CpuDeviceCores(Devices({"CPU@", "CPU@", "CPU@"}), 2, {0, 1, 2});
  ASSERT_FALSE(few.ok());
  EXPECT_EQ(few.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(few.status().message(),
              HasSubstr("3 CPU devices x 2 thread(s) need 6 cores and this "
                        "process may use 3"));
  EXPECT_FALSE(CpuDeviceCores(Devices({"CPU@"}), 0, {0}).ok());
}

TEST(CpuCoresTest, APinHoldsForItsScopeAndIsGivenBack) {
  const std::vector<int> allowed = AllowedCores();
  ASSERT_FALSE(allowed.empty());
  {
    ScopedPin pin({allowed.back()});
    EXPECT_EQ(AllowedCores(), std::vector<int>{allowed.back()});
  }
  EXPECT_EQ(AllowedCores(), allowed);
  {
    ScopedPin none({});  // unchanged
    EXPECT_EQ(AllowedCores(), allowed);
  }
  EXPECT_TRUE(PinThisThread({}).ok());
  EXPECT_FALSE(PinThisThread({100000}).ok());  // no such core
}

}  // namespace
}  // namespace placer
