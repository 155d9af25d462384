// placer simulate MODEL --cluster C --placement P.json [--trace T] [--json]
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "graph/training_view.h"
#include "simulator/chrome_trace.h"
#include "placer/cli/cli_common.h"
#include "placer/json_report.h"
#include "placer/model_source.h"
#include "simulator/placement_file.h"
#include "simulator/simulator.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "profiles/measured_cost_model.h"

namespace placer {
namespace {

absl::StatusOr<std::unique_ptr<ReadyOrder>> ReadyOrderFromFlag() {
  absl::StatusOr<std::unique_ptr<ReadyOrder>> order =
      NewReadyOrder(absl::GetFlag(FLAGS_order));
  if (!order.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--order: ", order.status().message()));
  }
  return order;
}

std::string CriticalStepName(const SimulationContext& c,
                             const SimulationResult& r,
                             const CriticalStep& s) {
  if (!s.is_transfer) return c.view().node(s.index).key;
  const ScheduledTransfer& t = r.transfers[s.index];
  return absl::StrCat("send ", TransferName(c.view(), t), " ",
                      c.cluster().device(t.src).name, " -> ",
                      c.cluster().device(t.dst).name);
}

std::string Text(const SimulationContext& c, const SimulationResult& r) {
  const Cluster& cluster = c.cluster();
  std::string out;
  absl::StrAppendFormat(&out, "step time        %.6f s\n", r.step_seconds);
  absl::StrAppendFormat(&out, "lower bound      %.6f s (step is %.2fx)\n",
                        r.lower_bound_seconds,
                        r.step_seconds / r.lower_bound_seconds);
  absl::StrAppendFormat(&out, "bytes moved      %s in %d transfers\n",
                        HumanBytes(r.bytes_moved), r.transfers_count);
  absl::StrAppendFormat(&out, "out of memory    %s\n", r.oom ? "YES" : "no");
  absl::StrAppendFormat(&out, "inaccurate ops   %d (cost model guessed)\n",
                        r.inaccurate_nodes);
  absl::StrAppendFormat(&out, "\n%-12s %10s %8s %14s %14s %s\n", "device",
                        "busy s", "busy %", "peak memory", "capacity", "");
  for (int d = 0; d < cluster.num_devices(); ++d) {
    const Device& dev = cluster.device(d);
    absl::StrAppendFormat(
        &out, "%-12s %10.6f %7.1f%% %14s %14s %s\n", dev.name,
        r.busy_seconds[d], 100 * r.busy_seconds[d] / r.step_seconds,
        HumanBytes(r.peak_memory_bytes[d]), HumanBytes(dev.memory_bytes),
        r.peak_memory_bytes[d] > dev.memory_bytes ? "OUT OF MEMORY" : "");
  }
  absl::StrAppendFormat(&out, "\ncritical path    %d steps",
                        r.critical_path.size());
  const size_t shown = 8;
  if (r.critical_path.size() > shown) out += " (last 8)";
  out += "\n";
  size_t from = r.critical_path.size() > shown ? r.critical_path.size() - shown
                                               : 0;
  for (size_t k = from; k < r.critical_path.size(); ++k) {
    const CriticalStep& s = r.critical_path[k];
    absl::StrAppendFormat(&out, "  %12.6f %12.6f  %s\n", s.start_seconds,
                          s.end_seconds, CriticalStepName(c, r, s));
  }
  return out;
}

std::string Json(const SimulationContext& c, const SimulationResult& r) {
  google::protobuf::Struct s;
  AddSimulationFields(Summarize(r, c.cluster()), &s);
  auto& f = *s.mutable_fields();
  f["transfers"].set_number_value(r.transfers_count);
  f["critical_path_steps"].set_number_value(
      static_cast<double>(r.critical_path.size()));
  return ReportJson(s);
}

}  // namespace

int SimulateCommand(const std::vector<std::string>& args) {
  if (args.size() != 1) return UsageError("simulate takes one MODEL");
  if (absl::GetFlag(FLAGS_cluster).empty()) {
    return UsageError("simulate needs --cluster");
  }
  if (absl::GetFlag(FLAGS_placement).empty()) {
    return UsageError("simulate needs --placement FILE.json");
  }
  absl::StatusOr<LoadedModel> model = LoadModelFromFlags(args[0]);
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<Cluster> cluster =
      LoadUserCluster(absl::GetFlag(FLAGS_cluster));
  if (!cluster.ok()) return Fail(cluster.status());
  absl::StatusOr<Placement> placement = ReadPlacementFile(
      UserPath(absl::GetFlag(FLAGS_placement)), model->graph, *cluster);
  if (!placement.ok()) return Fail(placement.status());
  absl::StatusOr<std::unique_ptr<ReadyOrder>> order = ReadyOrderFromFlag();
  if (!order.ok()) return Fail(order.status());

  TrainingView view = BuildTrainingView(model->graph);
  absl::StatusOr<std::unique_ptr<CostModel>> made = CostModelFromFlags();
  if (!made.ok()) return Fail(made.status());
  std::unique_ptr<CostModel> costs = std::move(*made);
  SimulationContext context =
      SimulationContext::Create(view, *cluster, *costs, **order);
  std::string trace_path = absl::GetFlag(FLAGS_trace);
  SimulationOptions sim_options;
  sim_options.record_schedule = !trace_path.empty();
  absl::StatusOr<SimulationResult> result =
      Simulate(context, *placement, sim_options);
  if (!result.ok()) return Fail(result.status());
  if (!trace_path.empty()) {
    std::ofstream trace(UserPath(trace_path), std::ios::trunc);
    trace << ChromeTraceJson(context, *result);
    if (!trace.flush()) {
      return Fail(absl::UnavailableError(trace_path + ": cannot write"));
    }
    ReportWrote(trace_path, "Chrome trace");
  }
  std::cout << (absl::GetFlag(FLAGS_json) ? Json(context, *result)
                                          : Text(context, *result));
  return 0;
}

}  // namespace placer
