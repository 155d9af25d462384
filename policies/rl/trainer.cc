// Over 600 lines, one idea: one REINFORCE training loop and the state it
// keeps (scoring batches on evaluator threads, imitation and the Grouper's
// prior that warm-start it, the step's loss and trust region). The
// checkpoint file is checkpoint.h, the network model.h, the features
// features.h.
#include "policies/rl/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/host_setup.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "policies/policies.h"
#include "simulator/memory_check.h"
#include "simulator/placement.h"

namespace placer {
namespace {

using Clock = SteadyClock;


// LibTorch single-threaded for the scope (see the header's contract), and
// OpenBLAS too: its threads otherwise spin between the model's small
// products, taking the cores the evaluators need.
class TorchThreads {
 public:
  explicit TorchThreads(int threads) : saved_(at::get_num_threads()) {
    at::set_num_threads(threads);
    SetBlasThreads(threads);
    KeepFreedHostMemory();
  }
  ~TorchThreads() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

// Clears every gradient to undefined, so that Adam leaves alone the
// parameters a loss does not reach (the Grouper's, when the Placer learns
// alone), in one run and in a resumed one alike, and on every LibTorch
// (1.x's zero_grad keeps zero tensors, which Adam's momentum still moves).
void ClearGradients(torch::nn::Module& model) {
  for (torch::Tensor p : model.parameters()) {
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
}

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

// The best heuristic placement of `task`; nullopt where none placed it.
std::optional<HeuristicWinner> BestHeuristicOrNone(const RlTask& task) {
  absl::StatusOr<HeuristicWinner> w = BestHeuristic(*task.input, task.options);
  if (!w.ok()) return std::nullopt;
  return *std::move(w);
}

// The best heuristic placement of `task`, computed once per task state.
const std::optional<HeuristicWinner>& KnownHeuristic(const RlTask& task,
                                                     TaskState& state) {
  if (!state.heuristic_known) {
    state.heuristic = BestHeuristicOrNone(task);
    state.heuristic_known = true;
  }
  return state.heuristic;
}

// Groups holding at least one unit in the batch's first sample: the
// Placer's device choices that count (empty groups are masked out).
int NonEmptyGroups(const RlBatch& batch) {
  if (batch.group_of_unit.empty()) return 0;
  const std::vector<int>& of = batch.group_of_unit[0];
  return static_cast<int>(std::set<int>(of.begin(), of.end()).size());
}

}  // namespace

std::string RlTrainerOptions::Describe() const {
  return absl::StrFormat(
      "%s seed=%d k=%d lr=%g decay=%g penalty=%g entropy=%g/%g/%g "
      "kl=%g noise=%g/%d "
      "warm=%d/%d floor=%d prior=%d norm=%d groups_sampled=%d",
      model.Describe(), seed, samples_per_step, learning_rate, baseline_decay,
      invalid_penalty, entropy_weight, entropy_target, entropy_rate,
      max_kl_per_choice, noise_stddev, noise_samples,
      warm_start ? 1 : 0, imitation_steps, heuristic_floor ? 1 : 0,
      grouper_prior_steps, normalize_advantage ? 1 : 0, sample_groups ? 1 : 0);
}

struct RlTrainer::State {
  std::vector<RlTask> tasks;
  RlTrainerOptions options;
  std::vector<std::unique_ptr<TaskState>> task_states;
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

  std::string Config() const {
    std::vector<std::string> names;
    for (const RlTask& t : tasks) names.push_back(t.name);
    return absl::StrCat(options.Describe(), " devices=", model->devices(),
                        " features=", model->features(), " tasks=",
                        absl::StrJoin(names, ","));
  }

