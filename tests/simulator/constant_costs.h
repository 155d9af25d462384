// Fakes for exact, hand-computed tests of the simulators (FlexFlow's
// style): a cost model of constant costs, a flat cluster, and a fixture
// simulating strategies of a graph with them.
#ifndef PLACER_TESTS_SIMULATOR_CONSTANT_COSTS_H_
#define PLACER_TESTS_SIMULATOR_CONSTANT_COSTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"

namespace placer {

// Forward nodes `forward` s, backward nodes `backward` s, updates
// `update` s; transfers latency + bytes / bandwidth.
class ConstantCosts : public CostModel {
 public:
  ConstantCosts(double forward, double backward, double update, double latency,
                double bandwidth)
      : forward_(forward),
        backward_(backward),
        update_(update),
        latency_(latency),
        bandwidth_(bandwidth) {}
  double NodeSeconds(const TrainingView& view, int node,
                     const Device&) const override {
    switch (view.node(node).kind) {
      case NodeKind::kForward:
        return forward_;
      case NodeKind::kBackward:
        return backward_;
      case NodeKind::kUpdate:
        return update_;
    }
    return 0;
  }
  double TransferSeconds(int64_t bytes, const Cluster&, int,
                         int) const override {
    return latency_ + static_cast<double>(bytes) / bandwidth_;
  }
  bool IsGuess(const TrainingView&, int) const override { return false; }
  double AccumulateSeconds(const TrainingView&, int,
                           const Device&) const override {
    return accumulate_;
  }
  // Per parameter and micro-batch after a replica's first; 0 by default.
  void set_accumulate(double seconds) { accumulate_ = seconds; }
  double PartialAddSeconds(const TrainingView&, int,
                           const Device&) const override {
    return partial_add_;
  }
  // Per partial added into a buffer its device holds; 0 by default.
  void set_partial_add(double seconds) { partial_add_ = seconds; }

 private:
  double forward_, backward_, update_, latency_, bandwidth_;
  double accumulate_ = 0;
  double partial_add_ = 0;
};

// `n` identical GPUs named /d:0.., every link 1 ms + bytes / 1 MB/s
// (ConstantCosts charges its own transfers; this is the cluster's).
inline Cluster FlatCluster(int n) {
  std::string text = "name: \"flat\"\n";
  for (int i = 0; i < n; ++i) {
    text += "devices { name: \"/d:" + std::to_string(i) +
            "\" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e11 "
            "memory_bytes: 1000000000 }\n";
  }
  text += "default_link { latency_seconds: 1e-3 bandwidth: 1e6 }\n";
  absl::StatusOr<Cluster> c = ParseCluster(text, "flat.pbtxt");
  return *std::move(c);
}

// A graph's training view on a flat cluster of `devices` with constant
// costs; Run simulates a strategy (recording its schedule), failing the
// test on an error.
struct ExactFixture {
  ExactFixture(Graph g, const ConstantCosts& c, int devices)
      : graph(std::move(g)),
        view(BuildTrainingView(graph)),
        cluster(FlatCluster(devices)),
        costs(c),
        order(NewCriticalPathReadyOrder()),
        context(SimulationContext::Create(view, cluster, costs, *order)) {}
  StrategySimulation Run(const Strategy& s) {
    SimulationOptions record;
    record.record_schedule = true;
    absl::StatusOr<StrategySimulation> r = SimulateStrategy(context, s, record);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : StrategySimulation{};
  }
  Graph graph;
  TrainingView view;
  Cluster cluster;
  ConstantCosts costs;
  std::unique_ptr<ReadyOrder> order;
  SimulationContext context;
};

}  // namespace placer

#endif  // PLACER_TESTS_SIMULATOR_CONSTANT_COSTS_H_
