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

// METIS_PartGraphKway of `graph` into `nparts` with `ncon` constraints
// (vwgt: ncon weights per vertex; tpwgts: ncon target shares per part;
// ubvec: ncon tolerances); fills `part` (one per vertex) and returns
// METIS's status. METIS prints some diagnostics with printf (e.g. when a
// recursive bisection leaves one side empty, as one heavy unit among light
// ones does); they go to stderr, so that stdout stays the caller's (a
// `--json` report). Calls are serialized process-wide while stdout's
// descriptor points at stderr; other threads' stdout writes in that window
// go to stderr too.
int PartGraphKway(MetisGraph& graph, idx_t ncon, std::vector<idx_t>& vwgt,
                  idx_t nparts, std::vector<real_t>& tpwgts,
                  std::vector<real_t>& ubvec, idx_t* options,
                  std::vector<idx_t>* part);

}  // namespace placer

#endif  // PLACER_POLICIES_METIS_GRAPH_H_