  // The step time of each placement, nullopt where invalid; evaluated on
  // up to options.threads threads, each with its own evaluator.
  std::vector<std::optional<double>> Score(int t,
                                           const std::vector<Placement>& ps) {
    TaskState& ts = *task_states[t];
    const RlTask& task = tasks[t];
    const int threads = std::max(
        1, std::min(options.threads, static_cast<int>(ps.size())));
    while (static_cast<int>(ts.evaluators.size()) < threads) {
      ts.evaluators.push_back(task.make_evaluator());
    }
    std::vector<std::optional<double>> out(ps.size());
    std::atomic<size_t> next{0};
    // An evaluator that throws (LibTorch, the allocator) must not reach
    // std::thread, which would terminate the process: the first exception
    // is kept, the batch stops, and Train returns it as a status.
    std::mutex failure_mu;
    auto work = [&](int w) {
      try {
        Evaluate(t, ps, w, next, out);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(failure_mu);
        if (evaluator_failure.ok()) {
          evaluator_failure = TorchErrorStatus(
              e, absl::StrCat("rl: evaluating a placement of ",
                              task.name, ": "));
        }
        next = ps.size();
      }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < threads; ++w) pool.emplace_back(work, w);
    work(0);
    for (std::thread& th : pool) th.join();
    return out;
  }

  // Worker w's share of Score: placements taken in turn from `next`.
  void Evaluate(int t, const std::vector<Placement>& ps, int w,
                std::atomic<size_t>& next,
                std::vector<std::optional<double>>& out) {
    const RlTask& task = tasks[t];
    StepEvaluator& ev = *task_states[t]->evaluators[w];
    const std::vector<int64_t> limits =
        MemoryLimits(task.input->cluster, task.options);
    for (size_t i = next++; i < ps.size(); i = next++) {
      absl::StatusOr<Evaluation> e = ev.Evaluate(ps[i]);
      if (!e.ok()) continue;
      if (CheckMemory(task.input->cluster, e->peak_memory_bytes, limits)
              .ok()) {
        out[i] = e->step_seconds;
      }
    }
  }

  void Consider(int t, const Placement& p, std::optional<double> seconds,
                const std::string& source) {
    RlTaskBest& b = task_states[t]->best;
    double& learned = task_states[t]->learned_seconds;
    if (seconds && (source == "rl" || source == "greedy") &&
        (learned == 0 || *seconds < learned)) {
      learned = *seconds;
    }
    if (seconds && (!b.placement || *seconds < b.step_seconds)) {
      b.placement = p;
      b.step_seconds = *seconds;
      b.source = source;
    }
  }

  // Each task's best heuristic placement (BestHeuristic), scored and
  // counted toward its best; nullopt where no heuristic placed it.
  std::vector<std::optional<HeuristicWinner>> ConsiderHeuristics() {
    std::vector<std::optional<HeuristicWinner>> out(tasks.size());
    for (size_t t = 0; t < tasks.size(); ++t) {
      const std::optional<HeuristicWinner>& w =
          KnownHeuristic(tasks[t], *task_states[t]);
      if (!w) continue;
      std::vector<std::optional<double>> s =
          Score(static_cast<int>(t), {w->placement});
      Consider(static_cast<int>(t), w->placement, s[0], w->policy);
      out[t] = *w;
    }
    return out;
  }

  void Imitate() {
    const int g = options.model.groups;
    std::vector<RlBatch> targets(tasks.size());
    std::vector<bool> have(tasks.size(), false);
    std::vector<std::optional<HeuristicWinner>> winners = ConsiderHeuristics();
    for (size_t t = 0; t < tasks.size(); ++t) {
      const std::optional<HeuristicWinner>& w = winners[t];
      if (!w) continue;
      const RlGraph& rg = task_states[t]->graph;
      const int n = rg.num_units();
      const int d = rg.num_devices;
      std::vector<int> device_of_unit(n);
      for (int u = 0; u < n; ++u) {
        device_of_unit[u] =
            w->placement.device_of_op[rg.units.members(u).front()];
      }
      // The structural groups (the Grouper's prior), each on the device
      // that holds most of its compute in the heuristic's placement (ties:
      // the lower device).
      RlBatch& target = targets[t];
      target.group_of_unit.assign(
          1, task_states[t]->tensors->structural_group);
      std::vector<double> weight(static_cast<size_t>(g) * d, 0);
      for (int u = 0; u < n; ++u) {
        weight[static_cast<size_t>(target.group_of_unit[0][u]) * d +
               device_of_unit[u]] += rg.units.min_seconds(u) + 1e-12;
      }
      target.device_of_group.assign(1, std::vector<int>(g, 0));
      for (int i = 0; i < g; ++i) {
        const double* row = &weight[static_cast<size_t>(i) * d];
        target.device_of_group[0][i] =
            static_cast<int>(std::max_element(row, row + d) - row);
      }
      have[t] = true;
    }
    Fit(targets, have, options.imitation_steps, /*grouper_only=*/false);
  }

