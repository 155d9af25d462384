#include "base/statistics.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace placer {
namespace {

TEST(StatisticsTest, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({}), 0);
}

TEST(StatisticsTest, TrimmedMeanLeavesOutBothEnds) {
  EXPECT_EQ(TrimmedMean({}, 0.05), 0);
  // 20 values: 5% is one at each end.
  std::vector<double> v(18, 1.0);
  v.push_back(0.0);
  v.push_back(1000.0);
  EXPECT_DOUBLE_EQ(TrimmedMean(v, 0.05), 1.0);
  EXPECT_DOUBLE_EQ(TrimmedMean(v, 0.0), 1018.0 / 20);
  // Fewer than 20: nothing left out.
  EXPECT_DOUBLE_EQ(TrimmedMean({1, 2, 6}, 0.05), 3.0);
}

TEST(StatisticsTest, SpearmanRhoByHand) {
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 2, 3, 4}, {10, 20, 35, 40}), 1);
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 2, 3, 4}, {4, 3, 2, 1}), -1);
  // Two neighbours swapped twice: 1 - 6 * 4 / (5 * 24).
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8);
  // Ties share their mean rank: ranks (1, 2, 3) against (1.5, 1.5, 3),
  // covariance 1.5 over sqrt(2 x 1.5).
  EXPECT_NEAR(SpearmanRho({1, 2, 3}, {7, 7, 9}), 1.5 / std::sqrt(3.0), 1e-12);
  // No spread: no order to compare.
  EXPECT_EQ(SpearmanRho({1, 2, 3}, {5, 5, 5}), 0);
  EXPECT_EQ(SpearmanRho({}, {}), 0);
}

}  // namespace
}  // namespace placer
