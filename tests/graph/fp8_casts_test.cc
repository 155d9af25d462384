#include "graph/fp8_casts.h"

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tests/graph/test_models.h"

namespace placer {
namespace {

using testing::AddInput;
using testing::AddNode;
using testing::AddWeight;

// x[16,32] -> Relu -> a; q = a Wq[32,8], k = a Wk[32,8] (two products
// reading one activation, as attention's q and k); s = q + k;
// y = s Wo[8,32], the last product (the output layer, kept at bf16).
Graph TwoProductsAndAHead() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {16, 32});
  AddWeight(g, "Wq", {32, 8});
  AddWeight(g, "Wk", {32, 8});
  AddWeight(g, "Wo", {8, 32});
  AddNode(g, "Relu", "relu", {"x"}, {"a"});
  AddNode(g, "MatMul", "q", {"a", "Wq"}, {"q_out"});
  AddNode(g, "MatMul", "k", {"a", "Wk"}, {"k_out"});
  AddNode(g, "Add", "sum", {"q_out", "k_out"}, {"s"});
  AddNode(g, "MatMul", "head", {"s", "Wo"}, {"y"});
  g->add_output()->set_name("y");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "fp8", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return std::move(*graph);
}

TEST(Fp8CastsTest, EachProductCastsItsOperandsAndTheSharedActivationOnce) {
  const Graph g = TwoProductsAndAHead();
  const std::vector<Precision> precisions =
      OpPrecisions(g, Precision::kFp8);
  const int q = g.FindOp("q"), k = g.FindOp("k"), head = g.FindOp("head");
  ASSERT_EQ(precisions[q], Precision::kFp8);
  ASSERT_EQ(precisions[head], Precision::kBf16);
  const std::vector<Fp8CastBytes> current = Fp8CastBytesPerOp(
      g, g.tensors(), precisions, Fp8Recipe::kTorchao);
  // torchao: amax (2) + cast (2 + 1) = 5 bytes an element, a transposed
  // copy 2. q: a (16 x 32 = 512: 5 + 2) and Wq (256: 5);
  // backward: q_out (16 x 8 = 128: 5 + 2) and Wq's transposed copy (2).
  EXPECT_EQ(current[q].forward, 512 * 7 + 256 * 5);
  EXPECT_EQ(current[q].backward, 128 * 7 + 256 * 2);
  // k reads the activation q already cast: only its weight.
  EXPECT_EQ(current[k].forward, 256 * 5);
  EXPECT_EQ(current[k].backward, 128 * 7 + 256 * 2);
  EXPECT_EQ(current[head].forward, 0);
  EXPECT_EQ(current[head].backward, 0);
  EXPECT_EQ(current[g.FindOp("relu")].forward, 0);
  // Transformer Engine's casts are not counted (contract).
  const std::vector<Fp8CastBytes> te = Fp8CastBytesPerOp(
      g, g.tensors(), precisions, Fp8Recipe::kTransformerEngine);
  for (const Fp8CastBytes& b : te) {
    EXPECT_EQ(b.forward, 0);
    EXPECT_EQ(b.backward, 0);
  }
  // At bf16 nothing is cast.
  const std::vector<Fp8CastBytes> bf16 = Fp8CastBytesPerOp(
      g, g.tensors(), OpPrecisions(g, Precision::kBf16), Fp8Recipe::kTorchao);
  EXPECT_EQ(bf16[q].forward, 0);
}

TEST(Fp8CastsTest, TheViewCarriesTheBytesToTheProductsNodes) {
  const Graph g = TwoProductsAndAHead();
  TrainingOptions options;
  options.precision = Precision::kFp8;
  options.fp8_recipe = Fp8Recipe::kTorchao;
  const TrainingView view = BuildTrainingView(g, options);
  const int q = g.FindOp("q");
  EXPECT_EQ(view.node(q).fp8_cast_bytes, 512 * 7 + 256 * 5);
  EXPECT_EQ(view.node(view.backward_node(q)).fp8_cast_bytes,
            128 * 7 + 256 * 2);
  options.fp8_recipe = Fp8Recipe::kTransformerEngine;
  const TrainingView te = BuildTrainingView(g, options);
  for (const TrainingNode& n : te.nodes()) EXPECT_EQ(n.fp8_cast_bytes, 0);
  options.fp8_recipe = Fp8Recipe::kTorchao;
  options.precision = Precision::kBf16;
  const TrainingView bf16 = BuildTrainingView(g, options);
  for (const TrainingNode& n : bf16.nodes()) EXPECT_EQ(n.fp8_cast_bytes, 0);
}

TEST(Fp8CastsTest, RecipesParseByName) {
  EXPECT_EQ(*ParseFp8Recipe("te"), Fp8Recipe::kTransformerEngine);
  EXPECT_EQ(*ParseFp8Recipe("torchao"), Fp8Recipe::kTorchao);
  const absl::StatusOr<Fp8Recipe> bad = ParseFp8Recipe("tensorwise");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tensorwise"), std::string::npos);
}

}  // namespace
}  // namespace placer