  // `steps` Adam steps on the mean per-unit log-likelihood of the targets
  // (of the tasks with have[t]); grouper_only: the Grouper's part alone.
  void Fit(const std::vector<RlBatch>& targets, const std::vector<bool>& have,
           int steps, bool grouper_only) {
    for (int it = 0; it < steps; ++it) {
      torch::Tensor loss = torch::zeros({});
      for (size_t t = 0; t < tasks.size(); ++t) {
        if (!have[t]) continue;
        RlBatch b = model->Run(*task_states[t]->tensors, 1,
                               RlSampleMode::kGiven, 0, rng, &targets[t]);
        loss = loss - (grouper_only ? b.group_log_prob : b.log_prob).sum() /
                          std::max(task_states[t]->graph.num_units(), 1);
      }
      ClearGradients(*model);
      loss.backward();
      optimizer->step();
    }
  }

  // The Grouper's structural prior (see grouper_prior_steps).
  void GrouperPrior() {
    const int g = options.model.groups;
    std::vector<RlBatch> targets(tasks.size());
    for (size_t t = 0; t < tasks.size(); ++t) {
      targets[t].group_of_unit.assign(
          1, task_states[t]->tensors->structural_group);
      targets[t].device_of_group.assign(1, std::vector<int>(g, 0));
    }
    Fit(targets, std::vector<bool>(tasks.size(), true),
        options.grouper_prior_steps, /*grouper_only=*/true);
  }

  // Scores the model's most likely placement of task t; 0 when invalid.
  double Greedy(int t) {
    TaskState& ts = *task_states[t];
    RlBatch b;
    {
      torch::NoGradGuard no_grad;
      b = model->Run(*ts.tensors, 1, RlSampleMode::kGreedy, 0, rng);
    }
    Placement p = ts.graph.Expand(b.DeviceOfUnit(0));
    std::optional<double> seconds = Score(t, {p})[0];
    Consider(t, p, seconds, "greedy");
    return seconds.value_or(0);
  }

  // The log-probability of each of the batch's samples under the current
  // model, without noise.
  torch::Tensor GivenLogProb(TaskState& ts, const RlBatch& batch) {
    return model
        ->Run(*ts.tensors, static_cast<int>(batch.group_of_unit.size()),
              RlSampleMode::kGiven, 0, rng, &batch, options.sample_groups)
        .log_prob;
  }

