// placer run MODEL --cluster C (--placement P.json | --policy P) --steps N
//   [--warmup W] [--profile P.pbtxt] [--profile-out FILE] [--json]
//   [--nproc N [--world-size W] [--master HOST:PORT] [--rank-timeout 30s]]
// Trains the model under the placement on this machine's devices and
// prints measured against simulated step time, the loss per step, the
// memory per device and (one process) the copies per link. --profile-out
// writes the node and link times measured in the steps (over --profile's,
// when given), an op placement's or a strategy's. With more than one rank
// (placer/cli/ranks.h), rank 0 chooses the placement and sends it; every
// rank runs its devices; rank 0 reports.
#include <iostream>
#include <algorithm>
#include <map>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/statistics.h"
#include "base/status_helpers.h"
#include "google/protobuf/struct.pb.h"
#include "graph/training_view.h"
#include "placer/cli/cli_common.h"
#include "placer/cli/ranks.h"
#include "placer/json_report.h"
#include "placer/model_source.h"
#include "placer/policy_run.h"
#include "profiles/measured_cost_model.h"
#include "runtime/executor.h"
#include "runtime/measurement.h"
#include "runtime/strategy_executor.h"
#include "simulator/placement_file.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"

namespace placer {

namespace {

// The command's flags, read once.
struct RunFlags {
  std::string placement, policy, cluster, profile, profile_out;
  std::vector<std::string> input_values;
  int rank = 0;
  int steps = 0;
  int warmup = 0;
  int threads = 1;
  uint64_t seed = 1;
  bool pin_cores = false;
  bool json = false;
};

RunFlags ReadRunFlags() {
  RunFlags f;
  f.placement = absl::GetFlag(FLAGS_placement);
  f.policy = absl::GetFlag(FLAGS_policy);
  f.cluster = absl::GetFlag(FLAGS_cluster);
  f.profile = absl::GetFlag(FLAGS_profile);
  f.profile_out = absl::GetFlag(FLAGS_profile_out);
  f.input_values = absl::GetFlag(FLAGS_input_values);
  f.rank = absl::GetFlag(FLAGS_rank);
  f.steps = absl::GetFlag(FLAGS_steps);
  f.warmup = absl::GetFlag(FLAGS_warmup);
  f.threads = absl::GetFlag(FLAGS_threads);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.pin_cores = absl::GetFlag(FLAGS_pin_cores);
  f.json = absl::GetFlag(FLAGS_json);
  return f;
}

// --input-values, by input name; files relative to the user's directory.
absl::StatusOr<std::map<std::string, InputValues>> InputValuesFromFlags(
    const RunFlags& flags) {
  std::map<std::string, InputValues> given;
  for (const std::string& entry : flags.input_values) {
    absl::StatusOr<std::pair<std::string, InputValues>> parsed =
        ParseInputValues(entry, UserPath("."));
    if (!parsed.ok()) return parsed.status();
    if (!given.emplace(parsed->first, parsed->second).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input-values gives '", parsed->first, "' twice"));
    }
  }
  return given;
}

// How the executor is measured: the flags' steps, inputs, seed and
// threads, and this process's place among the ranks.
absl::StatusOr<MeasureOptions> MeasureOptionsFromFlags(const RunFlags& flags,
                                                       const RankSetup& ranks) {
  MeasureOptions options;
  options.steps = flags.steps;
  options.warmup = flags.warmup;
  ExecutorOptions& executor = options.executor;
  ASSIGN_OR_RETURN(executor.input_values, InputValuesFromFlags(flags));
  executor.seed = flags.seed;
  executor.threads_per_cpu_device = flags.threads;
  executor.pin_cpu_devices = flags.pin_cores;
  executor.ranks = ranks.group;
  executor.rank_of_device = ranks.rank_of_device;
  return options;
}

// The run's error once FinishRanks has run: a rank other than 0 says
// which it is.
int FailFinished(const RankSetup& ranks, absl::Status s) {
  if (ranks.rank != 0) {
    s = WithContext(s, absl::StrCat("rank ", ranks.rank, ": "));
  }
  return Fail(s);
}

// A failure once the ranks are set up: the others are told.
int FailOnRank(RankSetup& ranks, const absl::Status& s) {
  return FailFinished(ranks, FinishRanks(ranks, s));
}

// A run's figures against the simulated step's, whatever the plan: one
// text table and one JSON object (to which a plan adds its own fields).
struct RunSummary {
  double measured_seconds = 0;  // the median of the measured steps
  int steps = 0;
  int ranks = 1;
  double simulated_seconds = 0;
  std::vector<double> losses, step_seconds;  // every step, warm-up included
  // Per device: measured (every rank's; the median over the measured
  // steps) and simulated.
  std::vector<double> busy_seconds, simulated_busy_seconds;
  std::vector<int64_t> peak_bytes, simulated_peak_bytes;
  // What `peak_bytes` is.
  std::string peak_meaning;
};

// The measured half of a RunSummary.
RunSummary SummaryOf(const Measurement& m, int steps, int ranks) {
  RunSummary summary;
  summary.measured_seconds = m.step_seconds;
  summary.steps = steps;
  summary.ranks = ranks;
  summary.losses = m.losses;
  summary.step_seconds = m.step_times;
  summary.busy_seconds = m.busy_seconds;
  return summary;
}

google::protobuf::Struct SummaryJson(const RunSummary& summary,
                                     const Cluster& cluster) {
  google::protobuf::Struct s;
  auto& f = *s.mutable_fields();
  f["measured_step_seconds"].set_number_value(summary.measured_seconds);
  f["simulated_step_seconds"].set_number_value(summary.simulated_seconds);
  f["ranks"].set_number_value(summary.ranks);
  auto* losses = f["losses"].mutable_list_value();
  for (double x : summary.losses) losses->add_values()->set_number_value(x);
  auto* times = f["step_seconds"].mutable_list_value();
  for (double x : summary.step_seconds) times->add_values()->set_number_value(x);
  auto& peak = *f["peak_memory_bytes"].mutable_struct_value()->mutable_fields();
  for (int d = 0; d < cluster.num_devices(); ++d) {
    peak[cluster.device(d).name].set_number_value(
        static_cast<double>(summary.peak_bytes[d]));
  }
  return s;
}

void PrintSummary(const RunSummary& summary, const Cluster& cluster) {
  std::cout << absl::StrFormat(
      "\nstep time   measured %.6f s (median of %d)   simulated %.6f s   "
      "simulated/measured %.3f\n",
      summary.measured_seconds, summary.steps, summary.simulated_seconds,
      summary.simulated_seconds / summary.measured_seconds);
  std::cout << absl::StrFormat("%-10s %12s %12s %12s %12s\n", "device",
                               "busy s", "sim busy s", "peak", "sim peak");
  for (int d = 0; d < cluster.num_devices(); ++d) {
    std::cout << absl::StrFormat(
        "%-10s %12.6f %12.6f %12s %12s\n", cluster.device(d).name,
        summary.busy_seconds[d], summary.simulated_busy_seconds[d],
        HumanBytes(summary.peak_bytes[d]),
        HumanBytes(summary.simulated_peak_bytes[d]));
  }
  std::cout << "peak: " << summary.peak_meaning << "\n";
}

void PrintHeader(const LoadedModel& model, const Cluster& cluster,
                 const std::string& plan, const RunFlags& flags, int ranks) {
  std::cout << absl::StrFormat("%s on %s (%s), %d warm-up + %d steps%s\n",
                               model.source, cluster.name(), plan,
                               flags.warmup, flags.steps,
                               ranks > 1 ? absl::StrCat(", ", ranks, " ranks")
                                         : std::string());
}

void PrintStep(int step, double loss, double seconds, int warmup) {
  std::cout << absl::StrFormat("step %3d  loss %.6f  %.6f s%s\n", step + 1,
                               loss, seconds,
                               step < warmup ? "  (warm-up)" : "")
            << std::flush;
}

// One direction of a link in one step: copies, bytes, seconds copying.
struct LinkLoad {
  double copies = 0;
  double bytes = 0;
  double seconds = 0;
};

// Per device pair that carried a copy, measured (the mean over the
// measured steps) and simulated (the step simulated).
std::map<std::pair<int, int>, std::pair<LinkLoad, LinkLoad>> LinkLoads(
    const Measurement& m, int steps, const SimulationResult& sim) {
  std::map<std::pair<int, int>, std::pair<LinkLoad, LinkLoad>> loads;
  for (const MeasuredTransfer& t : m.transfers) {
    LinkLoad& l = loads[{t.src, t.dst}].first;
    l.copies += 1;
    l.bytes += static_cast<double>(t.bytes);
    l.seconds += t.seconds;
  }
  for (auto& [pair, load] : loads) {
    load.first.copies /= steps;
    load.first.bytes /= steps;
    load.first.seconds /= steps;
  }
  for (const ScheduledTransfer& t : sim.transfers) {
    LinkLoad& l = loads[{t.src, t.dst}].second;
    l.copies += 1;
    l.bytes += static_cast<double>(t.bytes);
    l.seconds += t.end_seconds - t.start_seconds;
  }
  return loads;
}

// --profile-out (when given): the node and link times of the measured
// steps, over --profile's when given, so that the next search sees both.
// Returns the command's exit code.
int WriteProfileOut(const TrainingView& view, const Cluster& cluster,
                    const Measurement& m, const RunFlags& flags) {
  if (flags.profile_out.empty()) return 0;
  MeasuredProfile profile = ProfileFromMeasurement(view, cluster, m);
  if (!flags.profile.empty()) {
    absl::StatusOr<MeasuredProfile> base = LoadProfile(UserPath(flags.profile));
    if (!base.ok()) return Fail(base.status());
    profile = MergeProfiles(std::move(*base), profile);
  }
  if (absl::Status s = SaveProfile(profile, UserPath(flags.profile_out));
      !s.ok()) {
    return Fail(s);
  }
  ReportWrote(flags.profile_out,
              absl::StrFormat("%d node signatures, %d links",
                              profile.ops.size(), profile.links.size()));
  return 0;
}

// `run --placement F` where F holds a strategy: the strategy executor
// (threads in this process, or this rank's devices of a distributed run),
// measured against the strategy simulator. Reports on rank 0.
int RunStrategy(const LoadedModel& model, const Cluster& cluster,
                const TrainingView& view, const SimulationContext& context,
                const Strategy& strategy, const std::string& path,
                const RunFlags& flags, RankSetup& ranks) {
  const bool report = ranks.rank == 0;
  const int world = ranks.group != nullptr ? ranks.group->world_size() : 1;
  absl::StatusOr<StrategySimulation> simulated =
      SimulateStrategy(context, strategy);
  if (!simulated.ok()) {
    return FailOnRank(
        ranks, WithContext(simulated.status(), absl::StrCat(path, ": ")));
  }
  absl::StatusOr<MeasureOptions> options = MeasureOptionsFromFlags(flags, ranks);
  if (!options.ok()) return FailOnRank(ranks, options.status());
  // What LibTorch allocates per device, beside the simulated peak.
  options->executor.measure_allocations = true;
  // A wide stage's slots take their ready nodes in the simulator's order.
  options->executor.priorities = context.priorities();
  // The profile's node times need each GPU node waited for.
  options->executor.time_gpu_nodes = !flags.profile_out.empty();
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> executor =
      StrategyExecutor::Create(view, cluster, strategy, options->executor);
  if (!executor.ok()) return FailOnRank(ranks, executor.status());
  const bool json = flags.json || !report;
  if (!json) {
    PrintHeader(model, cluster,
                absl::StrCat(path, ": ", DescribeStrategy(strategy)), flags,
                world);
  }
  absl::StatusOr<Measurement> m = MeasureSteps(
      **executor, *options, [&](int step, const StepReport& r) {
        if (!json) PrintStep(step, r.loss, r.seconds, flags.warmup);
      });
  executor->reset();
  if (absl::Status s = FinishRanks(ranks, m.status()); !s.ok()) {
    return FailFinished(ranks, s);
  }
  if (!report) return 0;
  const SimulationResult& sim = simulated->step;
  RunSummary summary = SummaryOf(*m, flags.steps, world);
  // Per device (every rank's, merged at each step's end): the most
  // allocated in a measured step.
  summary.peak_bytes = m->allocated_peak_bytes;
  summary.peak_bytes.resize(cluster.num_devices(), 0);
  summary.peak_meaning =
      "what LibTorch allocated on the device (the most of a measured step)";
  summary.simulated_seconds = sim.step_seconds;
  summary.simulated_busy_seconds = sim.busy_seconds;
  summary.simulated_peak_bytes = sim.peak_memory_bytes;
  if (flags.json) {
    google::protobuf::Struct s = SummaryJson(summary, cluster);
    auto& f = *s.mutable_fields();
    f["micro_batches"].set_number_value(strategy.micro_batches);
    f["strategy"].set_string_value(DescribeStrategy(strategy));
    std::cout << ReportJson(s);
  } else {
    PrintSummary(summary, cluster);
  }
  return WriteProfileOut(view, cluster, *m, flags);
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  const RunFlags flags = ReadRunFlags();
  absl::StatusOr<TrainingOptions> training = TrainingOptionsFromFlags();
  if (!training.ok()) return Fail(training.status());
  if (!flags.profile_out.empty()) {
    if (absl::Status s = CheckMeasuredStepDefaults(); !s.ok()) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--profile-out: ", s.message())));
    }
  }
  if (args.size() != 1) return UsageError("run takes one MODEL");
  if (flags.steps < 1 || flags.warmup < 0) {
    return UsageError("--steps must be at least 1 and --warmup at least 0");
  }
  absl::StatusOr<LoadedModel> model = LoadModelFromFlags(args[0]);
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<Cluster> cluster =
      LoadUserCluster(flags.cluster.empty() ? "cpu2" : flags.cluster);
  if (!cluster.ok()) return Fail(cluster.status());
  NoteUnpinnedCpuDevices(*cluster);

