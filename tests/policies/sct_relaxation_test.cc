// The m-SCT LP relaxation on tiny DAGs whose optimum is known by hand.
#include "policies/sct_relaxation.h"

#include "gtest/gtest.h"

namespace placer {
namespace {

// a -> b, a -> c; p = 1 each.
SctProblem Fork(double c_ab, double c_ac) {
  SctProblem p;
  p.seconds = {1, 1, 1};
  p.order = {0, 1, 2};
  p.edges = {{0, 1}, {0, 2}};
  p.comm = {c_ab, c_ac};
  p.may_cross = {true, true};
  return p;
}

TEST(SctRelaxationTest, ForkSplitsTheCrossingByCommunication) {
  // a keeps at most one child: x_ab + x_ac >= 1. With c = 1 and 1, the
  // paths 2 + x_ab and 2 + x_ac balance at x = 1/2: w = 2.5.
  absl::StatusOr<SctRelaxation> r = SolveSctRelaxation(Fork(1, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->makespan, 2.5, 1e-9);
  EXPECT_NEAR(r->x[0], 0.5, 1e-9);
  EXPECT_NEAR(r->x[1], 0.5, 1e-9);
  // With c = 1 and 3: x_ab = 3 x_ac and x_ab + x_ac = 1: x = (3/4, 1/4),
  // w = 2.75; the expensive edge is the one kept.
  r = SolveSctRelaxation(Fork(1, 3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->makespan, 2.75, 1e-9);
  EXPECT_NEAR(r->x[0], 0.75, 1e-9);
  EXPECT_NEAR(r->x[1], 0.25, 1e-9);
}

TEST(SctRelaxationTest, AnEdgeThatMayNotCrossLeavesTheDegreeRows) {
  SctProblem p = Fork(1, 1);
  p.may_cross = {true, false};
  // One crossable out-edge: no degree row, so nothing needs to cross.
  absl::StatusOr<SctRelaxation> r = SolveSctRelaxation(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->makespan, 2, 1e-9);
  EXPECT_EQ(r->x[1], 0);
}

TEST(SctRelaxationTest, DiamondNeedsOneFullCrossingOnSomePath) {
  // a -> b -> d, a -> c -> d; p = 1, c = 1. Rows: x_ab + x_ac >= 1 and
  // x_bd + x_cd >= 1, so the two paths' crossings sum to at least 2 and
  // the longer of 3 + x_ab + x_bd and 3 + x_ac + x_cd is at least 4.
  SctProblem p;
  p.seconds = {1, 1, 1, 1};
  p.order = {0, 1, 2, 3};
  p.edges = {{0, 1}, {0, 2}, {1, 3}, {2, 3}};
  p.comm = {1, 1, 1, 1};
  p.may_cross = {true, true, true, true};
  absl::StatusOr<SctRelaxation> r = SolveSctRelaxation(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->makespan, 4, 1e-9);
  EXPECT_GE(r->x[0] + r->x[1], 1 - 1e-9);
  EXPECT_GE(r->x[2] + r->x[3], 1 - 1e-9);
  EXPECT_LE(3 + r->x[0] + r->x[2], 4 + 1e-9);
  EXPECT_LE(3 + r->x[1] + r->x[3], 4 + 1e-9);
}

TEST(SctRelaxationTest, NoEdgesIsTheLongestUnit) {
  SctProblem p;
  p.seconds = {2, 5};
  p.order = {0, 1};
  absl::StatusOr<SctRelaxation> r = SolveSctRelaxation(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->makespan, 5, 1e-9);
  EXPECT_TRUE(r->x.empty());
}

}  // namespace
}  // namespace placer
