// ONNX bytes in (files and service requests arrive this way): import with
// shape inference and folding, the cost pass, the training view.
#include <string>

#include "fuzz/fuzz_target.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  placer::ImportOptions options;
  options.max_ops = 20000;  // as a service would bound it
  options.weights_optional = true;
  absl::StatusOr<placer::Graph> graph = placer::ImportOnnxBytes(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx",
      options);
  if (graph.ok()) {
    placer::TrainingView view = placer::BuildTrainingView(*graph);
    (void)view.training_flops();
  }
  return 0;
}
