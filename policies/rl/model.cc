#include "policies/rl/model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace placer {
namespace {

// Draws an index from one row of probabilities.
int Draw(const float* probs, int count, std::mt19937_64& rng) {
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  double sum = 0;
  for (int i = 0; i < count; ++i) {
    sum += probs[i];
    if (u < sum) return i;
  }
  // Rounding left u above the total: the last index with mass.
  for (int i = count - 1; i > 0; --i) {
    if (probs[i] > 0) return i;
  }
  return 0;
}

int ArgMax(const float* values, int count) {
  return static_cast<int>(std::max_element(values, values + count) - values);
}

torch::Tensor Noise(at::IntArrayRef shape, double stddev,
                    std::mt19937_64& rng) {
  torch::Tensor t = torch::empty(shape, torch::kFloat);
  std::normal_distribution<float> normal(0.0f, static_cast<float>(stddev));
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = normal(rng);
  return t;
}

// Subtracted from a closed device's logit: exp(-1e4) is 0 in float.
constexpr float kClosed = 1e4f;

// Step t of the Placer's decoder: 1 for each (row, device) that group t of
// the row would overflow, given `used` (memory per row and device so far);
// a row whose group fits nowhere, or whose given device is closed, stays
// open. Empty when nothing is closed.
std::vector<float> ClosedDevices(const std::vector<float>& group_memory,
                                 const std::vector<float>& used,
                                 const std::vector<float>& capacity, int t,
                                 int groups, const RlBatch* given) {
  const int d = static_cast<int>(capacity.size());
  const int k = static_cast<int>(used.size()) / std::max(d, 1);
  std::vector<float> closed;
  for (int r = 0; r < k; ++r) {
    const float need = group_memory[static_cast<size_t>(r) * groups + t];
    if (need <= 0) continue;
    const float* on = &used[static_cast<size_t>(r) * d];
    int open = 0;
    for (int x = 0; x < d; ++x) open += on[x] + need <= capacity[x];
    if (open == 0 || open == d) continue;
    if (given != nullptr) {
      const int x = given->device_of_group[r][t];
      if (on[x] + need > capacity[x]) continue;
    }
    if (closed.empty()) closed.assign(static_cast<size_t>(k) * d, 0);
    for (int x = 0; x < d; ++x) {
      closed[static_cast<size_t>(r) * d + x] =
          on[x] + need <= capacity[x] ? 0.0f : 1.0f;
    }
  }
  return closed;
}

}  // namespace

std::string RlModelOptions::Describe() const {
  std::string s = absl::StrFormat(
      "g=%d gh=%d ph=%d de=%d clip=%g t=%g mm=%d", groups, grouper_hidden,
      placer_hidden, device_embedding, logit_clip, temperature,
      memory_mask ? 1 : 0);
  // Without an encoder the words are those of the checkpoints made before
  // it existed, which therefore still load.
  if (sage_layers > 0) {
    absl::StrAppendFormat(&s, " sage=%dx%d", sage_layers, sage_hidden);
  }
  if (device_agnostic) s += " any-devices";
  if (heuristic_input) s += " heuristic-input";
  return s;
}

RlGraphTensors::RlGraphTensors(const RlGraph& g, int groups) : graph(&g) {
  const int n = g.num_units();
  const int width = RlGraph::FeatureCount(g.num_devices);
  features = torch::from_blob(const_cast<float*>(g.features.data()),
                              {n, width}, torch::kFloat)
                 .clone();
  compute_fraction = torch::from_blob(
      const_cast<float*>(g.compute_fraction.data()), {n}, torch::kFloat)
                         .clone();
  memory_fraction = torch::from_blob(
      const_cast<float*>(g.memory_fraction.data()), {n}, torch::kFloat)
                        .clone();
  structural_group = g.StructuralGroups(groups);
  std::vector<int64_t> wide(structural_group.begin(), structural_group.end());
  structure = torch::one_hot(torch::tensor(wide, torch::kLong), groups)
                  .to(torch::kFloat);
  // The rows without their per-device columns, and those columns' least,
  // mean and largest value.
  constexpr int kShared = RlGraph::kAgnosticFeatures - 3;
  torch::Tensor speed = features.narrow(1, kShared, width - kShared);
  agnostic_features =
      g.num_devices > 0
          ? torch::cat({features.narrow(1, 0, kShared),
                        std::get<0>(speed.min(1, /*keepdim=*/true)),
                        speed.mean(1, /*keepdim=*/true),
                        std::get<0>(speed.max(1, /*keepdim=*/true))},
                       1)
          : torch::zeros({n, RlGraph::kAgnosticFeatures});
  device_features =
      torch::from_blob(const_cast<float*>(g.device_features.data()),
                       {g.num_devices, RlGraph::kDeviceFeatures},
                       torch::kFloat)
          .clone();
  std::vector<float> start(static_cast<size_t>(n) * g.num_devices, 0);
  if (static_cast<int>(g.start_device.size()) == n) {
    for (int u = 0; u < n; ++u) {
      const int x = g.start_device[u];
      if (x >= 0 && x < g.num_devices) {
        start[static_cast<size_t>(u) * g.num_devices + x] =
            static_cast<float>(g.units.min_seconds(u)) + 1e-12f;
      }
    }
  }
  start_seconds =
      torch::from_blob(start.data(), {n, g.num_devices}, torch::kFloat)
          .clone();
  std::vector<int64_t> src, dst;
  std::vector<float> degree(n, 0);
  for (const RlLink& link : g.links) {
    src.push_back(link.a);
    dst.push_back(link.b);
    src.push_back(link.b);
    dst.push_back(link.a);
    ++degree[link.a];
    ++degree[link.b];
  }
  for (float& x : degree) x = x > 0 ? 1.0f / x : 0.0f;
  neighbour_src = torch::tensor(src, torch::kLong);
  neighbour_dst = torch::tensor(dst, torch::kLong);
  inverse_degree =
      torch::from_blob(degree.data(), {n, 1}, torch::kFloat).clone();
}

