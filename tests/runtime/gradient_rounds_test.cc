#include "runtime/gradient_rounds.h"

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace placer {
namespace {

const torch::Device kCpu(torch::kCPU);

torch::Tensor Scalar(float x) { return torch::full({1}, x); }

// A round's parts are summed in replica order whatever order they come
// in: 1 + 1e8 - 1e8 is 0 in float32 (1e8 + 1 rounds to 1e8); in the order
// delivered (-1e8, 1, 1e8) it would be 1.
TEST(GradientRoundsTest, ARoundIsSummedInReplicaOrder) {
  GradientRounds rounds;
  rounds.Reset({1});
  torch::Tensor accumulator;
  rounds.Deliver(0, 0, 0, /*from=*/2, 3, Scalar(-1e8f), kCpu, &accumulator);
  rounds.Deliver(0, 0, 0, /*from=*/0, 3, Scalar(1.f), kCpu, &accumulator);
  EXPECT_FALSE(accumulator.defined());
  rounds.Deliver(0, 0, 0, /*from=*/1, 3, Scalar(1e8f), kCpu, &accumulator);
  ASSERT_TRUE(accumulator.defined());
  EXPECT_EQ(accumulator.item<float>(), 0.f);
}

// Round 1 complete before round 0 waits for it; then both are added, 0
// first.
TEST(GradientRoundsTest, RoundsAreAddedInOrder) {
  GradientRounds rounds;
  rounds.Reset({0, 2});
  torch::Tensor accumulator;
  rounds.Deliver(1, 1, /*round=*/1, 0, 2, Scalar(3.f), kCpu, &accumulator);
  rounds.Deliver(1, 1, /*round=*/1, 1, 2, Scalar(4.f), kCpu, &accumulator);
  EXPECT_FALSE(accumulator.defined());
  rounds.Deliver(1, 1, /*round=*/0, 1, 2, Scalar(2.f), kCpu, &accumulator);
  EXPECT_FALSE(accumulator.defined());
  rounds.Deliver(1, 1, /*round=*/0, 0, 2, Scalar(1.f), kCpu, &accumulator);
  ASSERT_TRUE(accumulator.defined());
  EXPECT_EQ(accumulator.item<float>(), 10.f);
  // The other shard's rounds are its own.
  torch::Tensor other;
  rounds.Deliver(1, 0, /*round=*/0, 0, 2, Scalar(5.f), kCpu, &other);
  EXPECT_FALSE(other.defined());
}

// Flush adds what some replica sent nothing for; the parts are copies,
// the accumulator not the part delivered.
TEST(GradientRoundsTest, FlushAddsIncompleteRounds) {
  GradientRounds rounds;
  rounds.Reset({1});
  torch::Tensor accumulator;
  torch::Tensor part = Scalar(2.f);
  rounds.Deliver(0, 0, 0, 0, 2, part, kCpu, &accumulator);
  rounds.Deliver(0, 0, 1, 1, 2, Scalar(5.f), kCpu, &accumulator);
  EXPECT_FALSE(accumulator.defined());
  torch::Tensor total = rounds.Flush(0, 0, kCpu, &accumulator);
  EXPECT_EQ(total.item<float>(), 7.f);
  EXPECT_EQ(part.item<float>(), 2.f);
  // Nothing is left to add; a reset step starts at round 0 again.
  EXPECT_EQ(rounds.Flush(0, 0, kCpu, &accumulator).item<float>(), 7.f);
  rounds.Reset({1});
  rounds.Deliver(0, 0, 0, 0, 1, Scalar(1.f), kCpu, &accumulator);
  EXPECT_EQ(accumulator.item<float>(), 8.f);
}

}  // namespace
}  // namespace placer
