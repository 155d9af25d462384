// placer place MODEL --cluster C [--policy P | --compare] [-o P.json]
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "graph/training_view.h"
#include "placer/cli/cli_common.h"
#include "placer/json_report.h"
#include "placer/model_source.h"
#include "simulator/placement_file.h"
#include "placer/policy_run.h"
#include "simulator/simulator.h"
#include "policies/policy.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "profiles/measured_cost_model.h"
#include "profiles/proto_io.h"

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

int PlaceCommand(const std::vector<std::string>& args) {
  if (args.size() != 1) return UsageError("place takes one MODEL");
  if (absl::GetFlag(FLAGS_cluster).empty()) {
    return UsageError("place needs --cluster");
  }
  absl::StatusOr<LoadedModel> model = LoadModelFromFlags(args[0]);
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<Cluster> cluster =
      LoadUserCluster(absl::GetFlag(FLAGS_cluster));
  if (!cluster.ok()) return Fail(cluster.status());
  std::string policy = absl::GetFlag(FLAGS_policy);
  const std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  if (const PolicyInfo* info = FindPolicy(policy);
      !checkpoint.empty() && info != nullptr &&
      info->kind != PolicyKind::kLearned) {
    return UsageError("--checkpoint is for learned policies (--policy rl)");
  }
  if (absl::StatusOr<std::unique_ptr<PlacementPolicy>> p = NewPolicy(policy);
      !p.ok()) {
    return Fail(p.status());
  }

  TrainingView view = BuildTrainingView(model->graph);
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
  options.on_progress = [&](const SearchProgress& p) {
    if (!tty && p.elapsed_seconds - last_shown < 10) return;
    last_shown = p.elapsed_seconds;
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
      it = runs.emplace(name, RunPolicy(name, input, options)).first;
    }
    return it->second;
  };
  const PolicyRun single = run_once(kSpeedupBaselinePolicy);
  std::vector<PolicyRun> rows;
  if (absl::GetFlag(FLAGS_compare)) {
    for (const PolicyInfo& info : Policies()) {
      if (StopOnSignal::requested()) break;  // report what ran
      rows.push_back(run_once(info.name));
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
  if (!absl::GetFlag(FLAGS_compare) && !rows[0].status.ok()) {
    return Fail(rows[0].status);
  }
  double single_seconds = single.status.ok() ? single.result.step_seconds : 0;
  double bound = context.lower_bound_seconds();
  std::cout << (absl::GetFlag(FLAGS_json)
                    ? Json(rows, single_seconds, bound, *cluster)
                    : Text(rows, single_seconds, bound));

  const PolicyRun* chosen = nullptr;
  for (const PolicyRun& r : rows) {
    if (r.policy == policy) chosen = &r;
  }
  if (chosen == nullptr || !chosen->status.ok()) {
    return Fail(chosen == nullptr ? absl::NotFoundError(policy)
                                  : chosen->status);
  }
  if (std::string out = absl::GetFlag(FLAGS_o); !out.empty()) {
    PlacementInfo info{model->source, policy, chosen->result.step_seconds};
    absl::Status s = WriteFileAtomically(
        UserPath(out),
        PlacementToJson(chosen->placement, model->graph, *cluster, info));
    if (!s.ok()) return Fail(s);
    ReportWrote(out, policy);
  }
  return stopped ? 130 : 0;
}

}  // namespace placer
