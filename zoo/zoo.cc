#include "zoo/zoo.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "base/status_helpers.h"
#include "zoo/onnx_builder.h"

namespace placer::zoo {

// Toy graphs for tests: small MatMul/Relu networks with a known structure.
// `layers` is the depth (chain) or the number of branches (wide).
onnx::ModelProto BuildChain(const ZooParams& p) {
  OnnxBuilder b("chain", p.seed, p.weights);
  std::string x = b.Input("x", {p.batch_size, p.hidden});
  for (int64_t i = 0; i < p.layers; ++i) {
    std::string w = b.Weight(absl::StrCat("w", i), {p.hidden, p.hidden},
                             p.hidden);
    x = b.Node("MatMul", absl::StrCat("matmul", i), {x, w});
    x = b.Node("Relu", absl::StrCat("relu", i), {x});
  }
  b.Output(x, onnx::TensorProto::FLOAT, {p.batch_size, p.hidden});
  return b.Finish();
}

onnx::ModelProto BuildDiamond(const ZooParams& p) {
  OnnxBuilder b("diamond", p.seed, p.weights);
  const int64_t h = p.hidden;
  std::string x = b.Input("x", {p.batch_size, h});
  std::string top = b.Node("MatMul", "top", {x, b.Weight("w_top", {h, h}, h)});
  std::string left =
      b.Node("MatMul", "left", {top, b.Weight("w_left", {h, h}, h)});
  std::string right =
      b.Node("MatMul", "right", {top, b.Weight("w_right", {h, h}, h)});
  std::string join = b.Node("Add", "join", {left, right});
  b.Output(join, onnx::TensorProto::FLOAT, {p.batch_size, h});
  return b.Finish();
}

onnx::ModelProto BuildWide(const ZooParams& p) {
  OnnxBuilder b("wide", p.seed, p.weights);
  const int64_t h = p.hidden;
  std::string x = b.Input("x", {p.batch_size, h});
  std::vector<std::string> branches;
  for (int64_t i = 0; i < p.layers; ++i) {
    std::string w = b.Weight(absl::StrCat("w", i), {h, h}, h);
    std::string y = b.Node("MatMul", absl::StrCat("branch", i, "/matmul"),
                           {x, w});
    branches.push_back(
        b.Node("Relu", absl::StrCat("branch", i, "/relu"), {y}));
  }
  std::string sum = b.Node("Sum", "sum", branches);
  b.Output(sum, onnx::TensorProto::FLOAT, {p.batch_size, h});
  return b.Finish();
}

// A seeded random layered DAG (training graphs for the RL placer that no
// one designed): `layers` layers of `seq_len` nodes each. A node
// concatenates the output of a random node of the layer below with that of
// a random node of any earlier layer (the input x for the first layer),
// multiplies by its own weight to a width of hidden/2, hidden or 2·hidden
// (drawn) and applies Relu. The last layer's outputs are concatenated and
// classified into `vocab` classes. The seed draws the structure (and the
// weights); every seed has 3·layers·seq_len + 3 ops.
onnx::ModelProto BuildRandomDag(const ZooParams& p) {
  OnnxBuilder b("random_dag", p.seed, p.weights);
  std::mt19937_64 rng(p.seed);
  auto draw = [&](int64_t n) {
    return static_cast<int64_t>(
        std::uniform_int_distribution<uint64_t>(0, n - 1)(rng));
  };
  const int64_t widths[] = {std::max<int64_t>(1, p.hidden / 2), p.hidden,
                            2 * p.hidden};
  std::string x = b.Input("x", {p.batch_size, p.hidden});
  struct Out {
    std::string name;
    int64_t width;
  };
  std::vector<std::vector<Out>> layers;
  for (int64_t l = 0; l < p.layers; ++l) {
    // The layer below's nodes in a drawn order: each is some node's first
    // input, so every node's output reaches the loss.
    std::vector<int64_t> below(p.seq_len);
    for (int64_t i = 0; i < p.seq_len; ++i) below[i] = i;
    for (int64_t i = p.seq_len - 1; i > 0; --i) {
      std::swap(below[i], below[draw(i + 1)]);
    }
    std::vector<Out> layer;
    for (int64_t i = 0; i < p.seq_len; ++i) {
      Out a{x, p.hidden}, c{x, p.hidden};
      if (l > 0) {
        a = layers[l - 1][below[i]];
        const std::vector<Out>& earlier = layers[draw(l)];
        c = earlier[draw(p.seq_len)];
      }
      const std::string pre = absl::StrCat("l", l, "/n", i);
      const int64_t in = a.width + c.width, out = widths[draw(3)];
      std::string joined = b.Node("Concat", pre + "/concat", {a.name, c.name},
                                  {IntAttr("axis", 1)});
      std::string y = b.Node("MatMul", pre + "/matmul",
                             {joined, b.Weight(pre + ".w", {in, out}, in)});
      layer.push_back({b.Node("Relu", pre + "/relu", {y}), out});
    }
    layers.push_back(std::move(layer));
  }
  std::vector<std::string> last;
  int64_t width = 0;
  for (const Out& o : layers.empty() ? std::vector<Out>{{x, p.hidden}}
                                     : layers.back()) {
    last.push_back(o.name);
    width += o.width;
  }
  std::string top = b.Node("Concat", "head/concat", last, {IntAttr("axis", 1)});
  std::string logits =
      b.Node("MatMul", "head/matmul",
             {top, b.Weight("head.w", {width, p.vocab}, width)});
  std::string labels = b.IntInput("labels", {p.batch_size});
  std::string loss =
      b.Node("SoftmaxCrossEntropyLoss", "loss", {logits, labels});
  b.Output(loss, onnx::TensorProto::FLOAT, {});
  return b.Finish();
}

const std::vector<ZooModel>& ZooModels() {
  static const std::vector<ZooModel>* models = [] {
    auto* m = new std::vector<ZooModel>();
    auto add = [&](std::string name, std::string description, ZooParams d,
                   onnx::ModelProto (*build)(const ZooParams&)) {
      m->push_back({std::move(name), std::move(description), d, build});
    };
    ZooParams cnn;
    cnn.batch_size = 32;
    cnn.image_size = 299;
    add("inception_v3", "Inception-V3 (Szegedy et al. 2016), 299x299 images",
        cnn, BuildInceptionV3);
    cnn.image_size = 224;
    add("resnet50", "ResNet-50 v1.5 (He et al. 2016), 224x224 images", cnn,
        BuildResNet50);
    ZooParams nmt;
    nmt.batch_size = 64;
    nmt.seq_len = 50;
    nmt.hidden = 1024;
    nmt.vocab = 32000;
    for (int layers : {2, 4, 8}) {
      nmt.layers = layers;
      add(absl::StrCat("gnmt", layers),
          absl::StrCat("GNMT-style NMT, ", layers,
                       "-layer LSTM encoder and decoder with attention, "
                       "unrolled over time"),
          nmt, BuildGnmt);
    }
    ZooParams lm;
    lm.batch_size = 64;
    lm.seq_len = 40;
    lm.hidden = 2048;
    lm.vocab = 32000;
    lm.layers = 2;
    add("rnnlm", "2-layer LSTM language model unrolled over time", lm,
        BuildRnnlm);
    ZooParams tf;
    tf.batch_size = 32;
    tf.seq_len = 64;
    tf.hidden = 1024;
    tf.vocab = 32000;
    tf.layers = 6;
    add("transformer_big",
        "Transformer (big): 6+6 layers, d_model 1024, 16 heads, d_ff 4096",
        tf, BuildTransformer);
    // Decoder LLMs at their published sizes: GPT-3 (Brown et al. 2020,
    // Table 2.1; heads of 64-128 dims, so 1.3B has 16 heads of 128 and 13B
    // a width of 5120 that 40 heads divide), Llama 2 (Touvron et al. 2023)
    // and Llama 3 / 3.1 (Grattafiori et al. 2024). A micro-batch of one
    // sequence by default; --batch, seq_len=... and the rest override.
    struct Decoder {
      const char* name;
      const char* family;
      int64_t layers, hidden, heads, kv_heads, ffn, vocab, seq;
    };
    const Decoder decoders[] = {
        {"gpt3_125m", "GPT-3 125M", 12, 768, 12, 12, 3072, 50257, 2048},
        {"gpt3_350m", "GPT-3 350M", 24, 1024, 16, 16, 4096, 50257, 2048},
        {"gpt3_760m", "GPT-3 760M", 24, 1536, 16, 16, 6144, 50257, 2048},
        {"gpt3_1.3b", "GPT-3 1.3B", 24, 2048, 16, 16, 8192, 50257, 2048},
        {"gpt3_2.7b", "GPT-3 2.7B", 32, 2560, 32, 32, 10240, 50257, 2048},
        {"gpt3_6.7b", "GPT-3 6.7B", 32, 4096, 32, 32, 16384, 50257, 2048},
        {"gpt3_13b", "GPT-3 13B", 40, 5120, 40, 40, 20480, 50257, 2048},
        {"gpt3_175b", "GPT-3 175B", 96, 12288, 96, 96, 49152, 50257, 2048},
        {"llama2_7b", "Llama 2 7B", 32, 4096, 32, 32, 11008, 32000, 4096},
        {"llama2_13b", "Llama 2 13B", 40, 5120, 40, 40, 13824, 32000, 4096},
        {"llama2_70b", "Llama 2 70B", 80, 8192, 64, 8, 28672, 32000, 4096},
        {"llama3_8b", "Llama 3 8B", 32, 4096, 32, 8, 14336, 128256, 8192},
        {"llama3_70b", "Llama 3 70B", 80, 8192, 64, 8, 28672, 128256, 8192},
        {"llama3.1_405b", "Llama 3.1 405B", 126, 16384, 128, 8, 53248, 128256,
         8192},
    };
    auto decoder = [&](const std::string& name, const Decoder& d,
                       const std::string& what, bool published_size) {
      ZooParams p;
      p.batch_size = 1;
      p.layers = d.layers;
      p.hidden = d.hidden;
      p.heads = d.heads;
      p.kv_heads = d.kv_heads;
      p.ffn = d.ffn;
      p.vocab = d.vocab;
      p.seq_len = d.seq;
      const bool llama = absl::StartsWith(d.name, "llama");
      add(name,
          absl::StrCat(what, ": ", d.layers, " layers, hidden ", d.hidden, ", ",
                       d.heads, " heads",
                       d.kv_heads < d.heads
                           ? absl::StrCat(" (", d.kv_heads, " key/value)")
                           : "",
                       ", ffn ", d.ffn, ", vocab ", d.vocab, ", ", d.seq,
                       " tokens", llama ? "; RMSNorm, RoPE, SwiGLU" : ""),
          p, llama ? BuildLlama : BuildGpt);
      m->back().published_size = published_size;
    };
    decoder("gpt", decoders[0],
            "GPT decoder (pre-norm, GELU, tied output), GPT-3 125M's sizes",
            false);
    decoder("llama", decoders[11],
            "Llama decoder (grouped-query attention), Llama 3 8B's sizes",
            false);
    for (const Decoder& d : decoders) decoder(d.name, d, d.family, true);
    ZooParams toy;
    toy.batch_size = 16;
    toy.hidden = 64;
    toy.layers = 8;
    add("chain", "toy: a chain of MatMul+Relu layers", toy, BuildChain);
    add("diamond", "toy: one MatMul feeding two that join in an Add", toy,
        BuildDiamond);
    add("wide", "toy: parallel MatMul+Relu branches joined by a Sum", toy,
        BuildWide);
    ZooParams dag;
    dag.batch_size = 64;
    dag.layers = 8;
    dag.seq_len = 4;
    dag.hidden = 1024;
    dag.vocab = 1000;
    add("random_dag",
        "seeded random layered DAG: layers x seq_len Concat+MatMul+Relu "
        "nodes of drawn widths (seed: the structure)",
        dag, BuildRandomDag);
    return m;
  }();
  return *models;
}

absl::StatusOr<ZooParams> ResolveZooParams(absl::string_view name,
                                           const ZooParams& params) {
  for (const ZooModel& m : ZooModels()) {
    if (m.name != name) continue;
    ZooParams p = params;
    const ZooParams& d = m.defaults;
    auto fill = [](int64_t& v, int64_t def) {
      if (v == 0) v = def;
    };
    fill(p.batch_size, d.batch_size);
    fill(p.layers, d.layers);
    fill(p.seq_len, d.seq_len);
    fill(p.hidden, d.hidden);
    fill(p.vocab, d.vocab);
    fill(p.image_size, d.image_size);
    fill(p.heads, d.heads);
    // GPT has no grouped-query attention: its key/value heads are its heads.
    fill(p.kv_heads, m.build == BuildGpt ? p.heads : d.kv_heads);
    fill(p.ffn, d.ffn);
    for (auto [field, value] :
         {std::pair<const char*, int64_t>{"batch_size", p.batch_size},
          {"layers", p.layers},
          {"seq_len", p.seq_len},
          {"hidden", p.hidden},
          {"vocab", p.vocab},
          {"image_size", p.image_size},
          {"heads", p.heads},
          {"kv_heads", p.kv_heads},
          {"ffn", p.ffn}}) {
      if (value < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("zoo:", name, ": ", field, " must be positive, got ",
                         value));
      }
    }
    if (m.build == BuildTransformer && p.hidden % 16 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zoo:", name, ": hidden (", p.hidden,
          ") must be a multiple of the 16 attention heads"));
    }
    if (m.build == BuildGpt || m.build == BuildLlama) {
      if (p.heads == 0 || p.hidden % p.heads != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "zoo:", name, ": hidden (", p.hidden, ") must be a multiple of "
            "heads (", p.heads, ")"));
      }
      if (p.kv_heads == 0 || p.heads % p.kv_heads != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "zoo:", name, ": heads (", p.heads, ") must be a multiple of "
            "kv_heads (", p.kv_heads, ")"));
      }
      if (m.build == BuildGpt && p.kv_heads != p.heads) {
        return absl::InvalidArgumentError(absl::StrCat(
            "zoo:", name, ": GPT has no grouped-query attention (kv_heads ",
            p.kv_heads, " != heads ", p.heads, "); zoo:llama has"));
      }
      if (m.build == BuildLlama && (p.hidden / p.heads) % 2 != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "zoo:", name, ": the head width hidden / heads (",
            p.hidden / p.heads, ") must be even for rotary embeddings"));
      }
    }
    if ((m.build == BuildInceptionV3 && p.image_size < 75) ||
        (m.build == BuildResNet50 && p.image_size < 32)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zoo:", name, ": image_size ", p.image_size, " is too small"));
    }
    return p;
  }
  std::vector<std::string> names;
  for (const ZooModel& m : ZooModels()) names.push_back(m.name);
  return absl::NotFoundError(absl::StrCat("unknown zoo model '", name,
                                          "'; known: ",
                                          absl::StrJoin(names, ", ")));
}

