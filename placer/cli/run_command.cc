// placer run MODEL --cluster C (--placement P.json | --policy P) --steps N
//   [--warmup W] [--profile P.pbtxt] [--profile-out FILE] [--json]
//   [--nproc N [--world-size W] [--master HOST:PORT] [--rank-timeout 30s]]
// Trains the model under the placement on this machine's devices and
// prints measured against simulated step time, the loss per step, the
// memory per device and (one process) the copies per link. --profile-out
// writes the node and link times measured in the steps (over --profile's,
// when given). With more than one rank
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

// --input-values, by input name; files relative to the user's directory.
absl::StatusOr<std::map<std::string, InputValues>> InputValuesFromFlags() {
  std::map<std::string, InputValues> given;
  for (const std::string& entry : absl::GetFlag(FLAGS_input_values)) {
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

// `run --placement F` where F holds a strategy: the strategy executor
// (threads in this process, or this rank's devices of a distributed run),
// measured against the strategy simulator. Reports on rank 0.
int RunStrategy(const LoadedModel& model, const Cluster& cluster,
                const TrainingView& view, const SimulationContext& context,
                const Strategy& strategy, const std::string& path,
                RankSetup& ranks) {
  const bool report = ranks.rank == 0;
  const int world = ranks.group != nullptr ? ranks.group->world_size() : 1;
  auto fail = [&](absl::Status s) {
    s = FinishRanks(ranks, s);
    if (!report) {
      s = WithContext(s, absl::StrCat("rank ", ranks.rank, ": "));
    }
    return Fail(s);
  };
  absl::StatusOr<StrategySimulation> simulated =
      SimulateStrategy(context, strategy);
  if (!simulated.ok()) {
    return fail(WithContext(simulated.status(), absl::StrCat(path, ": ")));
  }
  ExecutorOptions options;
  absl::StatusOr<std::map<std::string, InputValues>> given =
      InputValuesFromFlags();
  if (!given.ok()) return fail(given.status());
  options.input_values = *std::move(given);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.threads_per_cpu_device = absl::GetFlag(FLAGS_threads);
  options.pin_cpu_devices = absl::GetFlag(FLAGS_pin_cores);
  options.ranks = ranks.group;
  options.rank_of_device = ranks.rank_of_device;
  // What LibTorch allocates per device, beside the simulated peak.
  options.measure_allocations = true;
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> executor =
      StrategyExecutor::Create(view, cluster, strategy, options);
  if (!executor.ok()) return fail(executor.status());
  const int steps = absl::GetFlag(FLAGS_steps);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  if (steps < 1 || warmup < 0) {
    // The usage error is what this rank reports, whatever the others did.
    (void)FinishRanks(ranks, absl::InvalidArgumentError("bad --steps"));
    return UsageError("--steps must be at least 1 and --warmup at least 0");
  }
  const bool json = absl::GetFlag(FLAGS_json) || !report;
  if (!json) {
    std::cout << absl::StrFormat("%s on %s (%s: %s), %d warm-up + %d steps%s\n",
                                 model.source, cluster.name(), path,
                                 DescribeStrategy(strategy), warmup, steps,
                                 world > 1 ? absl::StrCat(", ", world, " ranks")
                                           : std::string());
  }
  std::vector<double> losses, times;
  std::vector<double> busy(cluster.num_devices(), 0);
  // Per device (every rank's, merged at each step's end): the most
  // allocated in a measured step.
  std::vector<int64_t> allocated(cluster.num_devices(), 0);
  for (int step = 0; step < warmup + steps; ++step) {
    absl::StatusOr<StrategyStepReport> r = (*executor)->Step();
    if (!r.ok()) return fail(r.status());
    losses.push_back(r->loss);
    if (step >= warmup) {
      times.push_back(r->seconds);
      for (int d = 0; d < cluster.num_devices(); ++d) {
        busy[d] += r->busy_seconds[d] / steps;
        if (d < static_cast<int>(r->allocated_peak_bytes.size())) {
          allocated[d] = std::max(allocated[d], r->allocated_peak_bytes[d]);
        }
      }
    }
    if (!json) {
      std::cout << absl::StrFormat("step %3d  loss %.6f  %.6f s%s\n",
                                   step + 1, r->loss, r->seconds,
                                   step < warmup ? "  (warm-up)" : "")
                << std::flush;
    }
  }
  executor->reset();
  if (absl::Status s = FinishRanks(ranks, absl::OkStatus()); !s.ok()) {
    return fail(s);
  }
  if (!report) return 0;
  const double median = Median(times);
  const SimulationResult& sim = simulated->step;
  if (absl::GetFlag(FLAGS_json)) {
    google::protobuf::Struct s;
    auto& f = *s.mutable_fields();
    f["measured_step_seconds"].set_number_value(median);
    f["simulated_step_seconds"].set_number_value(sim.step_seconds);
    f["micro_batches"].set_number_value(strategy.micro_batches);
    f["strategy"].set_string_value(DescribeStrategy(strategy));
    f["ranks"].set_number_value(world);
    auto* l = f["losses"].mutable_list_value();
    for (double x : losses) l->add_values()->set_number_value(x);
    auto* t = f["step_seconds"].mutable_list_value();
    for (double x : times) t->add_values()->set_number_value(x);
    auto& peak =
        *f["peak_memory_bytes"].mutable_struct_value()->mutable_fields();
    for (int d = 0; d < cluster.num_devices(); ++d) {
      peak[cluster.device(d).name].set_number_value(
          static_cast<double>(allocated[d]));
    }
    std::cout << ReportJson(s);
    return 0;
  }
  std::cout << absl::StrFormat(
      "\nstep time   measured %.6f s (median of %d)   simulated %.6f s   "
      "simulated/measured %.3f\n",
      median, steps, sim.step_seconds, sim.step_seconds / median);
  // "peak": what LibTorch allocated (every rank's devices).
  std::cout << absl::StrFormat("%-10s %12s %12s %12s %12s\n", "device",
                               "busy s", "sim busy s", "peak", "sim peak");
  for (int d = 0; d < cluster.num_devices(); ++d) {
    std::cout << absl::StrFormat(
        "%-10s %12.6f %12.6f %12s %12s\n", cluster.device(d).name, busy[d],
        sim.busy_seconds[d], HumanBytes(allocated[d]),
        HumanBytes(sim.peak_memory_bytes[d]));
  }
  return 0;
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  absl::StatusOr<TrainingOptions> training = TrainingOptionsFromFlags();
  if (!training.ok()) return Fail(training.status());
  if (!absl::GetFlag(FLAGS_profile_out).empty()) {
    if (absl::Status s = CheckMeasuredStepDefaults(); !s.ok()) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--profile-out: ", s.message())));
    }
  }
  if (args.size() != 1) return UsageError("run takes one MODEL");
  std::string placement_path = absl::GetFlag(FLAGS_placement);
  std::string policy = absl::GetFlag(FLAGS_policy);
  absl::StatusOr<LoadedModel> model = LoadModelFromFlags(args[0]);
  if (!model.ok()) return Fail(model.status());
  std::string cluster_spec = absl::GetFlag(FLAGS_cluster);
  absl::StatusOr<Cluster> cluster =
      LoadUserCluster(cluster_spec.empty() ? "cpu2" : cluster_spec);
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
  const int rank = absl::GetFlag(FLAGS_rank);
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
                         "rank 0's strategy", **ranks_or);
    }
    placement = std::move(p->placement);
  } else if (!placement_path.empty()) {
    absl::StatusOr<PlacementOrStrategy> p = ReadPlacementOrStrategyFile(
        UserPath(placement_path), model->graph, *cluster);
    if (!p.ok()) return Fail(p.status());
    if (p->strategy) {
      ranks_or = JoinRanks(*cluster, RerunArguments("run", args));
      if (!ranks_or.ok()) return Fail(ranks_or.status());
      if ((*ranks_or)->group != nullptr) {
        if (absl::Status s = (*ranks_or)->group->Put(
                "placer/placement",
                StrategyToJson(*p->strategy, model->graph, *cluster,
                               {model->source, placement_path, 0}, 0));
            !s.ok()) {
          return Fail(FinishRanks(**ranks_or, s));
        }
      }
      return RunStrategy(*model, *cluster, view, context, *p->strategy,
                         placement_path, **ranks_or);
    }
    placement = std::move(p->placement);
    placed_by = placement_path;
  } else {
    PolicyInput input{view, *cluster, **costs, context};
    PolicyOptions options = PolicyOptionsFromFlags();
    PolicyRun run = RunPolicy(policy, input, options);
    if (!run.status.ok()) return Fail(run.status);
    placement = std::move(run.placement);
    placed_by = "policy " + policy;
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

  MeasureOptions options;
  options.steps = absl::GetFlag(FLAGS_steps);
  options.warmup = absl::GetFlag(FLAGS_warmup);
  options.executor.seed = absl::GetFlag(FLAGS_seed);
  absl::StatusOr<std::map<std::string, InputValues>> given =
      InputValuesFromFlags();
  if (!given.ok()) return Fail(given.status());
  options.executor.input_values = *std::move(given);
  options.executor.threads_per_cpu_device = absl::GetFlag(FLAGS_threads);
  options.executor.pin_cpu_devices = absl::GetFlag(FLAGS_pin_cores);
  options.executor.priorities = context.priorities();
  options.executor.ranks = ranks.group;
  options.executor.rank_of_device = ranks.rank_of_device;
  // Errors of ranks other than 0 say which rank they are.
  auto fail = [&](absl::Status s) {
    s = FinishRanks(ranks, s);
    if (!report) {
      s = WithContext(s, absl::StrCat("rank ", rank, ": "));
    }
    return Fail(s);
  };
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::Create(view, *cluster, placement, options.executor);
  if (!executor.ok()) return fail(executor.status());
  const bool json = absl::GetFlag(FLAGS_json);
  if (!json && report) {
    std::cout << absl::StrFormat("%s on %s (%s), %d warm-up + %d steps%s\n",
                                 model->source, cluster->name(), placed_by,
                                 options.warmup, options.steps,
                                 world > 1 ? absl::StrCat(", ", world, " ranks")
                                           : std::string());
  }
  absl::StatusOr<Measurement> m = MeasureSteps(
      **executor, options, [&](int step, const StepReport& r) {
        if (json || !report) return;
        std::cout << absl::StrFormat("step %3d  loss %.6f  %.6f s%s\n",
                                     step + 1, r.loss, r.seconds,
                                     step < options.warmup ? "  (warm-up)" : "")
                  << std::flush;
      });
  executor->reset();
  if (absl::Status s = FinishRanks(ranks, m.status()); !s.ok()) return fail(s);
  if (!report) return 0;

  if (json) {
    google::protobuf::Struct s;
    auto& f = *s.mutable_fields();
    f["measured_step_seconds"].set_number_value(m->step_seconds);
    f["simulated_step_seconds"].set_number_value(simulated->step_seconds);
    f["ranks"].set_number_value(world);
    auto* losses = f["losses"].mutable_list_value();
    for (double l : m->losses) losses->add_values()->set_number_value(l);
    auto* times = f["step_seconds"].mutable_list_value();
    for (double t : m->step_times) times->add_values()->set_number_value(t);
    auto& peak = *f["peak_memory_bytes"].mutable_struct_value()->mutable_fields();
    for (int d = 0; d < cluster->num_devices(); ++d) {
      peak[cluster->device(d).name].set_number_value(
          static_cast<double>(m->peak_memory_bytes[d]));
    }
    if (world == 1) {
      auto* links = f["links"].mutable_list_value();
      for (const auto& [pair, load] :
           LinkLoads(*m, options.steps, *simulated)) {
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
    std::cout << absl::StrFormat(
        "\nstep time   measured %.6f s (median of %d)   simulated %.6f s   "
        "simulated/measured %.3f\n",
        m->step_seconds, options.steps, simulated->step_seconds,
        simulated->step_seconds / m->step_seconds);
    std::cout << absl::StrFormat("%-10s %12s %12s %12s %12s\n", "device",
                                 "busy s", "sim busy s", "peak",
                                 "sim peak");
    for (int d = 0; d < cluster->num_devices(); ++d) {
      std::cout << absl::StrFormat(
          "%-10s %12.6f %12.6f %12s %12s\n", cluster->device(d).name,
          m->busy_seconds[d], simulated->busy_seconds[d],
          HumanBytes(m->peak_memory_bytes[d]),
          HumanBytes(simulated->peak_memory_bytes[d]));
    }
    // Copies between devices per step (a rank sees only its own).
    auto loads = LinkLoads(*m, options.steps, *simulated);
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
  if (std::string out = absl::GetFlag(FLAGS_profile_out); !out.empty()) {
    MeasuredProfile profile =
        ProfileFromMeasurement(view, *cluster, placement, *m);
    // With --profile, the written profile is that one overlaid with what
    // this run measured, so that the next search sees both.
    if (std::string in = absl::GetFlag(FLAGS_profile); !in.empty()) {
      absl::StatusOr<MeasuredProfile> base = LoadProfile(UserPath(in));
      if (!base.ok()) return Fail(base.status());
      profile = MergeProfiles(std::move(*base), profile);
    }
    if (absl::Status s = SaveProfile(profile, UserPath(out)); !s.ok()) {
      return Fail(s);
    }
    ReportWrote(out, absl::StrFormat("%d node signatures, %d links",
                                     profile.ops.size(), profile.links.size()));
  }
  return 0;
}

}  // namespace placer
