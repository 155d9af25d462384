// Decoder-only language models as they are trained today, op by op as
// PyTorch's exporter writes them:
//  - GPT (Brown et al. 2020, GPT-2's layout): learned positions, pre-layer
//    norm, multi-head attention with biases, a GELU MLP of ffn = 4 x hidden,
//    a final layer norm and an output layer tied to the token embedding.
//  - Llama (Touvron et al. 2023; Llama 3): RMSNorm, rotary position
//    embeddings computed from the positions, grouped-query attention
//    (kv_heads key/value heads, each read by heads / kv_heads query heads:
//    Unsqueeze, Expand, Reshape as torch exports repeat_kv), a SwiGLU MLP
//    and an untied output layer.
// Attention is the exported form (scores materialized, a causal mask made
// by Trilu), not a fused kernel. The mask and the rotary tables are
// computed by ops from shapes, so nothing of size seq_len^2 is stored in
// the file. Every block is the same ops with its own weights.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "zoo/onnx_builder.h"
#include "zoo/zoo.h"

namespace placer::zoo {
namespace {

struct DecoderShape {
  int64_t batch, seq, hidden, heads, kv_heads, head_dim, ffn, vocab, layers;
};

DecoderShape ShapeOf(const ZooParams& p) {
  DecoderShape s;
  s.batch = p.batch_size;
  s.seq = p.seq_len;
  s.hidden = p.hidden;
  s.heads = p.heads;
  s.kv_heads = p.kv_heads;
  // EstimateZooOps builds at hidden 16, where the heads may not divide:
  // the node count does not depend on the widths.
  s.head_dim = std::max<int64_t>(1, p.hidden / std::max<int64_t>(1, p.heads));
  s.ffn = p.ffn;
  s.vocab = p.vocab;
  s.layers = p.layers;
  return s;
}

class DecoderBuilder {
 public:
  DecoderBuilder(OnnxBuilder& b, const DecoderShape& s) : b_(b), s_(s) {
    q_heads_ = b_.Ints("shape/q_heads", {s.batch, s.seq, s.heads, s.head_dim});
    kv_split_ =
        b_.Ints("shape/kv_heads", {s.batch, s.seq, s.kv_heads, s.head_dim});
    kv_expand_ = b_.Ints("shape/kv_expand", {s.batch, s.kv_heads,
                                             s.heads / std::max<int64_t>(
                                                           1, s.kv_heads),
                                             s.seq, s.head_dim});
    kv_merge_ = b_.Ints("shape/kv_merge", {s.batch, s.heads, s.seq, s.head_dim});
    merge_heads_ = b_.Ints("shape/merge_heads",
                           {s.batch, s.seq, s.heads * s.head_dim});
    axis2_ = b_.Ints("axes/2", {2});
    half_ = b_.Ints("split/rotary_half", {s.head_dim / 2,
                                         s.head_dim - s.head_dim / 2});
    scale_ = b_.Constant(
        "attention_scale", {},
        {static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)))});
    // The causal mask: -1e9 above the diagonal, from a shape, not a table.
    std::string full = b_.Node("ConstantOfShape", "causal_mask/ConstantOfShape",
                               {b_.Ints("shape/scores", {s.seq, s.seq})},
                               {FloatTensorAttr("value", -1e9f)});
    std::string above = b_.Node("Constant", "causal_mask/k", {},
                                {IntAttr("value_int", 1)});
    causal_mask_ = b_.Node("Trilu", "causal_mask/Trilu", {full, above},
                           {IntAttr("upper", 1)});
  }

  std::string Linear(const std::string& p, const std::string& x, int64_t in,
                     int64_t out, bool bias) {
    std::string w = b_.Weight(p + ".weight", {in, out}, in);
    std::string y = b_.Node("MatMul", p + "/MatMul", {x, w});
    if (!bias) return y;
    return b_.Node("Add", p + "/Add", {y, b_.Weight(p + ".bias", {out}, in)});
  }

  std::string LayerNorm(const std::string& p, const std::string& x) {
    std::string g = b_.Weight(p + ".weight", {s_.hidden}, 0, 1.0f);
    std::string beta = b_.Weight(p + ".bias", {s_.hidden}, 0, 0.0f);
    return b_.Node("LayerNormalization", p + "/LayerNormalization",
                   {x, g, beta},
                   {IntAttr("axis", -1), FloatAttr("epsilon", 1e-5f)});
  }

  // x * rsqrt(mean(x^2) + eps) * weight, as torch exports it.
  std::string RmsNorm(const std::string& p, const std::string& x) {
    std::string sq = b_.Node("Pow", p + "/Pow", {x, Two()});
    std::string mean = b_.Node("ReduceMean", p + "/ReduceMean", {sq},
                               {IntsAttr("axes", {-1}), IntAttr("keepdims", 1)});
    std::string eps = b_.Node("Add", p + "/Add", {mean, Epsilon()});
    std::string root = b_.Node("Sqrt", p + "/Sqrt", {eps});
    std::string inv = b_.Node("Reciprocal", p + "/Reciprocal", {root});
    std::string normed = b_.Node("Mul", p + "/Mul", {x, inv});
    std::string g = b_.Weight(p + ".weight", {s_.hidden}, 0, 1.0f);
    return b_.Node("Mul", p + "/Mul_1", {normed, g});
  }

  // The rotary tables [T, head_dim]: cos and sin of position x frequency,
  // computed from a Range (torch computes them from its buffers the same
  // way each step).
  void RotaryTables() {
    const int64_t half = s_.head_dim / 2;
    std::vector<float> inv_freq(half);
    for (int64_t i = 0; i < half; ++i) {
      inv_freq[i] = static_cast<float>(
          std::pow(500000.0, -2.0 * static_cast<double>(i) /
                                 static_cast<double>(s_.head_dim)));
    }
    std::string positions = b_.Node(
        "Range", "rotary/Range",
        {b_.Constant("rotary/start", {}, {0.0f}),
         b_.Constant("rotary/limit", {}, {static_cast<float>(s_.seq)}),
         b_.Constant("rotary/delta", {}, {1.0f})});
    positions = b_.Node("Unsqueeze", "rotary/Unsqueeze",
                        {positions, b_.Ints("axes/1", {1})});
    std::string freqs =
        b_.Node("Mul", "rotary/Mul",
                {positions, b_.Constant("rotary/inv_freq", {1, half}, inv_freq)});
    std::string angles = b_.Node("Concat", "rotary/Concat", {freqs, freqs},
                                 {IntAttr("axis", -1)});
    cos_ = b_.Node("Cos", "rotary/Cos", {angles});
    sin_ = b_.Node("Sin", "rotary/Sin", {angles});
  }

  // x * cos + rotate_half(x) * sin over [B, h, T, head_dim].
  std::string Rotary(const std::string& p, const std::string& x) {
    std::vector<std::string> halves =
        b_.NodeN("Split", p + "/Split", {x, half_}, 2, {IntAttr("axis", -1)});
    std::string neg = b_.Node("Neg", p + "/Neg", {halves[1]});
    std::string rotated = b_.Node("Concat", p + "/Concat", {neg, halves[0]},
                                  {IntAttr("axis", -1)});
    return b_.Node("Add", p + "/Add",
                   {b_.Node("Mul", p + "/Mul", {x, cos_}),
                    b_.Node("Mul", p + "/Mul_1", {rotated, sin_})});
  }

  // [B, T, n * head_dim] -> [B, n, T, head_dim].
  std::string Heads(const std::string& p, const std::string& x,
                    const std::string& shape) {
    std::string r = b_.Node("Reshape", p + "/Reshape", {x, shape});
    return b_.Node("Transpose", p + "/Transpose", {r},
                   {IntsAttr("perm", {0, 2, 1, 3})});
  }

  // [B, kv, T, d] -> [B, h, T, d]: each key/value head read by h/kv query
  // heads.
  std::string RepeatKv(const std::string& p, const std::string& x) {
    if (s_.kv_heads == s_.heads) return x;
    std::string u = b_.Node("Unsqueeze", p + "/Unsqueeze", {x, axis2_});
    std::string e = b_.Node("Expand", p + "/Expand", {u, kv_expand_});
    return b_.Node("Reshape", p + "/Reshape", {e, kv_merge_});
  }

  std::string Attention(const std::string& p, const std::string& x,
                        bool llama) {
    const int64_t q_width = s_.heads * s_.head_dim;
    const int64_t kv_width = s_.kv_heads * s_.head_dim;
    const bool bias = !llama;
    std::string q = Heads(p + "/q", Linear(p + ".q_proj", x, s_.hidden,
                                           q_width, bias),
                          q_heads_);
    std::string k = Heads(p + "/k", Linear(p + ".k_proj", x, s_.hidden,
                                           kv_width, bias),
                          llama ? kv_split_ : q_heads_);
    std::string v = Heads(p + "/v", Linear(p + ".v_proj", x, s_.hidden,
                                           kv_width, bias),
                          llama ? kv_split_ : q_heads_);
    if (llama) {
      q = Rotary(p + "/q_rotary", q);
      k = RepeatKv(p + "/k_repeat", Rotary(p + "/k_rotary", k));
      v = RepeatKv(p + "/v_repeat", v);
    }
    std::string kt = b_.Node("Transpose", p + "/k/Transpose_1", {k},
                             {IntsAttr("perm", {0, 1, 3, 2})});
    std::string scores = b_.Node("MatMul", p + "/scores", {q, kt});
    scores = b_.Node("Mul", p + "/scale", {scores, scale_});
    scores = b_.Node("Add", p + "/mask", {scores, causal_mask_});
    scores = b_.Node("Softmax", p + "/Softmax", {scores}, {IntAttr("axis", -1)});
    std::string ctx = b_.Node("MatMul", p + "/context", {scores, v});
    ctx = b_.Node("Transpose", p + "/context/Transpose", {ctx},
                  {IntsAttr("perm", {0, 2, 1, 3})});
    ctx = b_.Node("Reshape", p + "/context/Reshape", {ctx, merge_heads_});
    return Linear(p + ".o_proj", ctx, q_width, s_.hidden, bias);
  }

  std::string GeluMlp(const std::string& p, const std::string& x) {
    std::string h = Linear(p + ".fc_in", x, s_.hidden, s_.ffn, true);
    // gelu(h) = 0.5 h (1 + erf(h / sqrt 2)), as torch exports nn.GELU.
    std::string scaled = b_.Node("Div", p + "/Div", {h, Sqrt2()});
    std::string erf = b_.Node("Erf", p + "/Erf", {scaled});
    std::string one = b_.Node("Add", p + "/Add", {erf, One()});
    std::string gated = b_.Node("Mul", p + "/Mul", {h, one});
    gated = b_.Node("Mul", p + "/Mul_1", {gated, Half()});
    return Linear(p + ".fc_out", gated, s_.ffn, s_.hidden, true);
  }

  // w2(silu(w1 x) * w3 x).
  std::string SwiGlu(const std::string& p, const std::string& x) {
    std::string gate = Linear(p + ".gate_proj", x, s_.hidden, s_.ffn, false);
    std::string up = Linear(p + ".up_proj", x, s_.hidden, s_.ffn, false);
    std::string silu = b_.Node(
        "Mul", p + "/silu", {gate, b_.Node("Sigmoid", p + "/Sigmoid", {gate})});
    std::string h = b_.Node("Mul", p + "/Mul", {silu, up});
    return Linear(p + ".down_proj", h, s_.ffn, s_.hidden, false);
  }

 private:
  std::string Scalar(const std::string& name, float value) {
    auto it = scalars_.find(name);
    if (it != scalars_.end()) return it->second;
    return scalars_[name] = b_.Constant(name, {}, {value});
  }
  std::string Two() { return Scalar("const/two", 2.0f); }
  std::string One() { return Scalar("const/one", 1.0f); }
  std::string Half() { return Scalar("const/half", 0.5f); }
  std::string Sqrt2() { return Scalar("const/sqrt2", std::sqrt(2.0f)); }
  std::string Epsilon() { return Scalar("const/rms_eps", 1e-5f); }

  OnnxBuilder& b_;
  const DecoderShape s_;
  std::string q_heads_, kv_split_, kv_expand_, kv_merge_, merge_heads_, axis2_,
      half_, scale_, causal_mask_, cos_, sin_;
  std::map<std::string, std::string> scalars_;
};

