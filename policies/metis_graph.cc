#include "policies/metis_graph.h"

#include <algorithm>
#include <cmath>

namespace placer {

std::vector<idx_t> ScaledWeights(const std::vector<double>& values) {
  double top = 0;
  for (double v : values) top = std::max(top, v);
  std::vector<idx_t> out;
  out.reserve(values.size());
  for (double v : values) {
    out.push_back(top > 0 ? 1 + static_cast<idx_t>(std::llround(v / top * 1e6))
                          : 1);
  }
  return out;
}

MetisGraph ToMetisGraph(const GroupGraph& units) {
  MetisGraph g;
  std::vector<double> bytes;
  for (int u = 0; u < units.num_units(); ++u) {
    for (const GroupEdge& e : units.neighbours(u)) {
      g.adjncy.push_back(e.to);
      bytes.push_back(static_cast<double>(e.bytes));
    }
    g.xadj.push_back(static_cast<idx_t>(g.adjncy.size()));
  }
  g.adjwgt = ScaledWeights(bytes);
  return g;
}

}  // namespace placer
