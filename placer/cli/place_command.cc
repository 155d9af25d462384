// placer place MODEL --cluster C [--policy P | --compare]
//     [--parallelism model|pipeline|data|hybrid|tensor|auto]
//     [--micro-batches M] [--recompute R] [--zero Z] [--tensor T] [-o P.json]
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

// --parallelism pipeline|data|hybrid|tensor|auto: one row per candidate,
// compared per graph batch (the graph's batch is one micro-batch).
struct StrategyRow {
  std::string name;  // single, the op policy, data, pipeline, auto
  absl::Status status;
  std::optional<Strategy> strategy;  // none: an op placement
  Placement placement;               // op placements
  SimulationResult step;
  int micro_batches = 1;
  double seconds_per_batch = 0;
  double search_seconds = 0;
};

// An op placement run as a gradient-accumulation loop of M micro-batches.
StrategyRow FromPolicy(const PolicyRun& run, const SimulationContext& context,
                       int micro_batches) {
  StrategyRow row;
  row.name = run.policy;
  row.status = run.status;
  row.placement = run.placement;
  row.search_seconds = run.placement_seconds;
  row.micro_batches = micro_batches;
  if (!run.status.ok()) return row;
  absl::StatusOr<SimulationResult> r =
      SimulateAccumulation(context, run.placement, micro_batches);
  if (!r.ok()) {
    row.status = r.status();
    return row;
  }
  row.step = *std::move(r);
  row.seconds_per_batch = row.step.step_seconds / micro_batches;
  return row;
}

// The whole model on the pool's first device, M micro-batches accumulated.
StrategyRow OneDevice(const PolicyInput& input, int micro_batches) {
  StrategyRow row;
  row.name = "single";
  const std::vector<int> pool = IdenticalDevicePool(input.cluster);
  Strategy s = OneDeviceStrategy(input.view, pool[0], micro_batches);
  absl::StatusOr<StrategySimulation> r = SimulateStrategy(input.simulation, s);
  if (!r.ok()) {
    row.status = r.status();
    return row;
  }
  row.strategy = s;
  row.step = r->step;
  row.micro_batches = micro_batches;
  row.seconds_per_batch = r->seconds_per_batch;
  return row;
}

// auto's wide candidates place ops inside a replica with `policy`, taking
// the placements kept in `inside` (an earlier row's) where it has them.
// `fixed` holds what the flags fix for every row (all but parallelism).
StrategyRow FromSearch(Parallelism mode, const PolicyInput& input,
                       const PolicyOptions& options,
                       const StrategySearchOptions& fixed) {
  StrategyRow row;
  row.name = ParallelismName(mode);
  StrategySearchOptions search = fixed;
  search.parallelism = mode;
  const auto started = absl::Now();
  absl::StatusOr<StrategyChoice> choice =
      SearchStrategy(input, options, search);
  row.search_seconds = absl::ToDoubleSeconds(absl::Now() - started);
  if (!choice.ok()) {
    row.status = choice.status();
    return row;
  }
  row.strategy = choice->strategy;
  row.step = choice->simulation.step;
  row.micro_batches = choice->simulation.micro_batches;
  row.seconds_per_batch = choice->simulation.seconds_per_batch;
  return row;
}

// A failed search on a graph whose attention cores are written op by op:
// the error says so, and what fuses them.
absl::Status WithAttentionHint(const Graph& graph, const absl::Status& failed) {
  if (failed.ok() || failed.code() != absl::StatusCode::kResourceExhausted) {
    return failed;
  }
  int cores = 0;
  if (!FuseAttention(graph, &cores).ok() || cores == 0) return failed;
  return absl::Status(
      failed.code(),
      absl::StrCat(failed.message(), "\n  the model's ", cores,
                   " attention cores run op by op, keeping every head's "
                   "seq x seq scores for the backward; --attention fused "
                   "runs each as one FlashAttention op"));
}

