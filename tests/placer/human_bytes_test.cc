#include "gtest/gtest.h"
#include "placer/cli/cli_common.h"

namespace placer {
namespace {

TEST(HumanBytesTest, ThreeSignificantDigitsInBinaryUnits) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1024), "1.00 KiB");
  EXPECT_EQ(HumanBytes(16 * 1024 + 512), "16.5 KiB");
  EXPECT_EQ(HumanBytes(int64_t{415} << 20), "415 MiB");
  EXPECT_EQ(HumanBytes(3071225880), "2.86 GiB");
  EXPECT_EQ(HumanBytes(-2048), "-2.00 KiB");
}

}  // namespace
}  // namespace placer
