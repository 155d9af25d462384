// FuseElementwise on a hand-built residual + RMSNorm (exact FLOPs, bytes
// and what the fused op keeps), on the zoo's decoders (every layer's norms,
// rotary embeddings and MLP gates fused; the step's memory drops) and on
// PyTorch's own exports.
#include "graph/elementwise_fusion.h"

#include <map>
#include <set>
#include <string>

#include "graph/autocast.h"
#include "graph/onnx_import.h"
#include "graph/op_costs.h"
#include "graph/repeated_layers.h"
#include "graph/saved_for_backward.h"
#include "graph/tensor_sharding.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "tests/graph/test_models.h"
#include "zoo/onnx_builder.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

using ::placer::testing::AddInput;
using ::placer::testing::AddNode;
using ::placer::testing::AddOutput;
using ::placer::testing::AddWeight;
using ::placer::testing::EmptyModel;
using ::placer::zoo::IntAttr;
using ::placer::zoo::IntsAttr;

void AddScalar(onnx::GraphProto* g, const std::string& name, float value) {
  onnx::NodeProto* n = AddNode(g, "Constant", name, {}, {name});
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_float_data(value);
}

// r = x + y (a weight); h = r * rsqrt(mean(r^2) + eps) * w; out = h·W + r.
onnx::ModelProto ResidualNorm() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 4, 8});
  AddWeight(g, "y", {2, 4, 8});
  AddWeight(g, "w", {8});
  AddWeight(g, "W", {8, 8});
  AddScalar(g, "two", 2.0f);
  AddScalar(g, "eps", 1e-5f);
  AddNode(g, "Add", "res", {"x", "y"}, {"r"});
  AddNode(g, "Pow", "pow", {"r", "two"}, {"sq"});
  *AddNode(g, "ReduceMean", "mean", {"sq"}, {"m"})->add_attribute() =
      IntsAttr("axes", {-1});
  AddNode(g, "Add", "add_eps", {"m", "eps"}, {"e"});
  AddNode(g, "Sqrt", "sqrt", {"e"}, {"s"});
  AddNode(g, "Reciprocal", "inv", {"s"}, {"i"});
  AddNode(g, "Mul", "normed", {"r", "i"}, {"n"});
  AddNode(g, "Mul", "scaled", {"n", "w"}, {"h"});
  AddNode(g, "MatMul", "linear", {"h", "W"}, {"o"});
  AddNode(g, "Add", "res2", {"o", "r"}, {"out"});
  AddOutput(g, "out");
  return m;
}

int CountFused(const Graph& g) {
  int n = 0;
  for (const Op& op : g.ops()) n += IsFusedRegion(op);
  return n;
}

