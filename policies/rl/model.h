// HierarchicalPlacer: the Grouper + Placer network of Mirhoseini et al.,
// "A Hierarchical Model for Device Placement" (ICLR 2018), in LibTorch.
//
// Contract: with sage_layers > 0, a GraphSAGE encoder (Hamilton et al.
// 2017, as in GDP) first embeds every unit: layer k maps [h ; mean of h over
// the unit's neighbours (units exchanging bytes with it)] through a linear
// map and a ReLU to sage_hidden numbers, each row scaled to unit length.
// The Grouper is a feed-forward network over each unit's features (RlGraph
// rows), its embedding and its structural group (one-hot) giving a softmax
// over `groups` groups. The Placer embeds each group (the mean of its
// members' features, its share of units, compute and memory, its row of the
// group-to-group byte adjacency, and the mean of its members' embeddings,
// through which the Placer's loss trains the encoder),
// runs a bidirectional LSTM over the groups and an attention decoder that
// emits one device per group, each step fed the device it chose before.
// Logits are clipped (C·tanh(x/C)) and divided by the temperature; with
// heuristic_input they then gain w times the share of the group's compute
// that the start placement puts on each device. With
// memory_mask, a device is closed to a group when the memory its groups so
// far (memory_fraction sums) plus this group's would pass its
// device_capacity, unless the group fits on no device; the choice is drawn
// from the open devices and its log-probability is under that mask (in
// kGiven mode a step whose given device is closed is scored unmasked).
//
// Run draws `k` placements in one batch and returns their log-probability
// (differentiable: the sum of the units' group log-probabilities and the
// non-empty groups' device log-probabilities). Every random number comes
// from the caller's generator, so a seeded generator makes runs
// repeatable; the model draws nothing from LibTorch's global generator
// (its parameters are initialised from the seed too).
#ifndef PLACER_POLICIES_RL_MODEL_H_
#define PLACER_POLICIES_RL_MODEL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "policies/rl/features.h"

namespace placer {

inline constexpr int kMaxSageLayers = 8;
inline constexpr int kMaxSageHidden = 1024;
inline constexpr double kStartWeight = 4;

struct RlModelOptions {
  int groups = 32;
  int grouper_hidden = 64;
  int placer_hidden = 128;
  int device_embedding = 16;
  double logit_clip = 5;   // C in C·tanh(x/C); the paper's value
  double temperature = 1;  // dividing the clipped logits
  // The Placer skips devices whose memory the group would overflow, given
  // the groups it already put there (unless the group fits nowhere).
  bool memory_mask = true;
  // GraphSAGE layers over the units (0: none, the features alone) and the
  // width of each, at most kMaxSageLayers x kMaxSageHidden (a damaged
  // checkpoint must not ask for gigabytes).
  int sage_layers = 0;
  int sage_hidden = 64;
  // A Placer for any cluster: it reads the device-count-free unit rows and
  // scores each device from the device's own numbers and from what the
  // placement put on it so far (memory, compute, whether it was the last
  // choice) with an attention over the devices, instead of one output per
  // device of the training cluster; a checkpoint then places on clusters
  // of other sizes and kinds.
  bool device_agnostic = false;
  // The Placer reads a start placement, as Placeto's state holds the
  // current placement: each group's device logits gain w times the share
  // of the group's compute (its units' fastest seconds) that the start
  // placement (RlGraph::start_device: the trainer gives the best
  // heuristic's) puts on each device; w is one learned number, so it
  // carries to any graph and cluster. It starts at kStartWeight: the first
  // samples follow the start placement (about 95% of choices on 4
  // devices) and training learns where to leave it. Unless the Grouper is
  // sampled, the groups are then the structural groups themselves (cut by
  // start device, so they can hold the start placement exactly). Without
  // a start placement the term is zero.
  bool heuristic_input = false;
  // "g=32 gh=64 ph=128 de=16 clip=5 t=1 mm=1" (and " sage=2x64" with an
  // encoder, " any-devices" when device_agnostic, " heuristic-input"):
  // checkpoints must match it.
  std::string Describe() const;
};

// One graph's constant inputs, as tensors.
struct RlGraphTensors {
  RlGraphTensors(const RlGraph& graph, int groups);
  const RlGraph* graph;
  torch::Tensor features;         // [N, F] float
  std::vector<int> structural_group;  // [N] StructuralGroups(G)
  torch::Tensor structure;        // [N, G] its one-hot
  torch::Tensor compute_fraction; // [N]
  torch::Tensor memory_fraction;  // [N]
  torch::Tensor agnostic_features;  // [N, kAgnosticFeatures]
  torch::Tensor device_features;    // [D, kDeviceFeatures]
  // [N, D]: a unit's fastest seconds in its start device's column, zeros
  // elsewhere and without a start placement.
  torch::Tensor start_seconds;
  // Both directions of every link: messages from src[i] to dst[i]; and
  // 1 / (the unit's neighbour count), 0 without neighbours. [2L], [2L],
  // [N, 1].
  torch::Tensor neighbour_src, neighbour_dst, inverse_degree;
};

enum class RlSampleMode {
  kSample,  // draw from the (noised) distributions
  kGreedy,  // the most likely group and device everywhere
  kGiven,   // score the choices passed in (teacher forcing)
};

struct RlBatch {
  // k rows each.
  std::vector<std::vector<int>> group_of_unit;    // [k][N]
  std::vector<std::vector<int>> device_of_group;  // [k][G]
  torch::Tensor log_prob;                         // [k], differentiable
  torch::Tensor group_log_prob;                   // [k], the Grouper's part
  // [k], differentiable: the summed entropies of the distributions the
  // row's choices were drawn from (the Grouper's only when it was sampled).
  torch::Tensor entropy;
  // Device per unit (unit -> its group's device), what RlGraph::Expand takes.
  std::vector<int> DeviceOfUnit(int row) const;
};

class HierarchicalPlacerImpl : public torch::nn::Module {
 public:
  HierarchicalPlacerImpl(int features, int devices, RlModelOptions options,
                         uint64_t seed);

