// What the strategy executor's tests share: a plan run for kSteps steps
// (losses and replica 0's parameters; every replica checked to hold the
// same), two such runs compared, one device's plan, the search's plan and
// the zoo's small decoders.
#ifndef PLACER_TESTS_RUNTIME_STRATEGY_RUNS_H_
#define PLACER_TESTS_RUNTIME_STRATEGY_RUNS_H_

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "policies/strategy_search.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "runtime/strategy_executor.h"
#include "simulator/simulation_context.h"
#include "simulator/strategy.h"
#include "zoo/zoo.h"

namespace placer {

constexpr int kSteps = 4;

struct Trajectory {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> parameters;  // replica 0's
};

inline std::vector<std::string> ParameterNames(const TrainingView& view) {
  std::vector<std::string> names;
  for (const TrainingValue& v : view.values()) {
    if (v.kind == ValueKind::kParameter) names.push_back(v.name);
  }
  return names;
}

inline Trajectory RunStrategy(const TrainingView& view, const Cluster& cluster,
                              const Strategy& strategy, int steps = kSteps) {
  Trajectory run;
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(view, cluster, strategy);
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return run;
  for (int s = 0; s < steps; ++s) {
    absl::StatusOr<StepReport> r = (*e)->Step();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.losses.push_back(r->loss);
  }
  for (const std::string& name : ParameterNames(view)) {
    absl::StatusOr<torch::Tensor> t = (*e)->Parameter(name);
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) run.parameters[name] = *t;
  }
  // Every replica holds the same parameters.
  for (const PipelineStage& stage : strategy.stages) {
    for (int k = 1; k < stage.num_replicas(); ++k) {
      for (const std::string& name : ParameterNames(view)) {
        absl::StatusOr<torch::Tensor> t = (*e)->Parameter(name, k);
        if (!t.ok()) continue;  // another stage's
        EXPECT_TRUE(torch::equal(*t, run.parameters[name])) << name;
      }
    }
  }
  return run;
}

inline void ExpectSame(const Trajectory& a, const Trajectory& b, double tolerance) {
  ASSERT_GE(a.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.losses.size(), a.losses.size());
  for (size_t s = 0; s < a.losses.size(); ++s) {
    EXPECT_NEAR(a.losses[s], b.losses[s],
                tolerance * std::max(1.0, std::abs(a.losses[s])))
        << "step " << s + 1;
  }
  EXPECT_NE(a.losses.front(), a.losses.back());  // training moved
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  for (const auto& [name, t] : a.parameters) {
    auto it = b.parameters.find(name);
    ASSERT_NE(it, b.parameters.end()) << name;
    EXPECT_TRUE(torch::allclose(t, it->second, tolerance, tolerance))
        << name << ": max difference "
        << (t - it->second).abs().max().item<double>();
  }
}

inline Strategy OneDevice(const TrainingView& view, int micro_batches) {
  Strategy s;
  s.stage_of_op.assign(view.num_groups(), 0);
  s.stages = {PipelineStage::OneDevicePerReplica({0})};
  s.micro_batches = micro_batches;
  s.schedule = PipelineSchedule::k1F1B;
  return s;
}

// What the search makes on `cluster`.
inline absl::StatusOr<Strategy> Searched(const TrainingView& view,
                                  const Cluster& cluster, Parallelism mode,
                                  int micro_batches) {
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(view, cluster, *costs, *order);
  PolicyInput input{view, cluster, *costs, context};
  StrategySearchOptions search;
  search.parallelism = mode;
  search.micro_batches = micro_batches;
  absl::StatusOr<StrategyChoice> choice = SearchStrategy(input, {}, search);
  if (!choice.ok()) return choice.status();
  return choice->strategy;
}

// The zoo's GPT- or Llama-style decoder (`name`: gpt, llama) of 2 layers,
// width 64, 4 heads (Llama: 2 key/value heads), batch 2, `seq_len` tokens.
inline absl::StatusOr<Graph> SmallDecoder(const std::string& name,
                                          int seq_len) {
  zoo::ZooParams p;
  p.layers = 2;
  p.hidden = 64;
  p.heads = 4;
  p.kv_heads = name == "llama" ? 2 : 4;
  p.ffn = 128;
  p.seq_len = seq_len;
  p.vocab = 64;
  p.batch_size = 2;
  absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel(name, p);
  if (!m.ok()) return m.status();
  return ImportOnnxModel(*m, name, {});
}

}  // namespace placer

#endif  // PLACER_TESTS_RUNTIME_STRATEGY_RUNS_H_
