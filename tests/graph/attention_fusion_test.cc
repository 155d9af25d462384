// FuseAttention on a hand-built attention core (exact FLOPs and saved
// bytes), on the zoo's decoders and on PyTorch's own exports.
#include "graph/attention_fusion.h"

#include <string>

#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "graph/op_costs.h"
#include "graph/saved_for_backward.h"
#include "graph/training_view.h"
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

// q, k, v [1, 2, 4, 8] (batch, heads, tokens, head dim); scores =
// q·kᵀ / c + mask, softmax over the keys, times v; the context goes on
// through a Relu so the core is no graph output.
onnx::ModelProto Core() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "q", {1, 2, 4, 8});
  AddInput(g, "k", {1, 2, 4, 8});
  AddInput(g, "v", {1, 2, 4, 8});
  AddInput(g, "mask", {1, 1, 4, 4});
  AddWeight(g, "c", {1});
  *AddNode(g, "Transpose", "kt", {"k"}, {"k_t"})->add_attribute() =
      IntsAttr("perm", {0, 1, 3, 2});
  AddNode(g, "MatMul", "scores", {"q", "k_t"}, {"s"});
  AddNode(g, "Div", "scale", {"s", "c"}, {"s1"});
  AddNode(g, "Add", "masked", {"s1", "mask"}, {"s2"});
  *AddNode(g, "Softmax", "softmax", {"s2"}, {"p"})->add_attribute() =
      IntAttr("axis", -1);
  AddNode(g, "MatMul", "context", {"p", "v"}, {"o"});
  AddNode(g, "Relu", "relu", {"o"}, {"y"});
  AddOutput(g, "y");
  return m;
}

TEST(AttentionFusionTest, TheCoreBecomesOneOpWithTheSameForwardFlops) {
  absl::StatusOr<Graph> plain = ImportOnnxModel(Core(), "core", {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ImportOptions fuse;
  fuse.fuse_attention = true;
  absl::StatusOr<Graph> fused = ImportOnnxModel(Core(), "core", fuse);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_EQ(fused->ops().size(), 3u);  // kt, the fused core, relu
  const int f = fused->FindOp("scores/FusedAttention");
  ASSERT_GE(f, 0);
  const Op& op = fused->op(f);
  EXPECT_TRUE(IsFusedAttention(op));
  std::vector<std::string> inputs;
  for (int t : op.inputs) inputs.push_back(fused->tensor(t).name);
  EXPECT_EQ(inputs, (std::vector<std::string>{"q", "k_t", "v", "c", "mask"}));
  EXPECT_EQ(fused->tensor(op.outputs[0]).name, "o");
  EXPECT_GE(fused->FindOp("kt"), 0);
  EXPECT_GE(fused->FindOp("relu"), 0);
  EXPECT_LT(fused->FindTensor("s"), 0);  // the scores are no tensor
  const std::vector<AttentionStep> steps = AttentionSteps(op);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].op_type, "Div");
  EXPECT_EQ(steps[1].op_type, "Add");
  EXPECT_EQ(steps[1].first_input, 4);
  // 32 scores: q·kᵀ 2 x 32 x 8, p·v 2 x 64 x 4; per score 1 for each step
  // and 5 for the softmax. The graph as written costs the same.
  EXPECT_EQ(op.forward.status, CostStatus::kExact);
  EXPECT_DOUBLE_EQ(op.forward.flops, 512 + 512 + 32 * 7);
  EXPECT_DOUBLE_EQ(fused->forward_flops(), plain->forward_flops());
  // FlashAttention's backward: 5 products the size of a forward one, the
  // elementwise chain twice.
  const OpCost backward = ComputeBackwardCost(
      op, fused->tensors(), std::vector<bool>(op.inputs.size(), true));
  EXPECT_DOUBLE_EQ(backward.flops, 5 * 512 + 2 * 32 * 7);
  // It keeps its inputs, its output and a log-sum-exp per query row.
  const SavedTensors saved = SavedForBackward(op);
  EXPECT_EQ(saved.inputs.size(), 5u);
  EXPECT_EQ(saved.outputs, std::vector<int>{0});
  EXPECT_EQ(SavedWorkspaceBytes(op, fused->tensors()), 1 * 2 * 4 * 4);
}

TEST(AttentionFusionTest, ASecondReaderOfTheScoresKeepsTheCore) {
  onnx::ModelProto m = Core();
  AddNode(m.mutable_graph(), "Relu", "peek", {"s1"}, {"seen"});
  AddOutput(m.mutable_graph(), "seen");
  ImportOptions fuse;
  fuse.fuse_attention = true;
  absl::StatusOr<Graph> g = ImportOnnxModel(m, "core", fuse);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_GE(g->FindOp("softmax"), 0);
  EXPECT_LT(g->FindOp("scores/FusedAttention"), 0);
}