  TrainingView view = BuildTrainingView(model->graph, *training);
  if (absl::Status s = CheckRunnable(model->graph); !s.ok()) return Fail(s);
  absl::StatusOr<std::unique_ptr<CostModel>> costs = CostModelFromFlags();
  if (!costs.ok()) return Fail(costs.status());
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(view, *cluster, **costs, *order);

  absl::StatusOr<std::unique_ptr<RankSetup>> ranks_or;
  const int rank = flags.rank;
  Placement placement;
  std::string placed_by;
  if (rank > 0) {
    // The placement is rank 0's (a timed search need not repeat).
    ranks_or = JoinRanks(*cluster, {});
    if (!ranks_or.ok()) return Fail(ranks_or.status());
    absl::StatusOr<std::string> json = (*ranks_or)->group->Get("placer/placement");
    if (!json.ok()) return Fail(FinishRanks(**ranks_or, json.status()));
    absl::StatusOr<PlacementOrStrategy> p = ParsePlacementOrStrategyJson(
        *json, "rank 0's placement", model->graph, *cluster);
    if (!p.ok()) return Fail(FinishRanks(**ranks_or, p.status()));
    if (p->strategy) {
      return RunStrategy(*model, *cluster, view, context, *p->strategy,
                         "rank 0's strategy", flags, **ranks_or);
    }
    placement = std::move(p->placement);
  } else if (!flags.placement.empty()) {
    absl::StatusOr<PlacementOrStrategy> p = ReadPlacementOrStrategyFile(
        UserPath(flags.placement), model->graph, *cluster);
    if (!p.ok()) return Fail(p.status());
    if (p->strategy) {
      ranks_or = JoinRanks(*cluster, RerunArguments("run", args));
      if (!ranks_or.ok()) return Fail(ranks_or.status());
      if ((*ranks_or)->group != nullptr) {
        if (absl::Status s = (*ranks_or)->group->Put(
                "placer/placement",
                StrategyToJson(*p->strategy, model->graph, *cluster,
                               {model->source, flags.placement, 0}, 0));
            !s.ok()) {
          return Fail(FinishRanks(**ranks_or, s));
        }
      }
      return RunStrategy(*model, *cluster, view, context, *p->strategy,
                         flags.placement, flags, **ranks_or);
    }
    placement = std::move(p->placement);
    placed_by = flags.placement;
  } else {
    PolicyInput input{view, *cluster, **costs, context};
    PolicyOptions options = PolicyOptionsFromFlags();
    PolicyRun run = RunPolicy(flags.policy, input, options);
    if (!run.status.ok()) return Fail(run.status);
    placement = std::move(run.placement);
    placed_by = "policy " + flags.policy;
  }
  absl::StatusOr<SimulationResult> simulated = Simulate(context, placement);
  if (!simulated.ok()) return Fail(simulated.status());
  if (rank == 0) {
    ranks_or = JoinRanks(*cluster, RerunArguments("run", args));
    if (!ranks_or.ok()) return Fail(ranks_or.status());
    if ((*ranks_or)->group != nullptr) {
      if (absl::Status s = (*ranks_or)->group->Put(
              "placer/placement",
              PlacementToJson(placement, model->graph, *cluster,
                              {model->source, placed_by, 0}));
          !s.ok()) {
        return Fail(FinishRanks(**ranks_or, s));
      }
    }
  }
  RankSetup& ranks = **ranks_or;
  const int world = ranks.group != nullptr ? ranks.group->world_size() : 1;
  const bool report = ranks.rank == 0;
  absl::StatusOr<MeasureOptions> options = MeasureOptionsFromFlags(flags, ranks);
  if (!options.ok()) return FailOnRank(ranks, options.status());
  options->executor.priorities = context.priorities();
  // The profile's node times need each GPU node waited for; a plain run
  // queues them as training frameworks do.
  options->executor.time_gpu_nodes = !flags.profile_out.empty();
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> executor =
      StrategyExecutor::Create(view, *cluster, placement, options->executor);
  if (!executor.ok()) return FailOnRank(ranks, executor.status());
  if (!flags.json && report) {
    PrintHeader(*model, *cluster, placed_by, flags, world);
  }
  absl::StatusOr<Measurement> m = MeasureSteps(
      **executor, *options, [&](int step, const StepReport& r) {
        if (flags.json || !report) return;
        PrintStep(step, r.loss, r.seconds, flags.warmup);
      });
  executor->reset();
  if (absl::Status s = FinishRanks(ranks, m.status()); !s.ok()) {
    return FailFinished(ranks, s);
  }
  if (!report) return 0;