std::string StrategyText(const std::vector<StrategyRow>& rows,
                         double single_per_batch, const std::string& chosen) {
  std::string out = absl::StrFormat(
      "%-10s %-44s %11s %5s %11s %9s %10s %10s %8s\n", "row", "strategy",
      "step s", "mb", "s/batch", "speedup", "max peak", "moved", "search s");
  for (const StrategyRow& r : rows) {
    if (!r.status.ok()) {
      absl::StrAppendFormat(&out, "%-10s %-44s %11s\n  %s: %s\n", r.name, "-",
                            "failed", r.name, r.status.message());
      continue;
    }
    absl::StrAppendFormat(
        &out, "%-10s %-44s %11.6f %5d %11.6f %8.3fx %10s %10s %8.2f%s\n",
        r.name,
        r.strategy ? DescribeStrategy(*r.strategy) : "op placement",
        r.step.step_seconds, r.micro_batches, r.seconds_per_batch,
        single_per_batch / r.seconds_per_batch,
        HumanBytes(MaxPeakBytes(r.step)), HumanBytes(r.step.bytes_moved),
        r.search_seconds,
        absl::StrCat(r.step.oom ? "  OUT OF MEMORY" : "",
                     r.name == chosen ? "  <- chosen" : ""));
  }
  out +=
      "Every row runs the same micro-batches (mb) per step, each the "
      "graph's batch, then one update; op placements run them one after "
      "another (gradient accumulation). s/batch: step seconds per "
      "micro-batch; speedup: single's step over the row's.\n";
  return out;
}

std::string StrategyJson(const std::vector<StrategyRow>& rows,
                         double single_per_batch, const std::string& chosen,
                         const Cluster& cluster) {
  google::protobuf::Struct s;
  auto& f = *s.mutable_fields();
  f["chosen"].set_string_value(chosen);
  auto* list = f["results"].mutable_list_value();
  for (const StrategyRow& r : rows) {
    auto& e = *list->add_values()->mutable_struct_value()->mutable_fields();
    e["row"].set_string_value(r.name);
    e["ok"].set_bool_value(r.status.ok());
    e["search_seconds"].set_number_value(r.search_seconds);
    if (!r.status.ok()) {
      e["error"].set_string_value(std::string(r.status.message()));
      continue;
    }
    google::protobuf::Struct row;
    AddSimulationFields(Summarize(r.step, cluster), &row);
    for (auto& [key, value] : *row.mutable_fields()) e[key] = value;
    e["micro_batches"].set_number_value(r.micro_batches);
    e["seconds_per_batch"].set_number_value(r.seconds_per_batch);
    e["speedup_per_batch_over_single"].set_number_value(single_per_batch /
                                                        r.seconds_per_batch);
    e["strategy"].set_string_value(
        r.strategy ? DescribeStrategy(*r.strategy) : "op placement");
  }
  return ReportJson(s);
}

// What place is told, its own flags read once (the model's, the
// training's, the cost model's and the searches' are read by cli_common).
struct PlaceFlags {
  std::string cluster;
  std::string policy;
  std::string checkpoint;   // a trained model for learned policies
  std::string parallelism;  // "model", "data", "pipeline", "hybrid", "auto"
  int micro_batches = 0;    // 0: one per device
  std::string recompute;    // ParseStageRecompute's names
  std::string zero;         // "auto", "0", "1", "2", "3"
  std::string tensor;       // "auto" or devices per group
  std::string stages;       // "auto" or pipeline stages
  std::string replicas;     // "auto" or data-parallel replicas per stage
  bool sequence_parallel = false;
  bool overlap_param_gather = false;
  std::string emit;         // --emit: "", "megatron", "deepspeed", "torchtitan"
  int64_t global_batch = 0;  // --global-batch; 0: --micro-batches decides
  bool compare = false;
  bool json = false;
  std::string out_path;     // -o; empty: no file
  std::string report_path;  // --report; empty: no HTML report
};

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
  f.compare = absl::GetFlag(FLAGS_compare);
  f.json = absl::GetFlag(FLAGS_json);
  f.out_path = absl::GetFlag(FLAGS_o);
  f.report_path = absl::GetFlag(FLAGS_report);
  return f;
}

