// Every policy on small models and clusters: valid placements (every op on
// a device, pins kept, memory within limits), clear infeasibility errors,
// determinism.
#include "policies/policy.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

using ::testing::HasSubstr;

struct Scenario {
  Graph graph;
  TrainingView view;
  Cluster cluster;
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  std::unique_ptr<SimulationContext> sim;

  Scenario(const std::string& model, const std::string& preset,
        zoo::ZooParams p = Small()) {
    p.weights = false;
    graph = *ImportOnnxModel(*zoo::BuildZooModel(model, p), model, {});
    view = BuildTrainingView(graph);
    cluster = *LoadCluster(preset);
    sim = std::make_unique<SimulationContext>(
        SimulationContext::Create(view, cluster, *costs, *order));
  }
  static zoo::ZooParams Small() {
    zoo::ZooParams p;
    p.batch_size = 8;
    p.seq_len = 4;
    p.hidden = 64;
    p.vocab = 100;
    p.image_size = 64;
    return p;
  }
  PolicyInput input() const { return {view, cluster, *costs, *sim}; }
};

PolicyOptions Quick() {
  PolicyOptions o;
  o.budget_seconds = 60;
  o.max_evaluations = 40;  // machine-independent stopping point
  return o;
}

TEST(PoliciesTest, EveryPolicyPlacesValidly) {
  for (const auto& [model, preset] :
       std::vector<std::pair<std::string, std::string>>{
           {"gnmt2", "p100x4"}, {"transformer_big", "v100x4"},
           {"resnet50", "cpu1_gpu2"}, {"wide", "cpu2"}}) {
    Scenario s(model, preset);
    for (const PolicyInfo& info : Policies()) {
      SCOPED_TRACE(model + " on " + preset + " by " + info.name);
      absl::StatusOr<Placement> p = info.make()->Place(s.input(), Quick());
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_EQ(p->device_of_op.size(), s.graph.ops().size());
      for (int d : p->device_of_op) {
        EXPECT_GE(d, 0);
        EXPECT_LT(d, s.cluster.num_devices());
      }
      absl::StatusOr<SimulationResult> r =
          CheckPlacement(s.input(), Quick(), *p);
      EXPECT_TRUE(r.ok()) << r.status();
    }
  }
}

TEST(PoliciesTest, PinnedOpsStayPut) {
  Scenario s("gnmt2", "p100x4");
  PolicyOptions o = Quick();
  int first = s.graph.topological_order().front();
  int last = s.graph.topological_order().back();
  o.pinned = {{first, 3}, {last, 2}};
  for (const PolicyInfo& info : Policies()) {
    SCOPED_TRACE(info.name);
    absl::StatusOr<Placement> p = info.make()->Place(s.input(), o);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->device_of_op[first], 3);
    EXPECT_EQ(p->device_of_op[last], 2);
  }
}

TEST(PoliciesTest, SameSeedSamePlacement) {
  Scenario s("gnmt2", "p100x4");
  for (const PolicyInfo& info : Policies()) {
    SCOPED_TRACE(info.name);
    absl::StatusOr<Placement> a = info.make()->Place(s.input(), Quick());
    absl::StatusOr<Placement> b = info.make()->Place(s.input(), Quick());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->device_of_op, b->device_of_op);
  }
}

// A stop request ends a search early with the best placement so far;
// progress reports never get worse and count evaluations up.
TEST(PoliciesTest, SearchesStopOnRequestAndReportProgress) {
  Scenario s("gnmt2", "p100x4");
  for (const std::string name : {"local_search", "best"}) {
    SCOPED_TRACE(name);
    PolicyOptions o;
    o.max_evaluations = 0;
    o.budget_seconds = 600;  // only the stop request ends it
    std::vector<SearchProgress> seen;
    o.on_progress = [&](const SearchProgress& p) { seen.push_back(p); };
    o.progress_interval_seconds = 0;
    int64_t checks = 0;
    o.should_stop = [&] { return ++checks > 30; };
    absl::StatusOr<Placement> p = (*NewPolicy(name))->Place(s.input(), o);
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<SimulationResult> r = CheckPlacement(s.input(), o, *p);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_FALSE(seen.empty());
    for (size_t k = 1; k < seen.size(); ++k) {
      EXPECT_GE(seen[k].evaluations, seen[k - 1].evaluations);
      if (seen[k - 1].best_step_seconds > 0) {
        EXPECT_LE(seen[k].best_step_seconds, seen[k - 1].best_step_seconds);
      }
    }
    EXPECT_NEAR(seen.back().best_step_seconds, r->step_seconds,
                1e-9 * r->step_seconds);
    EXPECT_LE(seen.back().evaluations, 40);
  }
}

// Limits that one device cannot meet but four can: single fails with the
// device and the overflow; the portfolio spreads the model within limits.
TEST(PoliciesTest, MemoryTightClusterForcesSpreading) {
  Scenario s("gnmt2", "p100x4");
  PolicyInput in = s.input();
  absl::StatusOr<SimulationResult> one = Simulate(
      *s.sim, Placement{std::vector<int>(s.graph.ops().size(), 0)});
  ASSERT_TRUE(one.ok());
  PolicyOptions o = Quick();
  o.memory_limit_bytes.assign(4, one->peak_memory_bytes[0] * 6 / 10);
  absl::StatusOr<Placement> single = NewPolicy("single").value()->Place(in, o);
  ASSERT_FALSE(single.ok());
  EXPECT_EQ(single.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(single.status().message(), HasSubstr("/gpu:0 needs"));
  EXPECT_THAT(single.status().message(), HasSubstr("over its limit"));
  absl::StatusOr<Placement> best = NewPolicy("best").value()->Place(in, o);
  ASSERT_TRUE(best.ok()) << best.status();
  absl::StatusOr<SimulationResult> r = CheckPlacement(in, o, *best);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<int> used(best->device_of_op.begin(), best->device_of_op.end());
  EXPECT_GE(used.size(), 2u);
}

TEST(PoliciesTest, ImpossibleLimitsAreClearErrors) {
  Scenario s("chain", "cpu2", [] {
    zoo::ZooParams p;
    p.batch_size = 4;
    p.hidden = 16;
    return p;
  }());
  PolicyOptions o = Quick();
  o.memory_limit_bytes = {100, 100};
  for (const PolicyInfo& info : Policies()) {
    SCOPED_TRACE(info.name);
    absl::StatusOr<Placement> p = info.make()->Place(s.input(), o);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted)
        << p.status();
  }
  EXPECT_THAT(NewPolicy("nope").status().message(),
              HasSubstr("unknown policy 'nope'"));
}

// On an unrolled NMT model the critical-path heuristic beats hashing, and
// the portfolio is never worse than any of its members.
TEST(PoliciesTest, QualityOrderingOnGnmt) {
  Scenario s("gnmt2", "p100x4");
  std::map<std::string, double> step;
  for (const PolicyInfo& info : Policies()) {
    absl::StatusOr<Placement> p = info.make()->Place(s.input(), Quick());
    ASSERT_TRUE(p.ok()) << info.name << ": " << p.status();
    step[info.name] = Simulate(*s.sim, *p)->step_seconds;
  }
  EXPECT_LT(step["critical_path"], step["hash"]);
  for (const auto& [name, seconds] : step) {
    EXPECT_LE(step["best"], seconds) << name;
  }
}

}  // namespace
}  // namespace placer
