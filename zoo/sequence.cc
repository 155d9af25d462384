// Sequence models written op by op, as TensorFlow graphs of the device
// placement papers were: LSTM cells unrolled over time with MatMul, Split,
// Sigmoid, Tanh and Mul ops (Debian's PyTorch exports nn.LSTMCell as one
// fused ONNX LSTM node, which would hide the structure placers exploit).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "zoo/onnx_builder.h"
#include "zoo/zoo.h"

namespace placer::zoo {
namespace {

struct LstmWeights {
  std::string w;     // [input, 4H]
  std::string r;     // [H, 4H]
  std::string bias;  // [4H]
};

LstmWeights MakeLstm(OnnxBuilder& b, const std::string& p, int64_t input,
                     int64_t hidden) {
  return {b.Weight(p + ".W", {input, 4 * hidden}, input),
          b.Weight(p + ".R", {hidden, 4 * hidden}, hidden),
          b.Weight(p + ".b", {4 * hidden}, hidden)};
}

struct LstmState {
  std::string h;
  std::string c;
};

// One LSTM cell step. With no previous state (t = 0) the state is zero, so
// the recurrent MatMul and the forget gate drop out.
LstmState LstmCell(OnnxBuilder& b, const std::string& p, const std::string& x,
                   const LstmState* prev, const LstmWeights& w) {
  std::string gates = b.Node("MatMul", p + "/MatMul_x", {x, w.w});
  if (prev != nullptr) {
    std::string hr = b.Node("MatMul", p + "/MatMul_h", {prev->h, w.r});
    gates = b.Node("Add", p + "/Add_xh", {gates, hr});
  }
  gates = b.Node("Add", p + "/Add_bias", {gates, w.bias});
  std::vector<std::string> g =
      b.NodeN("Split", p + "/Split", {gates}, 4, {IntAttr("axis", 1)});
  std::string i = b.Node("Sigmoid", p + "/input_gate", {g[0]});
  std::string cand = b.Node("Tanh", p + "/candidate", {g[2]});
  std::string o = b.Node("Sigmoid", p + "/output_gate", {g[3]});
  std::string c = b.Node("Mul", p + "/Mul_ic", {i, cand});
  if (prev != nullptr) {
    std::string f = b.Node("Sigmoid", p + "/forget_gate", {g[1]});
    std::string fc = b.Node("Mul", p + "/Mul_fc", {f, prev->c});
    c = b.Node("Add", p + "/cell", {fc, c});
  }
  std::string tc = b.Node("Tanh", p + "/Tanh_c", {c});
  std::string h = b.Node("Mul", p + "/hidden", {o, tc});
  return {h, c};
}

// Embeds [T, B] token ids and splits them into T tensors of [B, E].
std::vector<std::string> EmbedSteps(OnnxBuilder& b, const std::string& p,
                                    const std::string& tokens,
                                    const std::string& table, int64_t steps) {
  std::string e = b.Node("Gather", p + "/Gather", {table, tokens});
  std::vector<std::string> parts =
      b.NodeN("Split", p + "/Split", {e}, static_cast<int>(steps),
              {IntAttr("axis", 0)});
  std::string axes = b.Ints(p + "/squeeze_axes", {0});
  std::vector<std::string> out;
  for (int64_t t = 0; t < steps; ++t) {
    out.push_back(b.Node("Squeeze", absl::StrCat(p, "/Squeeze_t", t),
                         {parts[t], axes}));
  }
  return out;
}

// Per-step logits [B, V] stacked to [B, V, T] and a cross-entropy loss
// against labels [B, T].
void SequenceLoss(OnnxBuilder& b, const std::vector<std::string>& logits,
                  int64_t batch, int64_t steps) {
  std::string axes = b.Ints("loss/unsqueeze_axes", {2});
  std::vector<std::string> stacked;
  for (size_t t = 0; t < logits.size(); ++t) {
    stacked.push_back(b.Node("Unsqueeze", absl::StrCat("loss/Unsqueeze_t", t),
                             {logits[t], axes}));
  }
  std::string scores =
      b.Node("Concat", "loss/Concat", stacked, {IntAttr("axis", 2)});
  std::string labels = b.IntInput("labels", {batch, steps});
  std::string loss =
      b.Node("SoftmaxCrossEntropyLoss", "loss", {scores, labels});
  b.Output(loss, onnx::TensorProto::FLOAT, {});
}

}  // namespace

// GNMT-style encoder-decoder (Wu et al. 2016, as placed by Mirhoseini et
// al.): L-layer LSTM encoder and decoder with residual connections from the
// third layer up, Luong attention over the top encoder layer fed into the
// first decoder layer, and a softmax per target step.
onnx::ModelProto BuildGnmt(const ZooParams& p) {
  OnnxBuilder b(absl::StrCat("gnmt", p.layers), p.seed, p.weights);
  const int64_t B = p.batch_size, T = p.seq_len, H = p.hidden, V = p.vocab;
  const int64_t L = p.layers;
  std::string src = b.IntInput("source_tokens", {T, B});
  std::string tgt = b.IntInput("target_tokens", {T, B});
  std::string enc_table = b.Weight("encoder.embedding", {V, H}, H);
  std::string dec_table = b.Weight("decoder.embedding", {V, H}, H);

  // Encoder.
  std::vector<std::string> inputs = EmbedSteps(b, "encoder/embed", src,
                                               enc_table, T);
  for (int64_t l = 0; l < L; ++l) {
    std::string pre = absl::StrCat("encoder.l", l);
    LstmWeights w = MakeLstm(b, pre, H, H);
    std::vector<std::string> outputs;
    LstmState state;
    for (int64_t t = 0; t < T; ++t) {
      state = LstmCell(b, absl::StrCat(pre, "/t", t), inputs[t],
                       t == 0 ? nullptr : &state, w);
      std::string out = state.h;
      if (l >= 2) {
        out = b.Node("Add", absl::StrCat(pre, "/t", t, "/residual"),
                     {out, inputs[t]});
      }
      outputs.push_back(out);
    }
    inputs = outputs;
  }
  // Memory [B, T, H] from the top encoder layer.
  std::string mem_axes = b.Ints("encoder/memory_axes", {1});
  std::vector<std::string> steps;
  for (int64_t t = 0; t < T; ++t) {
    steps.push_back(b.Node("Unsqueeze", absl::StrCat("encoder/memory/t", t),
                           {inputs[t], mem_axes}));
  }
  std::string memory =
      b.Node("Concat", "encoder/memory", steps, {IntAttr("axis", 1)});

  // Decoder.
  std::vector<std::string> embedded = EmbedSteps(b, "decoder/embed", tgt,
                                                 dec_table, T);
  std::vector<LstmWeights> weights;
  for (int64_t l = 0; l < L; ++l) {
    weights.push_back(MakeLstm(b, absl::StrCat("decoder.l", l),
                               l == 0 ? 2 * H : H, H));
  }
  std::string wa = b.Weight("attention.query", {H, H}, H);
  std::string wc = b.Weight("attention.combine", {2 * H, H}, 2 * H);
  std::string wo = b.Weight("softmax.weight", {H, V}, H);
  std::string bo = b.Weight("softmax.bias", {V}, H);
  std::string q_axes = b.Ints("attention/query_axes", {2});
  std::string ctx_axes = b.Ints("attention/context_axes", {1});
  std::vector<LstmState> states(L);
  std::vector<std::string> logits;
  std::string attentional;  // previous step's attention output
  for (int64_t t = 0; t < T; ++t) {
    std::string pre = absl::StrCat("decoder/t", t);
    std::string x = embedded[t];
    if (t == 0) {
      // No attention yet: feed zeros of width H alongside the embedding.
      std::string zeros = b.Node("Sub", pre + "/zero_attention", {x, x});
      x = b.Node("Concat", pre + "/input_feed", {x, zeros},
                 {IntAttr("axis", 1)});
    } else {
      x = b.Node("Concat", pre + "/input_feed", {x, attentional},
                 {IntAttr("axis", 1)});
    }
    for (int64_t l = 0; l < L; ++l) {
      LstmState next = LstmCell(b, absl::StrCat(pre, "/l", l), x,
                                t == 0 ? nullptr : &states[l], weights[l]);
      std::string out = next.h;
      if (l >= 2) {
        out = b.Node("Add", absl::StrCat(pre, "/l", l, "/residual"),
                     {out, x});
      }
      states[l] = next;
      x = out;
    }
    // Luong attention: score = memory . (W_a h).
    std::string q = b.Node("MatMul", pre + "/attention/query", {x, wa});
    q = b.Node("Unsqueeze", pre + "/attention/query_col", {q, q_axes});
    std::string scores =
        b.Node("MatMul", pre + "/attention/scores", {memory, q});
    std::string align = b.Node("Softmax", pre + "/attention/Softmax",
                               {scores}, {IntAttr("axis", 1)});
    align = b.Node("Transpose", pre + "/attention/Transpose", {align},
                   {IntsAttr("perm", {0, 2, 1})});
    std::string ctx =
        b.Node("MatMul", pre + "/attention/context", {align, memory});
    ctx = b.Node("Squeeze", pre + "/attention/Squeeze", {ctx, ctx_axes});
    std::string both = b.Node("Concat", pre + "/attention/Concat", {ctx, x},
                              {IntAttr("axis", 1)});
    attentional = b.Node(
        "Tanh", pre + "/attention/Tanh",
        {b.Node("MatMul", pre + "/attention/combine", {both, wc})});
    std::string logit =
        b.Node("MatMul", pre + "/softmax/MatMul", {attentional, wo});
    logits.push_back(b.Node("Add", pre + "/softmax/Add", {logit, bo}));
  }
  SequenceLoss(b, logits, B, T);
  return b.Finish();
}

// A stacked LSTM language model (Jozefowicz et al. 2016, the RNNLM of the
// placement papers): embedding, L LSTM layers unrolled over T steps, and a
// softmax over the vocabulary at every step.
onnx::ModelProto BuildRnnlm(const ZooParams& p) {
  OnnxBuilder b("rnnlm", p.seed, p.weights);
  const int64_t B = p.batch_size, T = p.seq_len, H = p.hidden, V = p.vocab;
  std::string tokens = b.IntInput("tokens", {T, B});
  std::string table = b.Weight("embedding", {V, H}, H);
  std::vector<std::string> inputs = EmbedSteps(b, "embed", tokens, table, T);
  for (int64_t l = 0; l < p.layers; ++l) {
    std::string pre = absl::StrCat("lstm.l", l);
    LstmWeights w = MakeLstm(b, pre, H, H);
    LstmState state;
    for (int64_t t = 0; t < T; ++t) {
      state = LstmCell(b, absl::StrCat(pre, "/t", t), inputs[t],
                       t == 0 ? nullptr : &state, w);
      inputs[t] = state.h;
    }
  }
  std::string wo = b.Weight("softmax.weight", {H, V}, H);
  std::string bo = b.Weight("softmax.bias", {V}, H);
  std::vector<std::string> logits;
  for (int64_t t = 0; t < T; ++t) {
    std::string pre = absl::StrCat("softmax/t", t);
    logits.push_back(b.Node(
        "Add", pre + "/Add",
        {b.Node("MatMul", pre + "/MatMul", {inputs[t], wo}), bo}));
  }
  SequenceLoss(b, logits, B, T);
  return b.Finish();
}

}  // namespace placer::zoo