  // `devices`: the device count of the graphs it places (ignored when
  // device_agnostic: any). `noise_stddev`: Gaussian noise added to the
  // logits before sampling
  // (kSample only). For kGiven, `given` holds the k rows to score.
  // `sample_groups` false (kSample only): every row takes the Grouper's
  // most likely groups and log_prob leaves the Grouper out.
  RlBatch Run(const RlGraphTensors& graph, int k, RlSampleMode mode,
              double noise_stddev, std::mt19937_64& rng,
              const RlBatch* given = nullptr, bool sample_groups = true);

  // [N, sage_hidden] unit embeddings (differentiable); [N, 0] without an
  // encoder.
  torch::Tensor Encode(const RlGraphTensors& graph);

  int features() const { return features_; }
  int devices() const { return devices_; }
  const RlModelOptions& options() const { return options_; }

 private:
  torch::Tensor Clip(const torch::Tensor& logits) const;

  int features_, devices_;
  RlModelOptions options_;
  torch::nn::Linear grouper_hidden_{nullptr}, grouper_out_{nullptr};
  torch::nn::Linear group_embed_{nullptr};
  torch::nn::LSTM encoder_{nullptr};
  torch::nn::LSTMCell decoder_{nullptr};
  torch::nn::Embedding device_embed_{nullptr};
  torch::nn::Linear attend_encoder_{nullptr}, attend_decoder_{nullptr},
      attend_score_{nullptr};
  torch::nn::Linear device_out_{nullptr};
  std::vector<torch::nn::Linear> sage_;
  // device_agnostic: devices embedded from their numbers, a learned "no
  // device yet", and an additive attention scoring each device.
  torch::nn::Linear device_in_{nullptr}, score_query_{nullptr},
      score_key_{nullptr}, score_state_{nullptr}, score_out_{nullptr};
  torch::Tensor no_device_;
  // heuristic_input: w, the weight of the start placement's shares.
  torch::Tensor start_weight_;
  // The unit rows the model reads.
  const torch::Tensor& Rows(const RlGraphTensors& graph) const;
};
TORCH_MODULE(HierarchicalPlacer);

}  // namespace placer

#endif  // PLACER_POLICIES_RL_MODEL_H_
