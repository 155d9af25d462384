#include "graph/repeated_layers.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "graph/elementwise_fusion.h"
#include "graph/onnx_import.h"
#include "onnx/onnx_pb.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

struct Found {
  int count = 0;
  std::map<int, int> products;  // layer -> weight products in it
  std::map<int, int> nodes;     // layer -> forward nodes in it
  int outside_products = 0;     // weight products in no layer
  bool ordered = true;          // layers rise in forward order
};

Found Describe(const TrainingView& view) {
  const RepeatedLayers layers = FindRepeatedLayers(view);
  Found found;
  found.count = layers.count;
  int last = -1;
  for (int n : view.topological_order()) {
    if (view.node(n).kind != NodeKind::kForward) continue;
    const int layer = layers.layer_of_node[n];
    if (layer < 0) {
      found.outside_products += layers.weight_product[n];
      continue;
    }
    found.ordered &= layer >= last;
    last = layer;
    ++found.nodes[layer];
    found.products[layer] += layers.weight_product[n];
  }
  for (size_t n = 0; n < view.nodes().size(); ++n) {
    if (view.node(n).kind != NodeKind::kForward) {
      EXPECT_EQ(layers.layer_of_node[n], -1) << view.node(n).key;
      EXPECT_EQ(layers.weight_product[n], 0) << view.node(n).key;
    }
  }
  return found;
}

Graph Zoo(const std::string& name, zoo::ZooParams p) {
  absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel(name, p);
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Graph> g = ImportOnnxModel(*m, "zoo:" + name, {});
  EXPECT_TRUE(g.ok()) << g.status();
  return std::move(*g);
}

// Three Llama blocks, 4 query and 2 key/value heads of 16.
zoo::ZooParams SmallLlama() {
  zoo::ZooParams p;
  p.layers = 3;
  p.hidden = 64;
  p.heads = 4;
  p.kv_heads = 2;
  p.ffn = 128;
  p.seq_len = 16;
  p.vocab = 100;
  p.batch_size = 2;
  return p;
}

Graph Corpus(const std::string& file, const std::string& input,
             std::vector<int64_t> dims, const std::string& second = "") {
  ImportOptions options;
  options.input_shapes[input] = dims;
  if (!second.empty()) options.input_shapes[second] = dims;
  absl::StatusOr<Graph> g =
      ImportOnnxFile("tests/fixtures/corpus/" + file, options);
  EXPECT_TRUE(g.ok()) << g.status();
  return std::move(*g);
}

// As exported and with elementwise regions fused (graph/elementwise_fusion.h,
// whose regions no layer boundary crosses): the same blocks, fused or not
// (fused, the attention's residual add and the MLP's norm are one region
// inside each block: a cut all the same, the stream and its normalized
// copy from one node).
TEST(RepeatedLayersTest, ZooLlamaBlocksAreLayers) {
  absl::StatusOr<Graph> fused = FuseElementwise(Zoo("llama", SmallLlama()));
  ASSERT_TRUE(fused.ok()) << fused.status();
  for (const Graph& g : {Zoo("llama", SmallLlama()), *fused}) {
    const Found found = Describe(BuildTrainingView(g));
    EXPECT_EQ(found.count, 3);
    // q, k, v, o, gate, up, down in each block; the output layer in none.
    for (int layer = 0; layer < 3; ++layer) {
      EXPECT_EQ(found.products.at(layer), 7) << layer;
      EXPECT_EQ(found.nodes.at(layer), found.nodes.at(0)) << layer;
    }
    EXPECT_EQ(found.outside_products, 1);
    EXPECT_TRUE(found.ordered);
  }
}

TEST(RepeatedLayersTest, ZooGptWithItsTiedOutputLayer) {
  zoo::ZooParams p;
  p.layers = 2;
  p.hidden = 64;
  p.heads = 4;
  p.ffn = 256;
  p.seq_len = 16;
  p.vocab = 100;
  p.batch_size = 2;
  Graph g = Zoo("gpt", p);
  const Found found = Describe(BuildTrainingView(g));
  EXPECT_EQ(found.count, 2);
  // q, k, v, o, fc_in, fc_out; the tied output layer reads the embedding
  // transposed, a weight too.
  EXPECT_EQ(found.products.at(0), 6);
  EXPECT_EQ(found.products.at(1), 6);
  EXPECT_EQ(found.outside_products, 1);
}

// PyTorch's own exports (tests/fixtures/corpus/modern_models.py), two blocks
// each: a Llama (7 linear layers a block) and a GPT-2 (c_attn, c_proj,
// c_fc, mlp_proj).
TEST(RepeatedLayersTest, TorchExportedDecoders) {
  for (const char* file : {"llama.train.op17.onnx", "llama.eval.op14.onnx"}) {
    Graph g = Corpus(file, "tokens", {2, 16}, "targets");
    Found found = Describe(BuildTrainingView(g));
    EXPECT_EQ(found.count, 2) << file;
    EXPECT_EQ(found.products[0], 7) << file;
    EXPECT_EQ(found.products[1], 7) << file;
    EXPECT_EQ(found.outside_products, 1) << file;
  }
  for (const char* file : {"gpt2.train.op17.onnx", "gpt2.eval.op14.onnx"}) {
    Graph g = Corpus(file, "tokens", {2, 16}, "targets");
    Found found = Describe(BuildTrainingView(g));
    EXPECT_EQ(found.count, 2) << file;
    EXPECT_EQ(found.products[0], 4) << file;
    EXPECT_EQ(found.products[1], 4) << file;
  }
}

// torchvision's ResNet-50 in training mode: the 12 bottlenecks that repeat
// their stage's previous one are layers, three convolutions each; each
// stage's first (projection) block and the stem are in none.
TEST(RepeatedLayersTest, ResNetBottlenecks) {
  Graph g = Corpus("resnet50.train.op17.onnx", "input", {1, 3, 224, 224});
  const TrainingView view = BuildTrainingView(g);
  const RepeatedLayers layers = FindRepeatedLayers(view);
  EXPECT_EQ(layers.count, 12);
  std::map<int, int> convolutions;
  int outside = 0;
  for (size_t n = 0; n < view.nodes().size(); ++n) {
    if (view.node(n).kind != NodeKind::kForward ||
        g.op(view.node(n).forward_op).op_type != "Conv") {
      continue;
    }
    if (layers.layer_of_node[n] < 0) {
      ++outside;
    } else {
      ++convolutions[layers.layer_of_node[n]];
    }
  }
  for (const auto& [layer, count] : convolutions) {
    EXPECT_EQ(count, 3) << layer;
  }
  // 53 convolutions: 36 in the layers, the stem's and 4 projection blocks'
  // 4 each.
  EXPECT_EQ(outside, 53 - 36);
}

// A graph without repeated structure has no layers.
TEST(RepeatedLayersTest, DiamondHasNone) {
  zoo::ZooParams p;
  p.batch_size = 2;
  p.hidden = 3;
  Graph g = Zoo("diamond", p);
  EXPECT_EQ(FindRepeatedLayers(BuildTrainingView(g)).count, 0);
}

}  // namespace
}  // namespace placer
