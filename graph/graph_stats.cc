#include "graph/graph_stats.h"

#include <algorithm>
#include <vector>

namespace placer {

std::map<std::string, OpTypeStats> StatsByOpType(const Graph& graph) {
  std::map<std::string, OpTypeStats> stats;
  for (const Op& op : graph.ops()) {
    std::string type = op.domain.empty() || op.domain == "ai.onnx"
                           ? op.op_type
                           : op.domain + "::" + op.op_type;
    OpTypeStats& s = stats[type];
    ++s.count;
    s.flops += op.forward.flops;
  }
  return stats;
}

double LongestPathFlops(const Graph& graph) {
  std::vector<double> finish(graph.ops().size(), 0);
  double best = 0;
  for (int i : graph.topological_order()) {
    const Op& op = graph.op(i);
    double start = 0;
    for (int in : op.inputs) {
      if (in < 0) continue;
      int p = graph.tensor(in).producer;
      if (p >= 0) start = std::max(start, finish[p]);
    }
    finish[i] = start + op.forward.flops;
    best = std::max(best, finish[i]);
  }
  return best;
}

int64_t GraphBatch(const Graph& graph) {
  for (int t : graph.inputs()) {
    const Tensor& input = graph.tensor(t);
    if (input.shape_known && !input.shape.empty()) return input.shape[0];
  }
  return 0;
}

}  // namespace placer
