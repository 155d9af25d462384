// placer train MODEL... --cluster C[,C2...] [--budget 10s] [--checkpoint DIR]
// Trains the hierarchical RL placer on the models (policies/rl/trainer.h).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "graph/training_view.h"
#include "placer/cli/cli_common.h"
#include "placer/cli/ranks.h"
#include "placer/json_report.h"
#include "policies/policies.h"
#include "policies/rl/trainer.h"
#include "profiles/proto_io.h"
#include "runtime/measurement.h"
#include "simulator/evaluator.h"
#include "simulator/placement_file.h"
#include "simulator/simulator.h"

namespace placer {
namespace {

// One model, loaded and ready to simulate; held at a fixed address (the
// view, context and input refer to each other).
struct LoadedTask {
  const Cluster* cluster = nullptr;
  LoadedModel model;
  TrainingView view;
  std::unique_ptr<CostModel> costs;
  std::unique_ptr<ReadyOrder> order;
  std::unique_ptr<SimulationContext> context;
  std::unique_ptr<PolicyInput> input;
};

std::string Clock(double seconds) {
  int s = static_cast<int>(seconds);
  return s >= 3600 ? absl::StrFormat("%dh%02dm%02ds", s / 3600, s / 60 % 60,
                                     s % 60)
                   : absl::StrFormat("%dm%02ds", s / 60, s % 60);
}

// A progress line on stderr: redrawn in place on a terminal, a line every
// 10 s otherwise (logs).
class ProgressLine {
 public:
  explicit ProgressLine(const std::vector<std::string>& names)
      : names_(names),
        tty_(isatty(STDERR_FILENO) == 1),
        greedy_(names.size(), 0) {}
  void Show(const RlCurveRow& row, double fraction, bool force) {
    // The row's task's last greedy score (several tasks take turns).
    double& greedy = greedy_[row.task];
    if (row.greedy_seconds > 0) greedy = row.greedy_seconds;
    auto now = std::chrono::steady_clock::now();
    double since = std::chrono::duration<double>(now - last_).count();
    if (!force && since < (tty_ ? 0.25 : 10)) return;
    last_ = now;
    constexpr int kWidth = 24;
    int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kWidth);
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::cerr << (tty_ ? "\r" : "")
              << absl::StrFormat(
                     "[%s] %3.0f%% %s  samples %d  %s: best %.6f s  batch mean "
                     "%s  invalid %d  greedy %s  distinct %d  H %.2f  ",
                     bar, 100 * std::clamp(fraction, 0.0, 1.0),
                     Clock(row.elapsed_seconds), row.samples,
                     names_[row.task], row.best_seconds,
                     row.batch_mean_seconds > 0
                         ? absl::StrFormat("%.6f s", row.batch_mean_seconds)
                         : std::string("-"),
                     row.invalid,
                     greedy > 0 ? absl::StrFormat("%.6f s", greedy)
                                : std::string("-"),
                     row.distinct_placements, row.entropy_per_choice)
              << (tty_ ? "" : "\n") << std::flush;
  }
  void End() {
    if (tty_) std::cerr << "\n";
  }

