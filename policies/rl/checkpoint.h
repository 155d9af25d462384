// The RL trainer's checkpoint: <dir>/checkpoint.pt, a LibTorch archive of
// the trainer's whole state (RlCheckpointState), the network and Adam.
//
// Contract: WriteRlCheckpoint replaces the file atomically (the old one or
// the new one, never half of either). RlCheckpointReader checks every zip
// entry's CRC-32 before LibTorch sees the bytes (a damaged entry otherwise
// costs LibTorch seconds and gigabytes), and turns every LibTorch or
// TorchScript exception into DataLoss naming the file; values a damaged
// file could make absurd (model sizes, curve task indices, the random
// generator's state) are checked. The curve is stored by named columns;
// files of the two earlier positional layouts (9 and 12 columns) are read
// too.
#ifndef PLACER_POLICIES_RL_CHECKPOINT_H_
#define PLACER_POLICIES_RL_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "policies/rl/model.h"
#include "simulator/placement.h"

namespace placer {

// One row of the learning curve per training step.
struct RlCurveRow {
  int64_t step = 0;
  int64_t samples = 0;        // drawn so far, all tasks
  double elapsed_seconds = 0; // training time so far, across resumes
  int task = 0;
  double batch_mean_seconds = 0;  // valid samples of the batch; 0: none
  double batch_best_seconds = 0;
  double best_seconds = 0;        // the task's best so far; 0: none
  int invalid = 0;                // samples of the batch over memory / failed
  // The model's most likely placement, scored every greedy_every steps
  // (and counted toward the best); 0: not scored this step or invalid.
  double greedy_seconds = 0;
  // Sample diversity: distinct placements among the batch's samples, and
  // the policy's mean entropy per device choice (nats; ln 4 = 1.386 is
  // uniform over four devices). A collapsed policy draws one placement.
  int distinct_placements = 0;
  double entropy_per_choice = 0;
  // The step's policy change: KL(before || after) per choice, on the batch.
  double step_kl_per_choice = 0;
};

struct RlTaskBest {
  std::optional<Placement> placement;
  double step_seconds = 0;
  std::string source;  // "rl", "greedy" or the heuristic's name
};

struct RlTaskCheckpoint {
  double baseline = 0;
  bool has_baseline = false;
  RlTaskBest best;
};

// Everything but the network and the optimizer.
struct RlCheckpointState {
  // Options, devices, features and tasks in words: a resumed run must
  // match it.
  std::string config;
  RlModelOptions model;
  std::string rng;  // the generator's state, as its operator<< writes it
  int64_t step = 0;
  int64_t samples = 0;
  double elapsed_seconds = 0;
  bool imitation_done = false;
  double entropy_weight = 0;
  std::vector<RlTaskCheckpoint> tasks;
  std::vector<RlCurveRow> curve;
};

std::string RlCheckpointPath(const std::string& dir);

absl::Status WriteRlCheckpoint(const std::string& dir,
                               const RlCheckpointState& state,
                               const torch::nn::Module& model,
                               const torch::optim::Optimizer& optimizer);

class RlCheckpointReader {
 public:
  // NotFound when `dir` holds no checkpoint; DataLoss when it is damaged.
  static absl::StatusOr<std::unique_ptr<RlCheckpointReader>> Open(
      const std::string& dir);

  const std::string& path() const { return path_; }
  absl::StatusOr<std::string> Config();
  // DataLoss when a size is out of range (a damaged file must not ask for
  // a model of a billion groups).
  absl::StatusOr<RlModelOptions> ModelOptions();
  // The state but `config` and `model` (those above); `tasks`: how many
  // the reading trainer has. Best placements are as stored: the caller
  // checks them against its graphs.
  absl::StatusOr<RlCheckpointState> State(int tasks);
  absl::Status LoadModel(torch::nn::Module& model);
  absl::Status LoadOptimizer(torch::optim::Optimizer& optimizer);

 private:
  explicit RlCheckpointReader(std::string path) : path_(std::move(path)) {}
  std::string path_;
  torch::serialize::InputArchive archive_;
};

}  // namespace placer

#endif  // PLACER_POLICIES_RL_CHECKPOINT_H_
