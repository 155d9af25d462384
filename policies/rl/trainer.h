// RlTrainer: trains a HierarchicalPlacer with REINFORCE on one or more
// graphs (tasks), as in Mirhoseini et al. 2018. The tasks share one device
// count unless the model is device_agnostic (model.h).
//
// Contract: each training step takes the next task in turn, draws
// `samples_per_step` placements, scores them with the task's evaluators
// (one per thread, evaluated in parallel; results kept by sample index, so
// thread timing never changes the result) and takes one Adam step on
// -mean((R - b)·log p) - entropy_weight·mean(H), with R = -sqrt(step
// seconds / the task's lower bound) and b the task's moving-average
// baseline. A placement the
// evaluator rejects or one over a memory limit scores as a step of
// `invalid_penalty` lower bounds. Noise on the logits decays linearly to
// zero over the first `noise_samples` samples. With `warm_start`, the model
// first imitates each task's best heuristic placement (BestHeuristic) for
// `imitation_steps` steps (the structural groups, each on the device that
// holds most of its compute there), and that placement seeds the task's
// best;
// without, the Grouper may start from a structural prior (see
// grouper_prior_steps).
//
// Determinism: the state after any number of steps depends only on the
// seed, the options and the tasks (not on threads or time); the time budget
// only decides when to stop. Save/Resume round-trips every bit of that
// state (model, Adam, generator, baselines, bests, counters, curve), so
// training stopped and resumed from a checkpoint goes on exactly as if
// never stopped. LoadModel takes the model's parameters alone (zero-shot
// or fine-tuning on new graphs). LibTorch runs single-threaded inside
// Train (the model is small; this keeps its sums' order fixed).
#ifndef PLACER_POLICIES_RL_TRAINER_H_
#define PLACER_POLICIES_RL_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/evaluator.h"
#include "policies/policy.h"
#include "policies/rl/checkpoint.h"
#include "policies/rl/features.h"
#include "policies/rl/model.h"

namespace placer {

struct RlTrainerOptions {
  RlModelOptions model;
  uint64_t seed = 1;
  int samples_per_step = 64;
  double learning_rate = 0.01;
  double baseline_decay = 0.9;  // b <- decay·b + (1 - decay)·mean(R)
  double invalid_penalty = 20;  // lower bounds
  // The loss subtracts this times the batch's mean entropy (summed over a
  // placement's choices): it keeps the policy from settling on one
  // placement before it has found a good one.
  double entropy_weight = 0.01;
  // Exploration that cannot collapse: when > 0, the entropy weight above is
  // only where it starts. After each step it is multiplied by
  // exp(entropy_rate · (entropy_target − H)), H the batch's mean entropy per
  // device choice (nats), and kept in [1e-4, 1]: a policy drifting toward
  // one placement gets a growing push back, one exploring more than the
  // target a shrinking one. It depends on steps only (never on the wall
  // clock) and is checkpointed. 0: a fixed weight.
  double entropy_target = 0.4;
  double entropy_rate = 2;
  // A trust region on each step: when the updated policy's mean KL
  // divergence from the one that drew the batch, per device choice,
  // exceeds this, the update is halved (up to 8 times). Adam moves every
  // weight by about the learning rate whatever the gradient's size, which
  // without this turned the Placer deterministic within ~15 steps (entropy
  // per choice 1.3 -> 0.05 nats on GNMT-4; docs/rl.md). 0: off.
  double max_kl_per_choice = 0.01;
  double noise_stddev = 0.5;
  int64_t noise_samples = 4000;
  bool warm_start = false;
  int imitation_steps = 150;
  // Without a warm start: the best heuristic placement still seeds each
  // task's best (nothing imitated), so the result is never worse than it.
  bool heuristic_floor = false;
  // Without a warm start, the Grouper first learns, for this many steps,
  // a device-agnostic prior: the parameter families (a layer's time steps
  // and weights; ParameterFamilies) merged into `groups` groups
  // (MergeFamilies), so that no group splits a layer from its weights. The
  // Placer starts untrained, so the first placements are random
  // assignments of those groups. 0: the Grouper starts untrained too.
  int grouper_prior_steps = 100;
  // Whether REINFORCE samples (and trains) the Grouper's choices, or keeps
  // its most likely grouping and trains the Placer alone. Off by default:
  // one sampled group per unit scatters a few of a layer's ~3,000 units in
  // every sample, and on GNMT-4 over p100x4 joint training ended at 1.20x
  // the expert's step where the Placer alone reached 0.86x (docs/rl.md).
  bool sample_groups = false;
  // Advantages divided by their batch's standard deviation.
  bool normalize_advantage = true;
  int threads = 2;
  // Stops: the first reached ends Train (0: no limit; at least one must be
  // set). Elapsed time counts across resumes.
  double budget_seconds = 0;
  int64_t max_samples = 0;
  // Where Save writes; Train saves there every checkpoint_interval_seconds
  // and when it stops. Empty: no checkpoints.
  std::string checkpoint_dir;
  double checkpoint_interval_seconds = 60;
  int greedy_every = 10;  // steps; 0: never