std::vector<int> RlBatch::DeviceOfUnit(int row) const {
  std::vector<int> devices(group_of_unit[row].size());
  for (size_t u = 0; u < devices.size(); ++u) {
    devices[u] = device_of_group[row][group_of_unit[row][u]];
  }
  return devices;
}

HierarchicalPlacerImpl::HierarchicalPlacerImpl(int features, int devices,
                                               RlModelOptions options,
                                               uint64_t seed)
    : features_(options.device_agnostic ? RlGraph::kAgnosticFeatures
                                         : features),
      devices_(devices),
      options_(options) {
  features = features_;  // the width of the rows it reads (Rows)
  const int g = options.groups;
  const int gh = options.grouper_hidden;
  const int h = options.placer_hidden;
  const int e = options.device_embedding;
  const int sh = options.sage_layers > 0 ? options.sage_hidden : 0;
  for (int k = 0; k < options.sage_layers; ++k) {
    sage_.push_back(register_module(
        absl::StrCat("sage", k),
        torch::nn::Linear(2 * (k == 0 ? features : sh), sh)));
  }
  grouper_hidden_ = register_module("grouper_hidden",
                                    torch::nn::Linear(features + sh + g, gh));
  grouper_out_ = register_module("grouper_out", torch::nn::Linear(gh, g));
  group_embed_ = register_module("group_embed",
                                 torch::nn::Linear(features + 3 + g + sh, h));
  encoder_ = register_module(
      "encoder", torch::nn::LSTM(torch::nn::LSTMOptions(h, h)
                                     .bidirectional(true)
                                     .batch_first(true)));
  decoder_ = register_module("decoder", torch::nn::LSTMCell(e + 2 * h, h));
  if (!options.device_agnostic) {
    device_embed_ =
        register_module("device_embed", torch::nn::Embedding(devices + 1, e));
  }
  attend_encoder_ = register_module(
      "attend_encoder", torch::nn::Linear(torch::nn::LinearOptions(2 * h, h)
                                              .bias(false)));
  attend_decoder_ = register_module("attend_decoder",
                                    torch::nn::Linear(h, h));
  attend_score_ = register_module(
      "attend_score",
      torch::nn::Linear(torch::nn::LinearOptions(h, 1).bias(false)));
  if (options.device_agnostic) {
    device_in_ = register_module(
        "device_in", torch::nn::Linear(RlGraph::kDeviceFeatures, e));
    no_device_ = register_parameter("no_device", torch::zeros({e}));
    score_query_ = register_module("score_query", torch::nn::Linear(3 * h, h));
    score_key_ = register_module("score_key", torch::nn::Linear(e, h));
    score_state_ = register_module(
        "score_state",
        torch::nn::Linear(torch::nn::LinearOptions(3, h).bias(false)));
    score_out_ = register_module(
        "score_out",
        torch::nn::Linear(torch::nn::LinearOptions(h, 1).bias(false)));
  } else {
    device_out_ = register_module("device_out",
                                  torch::nn::Linear(3 * h, devices));
  }
  if (options.heuristic_input) {
    start_weight_ = register_parameter("start_weight", torch::zeros({1}));
  }

  // Uniform(-0.1, 0.1) from the seed, parameter by parameter in name order.
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-0.1f, 0.1f);
  torch::NoGradGuard no_grad;
  for (auto& p : named_parameters()) {
    float* data = p.value().data_ptr<float>();
    for (int64_t i = 0; i < p.value().numel(); ++i) data[i] = uniform(rng);
  }
  if (options.heuristic_input) start_weight_.fill_(kStartWeight);
}

