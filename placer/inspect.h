// The report of `placer inspect`: what a model contains and costs.
//
// Contract: every figure is computed from the imported Graph and its
// TrainingView; nothing is estimated here. Ops whose cost is unknown are
// listed, never hidden in the totals.
#ifndef PLACER_PLACER_INSPECT_H_
#define PLACER_PLACER_INSPECT_H_

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/graph_stats.h"

namespace placer {

struct InspectReport {
  std::string model;
  std::string graph_name;
  int nodes = 0;           // forward ONNX nodes
  int folded_nodes = 0;    // the file's nodes folded to constants at import
  int training_nodes = 0;  // forward + backward + update
  int backward_nodes = 0;
  int update_nodes = 0;
  int64_t parameters = 0;  // elements
  int64_t parameter_bytes = 0;
  double forward_flops = 0;
  double backward_flops = 0;
  double update_flops = 0;
  double training_flops = 0;
  double longest_path_flops = 0;
  int estimated_ops = 0;
  struct UnknownOp {
    std::string key;
    std::string op_type;
    std::string domain;
  };
  std::vector<UnknownOp> unknown_ops;
  // Ops the LibTorch executor has no kernel for (and whose outputs are not
  // folded constants): `run` and `profile` refuse the model before a step.
  std::vector<UnknownOp> unsupported_by_executor;
  std::map<std::string, OpTypeStats> ops_by_type;
  double import_seconds = 0;
};

InspectReport Inspect(const std::string& model, const Graph& graph,
                      double import_seconds);

std::string FormatInspectText(const InspectReport& report);
std::string FormatInspectJson(const InspectReport& report);

}  // namespace placer

#endif  // PLACER_PLACER_INSPECT_H_