  RunSummary summary = SummaryOf(*m, flags.steps, world);
  summary.simulated_seconds = simulated->step_seconds;
  summary.simulated_busy_seconds = simulated->busy_seconds;
  summary.peak_bytes = m->peak_memory_bytes;
  summary.simulated_peak_bytes = simulated->peak_memory_bytes;
  summary.peak_meaning =
      "tracked by the simulator's memory timeline over the step as it ran, "
      "at the sizes of the tensors the kernels made";
  // Copies between devices per step (a rank sees only its own).
  const auto loads = LinkLoads(*m, flags.steps, *simulated);
  if (flags.json) {
    google::protobuf::Struct s = SummaryJson(summary, *cluster);
    auto& f = *s.mutable_fields();
    if (world == 1) {
      auto* links = f["links"].mutable_list_value();
      for (const auto& [pair, load] : loads) {
        auto& e =
            *links->add_values()->mutable_struct_value()->mutable_fields();
        e["src"].set_string_value(cluster->device(pair.first).name);
        e["dst"].set_string_value(cluster->device(pair.second).name);
        e["copies"].set_number_value(load.first.copies);
        e["bytes"].set_number_value(load.first.bytes);
        e["seconds"].set_number_value(load.first.seconds);
        e["simulated_copies"].set_number_value(load.second.copies);
        e["simulated_bytes"].set_number_value(load.second.bytes);
        e["simulated_seconds"].set_number_value(load.second.seconds);
      }
    }
    std::cout << ReportJson(s);
  } else {
    PrintSummary(summary, *cluster);
    if (world == 1 && !loads.empty()) {
      std::cout << absl::StrFormat("%-22s %8s %8s %10s %10s %10s %10s\n",
                                   "link (per step)", "copies", "sim", "bytes",
                                   "sim bytes", "copy s", "sim copy s");
      for (const auto& [pair, load] : loads) {
        std::cout << absl::StrFormat(
            "%-22s %8.1f %8.0f %10s %10s %10.6f %10.6f\n",
            absl::StrCat(cluster->device(pair.first).name, " -> ",
                         cluster->device(pair.second).name),
            load.first.copies, load.second.copies,
            HumanBytes(static_cast<int64_t>(load.first.bytes)),
            HumanBytes(static_cast<int64_t>(load.second.bytes)),
            load.first.seconds, load.second.seconds);
      }
    }
  }
  return WriteProfileOut(view, *cluster, *m, flags);
}

}  // namespace placer
