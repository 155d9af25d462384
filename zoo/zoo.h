// The benchmark model zoo: C++ builders of the graphs the device-placement
// literature measures on (Inception-V3, ResNet-50, GNMT-style NMT, RNNLM,
// Transformer), the decoder LLMs trained today at their published sizes
// (GPT-3's eight, Llama 2 and 3), plus toy graphs for tests, emitted as
// ONNX ModelProtos.
//
// Contract: BuildZooModel(name, params) is deterministic for equal inputs;
// zero-valued fields of ZooParams take the model's defaults; the result
// passes onnx::checker and imports with every shape resolved. Graphs end in
// a loss (SoftmaxCrossEntropyLoss against int64 labels) where the model is
// a classifier or sequence model, so the training view starts from it.
#ifndef PLACER_ZOO_ZOO_H_
#define PLACER_ZOO_ZOO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "onnx/onnx_pb.h"

namespace placer::zoo {

struct ZooParams {
  int64_t batch_size = 0;
  int64_t layers = 0;   // recurrent/transformer layers or toy width/depth
  int64_t seq_len = 0;  // unrolled time steps / sequence length
  int64_t hidden = 0;   // hidden size / model width
  int64_t vocab = 0;    // vocabulary size
  int64_t image_size = 0;
  // Decoders (gpt, llama): attention heads, key/value heads (grouped-query
  // attention when fewer), and the MLP's inner width.
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t ffn = 0;
  uint64_t seed = 1;
  bool weights = true;  // false: external-data initializers, no bytes
};

struct ZooModel {
  std::string name;
  std::string description;
  ZooParams defaults;
  onnx::ModelProto (*build)(const ZooParams& params);
  // A published size of a family (gpt3_175b, llama3_8b, ...): the same
  // builder as the family's own entry (gpt, llama) at other defaults, so
  // checks that exercise every builder may skip it.
  bool published_size = false;
};

const std::vector<ZooModel>& ZooModels();

// What a zoo model may cost before it is built, so that sizes from a
// command line or a service request cannot exhaust memory: the forward ops
// (estimated exactly by EstimateZooOps, before anything large is
// allocated) and the weight bytes generated when params.weights is set
// (counted from a build without weights).
struct ZooLimits {
  int64_t max_ops = 2'000'000;
  int64_t max_weight_bytes = int64_t{8} << 30;
};

// Fills zero fields of `params` from the model's defaults and builds it;
// ResourceExhausted, naming the estimate and the limit, when it would pass
// `limits`.
absl::StatusOr<onnx::ModelProto> BuildZooModel(absl::string_view name,
                                               const ZooParams& params,
                                               const ZooLimits& limits = {});

// The number of forward ops (ONNX nodes) BuildZooModel would make, without
// building it: every builder's node count is bilinear in (layers,
// seq_len), so four tiny builds (hidden, vocab and batch shrunk, no
// weights) fix its coefficients. Saturates instead of overflowing.
absl::StatusOr<int64_t> EstimateZooOps(absl::string_view name,
                                       const ZooParams& params);

// The parameters BuildZooModel would use.
absl::StatusOr<ZooParams> ResolveZooParams(absl::string_view name,
                                           const ZooParams& params);

// Builders (exposed for tests).
onnx::ModelProto BuildInceptionV3(const ZooParams& p);
onnx::ModelProto BuildResNet50(const ZooParams& p);
onnx::ModelProto BuildGnmt(const ZooParams& p);
onnx::ModelProto BuildRnnlm(const ZooParams& p);
onnx::ModelProto BuildTransformer(const ZooParams& p);
onnx::ModelProto BuildGpt(const ZooParams& p);
onnx::ModelProto BuildLlama(const ZooParams& p);
onnx::ModelProto BuildChain(const ZooParams& p);
onnx::ModelProto BuildDiamond(const ZooParams& p);
onnx::ModelProto BuildWide(const ZooParams& p);

}  // namespace placer::zoo

#endif  // PLACER_ZOO_ZOO_H_
