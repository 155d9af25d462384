#include "zoo/zoo.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "onnx/checker.h"

namespace placer::zoo {
namespace {

bool IsDecoder(const std::string& name) {
  return name.rfind("gpt", 0) == 0 || name.rfind("llama", 0) == 0;
}

// Every model, with real weights at small sizes, passes the ONNX checker.
TEST(ZooTest, EveryModelPassesTheOnnxChecker) {
  for (const ZooModel& m : ZooModels()) {
    SCOPED_TRACE(m.name);
    ZooParams p;
    p.batch_size = 2;
    p.seq_len = 3;
    p.hidden = 32;
    p.vocab = 40;
    p.image_size = m.name == "inception_v3" ? 75 : 32;
    if (IsDecoder(m.name)) {
      p.heads = 4;
      p.kv_heads = m.name.rfind("gpt", 0) == 0 ? 4 : 2;
      p.ffn = 64;
    }
    absl::StatusOr<onnx::ModelProto> model = BuildZooModel(m.name, p);
    ASSERT_TRUE(model.ok()) << model.status();
    try {
      onnx::checker::check_model(*model);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Every model at its default sizes, without weight bytes (the graph and
// sizes are the same; the bytes only cost test time), imports with every
// shape resolved and no unknown op, and a training step costs about 3
// forward passes. The decoders' named sizes are the same two builders as
// gpt and llama at other widths (their sizes: DecodersHaveTheirPublished...).
TEST(ZooTest, EveryModelImportsAndCostsThreeForwardPasses) {
  for (const ZooModel& m : ZooModels()) {
    if (m.published_size) continue;  // gpt and llama are their builders
    SCOPED_TRACE(m.name);
    ZooParams p;
    p.weights = false;
    absl::StatusOr<onnx::ModelProto> model = BuildZooModel(m.name, p);
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<Graph> g = ImportOnnxModel(*model, "zoo:" + m.name, {});
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->ops().size() + g->folded_op_keys().size(),
              static_cast<size_t>(model->graph().node_size()));
    EXPECT_TRUE(g->unknown_cost_ops().empty());
    for (const Tensor& t : g->tensors()) ASSERT_TRUE(t.shape_known) << t.name;
    if (m.name == "chain" || m.name == "diamond" || m.name == "wide") continue;
    TrainingView v = BuildTrainingView(*g);
    double ratio = v.training_flops() / g->forward_flops();
    EXPECT_GT(ratio, 2.9);
    EXPECT_LT(ratio, 3.1);
  }
}

TEST(ZooTest, WeightsAreRealDeterministicAndSeeded) {
  ZooParams p;
  p.hidden = 8;
  std::string a, b, c;
  ASSERT_TRUE(BuildZooModel("chain", p)->SerializeToString(&a));
  ASSERT_TRUE(BuildZooModel("chain", p)->SerializeToString(&b));
  p.seed = 2;
  ASSERT_TRUE(BuildZooModel("chain", p)->SerializeToString(&c));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  onnx::ModelProto m = *BuildZooModel("chain", p);
  EXPECT_EQ(m.graph().initializer(0).raw_data().size(), 8u * 8 * 4);
}

// random_dag: the seed draws the structure (which nodes feed which, and
// the widths); the same seed builds the same graph; every seed has
// 3·layers·seq_len + 3 ops, and each node reads the layer below.
TEST(ZooTest, RandomDagIsSeededAndLayered) {
  ZooParams p;
  p.weights = false;
  p.layers = 5;
  p.seq_len = 3;
  p.hidden = 16;
  auto edges = [&](uint64_t seed) {
    p.seed = seed;
    onnx::ModelProto m = *BuildZooModel("random_dag", p);
    EXPECT_EQ(m.graph().node_size(), 3 * 5 * 3 + 3);
    std::string inputs;
    for (const onnx::NodeProto& n : m.graph().node()) {
      if (n.op_type() != "Concat") continue;
      if (n.name().rfind("l", 0) == 0 && n.name().rfind("l0/", 0) != 0) {
        // l<k>/n<i>/concat: its first input is a node of layer k-1.
        const int k = std::stoi(n.name().substr(1));
        EXPECT_EQ(n.input(0).rfind(absl::StrCat("l", k - 1, "/"), 0), 0u)
            << n.name() << " reads " << n.input(0);
      }
      for (const std::string& in : n.input()) inputs += in + ",";
    }
    for (const onnx::TensorProto& w : m.graph().initializer()) {
      inputs += absl::StrCat(w.dims(1), ",");
    }
    return inputs;
  };
  EXPECT_EQ(edges(1), edges(1));
  EXPECT_NE(edges(1), edges(2));
  EXPECT_NE(edges(2), edges(3));
}

TEST(ZooTest, PublishedSizes) {
  ZooParams p;
  p.weights = false;
  // Inception-V3 without the auxiliary head: 23.83M parameters; ResNet-50:
  // 25.56M (torchvision's counts).
  auto params = [&](const std::string& name) {
    absl::StatusOr<Graph> g =
        ImportOnnxModel(*BuildZooModel(name, p), name, {});
    EXPECT_TRUE(g.ok());
    return g->parameter_bytes() / 4;
  };
  EXPECT_EQ(params("inception_v3"), 23834568);
  EXPECT_EQ(params("resnet50"), 25557032);
}

TEST(ZooTest, Gnmt8HasOverTenThousandOps) {
  ZooParams p;
  p.weights = false;
  absl::StatusOr<onnx::ModelProto> m = BuildZooModel("gnmt8", p);
  ASSERT_TRUE(m.ok());
  EXPECT_GT(m->graph().node_size(), 10000);
  p.seq_len = 10;
  EXPECT_LT(BuildZooModel("gnmt8", p)->graph().node_size(), 10000);
}

// The estimate that guards BuildZooModel is the builders' exact node count
// at the defaults and at other sizes from 4 layers and 2 steps up.
TEST(ZooTest, OpEstimateIsExact) {
  for (const ZooModel& m : ZooModels()) {
    for (auto [layers, seq_len] : {std::pair<int64_t, int64_t>{0, 0},
                                   {4, 2}, {6, 9}, {11, 3}}) {
      SCOPED_TRACE(absl::StrCat(m.name, " layers=", layers, " seq_len=",
                                seq_len));
      ZooParams p;
      p.weights = false;
      p.layers = layers;
      p.seq_len = seq_len;
      absl::StatusOr<int64_t> estimate = EstimateZooOps(m.name, p);
      ASSERT_TRUE(estimate.ok()) << estimate.status();
      absl::StatusOr<onnx::ModelProto> model = BuildZooModel(m.name, p);
      ASSERT_TRUE(model.ok()) << model.status();
      EXPECT_EQ(*estimate, model->graph().node_size());
    }
  }
}

// Sizes that would exhaust memory are refused before anything is built
// (this returns at once; building gnmt8 at layers=100000 took 19+ GB).
TEST(ZooTest, HugeSizesAreRefusedBeforeBuilding) {
  ZooParams p;
  p.weights = false;
  p.layers = 100000;
  absl::StatusOr<onnx::ModelProto> m = BuildZooModel("gnmt8", p);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(m.status().message().find("over the limit of 2000000"),
            std::string::npos)
      << m.status();
  p = {};
  p.seq_len = int64_t{1} << 62;  // saturates, never overflows
  EXPECT_EQ(BuildZooModel("gnmt8", p).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Weights: a 2^20 x 8192 embedding alone is 32 GiB, over the default
  // 8 GiB of generated weights; without weights it is only dims.
  p = {};
  p.hidden = 8192;
  p.vocab = 1 << 20;
  EXPECT_EQ(BuildZooModel("rnnlm", p).status().code(),
            absl::StatusCode::kResourceExhausted);
  p.weights = false;
  EXPECT_TRUE(BuildZooModel("rnnlm", p).ok());
}

// The named decoders have the parameter counts their papers give (within
// 1.5%: GPT-3's counts are rounded, and its vocabulary is GPT-2's 50257),
// import with every shape known and no op left uncosted, and each block's
// weights are the same shapes (the import shares nothing: 126 Llama 3.1
// blocks are 126 copies).
TEST(ZooTest, DecodersHaveTheirPublishedParameterCounts) {
  struct Size {
    const char* name;
    double parameters;
  };
  for (const Size& size : {Size{"gpt3_125m", 125e6}, Size{"gpt3_1.3b", 1.3e9},
                           Size{"gpt3_6.7b", 6.7e9}, Size{"gpt3_175b", 175e9},
                           Size{"llama2_7b", 6.74e9}, Size{"llama2_70b", 68.98e9},
                           Size{"llama3_8b", 8.03e9}, Size{"llama3_70b", 70.55e9},
                           Size{"llama3.1_405b", 405.85e9}}) {
    SCOPED_TRACE(size.name);
    ZooParams p;
    p.weights = false;
    absl::StatusOr<onnx::ModelProto> model = BuildZooModel(size.name, p);
    ASSERT_TRUE(model.ok()) << model.status();
    double parameters = 0;
    for (const onnx::TensorProto& t : model->graph().initializer()) {
      if (t.data_type() != onnx::TensorProto::FLOAT) continue;
      double n = 1;
      for (int64_t d : t.dims()) n *= static_cast<double>(d);
      parameters += n;
    }
    EXPECT_NEAR(parameters / size.parameters, 1.0, 0.015) << parameters;
    absl::StatusOr<Graph> g =
        ImportOnnxModel(*model, absl::StrCat("zoo:", size.name), {});
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE(g->unknown_cost_ops().empty());
    for (const Tensor& t : g->tensors()) ASSERT_TRUE(t.shape_known) << t.name;
  }
}

// Llama's grouped-query attention reads each key/value head from
// heads / kv_heads query heads; GPT has none; widths that do not divide
// are errors naming the sizes.
TEST(ZooTest, DecoderSizesAreChecked) {
  ZooParams p;
  p.weights = false;
  p.hidden = 4096;
  p.heads = 32;
  p.kv_heads = 8;
  EXPECT_TRUE(BuildZooModel("llama", p).ok());
  absl::Status s = BuildZooModel("gpt", p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("zoo:llama has"), std::string::npos) << s;
  p.kv_heads = 5;
  s = BuildZooModel("llama", p).status();
  EXPECT_NE(s.message().find("multiple of kv_heads (5)"), std::string::npos)
      << s;
  p.kv_heads = 8;
  p.hidden = 4100;
  s = BuildZooModel("llama", p).status();
  EXPECT_NE(s.message().find("hidden (4100) must be a multiple of heads (32)"),
            std::string::npos)
      << s;
}

TEST(ZooTest, BadRequestsAreErrors) {
  EXPECT_EQ(BuildZooModel("nope", {}).status().code(),
            absl::StatusCode::kNotFound);
  ZooParams p;
  p.hidden = 1000;  // not divisible by 16 heads
  EXPECT_FALSE(BuildZooModel("transformer_big", p).ok());
  p = {};
  p.batch_size = -1;
  EXPECT_FALSE(BuildZooModel("chain", p).ok());
  p = {};
  p.image_size = 20;
  EXPECT_FALSE(BuildZooModel("inception_v3", p).ok());
}

}  // namespace
}  // namespace placer::zoo
