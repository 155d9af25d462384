// The Transformer of Vaswani et al. 2017 ("big": d_model 1024, 16 heads,
// d_ff 4096, 6 + 6 layers), op by op, post-layer-norm, with learned
// positional embeddings and a causal mask in decoder self-attention.
#include <string>
#include <vector>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "zoo/onnx_builder.h"
#include "zoo/zoo.h"

namespace placer::zoo {
namespace {

constexpr int64_t kHeads = 16;

class TransformerBuilder {
 public:
  TransformerBuilder(OnnxBuilder& b, int64_t batch, int64_t seq, int64_t d)
      : b_(b), batch_(batch), seq_(seq), d_(d) {
    split_heads_ = b_.Ints("shape/split_heads", {batch, seq, kHeads, d / kHeads});
    merge_heads_ = b_.Ints("shape/merge_heads", {batch, seq, d});
    std::vector<float> scale = {
        static_cast<float>(1.0 / std::sqrt(static_cast<double>(d / kHeads)))};
    scale_ = b_.Constant("attention_scale", {}, scale);
    std::vector<float> mask(seq * seq);
    for (int64_t i = 0; i < seq; ++i) {
      for (int64_t j = 0; j < seq; ++j) mask[i * seq + j] = j > i ? -1e9f : 0;
    }
    causal_mask_ = b_.Constant("causal_mask", {seq, seq}, mask);
  }

  std::string Linear(const std::string& p, const std::string& x, int64_t in,
                     int64_t out) {
    std::string w = b_.Weight(p + ".weight", {in, out}, in);
    std::string bias = b_.Weight(p + ".bias", {out}, in);
    return b_.Node("Add", p + "/Add",
                   {b_.Node("MatMul", p + "/MatMul", {x, w}), bias});
  }

  std::string LayerNorm(const std::string& p, const std::string& x) {
    std::string g = b_.Weight(p + ".weight", {d_}, 0, 1.0f);
    std::string beta = b_.Weight(p + ".bias", {d_}, 0, 0.0f);
    return b_.Node("LayerNormalization", p + "/LayerNormalization",
                   {x, g, beta},
                   {IntAttr("axis", -1), FloatAttr("epsilon", 1e-5f)});
  }

  // [B, T, d] -> [B, h, T, dk] (or [B, h, dk, T] for keys).
  std::string Heads(const std::string& p, const std::string& x, bool keys) {
    std::string r = b_.Node("Reshape", p + "/Reshape", {x, split_heads_});
    return b_.Node("Transpose", p + "/Transpose", {r},
                   {IntsAttr("perm", keys ? std::vector<int64_t>{0, 2, 3, 1}
                                          : std::vector<int64_t>{0, 2, 1, 3})});
  }

  std::string Attention(const std::string& p, const std::string& query,
                        const std::string& memory, bool causal) {
    std::string q = Heads(p + "/q", Linear(p + ".q", query, d_, d_), false);
    std::string k = Heads(p + "/k", Linear(p + ".k", memory, d_, d_), true);
    std::string v = Heads(p + "/v", Linear(p + ".v", memory, d_, d_), false);
    std::string s = b_.Node("MatMul", p + "/scores", {q, k});
    s = b_.Node("Mul", p + "/scale", {s, scale_});
    if (causal) s = b_.Node("Add", p + "/mask", {s, causal_mask_});
    s = b_.Node("Softmax", p + "/Softmax", {s}, {IntAttr("axis", -1)});
    std::string ctx = b_.Node("MatMul", p + "/context", {s, v});
    ctx = b_.Node("Transpose", p + "/context/Transpose", {ctx},
                  {IntsAttr("perm", {0, 2, 1, 3})});
    ctx = b_.Node("Reshape", p + "/context/Reshape", {ctx, merge_heads_});
    return Linear(p + ".out", ctx, d_, d_);
  }

  std::string FeedForward(const std::string& p, const std::string& x) {
    std::string h = b_.Node("Relu", p + "/Relu",
                            {Linear(p + ".fc1", x, d_, 4 * d_)});
    return Linear(p + ".fc2", h, 4 * d_, d_);
  }

  std::string Residual(const std::string& p, const std::string& x,
                       const std::string& y) {
    return LayerNorm(p + ".norm", b_.Node("Add", p + "/residual", {x, y}));
  }

  std::string Embed(const std::string& p, const std::string& tokens,
                    int64_t vocab) {
    std::string table = b_.Weight(p + ".embedding", {vocab, d_}, d_);
    std::string pos = b_.Weight(p + ".positions", {seq_, d_}, d_);
    std::string e = b_.Node("Gather", p + "/Gather", {table, tokens});
    return b_.Node("Add", p + "/positions", {e, pos});
  }

 private:
  OnnxBuilder& b_;
  int64_t batch_, seq_, d_;
  std::string split_heads_, merge_heads_, scale_, causal_mask_;
};

}  // namespace

onnx::ModelProto BuildTransformer(const ZooParams& p) {
  OnnxBuilder b("transformer", p.seed, p.weights);
  const int64_t B = p.batch_size, T = p.seq_len, d = p.hidden, V = p.vocab;
  TransformerBuilder t(b, B, T, d);
  std::string x = t.Embed("encoder", b.IntInput("source_tokens", {B, T}), V);
  for (int64_t l = 0; l < p.layers; ++l) {
    std::string pre = absl::StrCat("encoder.l", l);
    x = t.Residual(pre + ".attn", x,
                   t.Attention(pre + ".self_attn", x, x, false));
    x = t.Residual(pre + ".ffn", x, t.FeedForward(pre + ".ffn", x));
  }
  std::string memory = x;
  std::string y = t.Embed("decoder", b.IntInput("target_tokens", {B, T}), V);
  for (int64_t l = 0; l < p.layers; ++l) {
    std::string pre = absl::StrCat("decoder.l", l);
    y = t.Residual(pre + ".self", y,
                   t.Attention(pre + ".self_attn", y, y, true));
    y = t.Residual(pre + ".cross", y,
                   t.Attention(pre + ".cross_attn", y, memory, false));
    y = t.Residual(pre + ".ffn", y, t.FeedForward(pre + ".ffn", y));
  }
  std::string logits = t.Linear("generator", y, d, V);  // [B, T, V]
  logits = b.Node("Transpose", "generator/Transpose", {logits},
                  {IntsAttr("perm", {0, 2, 1})});
  std::string labels = b.IntInput("labels", {B, T});
  std::string loss =
      b.Node("SoftmaxCrossEntropyLoss", "loss", {logits, labels});
  b.Output(loss, onnx::TensorProto::FLOAT, {});
  return b.Finish();
}

}  // namespace placer::zoo
