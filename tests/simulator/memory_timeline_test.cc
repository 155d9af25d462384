// The memory timeline's rules on hand-computed cases beyond an op
// placement's plain step (tests/simulator/simulator_test.cc has those).
#include "simulator/memory_timeline.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "simulator/simulator.h"
#include "tests/simulator/constant_costs.h"
#include "tests/simulator/four_matmul_chain.h"

namespace placer {
namespace {

// The four-MatMul chain on one device (forwards 1 s, backwards 2 s,
// updates 0.5 s; every tensor 64 bytes). Weights and momentum 512 and x 64
// from the start; the forward makes a, b, c and d (d, read by no one, is
// freed): 832. grad:D makes dW4 and dc (896) and frees c (832); grad:C
// makes dW3 and db: 960, the peak, at 6 s. With gradients in two shards
// (ZeRO-2/3 over two replicas), dW4 is complete once grad:D ends and
// keeps its half from then (800), so grad:C's start peaks at 928; when
// the backward ends (12 s) the device holds four halves, 640 (768
// whole), until the updates free them. As a later micro-batch, its
// accumulators are the four halves.
TEST(MemoryTimelineTest, ShardedGradientsKeepTheirShardOnceComplete) {
  testing::ChainFixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  Placement p;
  p.device_of_op.assign(4, 0);
  auto run = [&](int shards, bool later) {
    SimulationOptions options;
    options.record_schedule = true;
    options.gradient_shards = shards;
    options.later_micro_batch = later;
    absl::StatusOr<SimulationResult> r = Simulate(f.context, p, options);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : SimulationResult{};
  };
  // What the device holds when the last backward ends, before the updates.
  auto at_backward_end = [](const SimulationResult& r) {
    int64_t bytes = -1;
    for (const MemorySample& m : r.memory) {
      if (m.seconds <= 12) bytes = m.bytes;
    }
    return bytes;
  };
  const SimulationResult whole = run(1, false);
  const SimulationResult halves = run(2, false);
  EXPECT_EQ(whole.peak_memory_bytes[0], 960);
  EXPECT_EQ(halves.peak_memory_bytes[0], 928);
  EXPECT_NEAR(whole.peak_moments[0].seconds, 6, 1e-12);
  EXPECT_NEAR(halves.peak_moments[0].seconds, 6, 1e-12);
  EXPECT_EQ(at_backward_end(whole), 768);
  EXPECT_EQ(at_backward_end(halves), 640);
  EXPECT_EQ(whole.step_seconds, halves.step_seconds);
  EXPECT_EQ(run(1, true).accumulator_bytes[0], 256);
  EXPECT_EQ(run(2, true).accumulator_bytes[0], 128);
}

// Rebuilds (recomputation in part) on the same chain: b, read forward by C
// and backward by grad:C (for dW3), made again as grad:C starts. The
// forward lets it go once C ends, so it peaks at 768 (the weights and
// momentum 512 with x, a, b and c as C runs; with x, a, c and d as D
// runs), where keeping b it peaked at 832 as D ran; grad:C's start holds
// b again, so the step's peak is the same 960, at the same moment.
TEST(MemoryTimelineTest, ARebuiltValueIsLetGoAfterTheForwardAndMadeAgain) {
  testing::ChainFixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  const TrainingView& view = f.view;
  auto node = [&](const std::string& key) {
    for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
      if (view.node(n).key == key) return n;
    }
    return -1;
  };
  Rebuilds rebuilds;
  rebuilds.value_at.assign(view.values().size(), -1);
  rebuilds.held_until.assign(view.values().size(), -1);
  rebuilds.workspace_at.assign(view.nodes().size(), -1);
  const int c_node = node("C");
  ASSERT_GE(c_node, 0);
  ASSERT_GE(node("grad:C"), 0);
  const int b = view.node(c_node).inputs[0];
  ASSERT_EQ(view.value(b).name, "b");
  rebuilds.value_at[b] = node("grad:C");
  Placement p;
  p.device_of_op.assign(4, 0);
  SimulationOptions options;
  absl::StatusOr<SimulationResult> kept = Simulate(f.context, p, options);
  ASSERT_TRUE(kept.ok()) << kept.status();
  options.rebuilds = &rebuilds;
  absl::StatusOr<SimulationResult> rebuilt = Simulate(f.context, p, options);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(kept->forward_peak_memory_bytes[0], 832);
  EXPECT_EQ(rebuilt->forward_peak_memory_bytes[0], 768);
  EXPECT_EQ(kept->peak_memory_bytes[0], 960);
  EXPECT_EQ(rebuilt->peak_memory_bytes[0], 960);
  EXPECT_NEAR(rebuilt->peak_moments[0].seconds, 6, 1e-12);
}

}  // namespace
}  // namespace placer