// Logits [B, T, V] -> the loss against next tokens.
void Loss(OnnxBuilder& b, const DecoderShape& s, const std::string& logits) {
  std::string t = b.Node("Transpose", "lm_head/Transpose", {logits},
                         {IntsAttr("perm", {0, 2, 1})});
  std::string labels = b.IntInput("labels", {s.batch, s.seq});
  std::string loss = b.Node("SoftmaxCrossEntropyLoss", "loss", {t, labels});
  b.Output(loss, onnx::TensorProto::FLOAT, {});
}

}  // namespace

onnx::ModelProto BuildGpt(const ZooParams& p) {
  OnnxBuilder b("gpt", p.seed, p.weights);
  const DecoderShape s = ShapeOf(p);
  DecoderBuilder d(b, s);
  std::string tokens = b.IntInput("tokens", {s.batch, s.seq});
  std::string table = b.Weight("wte", {s.vocab, s.hidden}, s.hidden);
  std::string x = b.Node("Gather", "wte/Gather", {table, tokens});
  x = b.Node("Add", "wpe/Add",
             {x, b.Weight("wpe", {s.seq, s.hidden}, s.hidden)});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string pre = absl::StrCat("h.", l);
    x = b.Node("Add", pre + "/attn/residual",
               {x, d.Attention(pre + ".attn",
                               d.LayerNorm(pre + ".ln_1", x), false)});
    x = b.Node("Add", pre + "/mlp/residual",
               {x, d.GeluMlp(pre + ".mlp", d.LayerNorm(pre + ".ln_2", x))});
  }
  x = d.LayerNorm("ln_f", x);
  // The output layer is the embedding's transpose (tied weights).
  std::string tied = b.Node("Transpose", "lm_head/tied", {table},
                            {IntsAttr("perm", {1, 0})});
  Loss(b, s, b.Node("MatMul", "lm_head/MatMul", {x, tied}));
  return b.Finish();
}

onnx::ModelProto BuildLlama(const ZooParams& p) {
  OnnxBuilder b("llama", p.seed, p.weights);
  const DecoderShape s = ShapeOf(p);
  DecoderBuilder d(b, s);
  d.RotaryTables();
  std::string tokens = b.IntInput("tokens", {s.batch, s.seq});
  std::string x = b.Node(
      "Gather", "embed_tokens/Gather",
      {b.Weight("embed_tokens", {s.vocab, s.hidden}, s.hidden), tokens});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string pre = absl::StrCat("layers.", l);
    x = b.Node("Add", pre + "/attn/residual",
               {x, d.Attention(pre + ".self_attn",
                               d.RmsNorm(pre + ".input_layernorm", x), true)});
    x = b.Node(
        "Add", pre + "/mlp/residual",
        {x, d.SwiGlu(pre + ".mlp",
                     d.RmsNorm(pre + ".post_attention_layernorm", x))});
  }
  x = d.RmsNorm("norm", x);
  Loss(b, s, d.Linear("lm_head", x, s.hidden, s.vocab, false));
  return b.Finish();
}

}  // namespace placer::zoo