 private:
  const std::vector<std::string>& names_;
  bool tty_;
  std::vector<double> greedy_;  // per task
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

namespace {

// The flags train reads, read once.
struct TrainFlags {
  std::string cluster;
  std::string checkpoint;
  bool resume = false;
  std::string reward;
  std::string output_path;  // -o
  uint64_t seed = 0;
  FlagSeconds budget;
  int64_t samples = 0;
  int32_t samples_per_step = 0;
  double learning_rate = 0;
  double entropy = 0;
  double entropy_target = 0;
  double max_kl = 0;
  int32_t groups = 0;
  int32_t sage_layers = 0;
  int32_t sage_hidden = 0;
  bool device_agnostic = false;
  bool heuristic_input = false;
  bool memory_mask = false;
  bool warm_start = false;
  int32_t imitation_steps = 0;
  bool joint = false;
  FlagSeconds checkpoint_every;
  int32_t steps = 0;
  int32_t warmup = 0;
  int32_t threads = 0;
  bool pin_cores = false;
  std::string curve;
  bool json = false;
};

TrainFlags ReadTrainFlags() {
  TrainFlags f;
  f.cluster = absl::GetFlag(FLAGS_cluster);
  f.checkpoint = absl::GetFlag(FLAGS_checkpoint);
  f.resume = absl::GetFlag(FLAGS_resume);
  f.reward = absl::GetFlag(FLAGS_reward);
  f.output_path = absl::GetFlag(FLAGS_o);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.budget = absl::GetFlag(FLAGS_budget);
  f.samples = absl::GetFlag(FLAGS_samples);
  f.samples_per_step = absl::GetFlag(FLAGS_samples_per_step);
  f.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  f.entropy = absl::GetFlag(FLAGS_entropy);
  f.entropy_target = absl::GetFlag(FLAGS_entropy_target);
  f.max_kl = absl::GetFlag(FLAGS_max_kl);
  f.groups = absl::GetFlag(FLAGS_groups);
  f.sage_layers = absl::GetFlag(FLAGS_sage_layers);
  f.sage_hidden = absl::GetFlag(FLAGS_sage_hidden);
  f.device_agnostic = absl::GetFlag(FLAGS_device_agnostic);
  f.heuristic_input = absl::GetFlag(FLAGS_heuristic_input);
  f.memory_mask = absl::GetFlag(FLAGS_memory_mask);
  f.warm_start = absl::GetFlag(FLAGS_warm_start);
  f.imitation_steps = absl::GetFlag(FLAGS_imitation_steps);
  f.joint = absl::GetFlag(FLAGS_joint);
  f.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  f.steps = absl::GetFlag(FLAGS_steps);
  f.warmup = absl::GetFlag(FLAGS_warmup);
  f.threads = absl::GetFlag(FLAGS_threads);
  f.pin_cores = absl::GetFlag(FLAGS_pin_cores);
  f.curve = absl::GetFlag(FLAGS_curve);
  f.json = absl::GetFlag(FLAGS_json);
  return f;
}

}  // namespace

int TrainCommand(const std::vector<std::string>& args) {
  const TrainFlags flags = ReadTrainFlags();
  if (absl::Status s = CheckMeasuredStepDefaults(); !s.ok()) return Fail(s);
  if (args.empty()) return UsageError("train takes one or more MODELs");
  if (flags.cluster.empty()) {
    return UsageError("train needs --cluster");
  }
  const std::string dir = flags.checkpoint.empty()
                              ? std::string()
                              : UserPath(flags.checkpoint);
  const bool resume = flags.resume;
  if (resume && dir.empty()) return UsageError("--resume needs --checkpoint");
  // The flag, parsed once: what rewards the placements sampled.
  const std::string reward_flag = flags.reward;
  enum class Reward { kSimulated, kMeasured };
  const std::map<std::string, Reward> kRewards = {
      {"simulated", Reward::kSimulated}, {"measured", Reward::kMeasured}};
  auto found = kRewards.find(reward_flag);
  if (found == kRewards.end()) {
    return UsageError(absl::StrCat("--reward: '", reward_flag,
                                   "' is neither simulated nor measured"));
  }
  const Reward reward = found->second;

  // --cluster A[,B...]: every model trains on every cluster (clusters of
  // different device counts need --device-agnostic; the trainer says so).
  std::vector<std::unique_ptr<Cluster>> clusters;
  std::vector<std::string> cluster_specs =
      absl::StrSplit(flags.cluster, ',', absl::SkipEmpty());
  for (const std::string& spec : cluster_specs) {
    absl::StatusOr<Cluster> c = LoadUserCluster(spec);
    if (!c.ok()) return Fail(c.status());
    clusters.push_back(std::make_unique<Cluster>(std::move(*c)));
  }
  if (clusters.empty()) return UsageError("train needs --cluster");
  if (!flags.output_path.empty() &&
      args.size() * clusters.size() != 1) {
    return UsageError(
        "-o takes the placement of one model on one cluster; with several, "
        "each one's best is written in --checkpoint DIR");
  }

  RlTrainerOptions to;
  to.seed = flags.seed;
  to.budget_seconds = flags.budget.seconds;
  to.max_samples = flags.samples;
  to.samples_per_step = flags.samples_per_step;
  to.learning_rate = flags.learning_rate;
  to.entropy_weight = flags.entropy;
  to.entropy_target = flags.entropy_target;
  to.max_kl_per_choice = flags.max_kl;
  to.model.groups = flags.groups;
  to.model.sage_layers = flags.sage_layers;
  to.model.sage_hidden = flags.sage_hidden;
  to.model.device_agnostic = flags.device_agnostic;
  to.model.heuristic_input = flags.heuristic_input;
  to.model.memory_mask = flags.memory_mask;
  to.warm_start = flags.warm_start;
  to.imitation_steps = flags.imitation_steps;
  to.sample_groups = flags.joint;
  to.checkpoint_dir = dir;
  to.checkpoint_interval_seconds =
      flags.checkpoint_every.seconds;
  // Measurements must not overlap on one machine's devices.
  to.threads = reward == Reward::kMeasured
                   ? 1
                   : static_cast<int>(std::clamp(
                         std::thread::hardware_concurrency(), 1u, 16u));

  std::vector<std::unique_ptr<LoadedTask>> loaded;
  std::vector<RlTask> tasks;
  std::vector<std::string> names;
  std::vector<std::pair<size_t, std::string>> pairs;  // (cluster, model)
  for (size_t ci = 0; ci < clusters.size(); ++ci) {
    for (const std::string& spec : args) pairs.push_back({ci, spec});
  }
  std::set<const Cluster*> noted;  // said once per cluster
  for (const auto& [ci, spec] : pairs) {
    const Cluster* cluster = clusters[ci].get();
    const std::string name =
        clusters.size() == 1 ? spec
                             : absl::StrCat(spec, "@", cluster_specs[ci]);
    auto t = std::make_unique<LoadedTask>();
    t->cluster = cluster;
    absl::StatusOr<LoadedModel> model = LoadModelFromFlags(spec);
    if (!model.ok()) return Fail(model.status());
    t->model = std::move(*model);
    t->view = BuildTrainingView(t->model.graph);
    absl::StatusOr<std::unique_ptr<CostModel>> costs = CostModelFromFlags();
    if (!costs.ok()) return Fail(costs.status());
    t->costs = std::move(*costs);
    t->order = NewCriticalPathReadyOrder();
    t->context = std::make_unique<SimulationContext>(
        SimulationContext::Create(t->view, *cluster, *t->costs, *t->order));
    t->input = std::make_unique<PolicyInput>(
        PolicyInput{t->view, *cluster, *t->costs, *t->context});
    RlTask task;
    task.name = name;
    task.input = t->input.get();
    task.options.seed = to.seed;
    const LoadedTask* raw = t.get();
    if (reward == Reward::kSimulated) {
      task.make_evaluator = [raw] {
        return NewSimulatorEvaluator(*raw->context);
      };
    } else {
      MeasureOptions measure;
      measure.steps = flags.steps;
      measure.warmup = flags.warmup;
      measure.executor.seed = to.seed;
      measure.executor.threads_per_cpu_device = flags.threads;
      measure.executor.pin_cpu_devices = flags.pin_cores;
      if (noted.insert(cluster).second) NoteUnpinnedCpuDevices(*cluster);
      measure.executor.priorities = raw->context->priorities();
      const Cluster* c = cluster;
      task.make_evaluator = [raw, c, measure] {
        return NewExecutorEvaluator(raw->view, *c, measure);
      };
    }
    tasks.push_back(std::move(task));
    names.push_back(name);
    loaded.push_back(std::move(t));
  }

  if (!dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "--checkpoint ", dir, ": cannot create it: ", error.message())));
    }
    if (!resume && std::filesystem::exists(dir + "/checkpoint.pt")) {
      return Fail(absl::AlreadyExistsError(absl::StrCat(
          dir, "/checkpoint.pt exists: --resume goes on from it; choose "
               "another --checkpoint to start afresh")));
    }
  }

  absl::StatusOr<std::unique_ptr<RlTrainer>> made =
      RlTrainer::Create(tasks, to);
  if (!made.ok()) return Fail(made.status());
  RlTrainer& trainer = **made;
  if (resume) {
    if (absl::Status s = trainer.Resume(); !s.ok()) return Fail(s);
    std::cerr << absl::StrFormat(
        "resumed %s/checkpoint.pt: %d samples, %s trained\n", dir,
        trainer.samples(), Clock(trainer.elapsed_seconds()));
  }

  // The heuristics, for the report (and the warm start's target).
  std::vector<std::optional<HeuristicWinner>> heuristics;
  for (const RlTask& t : tasks) {
    PolicyOptions o;
    o.seed = to.seed;
    absl::StatusOr<HeuristicWinner> w = BestHeuristic(*t.input, o);
    heuristics.push_back(w.ok() ? std::optional(std::move(*w)) : std::nullopt);
  }

  std::optional<StopOnSignal> stop_on_signal;
  stop_on_signal.emplace();
  ProgressLine progress(names);
  RlCurveRow last;
  auto fraction = [&](const RlCurveRow& row) {
    double f = 0;
    if (to.budget_seconds > 0) f = row.elapsed_seconds / to.budget_seconds;
    if (to.max_samples > 0) {
      f = std::max(f, static_cast<double>(row.samples) / to.max_samples);
    }
    return f;
  };
  absl::Status trained = trainer.Train(
      [] { return StopOnSignal::requested(); },
      [&](const RlCurveRow& row) {
        last = row;
        progress.Show(row, fraction(row), false);
      });
  if (last.samples > 0) progress.Show(last, fraction(last), true);
  progress.End();
  const bool stop_requested = StopOnSignal::requested();
  stop_on_signal.reset();
  if (!trained.ok()) return Fail(trained);
  trainer.EvaluateGreedy();
  // Measured rewards: the table's two steps must be in one unit. The best
  // heuristic's placement is measured as the samples were, and the model's
  // best is measured again beside it (its recorded step is the least of
  // many noisy measurements, so biased low).
  std::vector<std::optional<double>> measured_heuristic(tasks.size());
  std::vector<std::optional<double>> remeasured_best(tasks.size());
  if (reward == Reward::kMeasured) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      std::unique_ptr<StepEvaluator> e = tasks[i].make_evaluator();
      const RlTaskBest& best = trainer.best(static_cast<int>(i));
      if (heuristics[i]) {
        absl::StatusOr<Evaluation> r = e->Evaluate(heuristics[i]->placement);
        if (r.ok()) measured_heuristic[i] = r->step_seconds;
      }
      if (best.placement) {
        absl::StatusOr<Evaluation> r = e->Evaluate(*best.placement);
        if (r.ok()) remeasured_best[i] = r->step_seconds;
      }
    }
  }

  std::vector<std::pair<std::string, std::string>> files;
  if (!dir.empty()) files.push_back({dir + "/curve.csv", trainer.CurveCsv()});
  if (!flags.curve.empty()) {
    files.push_back({UserPath(flags.curve), trainer.CurveCsv()});
  }
  const bool json = flags.json;
  google::protobuf::Struct report;
  auto* models = (*report.mutable_fields())["models"].mutable_list_value();
  if (!json) {
    std::cout << absl::StrFormat("%-28s %12s %-10s %12s %-14s %8s\n", "model",
                                 "rl step s", "found by", "heuristic s",
                                 "heuristic", "ratio");
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    const RlTaskBest& best = trainer.best(static_cast<int>(i));
    const std::optional<HeuristicWinner>& h = heuristics[i];
    auto& e = *models->add_values()->mutable_struct_value()->mutable_fields();
    e["model"].set_string_value(names[i]);
    // The steps the table compares: simulated, or both measured after
    // training (then the simulated heuristic and the recorded best are in
    // the JSON too).
    std::optional<double> rl_seconds, heuristic_seconds;
    if (best.placement) {
      e["rl_step_seconds"].set_number_value(best.step_seconds);
      e["found_by"].set_string_value(best.source);
      rl_seconds = best.step_seconds;
    }
    if (h) {
      e["heuristic_step_seconds"].set_number_value(h->step_seconds);
      e["heuristic"].set_string_value(h->policy);
      heuristic_seconds = h->step_seconds;
    }
    if (reward == Reward::kMeasured) {
      rl_seconds = remeasured_best[i];
      heuristic_seconds = measured_heuristic[i];
      if (rl_seconds) {
        e["rl_step_seconds_remeasured"].set_number_value(*rl_seconds);
      }
      if (heuristic_seconds) {
        e["heuristic_step_seconds_measured"].set_number_value(
            *heuristic_seconds);
      }
    }
    if (!json) {
      std::cout << absl::StrFormat(
          "%-28s %12s %-10s %12s %-14s %8s\n", names[i],
          rl_seconds ? absl::StrFormat("%.6f", *rl_seconds) : "none",
          best.placement ? best.source : "-",
          heuristic_seconds ? absl::StrFormat("%.6f", *heuristic_seconds)
                            : "none",
          h ? h->policy : "-",
          rl_seconds && heuristic_seconds
              ? absl::StrFormat("%.4f", *rl_seconds / *heuristic_seconds)
              : "-");
    }
    if (!best.placement) continue;
    PlacementInfo info{names[i], "rl", best.step_seconds};
    std::string placement_json = PlacementToJson(
        *best.placement, loaded[i]->model.graph, *loaded[i]->cluster, info);
    if (!dir.empty()) {
      files.push_back(
          {absl::StrCat(dir, "/best_", i, ".json"), placement_json});
    }
    if (!flags.output_path.empty()) {
      files.push_back({UserPath(flags.output_path), placement_json});
    }
  }
  if (json) {
    auto& f = *report.mutable_fields();
    f["samples"].set_number_value(static_cast<double>(trainer.samples()));
    f["elapsed_seconds"].set_number_value(trainer.elapsed_seconds());
    f["stopped_by_signal"].set_bool_value(stop_requested);
    std::cout << ReportJson(report);
  } else {
    if (reward == Reward::kMeasured) {
      std::cout << "measured reward: both steps measured again, one after "
                   "the other, after training (the JSON has the recorded "
                   "best and the heuristic's simulated step)\n";
    }
    std::cout << absl::StrFormat(
        "%d samples in %s of training (all runs)%s\n", trainer.samples(),
        Clock(trainer.elapsed_seconds()),
        stop_requested ? "; stopped by signal, checkpoint saved" : "");
  }
  for (const auto& [path, contents] : files) {
    if (absl::Status s = WriteFileAtomically(path, contents); !s.ok()) {
      return Fail(s);
    }
    ReportWrote(path);
  }
  return stop_requested ? 130 : 0;
}

}  // namespace placer