int CountFused(const Graph& g) {
  int n = 0;
  for (const Op& op : g.ops()) n += IsFusedAttention(op);
  return n;
}

// The FLOPs causal cores skip: FlashAttention computes the scores on and
// below the diagonal, (keys + 1) / (2 keys) of those the exported ops
// compute; as if not causal, a core's FLOPs are the ops' it replaced.
// `causal` receives how many cores are causal.
double SkippedByCausal(const Graph& fused, int* causal) {
  double skipped = 0;
  *causal = 0;
  for (const Op& op : fused.ops()) {
    if (!IsCausalAttention(op)) continue;
    ++*causal;
    Op full = op;
    full.attributes.erase("causal");
    const double all = ComputeForwardCost(full, fused.tensors()).flops;
    const double keys = fused.tensor(op.inputs[1]).shape.back();
    EXPECT_DOUBLE_EQ(op.forward.flops, all * (keys + 1) / (2 * keys))
        << op.key;
    skipped += all - op.forward.flops;
  }
  return skipped;
}

// The zoo's decoders: one core per layer, no Softmax left, every other op
// its key; the step holds no seq x seq tensor, so the training view's
// saved bytes drop by the scores it kept.
TEST(AttentionFusionTest, DecodersFuseEveryLayer) {
  for (const char* family : {"gpt", "llama"}) {
    SCOPED_TRACE(family);
    zoo::ZooParams p;
    p.layers = 3;
    p.hidden = 64;
    p.seq_len = 128;
    p.vocab = 100;
    p.heads = 4;
    if (std::string(family) == "llama") p.kv_heads = 2;
    absl::StatusOr<onnx::ModelProto> model = zoo::BuildZooModel(family, p);
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<Graph> plain = ImportOnnxModel(*model, family, {});
    ImportOptions fuse;
    fuse.fuse_attention = true;
    absl::StatusOr<Graph> fused = ImportOnnxModel(*model, family, fuse);
    ASSERT_TRUE(plain.ok() && fused.ok());
    EXPECT_EQ(CountFused(*fused), 3);
    for (const Op& op : fused->ops()) {
      EXPECT_NE(op.op_type, "Softmax") << op.key;
      if (!IsFusedAttention(op)) {
        EXPECT_GE(plain->FindOp(op.key), 0) << op.key;
      }
    }
    // Every core is causal (their Trilu mask).
    int causal = 0;
    const double skipped = SkippedByCausal(*fused, &causal);
    EXPECT_EQ(causal, 3);
    EXPECT_NEAR(fused->forward_flops() + skipped, plain->forward_flops(),
                1e-9 * plain->forward_flops());
    EXPECT_EQ(fused->parameter_bytes(), plain->parameter_bytes());
  }
}

// PyTorch's own exports (tests/fixtures/corpus): every attention core of
// the eval-mode encoders and decoders fuses; training-mode ones keep the
// cores whose probabilities go through a training dropout.
TEST(AttentionFusionTest, PyTorchExports) {
  struct Case {
    const char* file;
    int fused;  // -1: every Softmax of the export
    bool causal;  // every fused core's mask is causal (else none)
  };
  for (const Case& c :
       {Case{"gpt2.eval.op17", -1, true}, Case{"gpt2.eval.op14", -1, true},
        Case{"llama.eval.op17", -1, true},
        Case{"bert_tiny.eval.op13", -1, false},
        Case{"bert_masked.eval.op17", -1, false},
        Case{"gpt2.train.op17", 0, false},
        Case{"bert_tiny.train.op13", 0, false}}) {
    SCOPED_TRACE(c.file);
    const std::string path =
        std::string("tests/fixtures/corpus/") + c.file + ".onnx";
    absl::StatusOr<Graph> plain = ImportOnnxFile(path, {});
    ImportOptions fuse;
    fuse.fuse_attention = true;
    absl::StatusOr<Graph> g = ImportOnnxFile(path, fuse);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(g.ok()) << g.status();
    int softmax = 0;
    for (const Op& op : plain->ops()) softmax += op.op_type == "Softmax";
    ASSERT_GT(softmax, 0);
    EXPECT_EQ(CountFused(*g), c.fused < 0 ? softmax : c.fused);
    int causal = 0;
    const double skipped = SkippedByCausal(*g, &causal);
    EXPECT_EQ(causal, c.causal ? CountFused(*g) : 0);
    EXPECT_NEAR(g->forward_flops() + skipped, plain->forward_flops(),
                1e-9 * plain->forward_flops());
    EXPECT_EQ(g->unknown_cost_ops().size(), plain->unknown_cost_ops().size());
  }
}

}  // namespace
}  // namespace placer
