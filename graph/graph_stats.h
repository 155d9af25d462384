// Summaries of a Graph used by reports: op counts and FLOPs by op type, and
// the longest path measured in FLOPs.
#ifndef PLACER_GRAPH_GRAPH_STATS_H_
#define PLACER_GRAPH_GRAPH_STATS_H_

#include <cstdint>
#include <map>
#include <string>

#include "graph/graph.h"

namespace placer {

struct OpTypeStats {
  int count = 0;
  double flops = 0;
};

// Keyed by "domain::type" for non-default domains, else the op type.
std::map<std::string, OpTypeStats> StatsByOpType(const Graph& graph);

// The largest sum of forward FLOPs along any path of the forward graph.
double LongestPathFlops(const Graph& graph);

// The graph's batch: the first dim of its first graph input whose shape is
// known and has a dim (a step's micro-batch, as the strategies run it);
// 0 when no input has one.
int64_t GraphBatch(const Graph& graph);

}  // namespace placer

#endif  // PLACER_GRAPH_GRAPH_STATS_H_
