// The benchmarks' large training view: GNMT-8 unrolled over 220 steps
// (111,230 training-view nodes), with a simulation context on a preset
// cluster and a layer-wise placement (ops in topological order cut into
// one contiguous run per device). Built once per cluster, kept for the
// process.
#ifndef PLACER_BENCHMARKS_LARGE_VIEW_H_
#define PLACER_BENCHMARKS_LARGE_VIEW_H_

#include <map>
#include <memory>
#include <string>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "simulator/simulator.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "zoo/zoo.h"

namespace placer {

struct LargeView {
  Graph graph;
  TrainingView view;
  Cluster cluster;
  std::unique_ptr<CostModel> costs;
  std::unique_ptr<ReadyOrder> order;
  std::unique_ptr<SimulationContext> context;
  Placement layers;
};

inline const LargeView& GetLargeView(const std::string& cluster) {
  static auto* views = new std::map<std::string, LargeView*>;
  LargeView*& s = (*views)[cluster];
  if (s != nullptr) return *s;
  s = new LargeView;
  zoo::ZooParams p;
  p.weights = false;
  p.seq_len = 220;
  s->graph = *ImportOnnxModel(*zoo::BuildZooModel("gnmt8", p), "gnmt8", {});
  s->view = BuildTrainingView(s->graph);
  s->cluster = *LoadCluster(cluster);
  s->costs = NewRooflineCostModel();
  s->order = NewCriticalPathReadyOrder();
  s->context = std::make_unique<SimulationContext>(SimulationContext::Create(
      s->view, s->cluster, *s->costs, *s->order));
  const int n = static_cast<int>(s->graph.ops().size());
  const int devices = s->cluster.num_devices();
  s->layers.device_of_op.resize(n);
  for (int k = 0; k < n; ++k) {
    s->layers.device_of_op[s->graph.topological_order()[k]] = k * devices / n;
  }
  return *s;
}

}  // namespace placer

#endif  // PLACER_BENCHMARKS_LARGE_VIEW_H_