namespace {

const ZooModel* FindZooModel(absl::string_view name) {
  for (const ZooModel& m : ZooModels()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

int64_t WeightBytes(const onnx::ModelProto& model) {
  double bytes = 0;
  for (const onnx::TensorProto& t : model.graph().initializer()) {
    double n = 4;  // the zoo's weights are float32
    for (int64_t d : t.dims()) n *= static_cast<double>(d);
    bytes += n;
  }
  return bytes >= 9e18 ? std::numeric_limits<int64_t>::max()
                       : static_cast<int64_t>(bytes);
}

}  // namespace

absl::StatusOr<int64_t> EstimateZooOps(absl::string_view name,
                                       const ZooParams& params) {
  ASSIGN_OR_RETURN(ZooParams p, ResolveZooParams(name, params));
  const ZooModel* m = FindZooModel(name);
  // Tiny probes at layers L0, L0+1 and seq_len T0, T0+1; L0 = 4 is past
  // every builder's special first layers (GNMT's bidirectional layer and
  // its residuals from layer 3 on).
  constexpr int64_t kL0 = 4, kT0 = 2;
  double count[2][2];
  for (int dl = 0; dl < 2; ++dl) {
    for (int dt = 0; dt < 2; ++dt) {
      ZooParams tiny = p;
      tiny.layers = kL0 + dl;
      tiny.seq_len = kT0 + dt;
      tiny.batch_size = 1;
      tiny.hidden = 16;
      tiny.vocab = 16;
      tiny.weights = false;
      count[dl][dt] = m->build(tiny).graph().node_size();
    }
  }
  const double a = count[0][0];
  const double per_layer = count[1][0] - a;
  const double per_step = count[0][1] - a;
  const double cross = count[1][1] - count[1][0] - count[0][1] + a;
  const double l = static_cast<double>(p.layers - kL0);
  const double t = static_cast<double>(p.seq_len - kT0);
  const double ops = a + per_layer * l + per_step * t + cross * l * t;
  if (ops >= 9e18) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(0, static_cast<int64_t>(std::llround(ops)));
}

absl::StatusOr<onnx::ModelProto> BuildZooModel(absl::string_view name,
                                               const ZooParams& params,
                                               const ZooLimits& limits) {
  ASSIGN_OR_RETURN(ZooParams p, ResolveZooParams(name, params));
  const ZooModel* m = FindZooModel(name);
  ASSIGN_OR_RETURN(int64_t ops, EstimateZooOps(name, params));
  if (ops > limits.max_ops) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "zoo:", name, " with layers=", p.layers, ", seq_len=", p.seq_len,
        " would have ", ops, " ops, over the limit of ", limits.max_ops,
        " (not built)"));
  }
  ZooParams shapes_only = p;
  shapes_only.weights = false;
  onnx::ModelProto model = m->build(shapes_only);
  if (!p.weights) return model;
  const int64_t bytes = WeightBytes(model);
  if (bytes > limits.max_weight_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "zoo:", name, " would generate ", bytes, " bytes of weights, over "
        "the limit of ", limits.max_weight_bytes,
        " (not built; --noweights needs none)"));
  }
  return m->build(p);
}

}  // namespace placer::zoo
