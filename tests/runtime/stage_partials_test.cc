// StagePartials names one entry per (sum, stage, slot): every entry starts
// undefined and each key reaches its own, checked over a whole 3 x 2 x 2
// table by writing each key's own number and reading them all back.
#include "runtime/stage_partials.h"

#include "gtest/gtest.h"

namespace placer {
namespace {

TEST(StagePartialsTest, EachSumStageAndSlotHasItsOwnEntry) {
  StagePartials partials(3, 2, 2);
  for (int sum = 0; sum < 3; ++sum) {
    for (int stage = 0; stage < 2; ++stage) {
      for (int slot = 0; slot < 2; ++slot) {
        EXPECT_FALSE(partials.at(sum, stage, slot).defined());
        partials.at(sum, stage, slot) =
            torch::full({1}, 100 * sum + 10 * stage + slot);
      }
    }
  }
  for (int sum = 0; sum < 3; ++sum) {
    for (int stage = 0; stage < 2; ++stage) {
      for (int slot = 0; slot < 2; ++slot) {
        EXPECT_EQ(partials.at(sum, stage, slot).item<float>(),
                  100 * sum + 10 * stage + slot);
      }
    }
  }
}

}  // namespace
}  // namespace placer
