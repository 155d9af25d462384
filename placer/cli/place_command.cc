// placer place MODEL --cluster C [--policy P | --compare]
//     [--parallelism model|pipeline|data|hybrid|tensor|auto]
//     [--micro-batches M | --global-batch G [--micro-batch-sizes 1,2,4]]
//     [--recompute R] [--zero Z] [--tensor T] [-o P.json]
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "google/protobuf/struct.pb.h"
#include "graph/attention_fusion.h"
#include "graph/graph_stats.h"
#include "graph/training_view.h"
#include "placer/cli/cli_common.h"
#include "placer/cli/place_strategies.h"
#include "placer/json_report.h"
#include "placer/model_source.h"
#include "placer/plan_emit.h"
#include "placer/plan_report.h"
#include "placer/policy_run.h"
#include "policies/policy.h"
#include "policies/strategy_search.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "profiles/measured_cost_model.h"
#include "profiles/proto_io.h"
#include "simulator/placement_file.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"

namespace placer {

// What --compare's speedups are over: one device.
constexpr char kSpeedupBaselinePolicy[] = "single";
namespace {

std::string Text(const std::vector<PolicyRun>& rows, double single_seconds,
                 double lower_bound) {
  std::string out = absl::StrFormat(
      "%-14s %12s %9s %9s %12s %12s %10s\n", "policy", "step s", "speedup",
      "x bound", "max peak", "moved", "place s");
  for (const PolicyRun& r : rows) {
    if (!r.status.ok()) {
      // The columns stay; the error follows on its own line.
      absl::StrAppendFormat(&out, "%-14s %12s %9s %9s %12s %12s %10.3f\n",
                            r.policy, "failed", "-", "-", "-", "-",
                            r.placement_seconds);
      absl::StrAppendFormat(&out, "  %s: %s\n", r.policy, r.status.message());
      continue;
    }
    absl::StrAppendFormat(
        &out, "%-14s %12.6f %9s %9.3f %12s %12s %10.3f\n", r.policy,
        r.result.step_seconds,
        single_seconds > 0
            ? absl::StrFormat("%.3fx", single_seconds / r.result.step_seconds)
            : std::string("-"),
        r.result.step_seconds / lower_bound,
        HumanBytes(MaxPeakBytes(r.result)), HumanBytes(r.result.bytes_moved),
        r.placement_seconds);
  }
  absl::StrAppendFormat(&out, "lower bound    %12.6f\n", lower_bound);
  return out;
}

std::string Json(const std::vector<PolicyRun>& rows, double single_seconds,
                 double lower_bound, const Cluster& cluster) {
  google::protobuf::Struct s;
  auto& f = *s.mutable_fields();
  f["lower_bound_seconds"].set_number_value(lower_bound);
  auto* list = f["results"].mutable_list_value();
  for (const PolicyRun& r : rows) {
    auto& e = *list->add_values()->mutable_struct_value()->mutable_fields();
    e["policy"].set_string_value(r.policy);
    e["ok"].set_bool_value(r.status.ok());
    e["placement_seconds"].set_number_value(r.placement_seconds);
    if (!r.status.ok()) {
      e["error"].set_string_value(std::string(r.status.message()));
      continue;
    }
    google::protobuf::Struct row;
    AddSimulationFields(Summarize(r.result, cluster), &row);
    for (auto& [key, value] : *row.mutable_fields()) e[key] = value;
    if (single_seconds > 0) {
      e["speedup_over_single"].set_number_value(single_seconds /
                                                r.result.step_seconds);
    }
    e["ratio_to_lower_bound"].set_number_value(r.result.step_seconds /
                                               lower_bound);
  }
  return ReportJson(s);
}

}  // namespace

PlaceFlags ReadPlaceFlags() {
  PlaceFlags f;
  f.cluster = absl::GetFlag(FLAGS_cluster);
  f.policy = absl::GetFlag(FLAGS_policy);
  f.checkpoint = absl::GetFlag(FLAGS_checkpoint);
  f.parallelism = absl::GetFlag(FLAGS_parallelism);
  f.micro_batches = absl::GetFlag(FLAGS_micro_batches);
  f.recompute = absl::GetFlag(FLAGS_recompute);
  f.zero = absl::GetFlag(FLAGS_zero);
  f.tensor = absl::GetFlag(FLAGS_tensor);
  f.stages = absl::GetFlag(FLAGS_stages);
  f.replicas = absl::GetFlag(FLAGS_replicas);
  f.sequence_parallel = absl::GetFlag(FLAGS_sequence_parallel);
  f.overlap_param_gather = absl::GetFlag(FLAGS_overlap_param_gather);
  f.emit = absl::GetFlag(FLAGS_emit);
  f.global_batch = absl::GetFlag(FLAGS_global_batch);
  f.micro_batch_sizes = absl::GetFlag(FLAGS_micro_batch_sizes);
  f.compare = absl::GetFlag(FLAGS_compare);
  f.json = absl::GetFlag(FLAGS_json);
  f.out_path = absl::GetFlag(FLAGS_o);
  f.report_path = absl::GetFlag(FLAGS_report);
  return f;
}


int PlaceCommand(const std::vector<std::string>& args) {
  if (args.size() != 1) return UsageError("place takes one MODEL");
  const PlaceFlags flags = ReadPlaceFlags();
  if (flags.cluster.empty()) {
    return UsageError("place needs --cluster");
  }
  absl::StatusOr<LoadedModel> model = LoadModelFromFlags(args[0]);
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<Cluster> cluster = LoadUserCluster(flags.cluster);
  if (!cluster.ok()) return Fail(cluster.status());
  const std::string& policy = flags.policy;
  const std::string& checkpoint = flags.checkpoint;
  if (const PolicyInfo* info = FindPolicy(policy);
      !checkpoint.empty() && info != nullptr &&
      info->kind != PolicyKind::kLearned) {
    return UsageError("--checkpoint is for learned policies (--policy rl)");
  }
  if (absl::StatusOr<std::unique_ptr<PlacementPolicy>> p = NewPolicy(policy);
      !p.ok()) {
    return Fail(p.status());
  }

  absl::StatusOr<Parallelism> parallelism = ParseParallelism(flags.parallelism);
  if (!parallelism.ok()) {
    return UsageError(absl::StrCat("--parallelism: ",
                                   parallelism.status().message()));
  }
  if (*parallelism == Parallelism::kModel && !flags.emit.empty()) {
    return UsageError(
        "--emit prints a strategy in another system's terms: give "
        "--parallelism (an op placement is no plan those systems run)");
  }

  absl::StatusOr<TrainingOptions> training = TrainingOptionsFromFlags();
  if (!training.ok()) return Fail(training.status());
  TrainingView view = BuildTrainingView(model->graph, *training);
  absl::StatusOr<std::unique_ptr<CostModel>> made = CostModelFromFlags();
  if (!made.ok()) return Fail(made.status());
  std::unique_ptr<CostModel> costs = std::move(*made);
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(view, *cluster, *costs, *order);
  PolicyInput input{view, *cluster, *costs, context};
  PolicyOptions options = PolicyOptionsFromFlags();
  if (!checkpoint.empty()) options.checkpoint_dir = UserPath(checkpoint);
  // Ctrl-C (or SIGTERM) stops the search with the best placement so far,
  // which is reported and written like any other.
  StopOnSignal stop_on_signal;
  options.should_stop = [] { return StopOnSignal::requested(); };
  // A progress line on stderr: redrawn on a terminal, every 10 s in a log.
  const bool tty = isatty(STDERR_FILENO) == 1;
  double last_shown = -1e9;
  bool shown = false;
  options.progress_interval_seconds = tty ? 0.5 : 10;
  std::string last_stage;
  // The policy running now: a search's stages are shown under its name
  // ("best/heft"), so a portfolio's heuristics are not mistaken for the
  // policies --compare runs.
  std::string running;
  options.on_progress = [&](const SearchProgress& progress) {
    SearchProgress p = progress;
    if (!running.empty() && p.stage != running) {
      p.stage = absl::StrCat(running, "/", p.stage);
    }
    // A new stage is always shown (the rl policy's last one says whether
    // the heuristic floor is the answer); otherwise every 10 s in a log.
    if (!tty && p.elapsed_seconds - last_shown < 10 && p.stage == last_stage) {
      return;
    }
    last_shown = p.elapsed_seconds;
    last_stage = p.stage;
    shown = true;
    std::cerr << (tty ? "\r" : "")
              << absl::StrFormat(
                     "place: %s  %.1f s  %d evaluations  best %s   ", p.stage,
                     p.elapsed_seconds, p.evaluations,
                     p.best_step_seconds > 0
                         ? absl::StrFormat("%.6f s", p.best_step_seconds)
                         : std::string("-"))
              << (tty ? "" : "\n") << std::flush;
  };

  // Each policy runs once, the baseline of "speedup over single" too.
  std::map<std::string, PolicyRun> runs;
  auto run_once = [&](const std::string& name) -> const PolicyRun& {
    auto it = runs.find(name);
    if (it == runs.end()) {
      running = name;
      it = runs.emplace(name, RunPolicy(name, input, options)).first;
    }
    return it->second;
  };
  if (*parallelism != Parallelism::kModel) {
    if (!flags.report_path.empty()) {
      return UsageError(
          "--report with --parallelism: write the plan with -o FILE, then "
          "`placer simulate MODEL --cluster C --placement FILE --report "
          "R.html` draws it, strategies included");
    }
    if (flags.compare) {
      return UsageError("--compare compares op placement policies; drop it "
                        "or --parallelism");
    }
    return PlaceWithStrategies(
        *parallelism, args[0], *model, *cluster, input, options, flags,
        [&]() -> const PolicyRun& { return run_once(policy); });
  }
  const PolicyRun single = run_once(kSpeedupBaselinePolicy);
  std::vector<PolicyRun> rows;
  if (flags.compare) {
    for (const PolicyInfo& info : Policies()) {
      if (StopOnSignal::requested()) break;  // report what ran
      rows.push_back(run_once(info.name));
      // One line per policy as it ends, under the search's own lines.
      const PolicyRun& r = rows.back();
      std::cerr << (tty && shown ? "\n" : "")
                << absl::StrFormat("place: %s  %.1f s  %s\n", info.name,
                                   r.placement_seconds,
                                   r.status.ok()
                                       ? absl::StrFormat("step %.6f s",
                                                         r.result.step_seconds)
                                       : std::string("failed"));
      shown = false;
    }
  } else {
    rows.push_back(run_once(policy));
  }
  if (shown && tty) std::cerr << "\n";
  const bool stopped = StopOnSignal::requested();
  if (stopped) {
    std::cerr << "place: stopped by signal; reporting the best placements "
                 "found so far\n";
  }
  // One policy that failed: its error, once (not also as a table row).
  if (!flags.compare && !rows[0].status.ok()) {
    return Fail(rows[0].status);
  }
  double single_seconds = single.status.ok() ? single.result.step_seconds : 0;
  double bound = context.lower_bound_seconds();
  std::cout << (flags.json ? Json(rows, single_seconds, bound, *cluster)
                           : Text(rows, single_seconds, bound));

  const PolicyRun* chosen = nullptr;
  for (const PolicyRun& r : rows) {
    if (r.policy == policy) chosen = &r;
  }
  if (chosen == nullptr || !chosen->status.ok()) {
    return Fail(chosen == nullptr ? absl::NotFoundError(policy)
                                  : chosen->status);
  }
  if (const std::string& out = flags.out_path; !out.empty()) {
    PlacementInfo info{model->source, policy, chosen->result.step_seconds};
    absl::Status s = WriteFileAtomically(
        UserPath(out),
        PlacementToJson(chosen->placement, model->graph, *cluster, info));
    if (!s.ok()) return Fail(s);
    ReportWrote(out, policy);
  }
  if (const std::string& path = flags.report_path; !path.empty()) {
    SimulationOptions recorded;
    recorded.record_schedule = true;
    absl::StatusOr<SimulationResult> step =
        Simulate(context, chosen->placement, recorded);
    if (!step.ok()) return Fail(step.status());
    PlanReport report;
    report.title =
        absl::StrCat(model->source, " on ", cluster->name(), " (", policy, ")");
    report.context = &context;
    report.result = &*step;
    if (flags.compare) {
      for (const PolicyRun& r : rows) {
        report.comparison.push_back(
            {r.policy, r.status.ok(), r.result.step_seconds,
             r.status.ok() ? MaxPeakBytes(r.result) : 0, r.result.bytes_moved,
             r.placement_seconds});
      }
    }
    if (absl::Status s =
            WriteFileAtomically(UserPath(path), PlanReportHtml(report));
        !s.ok()) {
      return Fail(s);
    }
    ReportWrote(path, "HTML report");
  }
  return stopped ? 130 : 0;
}

}  // namespace placer
