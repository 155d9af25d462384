#include "placer/model_source.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "onnx/onnx_pb.h"

namespace placer {
namespace {

// "NAME:batch=8,hidden=256" -> NAME, with the sizes set in `params`.
absl::StatusOr<std::string> ZooOverrides(const std::string& spec,
                                         zoo::ZooParams* params) {
  std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 1));
  if (parts.size() == 1) return parts[0];
  for (absl::string_view item : absl::StrSplit(parts[1], ',')) {
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    int64_t value = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &value) || value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zoo:", spec, ": '", item, "' is not SIZE=POSITIVE_INTEGER"));
    }
    const std::string& key = kv[0];
    if (key == "batch") {
      params->batch_size = value;
    } else if (key == "layers") {
      params->layers = value;
    } else if (key == "seq_len" || key == "seq-len") {
      params->seq_len = value;
    } else if (key == "hidden") {
      params->hidden = value;
    } else if (key == "vocab") {
      params->vocab = value;
    } else if (key == "image_size" || key == "image-size") {
      params->image_size = value;
    } else if (key == "heads") {
      params->heads = value;
    } else if (key == "kv_heads" || key == "kv-heads") {
      params->kv_heads = value;
    } else if (key == "ffn") {
      params->ffn = value;
    } else if (key == "seed") {
      params->seed = static_cast<uint64_t>(value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "zoo:", spec, ": unknown size '", key,
          "' (batch, layers, seq_len, hidden, vocab, image_size, heads, "
          "kv_heads, ffn, seed)"));
    }
  }
  return parts[0];
}

}  // namespace

absl::StatusOr<LoadedModel> LoadModel(const std::string& spec,
                                      const ImportOptions& import_options,
                                      const zoo::ZooParams& zoo_params,
                                      int64_t batch) {
  using Clock = SteadyClock;
  LoadedModel loaded;
  loaded.source = spec;
  absl::StatusOr<Graph> graph;
  Clock::time_point start;
  if (absl::StartsWith(spec, "zoo:")) {
    zoo::ZooParams params = zoo_params;
    ASSIGN_OR_RETURN(std::string name, ZooOverrides(spec.substr(4), &params));
    if (batch > 0) params.batch_size = batch;
    zoo::ZooLimits limits;
    if (import_options.max_ops > 0) limits.max_ops = import_options.max_ops;
    ASSIGN_OR_RETURN(onnx::ModelProto model,
                     zoo::BuildZooModel(name, params, limits));
    start = Clock::now();
    // The zoo built the model at params.batch_size already.
    ImportOptions zoo_import = import_options;
    zoo_import.batch_size.reset();
    graph = ImportOnnxModel(std::move(model), spec, zoo_import);
  } else {
    start = Clock::now();
    ImportOptions file_import = import_options;
    if (batch > 0) file_import.batch_size = batch;
    graph = ImportOnnxFile(spec, file_import);
  }
  if (!graph.ok()) return graph.status();
  loaded.import_seconds = SecondsSince(start);
  loaded.graph = std::move(*graph);
  return loaded;
}

}  // namespace placer
