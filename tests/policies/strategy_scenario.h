// What the strategy search's tests share: a chain of eight MatMuls and a
// scenario (a model's training view on a named cluster, its simulation
// context and the search's input) that searches it.
#ifndef PLACER_TESTS_POLICIES_STRATEGY_SCENARIO_H_
#define PLACER_TESTS_POLICIES_STRATEGY_SCENARIO_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "policies/policy.h"
#include "policies/strategy_search.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/simulation_context.h"
#include "tests/graph/test_models.h"

namespace placer {

// A chain of eight MatMuls [rows, width] x [width, width]: every op has a
// weight of width^2 floats. `biased`: a bias added after the first MatMul
// and after the last, a weight read at both ends that leaves only the cuts
// next to the ends.
inline Graph Chain(int64_t rows, int64_t width, bool biased = false) {
  onnx::ModelProto m = testing::EmptyModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {rows, width});
  if (biased) testing::AddWeight(g, "b", {width});
  std::string in = "x";
  for (int i = 0; i < 8; ++i) {
    const std::string w = "w" + std::to_string(i);
    const std::string out = "y" + std::to_string(i);
    testing::AddWeight(g, w, {width, width});
    testing::AddNode(g, "MatMul", "m" + std::to_string(i), {in, w}, {out});
    in = out;
    if (biased && (i == 0 || i == 7)) {
      testing::AddNode(g, "Add", "bias" + std::to_string(i), {in, "b"},
                       {in + "b"});
      in += "b";
    }
  }
  testing::AddOutput(g, in);
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "chain", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

struct Scenario {
  Scenario(Graph g, const std::string& cluster_name,
           Optimizer optimizer = Optimizer::kMomentum)
      : graph(std::move(g)),
        view(BuildTrainingView(graph, TrainingOptionsFor(optimizer))),
        cluster(*LoadCluster(cluster_name)),
        costs(NewRooflineCostModel()),
        order(NewCriticalPathReadyOrder()),
        context(SimulationContext::Create(view, cluster, *costs, *order)),
        input{view, cluster, *costs, context} {}
  absl::StatusOr<StrategyChoice> Search(
      Parallelism mode, int micro_batches, PolicyOptions options = {},
      const std::string& inside = "", InsidePlacements* kept = nullptr,
      StageRecompute recompute = StageRecompute::kAuto,
      std::optional<ZeroStage> zero = {}, int tensor = 0) {
    StrategySearchOptions search;
    search.recompute = recompute;
    search.zero = zero;
    search.tensor = tensor;
    search.parallelism = mode;
    search.micro_batches = micro_batches;
    search.inside_policy = inside;
    search.inside_placements = kept;
    return SearchStrategy(input, options, search);
  }
  Graph graph;
  TrainingView view;
  Cluster cluster;
  std::unique_ptr<CostModel> costs;
  std::unique_ptr<ReadyOrder> order;
  SimulationContext context;
  PolicyInput input;
};

}  // namespace placer

#endif  // PLACER_TESTS_POLICIES_STRATEGY_SCENARIO_H_
