// Resolves a MODEL argument of the CLI: a path to an ONNX file, or
// "zoo:NAME" for a model built by the zoo with the given parameters, which
// "zoo:NAME:batch=8,hidden=256,..." overrides (batch, layers, seq_len,
// hidden, vocab, image_size, seed).
//
// Contract: the returned Graph is fully imported (shapes resolved, costs
// computed); errors name the file or the zoo model.
#ifndef PLACER_PLACER_MODEL_SOURCE_H_
#define PLACER_PLACER_MODEL_SOURCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/onnx_import.h"
#include "zoo/zoo.h"

namespace placer {

struct LoadedModel {
  std::string source;  // as given on the command line
  Graph graph;
  double import_seconds = 0;  // parse + shape inference + costs
};

// `batch` > 0: the graph's batch, over the options', the parameters' and a
// zoo spec's own.
absl::StatusOr<LoadedModel> LoadModel(const std::string& spec,
                                      const ImportOptions& import_options,
                                      const zoo::ZooParams& zoo_params,
                                      int64_t batch = 0);

}  // namespace placer

#endif  // PLACER_PLACER_MODEL_SOURCE_H_