torch::Tensor HierarchicalPlacerImpl::Clip(const torch::Tensor& x) const {
  const double c = options_.logit_clip;
  torch::Tensor clipped = c > 0 ? c * torch::tanh(x / c) : x;
  return clipped / options_.temperature;
}

const torch::Tensor& HierarchicalPlacerImpl::Rows(
    const RlGraphTensors& graph) const {
  return options_.device_agnostic ? graph.agnostic_features : graph.features;
}

torch::Tensor HierarchicalPlacerImpl::Encode(const RlGraphTensors& graph) {
  torch::Tensor h = Rows(graph);
  if (sage_.empty()) return h.new_zeros({h.size(0), 0});
  for (torch::nn::Linear& layer : sage_) {
    torch::Tensor mean =
        torch::zeros_like(h).index_add_(
            0, graph.neighbour_dst, h.index_select(0, graph.neighbour_src)) *
        graph.inverse_degree;
    h = torch::relu(layer(torch::cat({h, mean}, 1)));
    h = h / h.norm(2, 1, /*keepdim=*/true).clamp_min(1e-6);
  }
  return h;
}

RlBatch HierarchicalPlacerImpl::Run(const RlGraphTensors& graph, int k,
                                    RlSampleMode mode, double noise_stddev,
                                    std::mt19937_64& rng,
                                    const RlBatch* given,
                                    bool sample_groups) {
  const RlGraph& rg = *graph.graph;
  const int n = rg.num_units();
  const int g = options_.groups;
  const int d = rg.num_devices;
  TORCH_CHECK(options_.device_agnostic || d == devices_, "rl: a model for ",
              devices_, " devices asked to place on ", d);
  const torch::Tensor& rows = Rows(graph);
  const bool noisy = mode == RlSampleMode::kSample && noise_stddev > 0;
  const bool draw_groups = mode == RlSampleMode::kSample && sample_groups;
  RlBatch out;

  // Grouper. The noise (one draw per step, shared by the batch's rows)
  // and the log-probabilities are per unit; rows gather their choices.
  torch::Tensor embedding = Encode(graph);  // [n, sh]
  torch::Tensor logits =
      Clip(grouper_out_(torch::relu(grouper_hidden_(
          torch::cat({rows, embedding, graph.structure}, 1)))));
  if (noisy && draw_groups) logits = logits + Noise({n, g}, noise_stddev, rng);
  torch::Tensor group_logp = torch::log_softmax(logits, 1);  // [n, g]
  if (mode == RlSampleMode::kGiven) {
    out.group_of_unit = given->group_of_unit;
  } else if (options_.heuristic_input && !draw_groups) {
    // The structural groups themselves (cut by start device), not the
    // Grouper's learned copy of them, which on an unseen graph can mix
    // what the start placement keeps apart.
    out.group_of_unit.assign(k, graph.structural_group);
  } else {
    torch::Tensor chooser =
        (draw_groups ? group_logp.exp() : logits).detach().contiguous();
    const float* p = chooser.data_ptr<float>();
    out.group_of_unit.assign(k, std::vector<int>(n));
    for (int r = 0; r < k; ++r) {
      for (int u = 0; u < n; ++u) {
        const float* row = p + static_cast<int64_t>(u) * g;
        out.group_of_unit[r][u] =
            draw_groups ? Draw(row, g, rng) : ArgMax(row, g);
      }
    }
  }
  std::vector<int64_t> flat_groups;
  flat_groups.reserve(static_cast<size_t>(k) * n);
  for (int r = 0; r < k; ++r) {
    for (int u = 0; u < n; ++u) {
      flat_groups.push_back(static_cast<int64_t>(r) * g +
                            out.group_of_unit[r][u]);
    }
  }
  torch::Tensor slot =
      torch::tensor(flat_groups, torch::kLong);  // k*g slot per (row, unit)
  // Row r's unit u chose group slot % g: its log-probability is entry
  // u*g + slot % g of the flattened [n, g] table.
  torch::Tensor unit_base = torch::arange(n, torch::kLong).repeat({k}) * g;
  torch::Tensor log_prob = group_logp.view({-1})
                               .index_select(0, unit_base + slot % g)
                               .view({k, n})
                               .sum(1);
  out.group_log_prob = log_prob;
  torch::Tensor entropy = torch::zeros({k});
  if (mode == RlSampleMode::kSample && !sample_groups) {
    log_prob = torch::zeros({k});
  } else {
    entropy = entropy - (group_logp.exp() * group_logp).sum();
  }

  // Group embeddings, from the drawn grouping (constants: no gradient).
  torch::Tensor embed_in;
  std::vector<float> nonempty(static_cast<size_t>(k) * g, 0);
  std::vector<float> group_memory;  // [k * g], fractions of the units' bytes
  std::vector<float> group_compute;  // [k * g], fractions of their seconds
  torch::Tensor start_share;  // [k, g, d]: heuristic_input's shares
  {
    torch::NoGradGuard no_grad;
    torch::Tensor ones = torch::ones({k * n}, torch::kFloat);
    torch::Tensor counts =
        torch::zeros({k * g}, torch::kFloat).index_add_(0, slot, ones);
    torch::Tensor sums =
        torch::zeros({k * g, features_}, torch::kFloat)
            .index_add_(0, slot, rows.repeat({k, 1}));
    torch::Tensor means = sums / counts.clamp_min(1).unsqueeze(1);
    torch::Tensor compute =
        torch::zeros({k * g}, torch::kFloat)
            .index_add_(0, slot, graph.compute_fraction.repeat({k}));
    torch::Tensor memory =
        torch::zeros({k * g}, torch::kFloat)
            .index_add_(0, slot, graph.memory_fraction.repeat({k}));
    std::vector<float> adjacency(static_cast<size_t>(k) * g * g, 0);
    for (int r = 0; r < k; ++r) {
      float* a = &adjacency[static_cast<size_t>(r) * g * g];
      const std::vector<int>& of = out.group_of_unit[r];
      for (const RlLink& link : rg.links) {
        int ga = of[link.a], gb = of[link.b];
        a[ga * g + gb] += link.byte_fraction;
        if (ga != gb) a[gb * g + ga] += link.byte_fraction;
      }
    }
    torch::Tensor adjacency_t =
        torch::from_blob(adjacency.data(), {k * g, g}, torch::kFloat).clone();
    const float* c = counts.data_ptr<float>();
    for (int i = 0; i < k * g; ++i) nonempty[i] = c[i] > 0 ? 1.0f : 0.0f;
    const float* m = memory.data_ptr<float>();
    group_memory.assign(m, m + static_cast<size_t>(k) * g);
    const float* w = compute.data_ptr<float>();
    group_compute.assign(w, w + static_cast<size_t>(k) * g);
    if (options_.heuristic_input) {
      torch::Tensor on = torch::zeros({k * g, d}, torch::kFloat)
                             .index_add_(0, slot,
                                         graph.start_seconds.repeat({k, 1}));
      start_share = (on / on.sum(1, /*keepdim=*/true).clamp_min(1e-30))
                        .view({k, g, d});
    }
    embed_in = torch::cat({means, (counts / std::max(n, 1)).unsqueeze(1),
                           compute.unsqueeze(1), memory.unsqueeze(1),
                           adjacency_t},
                          1)
                   .view({k, g, features_ + 3 + g});
  }
  if (embedding.size(1) > 0) {
    // Each group's mean member embedding; differentiable, so the device
    // choices' log-probabilities train the encoder.
    torch::Tensor counts =
        torch::zeros({k * g}, torch::kFloat)
            .index_add_(0, slot, torch::ones({k * n}, torch::kFloat));
    torch::Tensor sums =
        torch::zeros({k * g, embedding.size(1)}, torch::kFloat)
            .index_add_(0, slot, embedding.repeat({k, 1}));
    torch::Tensor means = sums / counts.clamp_min(1).unsqueeze(1);
    embed_in = torch::cat({embed_in, means.view({k, g, -1})}, 2);
  }
  torch::Tensor mask =
      torch::from_blob(nonempty.data(), {k, g}, torch::kFloat).clone();

  // Placer: bidirectional encoder, attention decoder.
  torch::Tensor h = torch::tanh(group_embed_(embed_in));          // [k, g, H]
  torch::Tensor encoded = std::get<0>(encoder_->forward(h));      // [k, g, 2H]
  torch::Tensor keys = attend_encoder_(encoded);                  // [k, g, H]
  const int hidden = options_.placer_hidden;
  torch::Tensor hx = torch::zeros({k, hidden});
  torch::Tensor cx = torch::zeros({k, hidden});
  torch::Tensor previous = torch::full({k}, d, torch::kLong);
  // device_agnostic: each device embedded from its numbers ([d, e]; row d
  // is "none yet"), and its attention key ([d, H]).
  torch::Tensor device_table, device_keys;
  if (options_.device_agnostic) {
    torch::Tensor embedded = torch::tanh(device_in_(graph.device_features));
    device_table = torch::cat({embedded, no_device_.unsqueeze(0)}, 0);
    device_keys = score_key_(embedded);
  }
  out.device_of_group.assign(k, std::vector<int>(g, 0));
  std::vector<float> used(static_cast<size_t>(k) * d, 0);  // memory per device
  std::vector<float> busy(static_cast<size_t>(k) * d, 0);  // compute per device
  for (int t = 0; t < g; ++t) {
    torch::Tensor score =
        attend_score_(torch::tanh(keys + attend_decoder_(hx).unsqueeze(1)))
            .squeeze(2);                                          // [k, g]
    torch::Tensor context =
        (torch::softmax(score, 1).unsqueeze(2) * encoded).sum(1); // [k, 2H]
    torch::Tensor previous_embedded =
        options_.device_agnostic ? device_table.index_select(0, previous)
                                 : device_embed_(previous);
    std::tie(hx, cx) = decoder_->forward(
        torch::cat({previous_embedded, context}, 1),
        std::make_tuple(hx, cx));
    torch::Tensor query = torch::cat({hx, encoded.select(1, t)}, 1);
    torch::Tensor step_logits;                                    // [k, d]
    if (options_.device_agnostic) {
      // Identical devices differ only by what the row put on them so far:
      // its memory and compute there, and whether it was the last choice
      // (relabelling devices relabels these too).
      std::vector<float> state(static_cast<size_t>(k) * d * 3);
      const int64_t* last = previous.data_ptr<int64_t>();
      for (int r = 0; r < k; ++r) {
        for (int x = 0; x < d; ++x) {
          float* f = &state[(static_cast<size_t>(r) * d + x) * 3];
          f[0] = used[static_cast<size_t>(r) * d + x];
          f[1] = busy[static_cast<size_t>(r) * d + x];
          f[2] = last[r] == x ? 1.0f : 0.0f;
        }
      }
      torch::Tensor state_keys = score_state_(
          torch::from_blob(state.data(), {k, d, 3}, torch::kFloat).clone());
      step_logits = Clip(
          score_out_(torch::tanh(score_query_(query).unsqueeze(1) +
                                 device_keys.unsqueeze(0) + state_keys))
              .squeeze(2));
    } else {
      step_logits = Clip(device_out_(query));
    }
    if (options_.heuristic_input) {
      step_logits = step_logits + start_weight_ * start_share.select(1, t);
    }
    if (noisy) step_logits = step_logits + Noise({k, d}, noise_stddev, rng);
    if (options_.memory_mask) {
      std::vector<float> closed =
          ClosedDevices(group_memory, used, rg.device_capacity, t, g,
                        mode == RlSampleMode::kGiven ? given : nullptr);
      if (!closed.empty()) {
        step_logits = step_logits -
                      kClosed * torch::from_blob(closed.data(), {k, d},
                                                 torch::kFloat)
                                    .clone();
      }
    }
    torch::Tensor step_logp = torch::log_softmax(step_logits, 1);
    std::vector<int64_t> chosen(k);
    if (mode == RlSampleMode::kGiven) {
      for (int r = 0; r < k; ++r) chosen[r] = given->device_of_group[r][t];
    } else {
      torch::Tensor chooser =
          (mode == RlSampleMode::kSample ? step_logp.exp() : step_logits)
              .detach()
              .contiguous();
      const float* p = chooser.data_ptr<float>();
      for (int r = 0; r < k; ++r) {
        chosen[r] = mode == RlSampleMode::kSample ? Draw(p + r * d, d, rng)
                                                  : ArgMax(p + r * d, d);
      }
    }
    for (int r = 0; r < k; ++r) {
      out.device_of_group[r][t] = static_cast<int>(chosen[r]);
      used[static_cast<size_t>(r) * d + chosen[r]] +=
          group_memory[static_cast<size_t>(r) * g + t];
      busy[static_cast<size_t>(r) * d + chosen[r]] +=
          group_compute[static_cast<size_t>(r) * g + t];
    }
    previous = torch::tensor(chosen, torch::kLong);
    log_prob = log_prob + step_logp.gather(1, previous.unsqueeze(1))
                                  .squeeze(1) *
                              mask.select(1, t);
    // Closed devices have probability 0 exactly: they add nothing.
    entropy = entropy -
              (step_logp.exp() * step_logp).sum(1) * mask.select(1, t);
  }
  out.log_prob = log_prob;
  out.entropy = entropy;
  return out;
}

}  // namespace placer
