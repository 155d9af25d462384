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

// The view's node with `key`; -1 if none.
int NodeByKey(const TrainingView& view, const std::string& key) {
  for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
    if (view.node(n).key == key) return n;
  }
  return -1;
}

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
  auto node = [&](const std::string& key) { return NodeByKey(view, key); };
  Rebuilds rebuilds;
  rebuilds.value_at.assign(view.values().size(), -1);
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

// Holds (what a rerun reads, held until the rerun) are per device: the
// chain split after B (A and B on device 0, C and D on device 1), b made
// on device 0 and copied to device 1, where C and grad:C read it. Device
// 0 holds w1 and w2 with their momentum (256) and x (64); the forward
// makes a and b (448) and lets b go once copied (384); db arrives (448)
// and grad:B makes dW2 and da: 576, its peak. Held on device 0 until
// grad:B ends, b is there too: 640. A hold until grad:C (on device 1,
// which keeps b for grad:C anyway) moves neither device; with both, each
// device keeps its own.
TEST(MemoryTimelineTest, HoldsAreKeptOnEachDeviceTheyName) {
  testing::ChainFixture f(ConstantCosts(1, 2, 0.5, 1e-3, 1e6));
  const TrainingView& view = f.view;
  auto node = [&](const std::string& key) { return NodeByKey(view, key); };
  Placement p;
  p.device_of_op = {0, 0, 1, 1};
  const int c_node = node("C");
  ASSERT_GE(c_node, 0);
  const int b = view.node(c_node).inputs[0];
  ASSERT_EQ(view.value(b).name, "b");
  auto peaks = [&](const std::vector<Rebuilds::Hold>& holds) {
    Rebuilds rebuilds;
    rebuilds.value_at.assign(view.values().size(), -1);
    rebuilds.workspace_at.assign(view.nodes().size(), -1);
    rebuilds.holds = holds;
    SimulationOptions options;
    options.rebuilds = &rebuilds;
    absl::StatusOr<SimulationResult> r = Simulate(f.context, p, options);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->peak_memory_bytes : std::vector<int64_t>{};
  };
  const std::vector<int64_t> none = peaks({});
  const std::vector<int64_t> on_zero = peaks({{b, node("grad:B")}});
  const std::vector<int64_t> on_one = peaks({{b, node("grad:C")}});
  const std::vector<int64_t> both =
      peaks({{b, node("grad:C")}, {b, node("grad:B")}});
  ASSERT_EQ(none.size(), 4u);  // the fixture's devices; 2 and 3 idle
  EXPECT_EQ(none[0], 576);
  EXPECT_EQ(on_zero[0], 640);
  EXPECT_EQ(on_zero[1], none[1]);
  EXPECT_EQ(on_one, none);
  EXPECT_EQ(both, on_zero);
}

}  // namespace
}  // namespace placer