  RlCurveRow Step() {
    const int t = static_cast<int>(step % static_cast<int64_t>(tasks.size()));
    TaskState& ts = *task_states[t];
    const int k = options.samples_per_step;
    double noise = 0;
    if (options.noise_samples > 0 && samples < options.noise_samples) {
      noise = options.noise_stddev *
              (1.0 - static_cast<double>(samples) / options.noise_samples);
    }
    RlBatch batch = model->Run(*ts.tensors, k, RlSampleMode::kSample, noise,
                               rng, nullptr, options.sample_groups);
    std::vector<Placement> placements;
    std::set<std::vector<int>> distinct;
    for (int r = 0; r < k; ++r) {
      std::vector<int> devices = batch.DeviceOfUnit(r);
      placements.push_back(ts.graph.Expand(devices));
      distinct.insert(std::move(devices));
    }
    std::vector<std::optional<double>> scores = Score(t, placements);

    RlCurveRow row;
    row.task = t;
    if (!evaluator_failure.ok()) return row;  // no update on a broken batch
    const int choices = std::max(1, NonEmptyGroups(batch));
    row.distinct_placements = static_cast<int>(distinct.size());
    row.entropy_per_choice = batch.entropy.mean().item<double>() / choices;
    std::vector<float> rewards(k);
    double mean_reward = 0, valid_sum = 0;
    int valid = 0;
    for (int r = 0; r < k; ++r) {
      double seconds = options.invalid_penalty * ts.lower_bound_seconds;
      if (scores[r]) {
        seconds = *scores[r];
        valid_sum += seconds;
        ++valid;
        if (row.batch_best_seconds == 0 || seconds < row.batch_best_seconds) {
          row.batch_best_seconds = seconds;
        }
        Consider(t, placements[r], scores[r], "rl");
      }
      rewards[r] = static_cast<float>(
          -std::sqrt(seconds / ts.lower_bound_seconds));
      mean_reward += rewards[r];
    }
    mean_reward /= k;
    if (!ts.has_baseline) {
      ts.baseline = mean_reward;
      ts.has_baseline = true;
    }
    std::vector<float> advantage(k);
    double spread = 0;
    for (int r = 0; r < k; ++r) {
      advantage[r] = rewards[r] - static_cast<float>(ts.baseline);
      spread += (rewards[r] - mean_reward) * (rewards[r] - mean_reward);
    }
    spread = std::sqrt(spread / k);
    if (options.normalize_advantage && spread > 1e-6) {
      for (float& a : advantage) a = static_cast<float>(a / spread);
    }
    torch::Tensor adv = torch::tensor(advantage, torch::kFloat);
    torch::Tensor loss = -(adv * batch.log_prob).mean() -
                         entropy_weight * batch.entropy.mean();
    std::vector<torch::Tensor> before;
    torch::Tensor old_log_prob;
    if (options.max_kl_per_choice > 0) {
      torch::NoGradGuard no_grad;
      for (const torch::Tensor& p : model->parameters()) {
        before.push_back(p.detach().clone());
      }
      old_log_prob = GivenLogProb(ts, batch);
    }
    ClearGradients(*model);
    loss.backward();
    optimizer->step();
    if (options.max_kl_per_choice > 0) {
      // KL(old || new) estimated on the batch drawn from the old policy.
      torch::NoGradGuard no_grad;
      std::vector<torch::Tensor> params = model->parameters();
      for (int halvings = 0; halvings < 8; ++halvings) {
        double kl = (old_log_prob - GivenLogProb(ts, batch))
                        .mean()
                        .item<double>() /
                    choices;
        row.step_kl_per_choice = kl;
        if (kl <= options.max_kl_per_choice) break;
        for (size_t i = 0; i < params.size(); ++i) {
          params[i].copy_(before[i] + 0.5 * (params[i] - before[i]));
        }
      }
    }
    if (options.entropy_target > 0) {
      entropy_weight = std::clamp(
          entropy_weight * std::exp(options.entropy_rate *
                                    (options.entropy_target -
                                     row.entropy_per_choice)),
          1e-4, 1.0);
    }
    ts.baseline = options.baseline_decay * ts.baseline +
                  (1 - options.baseline_decay) * mean_reward;

    samples += k;
    ++step;
    row.step = step;
    row.samples = samples;
    row.invalid = k - valid;
    row.batch_mean_seconds = valid ? valid_sum / valid : 0;
    row.best_seconds = ts.best.placement ? ts.best.step_seconds : 0;
    return row;
  }
};

RlTrainer::RlTrainer(std::unique_ptr<State> state) : s_(std::move(state)) {}
RlTrainer::~RlTrainer() = default;

absl::StatusOr<std::unique_ptr<RlTrainer>> RlTrainer::Create(
    std::vector<RlTask> tasks, RlTrainerOptions options) {
  if (tasks.empty()) return absl::InvalidArgumentError("rl: no graphs to train on");
  if (!(options.entropy_weight >= 0) || !(options.entropy_target >= 0) ||
      !(options.entropy_rate >= 0) || !(options.max_kl_per_choice >= 0)) {
    return absl::InvalidArgumentError(
        "rl: the entropy weight, entropy target, entropy rate and KL limit "
        "must be >= 0");
  }
  if (options.budget_seconds <= 0 && options.max_samples <= 0) {
    return absl::InvalidArgumentError(
        "rl: a time budget or a sample count must bound training");
  }
  if (options.samples_per_step < 2) {
    return absl::InvalidArgumentError("rl: samples per step must be >= 2");
  }
  const int devices = tasks[0].input->cluster.num_devices();
  if (options.model.groups < devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rl: ", options.model.groups, " groups cannot cover ", devices,
        " devices"));
  }
  if (options.model.sage_layers < 0 ||
      options.model.sage_layers > kMaxSageLayers ||
      options.model.sage_hidden < 1 ||
      options.model.sage_hidden > kMaxSageHidden) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rl: GraphSAGE layers must be 0..", kMaxSageLayers,
        " and their width 1..", kMaxSageHidden, " (got ",
        options.model.sage_layers, " x ", options.model.sage_hidden, ")"));
  }
  auto s = std::make_unique<State>();
  s->options = options;
  s->entropy_weight = options.entropy_weight;
  s->rng.seed(options.seed);
  for (const RlTask& t : tasks) {
    if (options.model.groups < t.input->cluster.num_devices()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rl: ", options.model.groups, " groups cannot cover ",
          t.input->cluster.num_devices(), " devices"));
    }
    if (!options.model.device_agnostic &&
        t.input->cluster.num_devices() != devices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rl: task '", t.name, "' has ", t.input->cluster.num_devices(),
          " devices, the first has ", devices,
          "; one model places on one device count (unless "
          "--device-agnostic)"));
    }
  }
  s->tasks = std::move(tasks);
  // LibTorch builds the graphs' tensors and the model here, and throws on
  // failure (out of memory): a status like any other.
  try {
    for (size_t i = 0; i < s->tasks.size(); ++i) {
      RlGraph graph = BuildRlGraph(*s->tasks[i].input, s->tasks[i].options);
      // heuristic_input: the Placer reads the best heuristic's placement
      // (each unit on the device of its first member op).
      std::optional<HeuristicWinner> w;
      if (options.model.heuristic_input) {
        w = BestHeuristicOrNone(s->tasks[i]);
        if (w) {
          graph.start_device.resize(graph.num_units());
          for (int u = 0; u < graph.num_units(); ++u) {
            graph.start_device[u] =
                w->placement.device_of_op[graph.units.members(u).front()];
          }
        }
      }
      s->task_states.push_back(
          std::make_unique<TaskState>(std::move(graph), options.model.groups));
      TaskState& ts = *s->task_states[i];
      ts.heuristic_known = options.model.heuristic_input;
      ts.heuristic = std::move(w);
      ts.lower_bound_seconds =
          s->tasks[i].input->simulation.lower_bound_seconds();
      if (!(ts.lower_bound_seconds > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rl: task '", s->tasks[i].name, "' has no work to place"));
      }
    }
    s->model = HierarchicalPlacer(RlGraph::FeatureCount(devices), devices,
                                  options.model, options.seed);
    s->optimizer = std::make_unique<torch::optim::Adam>(
        s->model->parameters(),
        torch::optim::AdamOptions(options.learning_rate));
  } catch (const std::exception& e) {
    return TorchErrorStatus(e, "rl: building the model: ");
  }
  return std::unique_ptr<RlTrainer>(new RlTrainer(std::move(s)));
}

