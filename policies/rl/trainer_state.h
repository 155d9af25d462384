// The RL trainer's state and the steps it takes on it (scoring batches on
// evaluator threads, imitation and the Grouper's prior that warm-start
// it, the REINFORCE step with its trust region), shared by trainer.cc
// (RlTrainer: create, train, save, resume) and trainer_state.cc (the
// steps). Internal to policies/rl/; trainer.h is the interface.
#ifndef PLACER_POLICIES_RL_TRAINER_STATE_H_
#define PLACER_POLICIES_RL_TRAINER_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "policies/policies.h"
#include "policies/rl/trainer.h"

namespace placer {
namespace trainer_internal {

struct TaskState {
  TaskState(RlGraph g, int groups)
      : graph(std::move(g)),
        tensors(std::make_unique<RlGraphTensors>(graph, groups)) {}
  RlGraph graph;
  std::unique_ptr<RlGraphTensors> tensors;
  std::vector<std::unique_ptr<StepEvaluator>> evaluators;  // per thread
  double lower_bound_seconds = 0;
  double baseline = 0;
  bool has_baseline = false;
  RlTaskBest best;
  // The model's own best step this run (its samples and greedy
  // placements, not the heuristic floor); 0: none valid yet.
  double learned_seconds = 0;
  // BestHeuristic's answer, once asked (heuristic_known); nullopt where no
  // heuristic placed the graph.
  bool heuristic_known = false;
  std::optional<HeuristicWinner> heuristic;
};

// Drops every parameter's gradient.
void ClearGradients(torch::nn::Module& model);
// The best heuristic placement of `task`; nullopt where none placed it.
std::optional<HeuristicWinner> BestHeuristicOrNone(const RlTask& task);
// The same, computed once per task state.
const std::optional<HeuristicWinner>& KnownHeuristic(const RlTask& task,
                                                     TaskState& state);
// Groups holding at least one unit in the batch's first sample: the
// Placer's device choices that count (empty groups are masked out).
int NonEmptyGroups(const RlBatch& batch);

}  // namespace trainer_internal

struct RlTrainer::State {
  std::vector<RlTask> tasks;
  RlTrainerOptions options;
  std::vector<std::unique_ptr<trainer_internal::TaskState>> task_states;
  HierarchicalPlacer model{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
  std::mt19937_64 rng;
  int64_t step = 0;
  int64_t samples = 0;
  double elapsed_seconds = 0;
  double entropy_weight = 0;  // now; options.entropy_weight at the start
  // The first exception an evaluator threw in Score; Train returns it.
  absl::Status evaluator_failure;
  bool imitation_done = false;
  std::vector<RlCurveRow> curve;

  std::string Config() const;

  // The step time of each placement, nullopt where invalid; evaluated on
  // up to options.threads threads, each with its own evaluator.
  std::vector<std::optional<double>> Score(int t,
                                           const std::vector<Placement>& ps);

  // Worker w's share of Score: placements taken in turn from `next`.
  void Evaluate(int t, const std::vector<Placement>& ps, int w,
                std::atomic<size_t>& next,
                std::vector<std::optional<double>>& out);

  void Consider(int t, const Placement& p, std::optional<double> seconds,
                const std::string& source);

  // Each task's best heuristic placement (BestHeuristic), scored and
  // counted toward its best; nullopt where no heuristic placed it.
  std::vector<std::optional<HeuristicWinner>> ConsiderHeuristics();

  void Imitate();

  // `steps` Adam steps on the mean per-unit log-likelihood of the targets
  // (of the tasks with have[t]); grouper_only: the Grouper's part alone.
  void Fit(const std::vector<RlBatch>& targets, const std::vector<bool>& have,
           int steps, bool grouper_only);

  // The Grouper's structural prior (see grouper_prior_steps).
  void GrouperPrior();

  // Scores the model's most likely placement of task t; 0 when invalid.
  double Greedy(int t);

  // The log-probability of each of the batch's samples under the current
  // model, without noise.
  torch::Tensor GivenLogProb(trainer_internal::TaskState& ts,
                             const RlBatch& batch);

  RlCurveRow Step();
};

}  // namespace placer

#endif  // PLACER_POLICIES_RL_TRAINER_STATE_H_
