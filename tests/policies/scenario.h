// Scenario: a small zoo model imported, its training view, a preset
// cluster and the simulation context policies take, kept together so a
// test can hand out the PolicyInput that refers to them.
//
// Contract: not copyable or movable (the input refers to the members);
// construction fails the test process on a bad model or preset name.
#ifndef PLACER_TESTS_POLICIES_SCENARIO_H_
#define PLACER_TESTS_POLICIES_SCENARIO_H_

#include <memory>
#include <string>
#include <utility>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "simulator/simulator.h"
#include "policies/policy.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "zoo/zoo.h"

namespace placer {

struct Scenario {
  Graph graph;
  TrainingView view;
  Cluster cluster;
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  std::unique_ptr<SimulationContext> sim;

  Scenario(const std::string& model, const std::string& preset,
           zoo::ZooParams p = Small())
      : Scenario(ImportZoo(model, p), preset) {}
  // An imported graph (a file of tests/fixtures/corpus, say) on a preset.
  Scenario(Graph imported, const std::string& preset)
      : graph(std::move(imported)) {
    view = BuildTrainingView(graph);
    cluster = *LoadCluster(preset);
    sim = std::make_unique<SimulationContext>(
        SimulationContext::Create(view, cluster, *costs, *order));
    input_ = std::make_unique<PolicyInput>(
        PolicyInput{view, cluster, *costs, *sim});
  }
  Scenario(const Scenario&) = delete;
  Scenario& operator=(const Scenario&) = delete;

  // Batch 8, sequence 4, hidden 64, vocabulary 100, 64-pixel images.
  static zoo::ZooParams Small() {
    zoo::ZooParams p;
    p.batch_size = 8;
    p.seq_len = 4;
    p.hidden = 64;
    p.vocab = 100;
    p.image_size = 64;
    p.heads = 4;  // decoders: 4 heads of 16, as many key/value heads
    p.kv_heads = 4;
    p.ffn = 128;
    return p;
  }
  const PolicyInput& input() const { return *input_; }

  // The simulated peak of the whole model on device 0.
  int64_t single_device_peak_bytes() const {
    return Simulate(*sim,
                    Placement{std::vector<int>(graph.ops().size(), 0)})
        ->peak_memory_bytes[0];
  }

 private:
  static Graph ImportZoo(const std::string& model, zoo::ZooParams p) {
    p.weights = false;
    return *ImportOnnxModel(*zoo::BuildZooModel(model, p), model, {});
  }

  std::unique_ptr<PolicyInput> input_;
};

}  // namespace placer

#endif  // PLACER_TESTS_POLICIES_SCENARIO_H_
