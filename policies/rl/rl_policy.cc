// The `rl` policy: the hierarchical RL placer behind the policy interface.
// With options.checkpoint_dir it starts from that trained model: its most
// likely placement first (zero-shot), then fine-tuning on this graph while
// the budget lasts. Without, it trains on this graph alone from a cold
// start. Either way the best heuristic placement is its floor: it never
// answers worse than BestHeuristic, and its last progress report says when
// the heuristic's placement is the answer. max_evaluations counts the
// greedy placement and the samples (1: zero-shot only); the floor's
// heuristics are not counted.
#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_helpers.h"
#include "policies/policy.h"
#include "policies/rl/trainer.h"
#include "policies/search_clock.h"
#include "simulator/evaluator.h"

namespace placer {
namespace {

class RlPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    SearchClock clock(o, "rl");
    RlTrainerOptions to;
    to.seed = o.seed;
    to.budget_seconds = o.budget_seconds;
    to.max_samples = o.max_evaluations > 0 ? o.max_evaluations - 1 : 0;
    // Without a checkpoint: a cold start (it explores more than imitating
    // the heuristic: docs/rl.md). Always the best heuristic as the floor:
    // a model that transfers badly (zero-shot RNNLM was 1.46x the
    // heuristic) never hands back a worse placement; the progress report's
    // stage says where the answer came from.
    to.heuristic_floor = true;
    to.threads = static_cast<int>(
        std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    const bool zero_shot_only = o.max_evaluations == 1 || o.budget_seconds <= 0;
    if (zero_shot_only && o.checkpoint_dir.empty()) {
      return absl::InvalidArgumentError(
          "rl: without a checkpoint the placer trains; give it a budget or "
          "more than one evaluation");
    }
    if (zero_shot_only) to.max_samples = 1;  // Create needs a bound
    if (!o.checkpoint_dir.empty()) {
      ASSIGN_OR_RETURN(RlModelOptions m,
                       RlTrainer::ReadModelOptions(o.checkpoint_dir));
      to.model = m;
    }
    std::vector<RlTask> tasks(1);
    tasks[0].name = "graph";
    tasks[0].input = &in;
    tasks[0].options = o;
    tasks[0].make_evaluator = [&in] {
      return NewSimulatorEvaluator(in.simulation);
    };
    ASSIGN_OR_RETURN(std::unique_ptr<RlTrainer> trainer,
                     RlTrainer::Create(std::move(tasks), to));
    RlTrainer& t = *trainer;
    if (!o.checkpoint_dir.empty()) {
      RETURN_IF_ERROR(t.LoadModel(o.checkpoint_dir));
      t.EvaluateGreedy();
      t.AddHeuristicFloor();  // Train skips it after a loaded model
    }
    if (!zero_shot_only) {
      RETURN_IF_ERROR(t.Train(o.should_stop, [&](const RlCurveRow& row) {
        clock.Report(row.samples, row.best_seconds);
      }));
    }
    const RlTaskBest& best = t.best(0);
    if (clock.reporting()) {
      const bool learned = best.source == "rl" || best.source == "greedy";
      const double own = t.learned_seconds(0);
      clock.ReportNow(
          t.samples(), best.step_seconds,
          learned ? std::string("rl")
                  : absl::StrCat("rl: the model's best (",
                                 own > 0 ? absl::StrFormat("%.6f s", own)
                                         : std::string("none valid"),
                                 ") did not beat the best heuristic; "
                                 "answering with ",
                                 best.source));
    }
    if (!best.placement) {
      return absl::ResourceExhaustedError(
          "rl: no sampled placement fit the memory limits");
    }
    return Checked(in, o, *best.placement, "rl");
  }
};

const PolicyRegistrar kRegistrar({
    "rl",
    "hierarchical RL placer (Grouper + Placer, REINFORCE on the simulator); "
    "--checkpoint: start from a trained model",
    [] { return std::unique_ptr<PlacementPolicy>(new RlPolicy); },
    PolicyKind::kLearned,
});

}  // namespace
}  // namespace placer
