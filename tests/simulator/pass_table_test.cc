#include "simulator/pass_table.h"

#include <set>

#include "gtest/gtest.h"

namespace placer {
namespace {

// Every (stage, micro-batch, direction) names its own entry, laid out in
// (stage, micro-batch, forward then backward) order.
TEST(PassTableTest, EveryPassHasItsOwnEntry) {
  PassTable<int> table(3, 4, -1);
  ASSERT_EQ(table.all().size(), 24u);
  std::set<size_t> seen;
  for (int s = 0; s < 3; ++s) {
    for (int j = 0; j < 4; ++j) {
      for (bool backward : {false, true}) {
        EXPECT_EQ(table.at(s, j, backward), -1);
        table.at(s, j, backward) = s * 100 + j * 10 + backward;
        EXPECT_TRUE(seen.insert(table.index(s, j, backward)).second);
      }
    }
  }
  EXPECT_EQ(table.index(0, 0, false), 0u);
  EXPECT_EQ(table.index(0, 0, true), 1u);
  EXPECT_EQ(table.index(0, 1, false), 2u);
  EXPECT_EQ(table.index(1, 0, false), 8u);
  EXPECT_EQ(table.index(2, 3, true), 23u);
  EXPECT_EQ(table.all()[table.index(2, 1, true)], 211);
  EXPECT_EQ(table.at(1, 3, false), 130);
  const PassTable<int>& read = table;
  EXPECT_EQ(read.at(0, 2, true), 21);
  EXPECT_EQ(read.stages(), 3);
  EXPECT_EQ(read.micro_batches(), 4);
}

TEST(PassTableTest, EmptyTableHasNoEntries) {
  PassTable<char> table;
  EXPECT_TRUE(table.all().empty());
  EXPECT_EQ(table.stages(), 0);
}

}  // namespace
}  // namespace placer
