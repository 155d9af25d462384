// placer simulate MODEL --cluster C --placement P.json [--trace T] [--json]
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_helpers.h"
#include "google/protobuf/struct.pb.h"
#include "graph/training_view.h"
#include "placer/cli/cli_common.h"
#include "placer/json_report.h"
#include "placer/model_source.h"
#include "placer/plan_report.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "profiles/measured_cost_model.h"
#include "profiles/proto_io.h"
#include "simulator/chrome_trace.h"
#include "simulator/placement_file.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"

namespace placer {
namespace {

// What simulate is told, its flags read once.
struct SimulateFlags {
  std::string cluster;
  std::string placement;    // the placement or strategy file
  std::string order;        // the ready queues' order
  std::string trace_path;   // empty: no Chrome trace
  std::string report_path;  // empty: no HTML report
  bool json = false;
};

SimulateFlags ReadSimulateFlags() {
  SimulateFlags f;
  f.cluster = absl::GetFlag(FLAGS_cluster);
  f.placement = absl::GetFlag(FLAGS_placement);
  f.order = absl::GetFlag(FLAGS_order);
  f.trace_path = absl::GetFlag(FLAGS_trace);
  f.report_path = absl::GetFlag(FLAGS_report);
  f.json = absl::GetFlag(FLAGS_json);
  return f;
}

absl::StatusOr<std::unique_ptr<ReadyOrder>> ReadyOrderFromFlag(
    const std::string& name) {
  absl::StatusOr<std::unique_ptr<ReadyOrder>> order = NewReadyOrder(name);
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

// When a device's peak came, shortly: "F64", "B3", "B0 end" (the pass of
// its micro-batch) with the seconds into the step, or "start" (what is
// resident).
std::string PeakAt(const PeakPass& moment) {
  if (moment.stage < 0) return "start";
  return absl::StrFormat("%c%d%s %.6f s", moment.backward ? 'B' : 'F',
                         moment.micro_batch, moment.at_end ? " end" : "",
                         moment.seconds);
}

// A strategy's step: what Text shows for a placement, plus the strategy.
std::string StrategyText(const SimulationContext& c, const Strategy& strategy,
                         const StrategySimulation& s) {
  const SimulationResult& r = s.step;
  const Cluster& cluster = c.cluster();
  std::string out;
  absl::StrAppendFormat(&out, "strategy         %s\n",
                        DescribeStrategy(strategy));
  absl::StrAppendFormat(&out, "step time        %.6f s (%d micro-batches)\n",
                        r.step_seconds, s.micro_batches);
  absl::StrAppendFormat(&out, "per micro-batch  %.6f s\n",
                        s.seconds_per_batch);
  absl::StrAppendFormat(&out, "lower bound      %.6f s (step is %.2fx)\n",
                        r.lower_bound_seconds,
                        r.step_seconds / r.lower_bound_seconds);
  absl::StrAppendFormat(&out, "allreduce        %.6f s in all\n",
                        s.allreduce_seconds);
  absl::StrAppendFormat(&out, "bytes moved      %s in %d transfers\n",
                        HumanBytes(r.bytes_moved), r.transfers_count);
  absl::StrAppendFormat(&out, "out of memory    %s\n", r.oom ? "YES" : "no");
  absl::StrAppendFormat(&out, "inaccurate ops   %d (cost model guessed)\n",
                        r.inaccurate_nodes);
  absl::StrAppendFormat(&out, "\n%-12s %6s %10s %8s %9s %14s %-20s %14s %s\n",
                        "device", "stage", "busy s", "busy %", "in flight",
                        "peak memory", "peak at", "capacity", "");
  std::vector<int> stage_of(cluster.num_devices(), -1);
  for (size_t k = 0; k < strategy.stages.size(); ++k) {
    const PipelineStage& stage = strategy.stages[k];
    for (int slot = 0; slot < stage.width(); ++slot) {
      for (int d : SlotDevices(stage, slot)) stage_of[d] = static_cast<int>(k);
    }
  }
  for (int d = 0; d < cluster.num_devices(); ++d) {
    const Device& dev = cluster.device(d);
    absl::StrAppendFormat(
        &out, "%-12s %6s %10.6f %7.1f%% %9d %14s %-20s %14s %s\n", dev.name,
        stage_of[d] < 0 ? "-" : absl::StrCat(stage_of[d]), r.busy_seconds[d],
        100 * r.busy_seconds[d] / r.step_seconds, s.most_in_flight[d],
        HumanBytes(r.peak_memory_bytes[d]), PeakAt(s.peak_passes[d]),
        HumanBytes(dev.memory_bytes),
        r.peak_memory_bytes[d] > dev.memory_bytes ? "OUT OF MEMORY" : "");
  }
  return out;
}

std::string StrategyJson(const SimulationContext& c, const Strategy& strategy,
                         const StrategySimulation& s) {
  google::protobuf::Struct report;
  AddSimulationFields(Summarize(s.step, c.cluster()), &report);
  auto& f = *report.mutable_fields();
  f["transfers"].set_number_value(s.step.transfers_count);
  f["strategy"].set_string_value(DescribeStrategy(strategy));
  f["micro_batches"].set_number_value(s.micro_batches);
  f["seconds_per_batch"].set_number_value(s.seconds_per_batch);
  f["allreduce_seconds"].set_number_value(s.allreduce_seconds);
  return ReportJson(report);
}

}  // namespace

int SimulateCommand(const std::vector<std::string>& args) {
  if (args.size() != 1) return UsageError("simulate takes one MODEL");
  const SimulateFlags flags = ReadSimulateFlags();
  if (flags.cluster.empty()) {
    return UsageError("simulate needs --cluster");
  }
  if (flags.placement.empty()) {
    return UsageError("simulate needs --placement FILE.json");
  }
  absl::StatusOr<LoadedModel> model = LoadModelFromFlags(args[0]);
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<Cluster> cluster = LoadUserCluster(flags.cluster);
  if (!cluster.ok()) return Fail(cluster.status());
  absl::StatusOr<PlacementOrStrategy> file = ReadPlacementOrStrategyFile(
      UserPath(flags.placement), model->graph, *cluster);
  if (!file.ok()) return Fail(file.status());
  const Placement* placement = &file->placement;
  absl::StatusOr<std::unique_ptr<ReadyOrder>> order =
      ReadyOrderFromFlag(flags.order);
  if (!order.ok()) return Fail(order.status());

  absl::StatusOr<TrainingOptions> training = TrainingOptionsFromFlags();
  if (!training.ok()) return Fail(training.status());
  TrainingView view = BuildTrainingView(model->graph, *training);
  absl::StatusOr<std::unique_ptr<CostModel>> made = CostModelFromFlags();
  if (!made.ok()) return Fail(made.status());
  std::unique_ptr<CostModel> costs = std::move(*made);
  SimulationContext context =
      SimulationContext::Create(view, *cluster, *costs, **order);
  const std::string& trace_path = flags.trace_path;
  const std::string& report_path = flags.report_path;
  if (file->strategy) {
    SimulationOptions options;
    options.record_schedule = !trace_path.empty() || !report_path.empty();
    absl::StatusOr<StrategySimulation> step =
        SimulateStrategy(context, *file->strategy, options);
    if (!step.ok()) {
      return Fail(
          WithContext(step.status(), absl::StrCat(flags.placement, ": ")));
    }
    if (!trace_path.empty()) {
      std::ofstream trace(UserPath(trace_path), std::ios::trunc);
      trace << StrategyChromeTraceJson(context, *file->strategy, *step);
      if (!trace.flush()) {
        return Fail(absl::UnavailableError(trace_path + ": cannot write"));
      }
      ReportWrote(trace_path, "Chrome trace");
    }
    if (!report_path.empty()) {
      PlanReport report;
      report.title = absl::StrCat(model->source, " on ", cluster->name(), " (",
                                  flags.placement, ")");
      report.context = &context;
      report.result = &step->step;
      report.strategy = &*file->strategy;
      report.strategy_result = &*step;
      if (absl::Status s = WriteFileAtomically(UserPath(report_path),
                                               PlanReportHtml(report));
          !s.ok()) {
        return Fail(s);
      }
      ReportWrote(report_path, "HTML report");
    }
    std::cout << (flags.json ? StrategyJson(context, *file->strategy, *step)
                             : StrategyText(context, *file->strategy, *step));
    return 0;
  }
  SimulationOptions sim_options;
  sim_options.record_schedule = !trace_path.empty() || !report_path.empty();
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
  if (!report_path.empty()) {
    PlanReport report;
    report.title = absl::StrCat(model->source, " on ", cluster->name(), " (",
                                flags.placement, ")");
    report.context = &context;
    report.result = &*result;
    if (absl::Status s =
            WriteFileAtomically(UserPath(report_path), PlanReportHtml(report));
        !s.ok()) {
      return Fail(s);
    }
    ReportWrote(report_path, "HTML report");
  }
  std::cout << (flags.json ? Json(context, *result) : Text(context, *result));
  return 0;
}

}  // namespace placer
