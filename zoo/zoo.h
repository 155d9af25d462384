// The benchmark model zoo: C++ builders of the graphs the device-placement
// literature measures on (Inception-V3, ResNet-50, GNMT-style NMT, RNNLM,
// Transformer) plus toy graphs for tests, emitted as ONNX ModelProtos.
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
  uint64_t seed = 1;
  bool weights = true;  // false: external-data initializers, no bytes
};

struct ZooModel {
  std::string name;
  std::string description;
  ZooParams defaults;
  onnx::ModelProto (*build)(const ZooParams& params);
};

const std::vector<ZooModel>& ZooModels();

// Fills zero fields of `params` from the model's defaults and builds it.
absl::StatusOr<onnx::ModelProto> BuildZooModel(absl::string_view name,
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
onnx::ModelProto BuildChain(const ZooParams& p);
onnx::ModelProto BuildDiamond(const ZooParams& p);
onnx::ModelProto BuildWide(const ZooParams& p);

}  // namespace placer::zoo

#endif  // PLACER_ZOO_ZOO_H_