absl::Status RlTrainer::Train(
    const std::function<bool()>& should_stop,
    const std::function<void(const RlCurveRow&)>& on_step) {
  return CatchExceptions("rl: training: ", [&] {
    return TrainOrThrow(should_stop, on_step);
  });
}

absl::Status RlTrainer::TrainOrThrow(
    const std::function<bool()>& should_stop,
    const std::function<void(const RlCurveRow&)>& on_step) {
  TorchThreads single(1);
  Clock::time_point start = Clock::now();
  Clock::time_point last_save = start;
  const double elapsed_before = s_->elapsed_seconds;
  const RlTrainerOptions& o = s_->options;
  if (!s_->imitation_done) {
    if (o.warm_start) {
      s_->Imitate();
      EvaluateGreedy();
    } else {
      s_->GrouperPrior();
      if (o.heuristic_floor) s_->ConsiderHeuristics();
    }
    if (!s_->evaluator_failure.ok()) {
      return std::exchange(s_->evaluator_failure, absl::OkStatus());
    }
    s_->imitation_done = true;
  }
  while (true) {
    s_->elapsed_seconds = elapsed_before + SecondsSince(start);
    if (o.budget_seconds > 0 && s_->elapsed_seconds >= o.budget_seconds) break;
    if (o.max_samples > 0 && s_->samples >= o.max_samples) break;
    if (should_stop && should_stop()) break;
    RlCurveRow row = s_->Step();
    if (o.greedy_every > 0 && row.step % o.greedy_every == 0 &&
        s_->evaluator_failure.ok()) {
      row.greedy_seconds = s_->Greedy(row.task);
      const RlTaskBest& best = s_->task_states[row.task]->best;
      row.best_seconds = best.placement ? best.step_seconds : 0;
    }
    if (!s_->evaluator_failure.ok()) {
      return std::exchange(s_->evaluator_failure, absl::OkStatus());
    }
    s_->elapsed_seconds = elapsed_before + SecondsSince(start);
    row.elapsed_seconds = s_->elapsed_seconds;
    s_->curve.push_back(row);
    if (on_step) on_step(row);
    if (!o.checkpoint_dir.empty() &&
        SecondsSince(last_save) >= o.checkpoint_interval_seconds) {
      RETURN_IF_ERROR(Save());
      last_save = Clock::now();
    }
  }
  if (!o.checkpoint_dir.empty()) return Save();
  return absl::OkStatus();
}

