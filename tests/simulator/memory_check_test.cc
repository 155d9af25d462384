#include "simulator/memory_check.h"

#include "gtest/gtest.h"

namespace placer {
namespace {

TEST(MemoryCheckTest, NamesTheDeviceFurthestOverItsLimit) {
  absl::StatusOr<Cluster> c = LoadCluster("p100x4");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<int64_t> limits = {100, 100, 100, 100};
  EXPECT_TRUE(CheckMemory(*c, {100, 0, 99, 100}, limits).ok());
  absl::Status s = CheckMemory(*c, {101, 130, 100, 130}, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  // Devices 1 and 3 are 30 over: the lower index is named.
  EXPECT_EQ(s.message(),
            "out of memory: " + c->device(1).name +
                " needs 130 bytes, 30 over its limit of 100");
  EXPECT_EQ(CheckMemory(*c, {1, 2}, limits).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(DeviceCapacities(*c)[2], c->device(2).memory_bytes);
}

// Told when each device peaked, the error says it for the device it names.
TEST(MemoryCheckTest, SaysWhenTheDeviceItNamesPeaked) {
  absl::StatusOr<Cluster> c = LoadCluster("p100x4");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<int64_t> limits = {100, 100, 100, 100};
  auto when = [](int d) { return ", at moment " + std::to_string(d); };
  EXPECT_TRUE(CheckMemory(*c, {100, 0, 99, 100}, limits, when).ok());
  absl::Status s = CheckMemory(*c, {101, 130, 100, 130}, limits, when);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "out of memory: " + c->device(1).name +
                             " needs 130 bytes, 30 over its limit of 100, "
                             "at moment 1");
  EXPECT_EQ(CheckMemory(*c, {1, 2}, limits, when).code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace placer
