// Internal to graph/: per op type, what an op needs of its inputs and
// gives its outputs when a tensor-parallel group splits it
// (graph/tensor_sharding.h's rules).
#ifndef PLACER_GRAPH_SHARDING_RULES_H_
#define PLACER_GRAPH_SHARDING_RULES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor_sharding.h"

namespace placer {

// What an op running in some sharding needs of one input.
struct InputNeed {
  bool any = false;  // reads no data (Shape): whatever layout it has
  TensorLayout layout;
  bool gradient_partial = false;  // the op makes its gradient partial
};

struct OpRule {
  std::vector<InputNeed> inputs;         // per op input
  std::vector<TensorLayout> outputs;     // per op output
  int64_t internal_allreduce_bytes = 0;  // forward, twice (max and sum)
};

// Op `op` of `graph` run as `mode` over `devices` devices: what it needs
// and gives, or nullopt when its type has no such rule or a dim it would
// split does not divide by `devices`. Replicated always has a rule.
std::optional<OpRule> ShardingRule(const Graph& graph, int op,
                                   const OpSharding& mode, int devices);

}  // namespace placer

#endif  // PLACER_GRAPH_SHARDING_RULES_H_
