// The ONNX op types the LibTorch executor has a kernel for, without
// LibTorch: commands that do not link it (`placer inspect`) list what a
// model would need before anyone tries to run it.
//
// Contract: ExecutorOpTypes() is exactly the set of op types in
// runtime/torch_ops.cc's kernel registry (tests/runtime/torch_ops_test.cc
// checks both ways). Shape arithmetic of other types is not an op once
// imported: the importer folds it to constants (graph.h).
#ifndef PLACER_RUNTIME_EXECUTOR_OPS_H_
#define PLACER_RUNTIME_EXECUTOR_OPS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace placer {

// Sorted op types of the default ONNX domain.
const std::vector<std::string>& ExecutorOpTypes();

// Whether the executor has a kernel for ops of `op_type` in `domain`.
bool ExecutorHasKernel(absl::string_view domain, absl::string_view op_type);

// Whether running `op` of `graph` again may give other values: it draws
// random numbers (Dropout given a training_mode input, unless that input
// is a constant false or its ratio a constant 0; the Random* generators;
// Bernoulli, Multinomial). The executor keeps no random state per
// micro-batch to replay.
bool DrawsRandomNumbers(const Graph& graph, const Op& op);

// Ops of `graph` the executor cannot run, by key, in graph order.
std::vector<int> OpsUnsupportedByExecutor(const Graph& graph);

}  // namespace placer

#endif  // PLACER_RUNTIME_EXECUTOR_OPS_H_