std::vector<double> RlTrainer::EvaluateGreedy() {
  TorchThreads single(1);
  std::vector<double> out;
  for (size_t t = 0; t < s_->tasks.size(); ++t) {
    out.push_back(s_->Greedy(static_cast<int>(t)));
  }
  return out;
}

void RlTrainer::AddHeuristicFloor() {
  TorchThreads single(1);
  s_->ConsiderHeuristics();
}

absl::Status RlTrainer::Save() {
  const State& s = *s_;
  RlCheckpointState c;
  c.config = s.Config();
  c.model = s.options.model;
  std::ostringstream rng;
  rng << s.rng;
  c.rng = rng.str();
  c.step = s.step;
  c.samples = s.samples;
  c.elapsed_seconds = s.elapsed_seconds;
  c.imitation_done = s.imitation_done;
  c.entropy_weight = s.entropy_weight;
  for (const std::unique_ptr<TaskState>& ts : s.task_states) {
    c.tasks.push_back({ts->baseline, ts->has_baseline, ts->best});
  }
  c.curve = s.curve;
  return WriteRlCheckpoint(s.options.checkpoint_dir, c, *s.model,
                           *s.optimizer);
}

absl::StatusOr<RlModelOptions> RlTrainer::ReadModelOptions(
    const std::string& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<RlCheckpointReader> reader,
                   RlCheckpointReader::Open(dir));
  return reader->ModelOptions();
}

