// MetisGraph: a GroupGraph in METIS's compressed adjacency form, for the
// policies that partition it (metis, and the RL trainer's Grouper prior).
//
// Contract: every neighbour pair of GroupGraph::neighbours appears in both
// directions, weighted by the bytes that cross when the two units are
// apart, scaled by ScaledWeights.
#ifndef PLACER_POLICIES_METIS_GRAPH_H_
#define PLACER_POLICIES_METIS_GRAPH_H_

#include <metis.h>

#include <vector>

#include "policies/group_graph.h"

namespace placer {

// Non-negative values as METIS integer weights in [1, 1e6], in proportion.
std::vector<idx_t> ScaledWeights(const std::vector<double>& values);

struct MetisGraph {
  std::vector<idx_t> xadj{0};  // units + 1 offsets into adjncy
  std::vector<idx_t> adjncy;   // neighbour units
  std::vector<idx_t> adjwgt;   // crossing bytes, scaled
  // For METIS's adjwgt argument (null without edges).
  idx_t* edge_weights() { return adjwgt.empty() ? nullptr : adjwgt.data(); }
};

MetisGraph ToMetisGraph(const GroupGraph& units);

}  // namespace placer

#endif  // PLACER_POLICIES_METIS_GRAPH_H_
