#include "policies/rl/trainer_state.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/torch_status.h"
#include "simulator/memory_check.h"

namespace placer {
namespace trainer_internal {

void ClearGradients(torch::nn::Module& model) {
  for (torch::Tensor p : model.parameters()) {
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
}

std::optional<HeuristicWinner> BestHeuristicOrNone(const RlTask& task) {
  absl::StatusOr<HeuristicWinner> w = BestHeuristic(*task.input, task.options);
  if (!w.ok()) return std::nullopt;
  return *std::move(w);
}

const std::optional<HeuristicWinner>& KnownHeuristic(const RlTask& task,
                                                     TaskState& state) {
  if (!state.heuristic_known) {
    state.heuristic = BestHeuristicOrNone(task);
    state.heuristic_known = true;
  }
  return state.heuristic;
}

int NonEmptyGroups(const RlBatch& batch) {
  if (batch.group_of_unit.empty()) return 0;
  const std::vector<int>& of = batch.group_of_unit[0];
  return static_cast<int>(std::set<int>(of.begin(), of.end()).size());
}

}  // namespace trainer_internal

using trainer_internal::ClearGradients;
using trainer_internal::KnownHeuristic;
using trainer_internal::NonEmptyGroups;
using trainer_internal::TaskState;

std::string RlTrainer::State::Config() const {
  std::vector<std::string> names;
  for (const RlTask& t : tasks) names.push_back(t.name);
  return absl::StrCat(options.Describe(), " devices=", model->devices(),
                      " features=", model->features(),
                      " tasks=", absl::StrJoin(names, ","));
}

std::vector<std::optional<double>> RlTrainer::State::Score(
    int t, const std::vector<Placement>& ps) {
  TaskState& ts = *task_states[t];
  const RlTask& task = tasks[t];
  const int threads =
      std::max(1, std::min(options.threads, static_cast<int>(ps.size())));
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
            e, absl::StrCat("rl: evaluating a placement of ", task.name, ": "));
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

void RlTrainer::State::Evaluate(int t, const std::vector<Placement>& ps, int w,
                                std::atomic<size_t>& next,
                                std::vector<std::optional<double>>& out) {
  const RlTask& task = tasks[t];
  StepEvaluator& ev = *task_states[t]->evaluators[w];
  const std::vector<int64_t> limits =
      MemoryLimits(task.input->cluster, task.options);
  for (size_t i = next++; i < ps.size(); i = next++) {
    absl::StatusOr<Evaluation> e = ev.Evaluate(ps[i]);
    if (!e.ok()) continue;
    if (CheckMemory(task.input->cluster, e->peak_memory_bytes, limits).ok()) {
      out[i] = e->step_seconds;
    }
  }
}

void RlTrainer::State::Consider(int t, const Placement& p,
                                std::optional<double> seconds,
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

std::vector<std::optional<HeuristicWinner>>
RlTrainer::State::ConsiderHeuristics() {
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

void RlTrainer::State::Imitate() {
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
    target.group_of_unit.assign(1, task_states[t]->tensors->structural_group);
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

void RlTrainer::State::Fit(const std::vector<RlBatch>& targets,
                           const std::vector<bool>& have, int steps,
                           bool grouper_only) {
  for (int it = 0; it < steps; ++it) {
    torch::Tensor loss = torch::zeros({});
    for (size_t t = 0; t < tasks.size(); ++t) {
      if (!have[t]) continue;
      RlBatch b = model->Run(*task_states[t]->tensors, 1, RlSampleMode::kGiven,
                             0, rng, &targets[t]);
      loss = loss - (grouper_only ? b.group_log_prob : b.log_prob).sum() /
                        std::max(task_states[t]->graph.num_units(), 1);
    }
    ClearGradients(*model);
    loss.backward();
    optimizer->step();
  }
}

void RlTrainer::State::GrouperPrior() {
  const int g = options.model.groups;
  std::vector<RlBatch> targets(tasks.size());
  for (size_t t = 0; t < tasks.size(); ++t) {
    targets[t].group_of_unit.assign(1,
                                    task_states[t]->tensors->structural_group);
    targets[t].device_of_group.assign(1, std::vector<int>(g, 0));
  }
  Fit(targets, std::vector<bool>(tasks.size(), true),
      options.grouper_prior_steps, /*grouper_only=*/true);
}

double RlTrainer::State::Greedy(int t) {
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

torch::Tensor RlTrainer::State::GivenLogProb(TaskState& ts,
                                             const RlBatch& batch) {
  return model
      ->Run(*ts.tensors, static_cast<int>(batch.group_of_unit.size()),
            RlSampleMode::kGiven, 0, rng, &batch, options.sample_groups)
      .log_prob;
}

RlCurveRow RlTrainer::State::Step() {
  const int t = static_cast<int>(step % static_cast<int64_t>(tasks.size()));
  TaskState& ts = *task_states[t];
  const int k = options.samples_per_step;
  double noise = 0;
  if (options.noise_samples > 0 && samples < options.noise_samples) {
    noise = options.noise_stddev *
            (1.0 - static_cast<double>(samples) / options.noise_samples);
  }
  RlBatch batch = model->Run(*ts.tensors, k, RlSampleMode::kSample, noise, rng,
                             nullptr, options.sample_groups);
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
    rewards[r] =
        static_cast<float>(-std::sqrt(seconds / ts.lower_bound_seconds));
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
  torch::Tensor loss =
      -(adv * batch.log_prob).mean() - entropy_weight * batch.entropy.mean();
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
      double kl =
          (old_log_prob - GivenLogProb(ts, batch)).mean().item<double>() /
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
        entropy_weight *
            std::exp(options.entropy_rate *
                     (options.entropy_target - row.entropy_per_choice)),
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

}  // namespace placer
