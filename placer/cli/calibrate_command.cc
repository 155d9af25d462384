// placer calibrate MODEL... --cluster cpu2 [--placements 10] [--steps N]
//   [--warmup W] [--rounds R] [--profile P.pbtxt] [-o results.csv]
// How far the simulator is from real execution: profiles each model on
// this machine as `placer profile` does (unless --profile is given: op by
// op, then inside reference steps), then for each of a set of placements
// (every heuristic policy, then seeded random ones) measures with the
// executor and simulates twice: with that profile, and with it overlaid by
// the node and link times measured inside the steps of one more reference
// placement that is not among those evaluated (and, where a host mixes
// device kinds, of each kind alone: the alone times; runtime/measurement.h)
// (the feedback loop of the product). With --rounds R the placements are
// measured R times in turn (drift on a shared machine then falls on all
// alike) and each keeps the median of its rounds. Prints each (as its last
// round ends), the median relative error and Spearman's rank correlation,
// per model and over all; with several rounds also how well the rounds
// rank the placements against each other (the measurement's own noise: the
// most rank agreement a simulator can be expected to show) and how well the
// simulator ranks each round on its own; per model, how much slower the
// placement simulated fastest measured than the fastest measured
// (calibration_summary.h).
#include <iostream>
#include <optional>
#include <set>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/statistics.h"
#include "google/protobuf/struct.pb.h"
#include "graph/training_view.h"
#include "placer/cli/calibration_summary.h"
#include "placer/cli/cli_common.h"
#include "placer/cli/ranks.h"
#include "placer/json_report.h"
#include "placer/model_source.h"
#include "placer/policy_run.h"
#include "policies/policy.h"
#include "profiles/measured_cost_model.h"
#include "profiles/proto_io.h"
#include "runtime/executor.h"
#include "runtime/measurement.h"
#include "runtime/profiler.h"
#include "runtime/strategy_executor.h"
#include "simulator/simulator.h"