int PlaceWithStrategies(Parallelism mode, const LoadedModel& model,
                        const Cluster& cluster, const PolicyInput& input,
                        const PolicyOptions& options, const PlaceFlags& flags,
                        const std::function<const PolicyRun&()>& op_policy) {
  const std::string& policy = flags.policy;
  const std::vector<int> pool = IdenticalDevicePool(cluster);
  if (pool.size() < 2) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--parallelism ", ParallelismName(mode), ": cluster '",
        cluster.name(), "' has no two identical devices")));
  }
  int micro_batches = flags.micro_batches;
  if (micro_batches < 0) {
    return UsageError("--micro-batches must be at least 1 (0: one per device)");
  }
  if (flags.global_batch != 0) {
    const int64_t batch = GraphBatch(model.graph);
    if (flags.micro_batches != 0) {
      return UsageError("--global-batch and --micro-batches both set the "
                        "micro-batches of a step: give one");
    }
    if (flags.global_batch < 0 || batch <= 0 || flags.global_batch % batch != 0 ||
        flags.global_batch / batch > std::numeric_limits<int>::max()) {
      return UsageError(absl::StrCat(
          "--global-batch ", flags.global_batch,
          ": not a positive multiple of the graph's batch, ", batch,
          " (one micro-batch; --batch sets it)"));
    }
    micro_batches = static_cast<int>(flags.global_batch / batch);
  }
  if (micro_batches == 0) micro_batches = static_cast<int>(pool.size());
  absl::StatusOr<StageRecompute> parsed = ParseStageRecompute(flags.recompute);
  if (!parsed.ok()) {
    return UsageError(absl::StrCat("--recompute: ", parsed.status().message()));
  }
  const StageRecompute recompute = *parsed;
  std::optional<ZeroStage> zero;
  if (flags.zero != "auto") {
    int number = -1;
    absl::StatusOr<ZeroStage> z =
        absl::SimpleAtoi(flags.zero, &number)
            ? ZeroFromNumber(number)
            : absl::InvalidArgumentError(
                  absl::StrCat("'", flags.zero,
                               "' is no ZeRO stage; known: auto, 0, 1, 2, 3"));
    if (!z.ok())
      return UsageError(absl::StrCat("--zero: ", z.status().message()));
    zero = *z;
  }
  if (flags.overlap_param_gather && zero.has_value() &&
      *zero != ZeroStage::kOptimizerState && *zero != ZeroStage::kGradients) {
    return UsageError(absl::StrCat(
        "--overlap-param-gather overlaps ZeRO-1's and -2's parameter "
        "all-gather; --zero ", flags.zero, " has none to overlap"));
  }
  int tensor = 0;
  if (flags.tensor != "auto" &&
      (!absl::SimpleAtoi(flags.tensor, &tensor) || tensor < 1)) {
    return UsageError(absl::StrCat("--tensor: '", flags.tensor,
                                   "' is neither auto nor a device count"));
  }
  if (tensor > 0 && pool.size() % tensor != 0) {
    return UsageError(absl::StrCat(
        "--tensor: groups of ", tensor, " do not divide the ", pool.size(),
        " identical devices of cluster '", cluster.name(), "'"));
  }
  int stages = 0, replicas = 0;
  for (const auto& [flag, text, count] :
       {std::tuple<const char*, const std::string&, int*>{"stages",
                                                          flags.stages,
                                                          &stages},
        {"replicas", flags.replicas, &replicas}}) {
    if (text != "auto" && (!absl::SimpleAtoi(text, count) || *count < 1)) {
      return UsageError(absl::StrCat("--", flag, ": '", text,
                                     "' is neither auto nor a count"));
    }
  }
  std::optional<EmitFormat> emit_format;
  if (!flags.emit.empty()) {
    if (flags.json) return UsageError("--emit prints text: leave out --json");
    absl::StatusOr<EmitFormat> parsed_emit = ParseEmitFormat(flags.emit);
    if (!parsed_emit.ok()) {
      return UsageError(absl::StrCat("--emit ", parsed_emit.status().message()));
    }
    emit_format = *parsed_emit;
  }
  std::vector<StrategyRow> rows;
  rows.push_back(OneDevice(input, micro_batches));
  // The hybrid row's op placements inside replicas, reused by auto's.
  InsidePlacements inside;
  StrategySearchOptions fixed;
  fixed.micro_batches = micro_batches;
  fixed.recompute = recompute;
  fixed.zero = zero;
  fixed.tensor = tensor;
  fixed.stages = stages;
  fixed.replicas = replicas;
  fixed.sequence_parallel = flags.sequence_parallel;
  fixed.overlap_parameter_gather = flags.overlap_param_gather;
  fixed.inside_policy = policy;
  fixed.inside_placements = &inside;
  if (mode == Parallelism::kAuto) {
    // Op placement over more devices than the strategy search's pool is
    // no plan at that scale, and its heuristics take minutes there: the
    // op placement row, the hybrid row and auto's replicas of op
    // placements (all within the pool) are left out (--parallelism model
    // and hybrid place ops alone).
    const bool beyond_pool = IdenticalDevices(cluster).size() > pool.size();
    if (!beyond_pool) {
      rows.push_back(
          FromPolicy(op_policy(), input.simulation, micro_batches));
    } else {
      std::cerr << "place: the op placement and hybrid rows are left out: "
                << cluster.num_devices() << " devices are more than the "
                << pool.size() << " the strategy search's pool takes\n";
      fixed.inside_policy.clear();
    }
    for (Parallelism m :
         {Parallelism::kData, Parallelism::kPipeline, Parallelism::kHybrid,
          Parallelism::kTensor, Parallelism::kAuto}) {
      if (m == Parallelism::kHybrid && (pool.size() < 4 || beyond_pool)) {
        continue;
      }
      if (StopOnSignal::requested()) break;
      rows.push_back(FromSearch(m, input, options, fixed));
    }
  } else {
    rows.push_back(FromSearch(mode, input, options, fixed));
  }
  // The fastest per batch; ties: the earlier row (the simpler strategy).
  const StrategyRow* chosen = nullptr;
  for (const StrategyRow& r : rows) {
    if (!r.status.ok() || r.step.oom ||
        (mode != Parallelism::kAuto && &r == &rows[0])) {
      continue;
    }
    if (chosen == nullptr || r.seconds_per_batch < chosen->seconds_per_batch) {
      chosen = &r;
    }
  }
  const double single_per_batch =
      rows[0].status.ok() ? rows[0].seconds_per_batch : 0;
  const std::string chosen_name = chosen ? chosen->name : "";
  std::cout << (flags.json
                    ? StrategyJson(rows, single_per_batch, chosen_name, cluster)
                    : StrategyText(rows, single_per_batch, chosen_name));
  if (chosen == nullptr) return Fail(WithAttentionHint(model.graph, rows.back().status));
  if (emit_format) {
    if (!chosen->strategy) {
      std::cout << "\n--emit " << flags.emit << ": the chosen plan is an op "
                << "placement, which " << flags.emit << " does not run\n";
    } else {
      EmitInput emit_input{&model.graph, &*chosen->strategy,
                           input.view.options().precision};
      absl::StatusOr<EmittedPlan> emitted = EmitPlan(*emit_format, emit_input);
      if (!emitted.ok()) return Fail(emitted.status());
      std::cout << "\n" << flags.emit << " (the chosen plan, " << chosen->name
                << "):\n" << emitted->text;
      if (!emitted->not_expressed.empty()) {
        std::cout << "not expressed in " << flags.emit << ":\n";
        for (const std::string& line : emitted->not_expressed) {
          std::cout << "  - " << line << "\n";
        }
      }
    }
  }
  if (const std::string& out = flags.out_path; !out.empty()) {
    PlacementInfo info{model.source, chosen->name, chosen->step.step_seconds};
    const std::string json =
        chosen->strategy
            ? StrategyToJson(*chosen->strategy, model.graph, cluster, info,
                             chosen->seconds_per_batch)
            : PlacementToJson(chosen->placement, model.graph, cluster, info);
    absl::Status s = WriteFileAtomically(UserPath(out), json);
    if (!s.ok()) return Fail(s);
    ReportWrote(out, chosen->strategy ? DescribeStrategy(*chosen->strategy)
                                      : chosen->name);
  }
  return StopOnSignal::requested() ? 130 : 0;
}

}  // namespace

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
        *parallelism, *model, *cluster, input, options, flags,
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