absl::Status RlTrainer::Resume() {
  State& s = *s_;
  ASSIGN_OR_RETURN(std::unique_ptr<RlCheckpointReader> opened,
                   RlCheckpointReader::Open(s.options.checkpoint_dir));
  RlCheckpointReader& reader = *opened;
  const std::string& path = reader.path();
  ASSIGN_OR_RETURN(std::string config, reader.Config());
  if (config != s.Config()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rl: ", path, " was trained with other options or graphs:\n  it: ",
        config, "\n  now: ", s.Config()));
  }
  const int tasks = static_cast<int>(s.tasks.size());
  ASSIGN_OR_RETURN(RlCheckpointState c, reader.State(tasks));
  for (int t = 0; t < tasks; ++t) {
    const RlTaskBest& best = c.tasks[t].best;
    if (best.placement &&
        !CheckPlacementShape(s.tasks[t].input->view, *best.placement,
                             s.tasks[t].input->cluster.num_devices())
             .ok()) {
      return absl::DataLossError(
          absl::StrCat("rl: ", path, ": the best placement of task ", t,
                       " does not fit its graph and cluster"));
    }
  }
  std::istringstream rng(c.rng);
  std::mt19937_64 generator;
  rng >> generator;
  if (rng.fail()) {
    return absl::DataLossError(
        absl::StrCat("rl: ", path, ": its random generator state is damaged"));
  }
  RETURN_IF_ERROR(reader.LoadModel(*s.model));
  RETURN_IF_ERROR(reader.LoadOptimizer(*s.optimizer));
  s.rng = generator;
  s.step = c.step;
  s.samples = c.samples;
  s.elapsed_seconds = c.elapsed_seconds;
  s.imitation_done = c.imitation_done;
  s.entropy_weight = c.entropy_weight;
  for (int t = 0; t < tasks; ++t) {
    TaskState& ts = *s.task_states[t];
    ts.baseline = c.tasks[t].baseline;
    ts.has_baseline = c.tasks[t].has_baseline;
    ts.best = c.tasks[t].best;
  }
  s.curve = std::move(c.curve);
  return absl::OkStatus();
}

absl::Status RlTrainer::LoadModel(const std::string& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<RlCheckpointReader> opened,
                   RlCheckpointReader::Open(dir));
  RlCheckpointReader& reader = *opened;
  const std::string& path = reader.path();
  ASSIGN_OR_RETURN(std::string read, reader.Config());
  const std::string& config = read;
  const std::string want = absl::StrCat(s_->options.model.Describe(), " ");
  const std::string devices =
      absl::StrCat(" devices=", s_->model->devices(), " ");
  if (size_t at = config.find(" devices="); !s_->options.model.device_agnostic &&
      at != std::string::npos && config.find(devices) == std::string::npos) {
    const std::string trained =
        config.substr(at + 9, config.find(' ', at + 9) - (at + 9));
    return absl::FailedPreconditionError(absl::StrCat(
        "rl: ", path, " holds a model trained for ", trained,
        " devices; this cluster has ", s_->model->devices(),
        " (train one on a cluster of ", s_->model->devices(),
        " devices, or place on one of ", trained, ")"));
  }
  if (config.rfind(want, 0) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rl: ", path, " holds a model of other dimensions (",
        config.substr(0, config.find(" seed=")), "; this run builds ",
        s_->options.model.Describe(), ")"));
  }
  RETURN_IF_ERROR(reader.LoadModel(*s_->model));
  // The loaded model is the start: no prior or imitation over it.
  s_->imitation_done = true;
  return absl::OkStatus();
}

const std::vector<RlCurveRow>& RlTrainer::curve() const { return s_->curve; }
const RlTaskBest& RlTrainer::best(int task) const {
  return s_->task_states[task]->best;
}

double RlTrainer::learned_seconds(int task) const {
  return s_->task_states[task]->learned_seconds;
}
int64_t RlTrainer::samples() const { return s_->samples; }
double RlTrainer::elapsed_seconds() const { return s_->elapsed_seconds; }

std::string RlTrainer::CurveCsv() const {
  std::string out =
      "step,samples,elapsed_seconds,task,batch_mean_seconds,"
      "batch_best_seconds,best_seconds,invalid,greedy_seconds,"
      "distinct_placements,entropy_per_choice,step_kl_per_choice\n";
  for (const RlCurveRow& r : s_->curve) {
    absl::StrAppendFormat(
        &out, "%d,%d,%.3f,\"%s\",%.6f,%.6f,%.6f,%d,%.6f,%d,%.4f,%.5f\n",
        r.step, r.samples, r.elapsed_seconds, s_->tasks[r.task].name,
        r.batch_mean_seconds, r.batch_best_seconds, r.best_seconds, r.invalid,
        r.greedy_seconds, r.distinct_placements, r.entropy_per_choice,
        r.step_kl_per_choice);
  }
  return out;
}

}  // namespace placer
