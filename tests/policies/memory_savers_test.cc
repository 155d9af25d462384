#include "policies/memory_savers.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace placer {
namespace {

// Device 0 peaks at 140 against a limit of 80: parameters and optimizer
// state 56 (48 of it state: Adam's fp32 master and moments over bf16
// weights, 6/7), gradients 16, activations 50, workspace 18, in a stage of
// 4 replicas (ZeRO shards 3/4). Device 1 is within its limit.
TriedMemory Tried() {
  TriedMemory tried;
  tried.peak_bytes = {140, 500};
  MemoryBreakdown over;
  over.parameters = 56;
  over.gradients = 16;
  over.activations = 50;
  over.workspace = 18;
  MemoryBreakdown under;
  under.parameters = 400;
  tried.parts = {over, under};
  return tried;
}

TEST(MemorySaversTest, EstimatesWhatEachSaverFreesAtThePeak) {
  const TriedMemory tried = Tried();
  const std::vector<int64_t> limits = {80, 600};
  const std::vector<int> replicas = {4, 1};
  const double state = 6.0 / 7.0;
  auto fits = [&](ZeroStage from, ZeroStage zero, bool recompute) {
    return SaversCouldFit(tried, limits, replicas,
                          {from, zero, recompute, state});
  };
  // ZeRO-1: 48 x 3/4 = 36 freed, 104 left; ZeRO-2: (48 + 16) x 3/4 = 48,
  // 92 left; ZeRO-3: (56 + 16) x 3/4 = 54, 86 left: each over 80.
  EXPECT_FALSE(fits(ZeroStage::kNone, ZeroStage::kOptimizerState, false));
  EXPECT_FALSE(fits(ZeroStage::kNone, ZeroStage::kGradients, false));
  EXPECT_FALSE(fits(ZeroStage::kNone, ZeroStage::kParameters, false));
  // Recomputation frees 50 + 18 = 68: 72 left alone, 18 with ZeRO-3.
  EXPECT_TRUE(fits(ZeroStage::kNone, ZeroStage::kNone, true));
  EXPECT_TRUE(fits(ZeroStage::kNone, ZeroStage::kParameters, true));
  // Tried with ZeRO-3 already: ZeRO frees nothing more.
  EXPECT_FALSE(fits(ZeroStage::kParameters, ZeroStage::kParameters, false));
  EXPECT_TRUE(fits(ZeroStage::kParameters, ZeroStage::kParameters, true));
}

TEST(MemorySaversTest, OneReplicaShardsNothingAndNoBreakdownRulesNothingOut) {
  TriedMemory tried = Tried();
  const std::vector<int64_t> limits = {80, 600};
  EXPECT_FALSE(SaversCouldFit(tried, limits, {1, 1},
                              {ZeroStage::kNone, ZeroStage::kParameters,
                               false, 6.0 / 7.0}));
  // 140 - 68 = 72 with recomputation, replicas or not.
  EXPECT_TRUE(SaversCouldFit(tried, limits, {1, 1},
                             {ZeroStage::kNone, ZeroStage::kNone, true, 0}));
  // A limit of 60 leaves the recomputation 12 over.
  EXPECT_FALSE(SaversCouldFit(tried, {60, 600}, {1, 1},
                              {ZeroStage::kNone, ZeroStage::kNone, true, 0}));
  tried.parts.clear();
  EXPECT_TRUE(SaversCouldFit(tried, {60, 600}, {1, 1},
                             {ZeroStage::kNone, ZeroStage::kNone, false, 0}));
}

TEST(MemorySaversTest, ReplicasOfDevicesCountsTensorGroupsAndSlots) {
  Strategy s;
  s.stages = {PipelineStage::OfTensorGroups({{0, 1}, {2, 3}}),
              PipelineStage::OneDevicePerReplica({4})};
  EXPECT_EQ(ReplicasOfDevices(s, 6), (std::vector<int>{2, 2, 2, 2, 1, 0}));
}

TEST(MemorySaversTest, PeakPartsNamesTheWorstDevicesPartsLargestFirst) {
  MemoryBreakdown a;
  a.parameters = 2'000'000'000;
  a.activations = 5'000'000'000;
  MemoryBreakdown b;
  b.gradients = 1'000'000'000;
  EXPECT_EQ(PeakParts({a, b}, {9, 20}, {10, 10}),
            " (accumulated gradients 1.0 GB)");
  EXPECT_EQ(PeakParts({a, b}, {30, 20}, {10, 10}),
            " (activations kept for the backward 5.0 GB, parameters and "
            "optimizer state 2.0 GB)");
  EXPECT_EQ(PeakParts({a, b}, {1, 2}, {10, 10}), "");
}

}  // namespace
}  // namespace placer
