// Imports the files PyTorch's ONNX exporter wrote (see
// tests/fixtures/export_torch_models.py): node counts must match the file,
// every shape must resolve, no op may be unknown, and a training step must
// cost about three forward passes.
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "onnx/onnx_pb.h"

namespace placer {
namespace {

onnx::ModelProto ReadModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(buffer.str())) << path;
  return m;
}

void ExpectFullyImported(const Graph& g, const onnx::ModelProto& file) {
  EXPECT_EQ(g.ops().size() + g.folded_op_keys().size(),
            static_cast<size_t>(file.graph().node_size()));
  EXPECT_TRUE(g.unknown_cost_ops().empty());
  for (const Tensor& t : g.tensors()) {
    EXPECT_TRUE(t.shape_known) << t.name;
  }
  TrainingView view = BuildTrainingView(g);
  double ratio = view.training_flops() / g.forward_flops();
  EXPECT_GT(ratio, 2.8);
  EXPECT_LT(ratio, 3.1);
  EXPECT_EQ(view.unknown_cost_nodes(), 0);
}

TEST(TorchFixturesTest, ResNet50) {
  const std::string path = "tests/fixtures/resnet50.onnx";
  absl::StatusOr<Graph> g = ImportOnnxFile(path, {});
  ASSERT_TRUE(g.ok()) << g.status();
  onnx::ModelProto file = ReadModel(path);
  ExpectFullyImported(*g, file);
  // Parameters: every float initializer PyTorch wrote (BN is folded into
  // the convolutions by the exporter in eval mode).
  int64_t bytes = 0;
  for (const auto& init : file.graph().initializer()) {
    if (init.data_type() != onnx::TensorProto::FLOAT) continue;
    int64_t n = 4;
    for (int64_t d : init.dims()) n *= d;
    bytes += n;
  }
  EXPECT_EQ(g->parameter_bytes(), bytes);
  // ResNet-50 costs about 4.1 GMACs per 224x224 image; the file has batch 2.
  EXPECT_NEAR(g->forward_flops() / 2 / 2, 4.1e9, 0.1e9);
}

TEST(TorchFixturesTest, TransformerNeedsItsSymbolicDims) {
  absl::StatusOr<Graph> g =
      ImportOnnxFile("tests/fixtures/transformer.onnx", {});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("symbolic 'batch'"), std::string::npos)
      << g.status();
}

TEST(TorchFixturesTest, TransformerShapeArithmeticIsFolded) {
  const std::string path = "tests/fixtures/transformer.onnx";
  ImportOptions options;
  options.batch_size = 8;
  options.dim_values = {{"src_len", 32}, {"tgt_len", 32}};
  absl::StatusOr<Graph> g = ImportOnnxFile(path, options);
  ASSERT_TRUE(g.ok()) << g.status();
  ExpectFullyImported(*g, ReadModel(path));
  // Hand count for d_model 256, 2+2 layers, d_ff 1024, vocab 1000, 8 x 32
  // tokens each side: weights touched per token (encoder 4*256^2 +
  // 2*256*1024, decoder 8*256^2 + 2*256*1024, generator 256*1000) at
  // 2 FLOPs each, plus attention scores and contexts (2 * 2 * 32 * 256 per
  // token per attention block, 6 blocks).
  const double tokens = 8 * 32;
  const double enc = 2 * (4 * 256.0 * 256 + 2 * 256.0 * 1024);
  const double dec = 2 * (8 * 256.0 * 256 + 2 * 256.0 * 1024);
  const double gen = 256.0 * 1000;
  const double attention = 6 * 2 * 2 * 32.0 * 256;
  const double matmul_flops = 2 * tokens * (enc + dec + gen) + tokens * attention;
  double counted = 0;
  for (const Op& op : g->ops()) {
    if (op.op_type == "MatMul" || op.op_type == "Gemm") {
      counted += op.forward.flops;
    }
  }
  // Gemm biases add one FLOP per output element; allow 1%.
  EXPECT_NEAR(counted / matmul_flops, 1.0, 0.01);
}

}  // namespace
}  // namespace placer
