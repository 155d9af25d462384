// The RL trainer: creating it over its tasks, the training loop with its
// stops and checkpoints, saving and resuming. The state and the steps it
// takes are trainer_state.h, the checkpoint file checkpoint.h, the network
// model.h, the features features.h.
#include "policies/rl/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
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
#include "policies/rl/trainer_state.h"
#include "simulator/memory_check.h"
#include "simulator/placement.h"

namespace placer {

using trainer_internal::BestHeuristicOrNone;
using trainer_internal::TaskState;

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
