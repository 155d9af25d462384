// Tensor parallelism on graphs PyTorch exported (tests/fixtures/corpus):
// what ShardTensors chooses must be Megatron-LM's pattern on GPT-2- and
// Llama-style decoders, output channels then input channels on a CNN, and
// a fixed sharding an op cannot run is refused by name.
#include "graph/tensor_sharding.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/onnx_import.h"
#include "gtest/gtest.h"

namespace placer {
namespace {

constexpr char kDir[] = "tests/fixtures/corpus/";

Graph Load(const std::string& file,
           const std::map<std::string, std::vector<int64_t>>& shapes) {
  ImportOptions options;
  for (const auto& [name, dims] : shapes) options.input_shapes[name] = dims;
  absl::StatusOr<Graph> g = ImportOnnxFile(kDir + file, options);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

TensorSharding ShardAll(const Graph& g, int devices) {
  absl::StatusOr<TensorSharding> s = ShardTensors(
      g, std::vector<int>(g.ops().size(), 0), std::vector<int>{devices});
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// "MatMul out:2 [/blocks.0/c_attn/MatMul]" lines of the ops that split.
std::string Describe(const Graph& g, const TensorSharding& s) {
  std::string out;
  for (int op : g.topological_order()) {
    if (!s.op[op].split()) continue;
    absl::StrAppend(&out, g.op(op).op_type, " ", OpShardingName(s.op[op]), " ",
                    g.op(op).key, "\n");
  }
  for (const GroupCollective& c : s.collectives) {
    absl::StrAppend(&out, c.backward ? "backward " : "forward ",
                    static_cast<int>(c.kind), " ", c.bytes, " ",
                    g.tensor(c.tensor).name, " by ", g.op(c.op).key, "\n");
  }
  return out;
}

// The sharding of the op named `key`.
std::string ShardingOf(const Graph& g, const TensorSharding& s,
                       const std::string& key) {
  const int op = g.FindOp(key);
  EXPECT_GE(op, 0) << key;
  return op < 0 ? "" : OpShardingName(s.op[op]);
}

using Count = std::pair<int, int64_t>;  // collectives, bytes

// Per (backward?, kind): how many collectives, and their bytes.
std::map<std::pair<bool, Collective>, std::pair<int, int64_t>> Tally(
    const TensorSharding& s) {
  std::map<std::pair<bool, Collective>, std::pair<int, int64_t>> tally;
  for (const GroupCollective& c : s.collectives) {
    auto& [count, bytes] = tally[{c.backward, c.kind}];
    ++count;
    bytes += c.bytes;
  }
  return tally;
}

// GPT-2 (2 blocks, hidden 64, vocabulary 256, batch 2 x 16 tokens, as
// PyTorch exports it at opsets 17 and 14; the
// attention's QKV projection fused): each block's QKV and first MLP
// projections split their output columns, the attention core its heads,
// the output and second MLP projections their inner dim (partial sums,
// allreduced); the embedding and the loss split the vocabulary. Per block
// two allreduces of the [2, 16, 64] activation forward and two of its
// gradient backward (the layer norms' outputs); nothing else but the
// embedding's allreduce and the loss's three small ones (max, sum, loss).
TEST(TensorShardingTest, Gpt2FallsIntoMegatronsPattern) {
  for (const char* file : {"gpt2.train.op17.onnx", "gpt2.train.op14.onnx"}) {
    SCOPED_TRACE(file);
    const Graph g = Load(file, {{"tokens", {2, 16}}, {"targets", {2, 16}}});
    const TensorSharding s = ShardAll(g, 2);
    SCOPED_TRACE(Describe(g, s));
    for (const std::string block : {"/blocks.0", "/blocks.1"}) {
      EXPECT_EQ(ShardingOf(g, s, block + "/c_attn/MatMul"), "out:2");
      EXPECT_EQ(ShardingOf(g, s, block + "/Split"), "out:2");
      EXPECT_EQ(ShardingOf(g, s, block + "/MatMul"), "out:1");  // Q K^T
      EXPECT_EQ(ShardingOf(g, s, block + "/Softmax"), "out:1");
      EXPECT_EQ(ShardingOf(g, s, block + "/MatMul_1"), "out:1");
      EXPECT_EQ(ShardingOf(g, s, block + "/c_proj/MatMul"), "contracted");
      EXPECT_EQ(ShardingOf(g, s, block + "/c_fc/MatMul"), "out:2");
      EXPECT_EQ(ShardingOf(g, s, block + "/mlp_proj/MatMul"), "contracted");
      // The layer norm (one op at opset 17, decomposed at 14) whole.
      int norm_ops = 0;
      for (int op = 0; op < static_cast<int>(g.ops().size()); ++op) {
        if (!absl::StartsWith(g.op(op).key, block + "/ln_1/")) continue;
        ++norm_ops;
        EXPECT_FALSE(s.op[op].split()) << g.op(op).key;
      }
      EXPECT_GE(norm_ops, 1);
    }
    EXPECT_EQ(ShardingOf(g, s, "/wte/Gather"), "contracted");
    EXPECT_EQ(ShardingOf(g, s, "/wpe/Gather"), "replicated");
    EXPECT_EQ(ShardingOf(g, s, "/lm_head/MatMul"), "out:2");
    EXPECT_EQ(ShardingOf(g, s, "/SoftmaxCrossEntropyLoss"), "contracted");
    const int64_t activation = 2 * 16 * 64 * 4;
    const auto tally = Tally(s);
    EXPECT_EQ(tally.size(), 2u);
    const auto forward = tally.at({false, Collective::kAllreduce});
    EXPECT_EQ(forward.first, 2 * 2 + 1 + 3);
    EXPECT_EQ(forward.second, 5 * activation + 2 * 2 * 16 * 4 + 4);
    const auto backward = tally.at({true, Collective::kAllreduce});
    EXPECT_EQ(backward.first, 2 * 2 + 1);  // + the final norm's, to lm_head
    EXPECT_EQ(backward.second, 5 * activation);
    // The weights split with their readers; the layer norms' whole.
    const int qkv = g.FindTensor("blocks.0.c_attn.weight");
    ASSERT_GE(qkv, 0);
    EXPECT_EQ(TensorLayoutName(s.layout[qkv]), "split:0");
    EXPECT_EQ(s.HeldBytes(g, qkv), 192 * 64 * 4 / 2);
  }
}

// Sequence parallelism on GPT-2: every allreduce of a block's activation
// becomes a reduce-scatter to a token split (forward; an all-gather of
// the gradient backward) and every allreduce of a layer norm's output's
// gradient an all-gather before the column-parallel MatMul (forward; a
// reduce-scatter backward): the same bytes, the layer norms, dropout and
// residuals run split.
// The same GPT-2 exported in eval mode, its attention cores fused
// (graph/attention_fusion.h): each FusedAttention op splits its heads,
// the projections around it as before, and the collectives are exactly
// the unfused graph's.
TEST(TensorShardingTest, FusedAttentionSplitsItsHeads) {
  const std::string file = std::string(kDir) + "gpt2.eval.op17.onnx";
  ImportOptions options;
  options.input_shapes = {{"tokens", {2, 16}}, {"targets", {2, 16}}};
  absl::StatusOr<Graph> plain = ImportOnnxFile(file, options);
  options.fuse_attention = true;
  absl::StatusOr<Graph> fused = ImportOnnxFile(file, options);
  ASSERT_TRUE(plain.ok() && fused.ok());
  const TensorSharding a = ShardAll(*plain, 2);
  const TensorSharding b = ShardAll(*fused, 2);
  SCOPED_TRACE(Describe(*fused, b));
  int cores = 0;
  for (int op = 0; op < static_cast<int>(fused->ops().size()); ++op) {
    if (fused->op(op).op_type != "FusedAttention") continue;
    ++cores;
    EXPECT_EQ(OpShardingName(b.op[op]), "out:1") << fused->op(op).key;
  }
  EXPECT_EQ(cores, 2);
  for (const std::string block : {"/blocks.0", "/blocks.1"}) {
    EXPECT_EQ(ShardingOf(*fused, b, block + "/c_attn/MatMul"), "out:2");
    EXPECT_EQ(ShardingOf(*fused, b, block + "/c_proj/MatMul"), "contracted");
  }
  EXPECT_EQ(Tally(a), Tally(b));
}

TEST(TensorShardingTest, SequenceParallelismTradesAllreducesForHalves) {
  const Graph g =
      Load("gpt2.train.op17.onnx", {{"tokens", {2, 16}}, {"targets", {2, 16}}});
  TensorShardingOptions options;
  options.sequence_parallel = true;
  absl::StatusOr<TensorSharding> s = ShardTensors(
      g, std::vector<int>(g.ops().size(), 0), std::vector<int>{2}, {}, options);
  ASSERT_TRUE(s.ok()) << s.status();
  SCOPED_TRACE(Describe(g, *s));
  for (const std::string block : {"/blocks.0", "/blocks.1"}) {
    EXPECT_EQ(ShardingOf(g, *s, block + "/c_attn/MatMul"), "out:2");
    EXPECT_EQ(ShardingOf(g, *s, block + "/c_proj/MatMul"), "contracted");
    EXPECT_EQ(ShardingOf(g, *s, block + "/ln_2/LayerNormalization"), "out:1");
    EXPECT_EQ(ShardingOf(g, *s, block + "/dropout_2/Dropout"), "out:1");
  }
  const int norm = g.FindTensor("/blocks.0/ln_1/LayerNormalization_output_0");
  ASSERT_GE(norm, 0);
  EXPECT_EQ(TensorLayoutName(s->layout[norm]), "split:1");  // the tokens
  const int64_t activation = 2 * 16 * 64 * 4;
  const auto tally = Tally(*s);
  // Per block two of each way; the embedding's reduce-scatter, the final
  // norm's all-gather; backward also the position embedding's slice
  // (4096 bytes) gathered.
  EXPECT_EQ(tally.at({false, Collective::kReduceScatter}),
            (Count{5, 5 * activation}));
  EXPECT_EQ(tally.at({false, Collective::kAllGather}),
            (Count{5, 5 * activation}));
  EXPECT_EQ(tally.at({true, Collective::kReduceScatter}),
            (Count{5, 5 * activation}));
  EXPECT_EQ(tally.at({true, Collective::kAllGather}),
            (Count{6, 5 * activation + 4096}));
  // What remains allreduced: the loss's three small ones, and backward
  // the gradients of the weights the token-split ops read whole (five
  // layer norms' scale and bias, two row-parallel biases per block).
  EXPECT_EQ(tally.at({false, Collective::kAllreduce}).first, 3);
  EXPECT_EQ(tally.at({true, Collective::kAllreduce}),
            (Count{5 * 2 + 2 * 2, (5 * 2 + 2 * 2) * 256}));
}

// The Llama-style decoder (RMSNorm, rotary embeddings, SwiGLU, separate
// Q, K, V projections): the same pattern, the gate and up projections both
// split on their columns.
TEST(TensorShardingTest, LlamaFallsIntoMegatronsPattern) {
  for (const char* file : {"llama.train.op17.onnx", "llama.train.op14.onnx"}) {
    SCOPED_TRACE(file);
    const Graph g = Load(file, {{"tokens", {2, 16}}, {"targets", {2, 16}}});
    const TensorSharding s = ShardAll(g, 2);
    SCOPED_TRACE(Describe(g, s));
    for (const std::string block : {"/blocks.0", "/blocks.1"}) {
      for (const char* p : {"wq", "wk", "wv"}) {
        EXPECT_EQ(ShardingOf(g, s, block + "/attention/" + p + "/MatMul"),
                  "out:2");
      }
      EXPECT_EQ(ShardingOf(g, s, block + "/attention/MatMul"), "out:1");
      EXPECT_EQ(ShardingOf(g, s, block + "/attention/wo/MatMul"), "contracted");
      EXPECT_EQ(ShardingOf(g, s, block + "/ffn/w1/MatMul"), "out:2");
      EXPECT_EQ(ShardingOf(g, s, block + "/ffn/w3/MatMul"), "out:2");
      EXPECT_EQ(ShardingOf(g, s, block + "/ffn/w2/MatMul"), "contracted");
    }
    const auto tally = Tally(s);
    EXPECT_EQ(tally.size(), 2u);
    EXPECT_EQ(tally.at({false, Collective::kAllreduce}).first, 2 * 2 + 1 + 3);
    EXPECT_EQ(tally.at({true, Collective::kAllreduce}).first, 2 * 2 + 1);
  }
}

// Not a transformer: ResNet-18's convolutions alternate output channels
// (batch norms and ReLUs follow the channel split) and input channels
// (partial sums, allreduced).
TEST(TensorShardingTest, ConvolutionsSplitChannels) {
  const Graph g =
      Load("resnet18.train.op17.onnx", {{"input", {1, 3, 224, 224}}});
  const TensorSharding s = ShardAll(g, 2);
  SCOPED_TRACE(Describe(g, s));
  EXPECT_EQ(ShardingOf(g, s, "/conv1/Conv"), "out:1");
  EXPECT_EQ(ShardingOf(g, s, "/bn1/BatchNormalization"), "out:1");
  EXPECT_EQ(ShardingOf(g, s, "/maxpool/MaxPool"), "out:1");
  EXPECT_EQ(ShardingOf(g, s, "/layer1/layer1.0/conv1/Conv"), "contracted");
  EXPECT_EQ(ShardingOf(g, s, "/layer1/layer1.0/conv2/Conv"), "out:1");
  EXPECT_GE(s.SplitOps(), 40);
}

// A sharding the plan fixes is checked op by op.
TEST(TensorShardingTest, AShardingAnOpCannotRunIsRefusedByName) {
  const Graph g =
      Load("gpt2.train.op17.onnx", {{"tokens", {2, 16}}, {"targets", {2, 16}}});
  std::vector<OpSharding> fixed = ShardAll(g, 2).op;
  // Three devices divide the QKV projection's 192 columns, not the 64 of
  // its parts.
  absl::StatusOr<TensorSharding> three = ShardTensors(
      g, std::vector<int>(g.ops().size(), 0), std::vector<int>{3}, fixed);
  ASSERT_FALSE(three.ok());
  EXPECT_TRUE(absl::StrContains(three.status().message(), "over 3 devices"))
      << three.status();
  // A LayerNorm cannot split the axis it normalizes.
  fixed[g.FindOp("/blocks.0/ln_1/LayerNormalization")] =
      OpSharding::SplitOutput(2);
  absl::StatusOr<TensorSharding> bad = ShardTensors(
      g, std::vector<int>(g.ops().size(), 0), std::vector<int>{2}, fixed);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(),
                                "/blocks.0/ln_1/LayerNormalization"))
      << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "out:2"));
  // Ops outside a tensor-parallel group run whole.
  absl::StatusOr<TensorSharding> single = ShardTensors(
      g, std::vector<int>(g.ops().size(), 0), std::vector<int>{1}, fixed);
  ASSERT_FALSE(single.ok());
  EXPECT_TRUE(
      absl::StrContains(single.status().message(), "not tensor parallel"));
  EXPECT_EQ(ParseOpSharding("out:3")->dim, 3);
  EXPECT_FALSE(ParseOpSharding("rows").ok());
}

}  // namespace
}  // namespace placer