namespace placer {
namespace {

// The flags calibrate reads, read once.
struct CalibrateFlags {
  std::string cluster;
  int32_t placements = 0;
  int32_t rounds = 0;
  std::string profile;
  int32_t steps = 0;
  int32_t warmup = 0;
  uint64_t seed = 0;
  int32_t threads = 0;
  bool pin_cores = false;
  bool json = false;
  int32_t repeats = 0;
  std::string output_path;  // -o
};

CalibrateFlags ReadCalibrateFlags() {
  CalibrateFlags f;
  f.cluster = absl::GetFlag(FLAGS_cluster);
  f.placements = absl::GetFlag(FLAGS_placements);
  f.rounds = absl::GetFlag(FLAGS_rounds);
  f.profile = absl::GetFlag(FLAGS_profile);
  f.steps = absl::GetFlag(FLAGS_steps);
  f.warmup = absl::GetFlag(FLAGS_warmup);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.threads = absl::GetFlag(FLAGS_threads);
  f.pin_cores = absl::GetFlag(FLAGS_pin_cores);
  f.json = absl::GetFlag(FLAGS_json);
  f.repeats = absl::GetFlag(FLAGS_repeats);
  f.output_path = absl::GetFlag(FLAGS_o);
  return f;
}

}  // namespace

int CalibrateCommand(const std::vector<std::string>& args) {
  const CalibrateFlags flags = ReadCalibrateFlags();
  if (absl::Status s = CheckMeasuredStepDefaults(); !s.ok()) return Fail(s);
  if (args.empty()) return UsageError("calibrate takes one or more MODELs");
  std::string cluster_spec = flags.cluster;
  absl::StatusOr<Cluster> cluster =
      LoadUserCluster(cluster_spec.empty() ? "cpu2" : cluster_spec);
  if (!cluster.ok()) return Fail(cluster.status());
  NoteUnpinnedCpuDevices(*cluster);
  const int wanted = flags.placements;
  const int rounds = flags.rounds;
  if (rounds < 1) return UsageError("--rounds must be at least 1");
  std::optional<MeasuredProfile> given;
  if (std::string path = flags.profile; !path.empty()) {
    absl::StatusOr<MeasuredProfile> p = LoadProfile(UserPath(path));
    if (!p.ok()) return Fail(p.status());
    given = std::move(*p);
  }
  MeasureOptions measure;
  measure.steps = flags.steps;
  measure.warmup = flags.warmup;
  measure.executor.seed = flags.seed;
  measure.executor.threads_per_cpu_device = flags.threads;
  measure.executor.pin_cpu_devices = flags.pin_cores;

  std::vector<CalibrationRow> all;
  std::string summaries;
  // With --json the table is progress on stderr and the report is JSON.
  const bool json = flags.json;
  std::ostream& table = json ? std::cerr : std::cout;
  google::protobuf::Struct per_model;
  // Ctrl-C: the placements measured so far are summarized and written.
  StopOnSignal stop_on_signal;
  for (const std::string& spec : args) {
    absl::StatusOr<LoadedModel> model = LoadModelFromFlags(spec);
    if (!model.ok()) return Fail(model.status());
      TrainingView view = BuildTrainingView(model->graph);
    if (absl::Status s = CheckRunnable(model->graph); !s.ok()) return Fail(s);
    MeasuredProfile profile;
    if (given) {
      profile = *given;
    } else {
      ProfilerOptions po;
      po.threads = measure.executor.threads_per_cpu_device;
      po.pin_cores = measure.executor.pin_cpu_devices;
      po.repeats = flags.repeats;
      absl::StatusOr<ProfileReport> report =
          ProfileDevices(&view, *cluster, po, [&](const std::string& line) {
            std::cerr << "calibrate: " << spec << ": profile: " << line << "\n";
          });
      if (!report.ok()) return Fail(report.status());
      profile = std::move(report->profile);
    }
    std::unique_ptr<CostModel> costs =
        NewMeasuredCostModel(profile, NewRooflineCostModel());
    std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
    SimulationContext context =
        SimulationContext::Create(view, *cluster, *costs, *order);
    measure.executor.priorities = context.priorities();
    // Feedback: the node and link times measured inside the steps of one
    // reference placement (random runs with a seed no evaluated placement
    // uses) overlay the op-by-op profile.
    Placement reference = RandomRuns(model->graph, cluster->num_devices(),
                                     ~flags.seed);
    absl::StatusOr<MeasuredProfile> fed =
        OverlayStepMeasurement(view, *cluster, reference, profile, measure);
    if (!fed.ok()) return Fail(fed.status());
    std::unique_ptr<CostModel> fed_costs =
        NewMeasuredCostModel(std::move(*fed), NewRooflineCostModel());
    SimulationContext fed_context =
        SimulationContext::Create(view, *cluster, *fed_costs, *order);

    // The placements: each heuristic's (duplicates dropped), then random.
    std::vector<std::pair<std::string, Placement>> placements;
    std::set<std::vector<int>> seen;
    PolicyInput input{view, *cluster, *costs, context};
    PolicyOptions po = PolicyOptionsFromFlags();
    for (const PolicyInfo& info : Policies()) {
      if (static_cast<int>(placements.size()) >= wanted) break;
      if (info.kind == PolicyKind::kLearned) continue;
      PolicyRun run = RunPolicy(info.name, input, po);
      if (!run.status.ok()) continue;
      if (seen.insert(run.placement.device_of_op).second) {
        placements.push_back({info.name, std::move(run.placement)});
      }
    }
    for (uint64_t k = 1; static_cast<int>(placements.size()) < wanted && k < 1000; ++k) {
      Placement p = RandomRuns(model->graph, cluster->num_devices(), po.seed * 1000 + k);
      if (seen.insert(p.device_of_op).second) {
        placements.push_back({absl::StrCat("random", k), std::move(p)});
      }
    }

    std::vector<CalibrationRow> rows;
    table << absl::StrFormat("%-14s %12s %12s %8s %12s %8s   %s\n",
                                 "placement", "measured s", "simulated s",
                                 "error", "+feedback s", "error", spec);
    // Simulated first; then measured in `rounds` rounds in turn (the
    // machine's drift then falls on every placement alike), each time a
    // fresh executor; a placement's step is the median of its rounds.
    std::vector<CalibrationRow> pending;
    for (auto& [name, placement] : placements) {
      absl::StatusOr<SimulationResult> sim = Simulate(context, placement);
      if (!sim.ok()) return Fail(sim.status());
      absl::StatusOr<SimulationResult> fed_sim = Simulate(fed_context, placement);
      if (!fed_sim.ok()) return Fail(fed_sim.status());
      pending.push_back(
          {spec, name, sim->step_seconds, 0, fed_sim->step_seconds});
    }
    std::vector<std::vector<double>> measured(placements.size());
    // A placement's row, once its rounds are over (after a signal, with the
    // rounds it was measured in).
    auto report = [&](size_t i) {
      if (measured[i].empty()) return;
      CalibrationRow row = pending[i];
      row.measured = Median(measured[i]);
      row.rounds = measured[i];
      table << absl::StrFormat(
          "%-14s %12.6f %12.6f %+7.1f%% %12.6f %+7.1f%%\n", row.placement,
          row.measured, row.simulated,
          100 * (row.simulated - row.measured) / row.measured,
          row.simulated_feedback,
          100 * (row.simulated_feedback - row.measured) / row.measured);
      table.flush();
      rows.push_back(row);
      all.push_back(row);
    };
    std::vector<bool> done(placements.size(), false);
    for (int round = 0; round < rounds && !StopOnSignal::requested();
         ++round) {
      if (rounds > 1) {
        std::cerr << absl::StrFormat("calibrate: %s: round %d of %d\n", spec,
                                     round + 1, rounds);
      }
      for (size_t i = 0; i < placements.size(); ++i) {
        if (done[i]) continue;
        absl::StatusOr<std::unique_ptr<StrategyExecutor>> executor = StrategyExecutor::Create(
            view, *cluster, placements[i].second, measure.executor);
        if (!executor.ok()) return Fail(executor.status());
        absl::StatusOr<Measurement> m = MeasureSteps(**executor, measure);
        if (StopOnSignal::requested()) break;
        if (!m.ok()) {
          table << absl::StrFormat("%-14s failed: %s\n", placements[i].first,
                                   m.status().message());
          done[i] = true;
          continue;
        }
        measured[i].push_back(m->step_seconds);
        if (round + 1 == rounds) {
          report(i);
          done[i] = true;
        }
      }
    }
    // Stopped by a signal: the placements measured so far.
    for (size_t i = 0; i < placements.size(); ++i) {
      if (!done[i]) report(i);
    }
    summaries += Summary(spec, rows, /*one_model=*/true);
    (*per_model.mutable_fields())[spec] = SummaryJson(rows, /*one_model=*/true);
    if (StopOnSignal::requested()) break;
  }
  const bool stopped = StopOnSignal::requested();
  if (stopped) {
    std::cerr << "calibrate: stopped by signal; reporting the placements "
                 "measured so far\n";
  }
  if (json) {
    google::protobuf::Struct report;
    auto& f = *report.mutable_fields();
    *f["models"].mutable_struct_value() = per_model;
    f["all"] = SummaryJson(all, /*one_model=*/false);
    auto* list = f["rows"].mutable_list_value();
    for (const CalibrationRow& r : all) {
      auto& e = *list->add_values()->mutable_struct_value()->mutable_fields();
      e["model"].set_string_value(r.model);
      e["placement"].set_string_value(r.placement);
      e["measured_seconds"].set_number_value(r.measured);
      e["simulated_seconds"].set_number_value(r.simulated);
      e["simulated_with_feedback_seconds"].set_number_value(
          r.simulated_feedback);
      auto* rounds = e["measured_rounds_seconds"].mutable_list_value();
      for (double t : r.rounds) rounds->add_values()->set_number_value(t);
    }
    std::cout << ReportJson(report);
  } else {
    std::cout << "\n"
              << summaries << Summary("all models", all, /*one_model=*/false);
  }
  if (std::string out = flags.output_path; !out.empty()) {
    std::string csv =
        "model,placement,measured_seconds,simulated_seconds,"
        "simulated_with_feedback_seconds,measured_rounds_seconds\n";
    for (const CalibrationRow& r : all) {
      absl::StrAppendFormat(
          &csv, "\"%s\",%s,%.9g,%.9g,%.9g,%s\n", r.model, r.placement,
          r.measured, r.simulated, r.simulated_feedback,
          absl::StrJoin(r.rounds, ";", [](std::string* out, double t) {
            absl::StrAppendFormat(out, "%.9g", t);
          }));
    }
    if (absl::Status s = WriteFileAtomically(UserPath(out), csv); !s.ok()) {
      return Fail(s);
    }
    ReportWrote(out);
  }
  return stopped ? 130 : 0;
}

}  // namespace placer