TEST(ElementwiseFusionTest, AResidualAndNormBecomeOneOp) {
  absl::StatusOr<Graph> plain = ImportOnnxModel(ResidualNorm(), "norm", {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ImportOptions options;
  options.fuse_elementwise = true;
  absl::StatusOr<Graph> fused = ImportOnnxModel(ResidualNorm(), "norm", options);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_EQ(CountFused(*fused), 1);
  const int f = fused->FindOp("res/FusedElementwise");
  ASSERT_GE(f, 0);
  const Op& op = fused->op(f);
  const Graph* body = RegionBody(op);
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->ops().size(), 8u);
  // The second residual add reads the MatMul, which reads the region: it
  // cannot join it (the region would wait for itself).
  ASSERT_GE(fused->FindOp("res2"), 0);
  ASSERT_GE(fused->FindOp("linear"), 0);
  std::vector<std::string> inputs, outputs;
  for (int t : op.inputs) inputs.push_back(fused->tensor(t).name);
  for (int t : op.outputs) outputs.push_back(fused->tensor(t).name);
  EXPECT_EQ(inputs, (std::vector<std::string>{"x", "y", "two", "eps", "w"}));
  EXPECT_EQ(outputs, (std::vector<std::string>{"r", "h"}));

  // FLOPs: its ops'; bytes: its inputs read and outputs written once.
  double flops = 0;
  for (const Op& member : body->ops()) {
    flops += plain->op(plain->FindOp(member.key)).forward.flops;
  }
  EXPECT_DOUBLE_EQ(op.forward.flops, flops);
  EXPECT_EQ(op.forward.bytes_accessed, 4 * 256 + 4 + 4 + 32);

  // It keeps r (an output: Pow's and the Muls' backward read it, and
  // everything else is recomputed from it), the constants and w; nothing
  // between its ops, not x nor y (the add's derivative reads neither).
  const SavedTensors saved = SavedForBackward(op);
  EXPECT_EQ(saved.inputs, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(saved.outputs, (std::vector<int>{0}));

  // Backward: reads the gradients of r and h, the kept r, two, eps and w;
  // writes y's and w's gradients (x is data).
  const TrainingView view = BuildTrainingView(*fused);
  const int b = view.backward_node(f);
  ASSERT_GE(b, 0);
  EXPECT_EQ(view.node(b).cost.bytes_accessed,
            256 + 256 + 4 + 4 + 32 + 256 + 256 + 32);
  EXPECT_GT(view.node(b).cost.flops, op.forward.flops);  // recomputed + own
  for (int v : view.node(b).inputs) {
    EXPECT_NE(view.value(v).name, "x");
    EXPECT_NE(view.value(v).name, "n");
  }
}

zoo::ZooParams Small(const std::string& family) {
  zoo::ZooParams p;
  p.layers = 3;
  p.hidden = 64;
  p.seq_len = 128;
  p.vocab = 100;
  p.heads = 4;
  if (family == "llama") p.kv_heads = 2;
  return p;
}

// The decoders: RMSNorm / LayerNorm with the residual add, the rotary
// embedding with the heads' reshapes, the MLP's gate each one op; the
// FLOPs and parameters stay; every op outside a region keeps its key; the
// step keeps less.
TEST(ElementwiseFusionTest, DecodersFuseTheirNormsRotaryAndGates) {
  for (const char* family : {"gpt", "llama"}) {
    SCOPED_TRACE(family);
    absl::StatusOr<onnx::ModelProto> model =
        zoo::BuildZooModel(family, Small(family));
    ASSERT_TRUE(model.ok()) << model.status();
    ImportOptions as_exported;
    as_exported.fuse_attention = true;
    ImportOptions fuse = as_exported;
    fuse.fuse_elementwise = true;
    absl::StatusOr<Graph> plain = ImportOnnxModel(*model, family, as_exported);
    absl::StatusOr<Graph> fused = ImportOnnxModel(*model, family, fuse);
    ASSERT_TRUE(plain.ok() && fused.ok());
    EXPECT_GE(CountFused(*fused), 3 * 3);
    for (const Op& op : fused->ops()) {
      if (IsFusedRegion(op)) continue;
      EXPECT_GE(plain->FindOp(op.key), 0) << op.key;
      for (const char* type : {"Pow", "Sigmoid", "Erf", "Reciprocal", "Neg"}) {
        EXPECT_NE(op.op_type, type) << op.key;
      }
    }
    // No region spans two blocks: each block's residual sum and the next
    // block's norm stay two kernels, and the fused graph's layers are the
    // blocks as exported.
    const OpLayers layers = FindRepeatedLayers(*plain);
    EXPECT_EQ(layers.count, 3);
    EXPECT_EQ(FindRepeatedLayers(*fused).count, 3);
    for (const Op& op : fused->ops()) {
      if (!IsFusedRegion(op)) continue;
      std::set<int> of_members;
      for (const Op& member : RegionBody(op)->ops()) {
        const int index = plain->FindOp(member.key);
        ASSERT_GE(index, 0) << member.key;
        of_members.insert(layers.layer_of_op[index]);
      }
      EXPECT_EQ(of_members.size(), 1u) << op.key;
    }
    EXPECT_NEAR(fused->forward_flops(), plain->forward_flops(),
                1e-9 * plain->forward_flops());
    EXPECT_EQ(fused->parameter_bytes(), plain->parameter_bytes());

    // Under bf16 autocast each tensor both graphs have gets one type.
    const std::vector<Tensor> a = AutocastTensors(*plain, Precision::kBf16);
    const std::vector<Tensor> b = AutocastTensors(*fused, Precision::kBf16);
    for (size_t t = 0; t < b.size(); ++t) {
      const int same = plain->FindTensor(b[t].name);
      ASSERT_GE(same, 0) << b[t].name;
      EXPECT_EQ(a[same].dtype, b[t].dtype) << b[t].name;
    }
    // What the step keeps for its backward: every value a backward node
    // reads that a forward node wrote.
    auto kept = [](const TrainingView& view) {
      int64_t bytes = 0;
      for (const TrainingValue& v : view.values()) {
        if (v.kind != ValueKind::kActivation) continue;
        for (int c : v.consumers) {
          if (view.node(c).kind == NodeKind::kBackward) {
            bytes += v.bytes;
            break;
          }
        }
      }
      return bytes;
    };
    TrainingOptions bf16;
    bf16.precision = Precision::kBf16;
    const int64_t before = kept(BuildTrainingView(*plain, bf16));
    const int64_t after = kept(BuildTrainingView(*fused, bf16));
    std::printf("%s: kept for the backward %lld -> %lld bytes\n", family,
                static_cast<long long>(before), static_cast<long long>(after));
    EXPECT_LT(after, 0.7 * static_cast<double>(before));
  }
}

// Tensor parallelism splits a region as its ops would split: the SwiGLU
// gate of each layer splits on the MLP's columns like the products around
// it, so the MLP needs the same collectives fused or not.
TEST(ElementwiseFusionTest, ARegionSplitsAsItsOps) {
  absl::StatusOr<onnx::ModelProto> model =
      zoo::BuildZooModel("llama", Small("llama"));
  ASSERT_TRUE(model.ok()) << model.status();
  ImportOptions as_exported;
  as_exported.fuse_attention = true;
  ImportOptions fuse = as_exported;
  fuse.fuse_elementwise = true;
  absl::StatusOr<Graph> plain = ImportOnnxModel(*model, "llama", as_exported);
  absl::StatusOr<Graph> fused = ImportOnnxModel(*model, "llama", fuse);
  ASSERT_TRUE(plain.ok() && fused.ok());
  auto shard = [](const Graph& g) {
    absl::StatusOr<TensorSharding> s = ShardTensors(
        g, std::vector<int>(g.ops().size(), 0), std::vector<int>{2});
    EXPECT_TRUE(s.ok()) << s.status();
    return *std::move(s);
  };
  const TensorSharding a = shard(*plain);
  const TensorSharding b = shard(*fused);
  int split_regions = 0;
  for (int op = 0; op < static_cast<int>(fused->ops().size()); ++op) {
    split_regions += IsFusedRegion(fused->op(op)) && b.op[op].split();
  }
  EXPECT_GE(split_regions, 3);
  auto bytes = [](const TensorSharding& s) {
    int64_t total = 0;
    for (const GroupCollective& c : s.collectives) total += c.bytes;
    return total;
  };
  EXPECT_LE(bytes(b), bytes(a));
}

// PyTorch's exports: the regions made, and the same FLOPs.
TEST(ElementwiseFusionTest, PyTorchExports) {
  for (const char* file :
       {"gpt2.eval.op17.onnx", "gpt2.train.op17.onnx", "llama.eval.op17.onnx",
        "llama.train.op14.onnx", "bert_tiny.train.op17.onnx",
        "unet.train.op17.onnx", "resnet18.train.op17.onnx"}) {
    SCOPED_TRACE(file);
    const std::string path = std::string("tests/fixtures/corpus/") + file;
    ImportOptions fuse;
    fuse.fuse_elementwise = true;
    absl::StatusOr<Graph> plain = ImportOnnxFile(path, {});
    absl::StatusOr<Graph> fused = ImportOnnxFile(path, fuse);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_GT(CountFused(*fused), 0);
    EXPECT_NEAR(fused->forward_flops(), plain->forward_flops(),
                1e-9 * plain->forward_flops());
    EXPECT_EQ(BuildTrainingView(*fused).unknown_cost_nodes(),
              BuildTrainingView(*plain).unknown_cost_nodes());
  }
}

}  // namespace
}  // namespace placer
