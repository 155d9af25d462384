#include "placer/model_source.h"

#include <chrono>

#include "absl/strings/match.h"
#include "onnx/onnx_pb.h"

namespace placer {

absl::StatusOr<LoadedModel> LoadModel(const std::string& spec,
                                      const ImportOptions& import_options,
                                      const zoo::ZooParams& zoo_params) {
  using Clock = std::chrono::steady_clock;
  LoadedModel loaded;
  loaded.source = spec;
  absl::StatusOr<Graph> graph;
  Clock::time_point start;
  if (absl::StartsWith(spec, "zoo:")) {
    absl::StatusOr<onnx::ModelProto> model =
        zoo::BuildZooModel(spec.substr(4), zoo_params);
    if (!model.ok()) return model.status();
    start = Clock::now();
    graph = ImportOnnxModel(std::move(*model), spec, import_options);
  } else {
    start = Clock::now();
    graph = ImportOnnxFile(spec, import_options);
  }
  if (!graph.ok()) return graph.status();
  loaded.import_seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  loaded.graph = std::move(*graph);
  return loaded;
}

}  // namespace placer