  // What a checkpoint must agree on to be resumed.
  std::string Describe() const;
};

// One graph to place. `input` and `options` (memory limits, pinned ops)
// must outlive the trainer; `make_evaluator` is called once per thread.
struct RlTask {
  std::string name;
  const PolicyInput* input = nullptr;
  PolicyOptions options;
  std::function<std::unique_ptr<StepEvaluator>()> make_evaluator;
};

// One row of the learning curve: a training step.
class RlTrainer {
 public:
  static absl::StatusOr<std::unique_ptr<RlTrainer>> Create(
      std::vector<RlTask> tasks, RlTrainerOptions options);
  ~RlTrainer();

  // The model options a checkpoint in `dir` was trained with (what
  // LoadModel needs the trainer to be created with).
  static absl::StatusOr<RlModelOptions> ReadModelOptions(
      const std::string& dir);

  // Restores the whole training state from options.checkpoint_dir; an
  // error when it is missing, unreadable or made with other options or
  // other task names (the message says which).
  absl::Status Resume();
  // Takes only the model's parameters from `dir` (a checkpoint of any
  // tasks with the same device count and model options); training then
  // starts from them (no warm start or Grouper prior).
  absl::Status LoadModel(const std::string& dir);

  // Trains until a stop (budget, samples, or `should_stop` returning true),
  // saving a checkpoint every checkpoint_interval_seconds and at the end
  // when checkpoint_dir is set. `on_step` (may be empty) hears each row.
  absl::Status Train(const std::function<bool()>& should_stop = {},
                     const std::function<void(const RlCurveRow&)>& on_step =
                         {});
  absl::Status Save();

  // Scores the model's most likely placement of each task (and counts it
  // toward the best); the step seconds per task, 0 where invalid.
  std::vector<double> EvaluateGreedy();

  // Scores each task's best heuristic placement (BestHeuristic) and counts
  // it toward the task's best, so what the trainer hands back is never
  // worse than it; best(t).source then names the heuristic where it won.
  void AddHeuristicFloor();

  const std::vector<RlCurveRow>& curve() const;
  const RlTaskBest& best(int task) const;
  // The best step among the model's own placements (samples and greedy)
  // since this trainer was made, the heuristic floor left out; 0: none.
  double learned_seconds(int task) const;
  int64_t samples() const;
  double elapsed_seconds() const;
  std::string CurveCsv() const;

 private:
  struct State;
  explicit RlTrainer(std::unique_ptr<State> state);
  absl::Status TrainOrThrow(const std::function<bool()>& should_stop,
                            const std::function<void(const RlCurveRow&)>& on_step);
  std::unique_ptr<State> s_;
};

}  // namespace placer

#endif  // PLACER_POLICIES_RL_TRAINER_H_
