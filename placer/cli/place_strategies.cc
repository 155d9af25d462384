#include "placer/cli/place_strategies.h"

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
namespace {

// --parallelism pipeline|data|hybrid|tensor|auto: one row per candidate,
// compared per graph batch (the graph's batch is one micro-batch).
struct StrategyRow {
  std::string name;  // single, the op policy, data, pipeline, auto
  absl::Status status;
  std::optional<Strategy> strategy;  // none: an op placement
  Placement placement;               // op placements
  SimulationResult step;
  int micro_batches = 1;
  int64_t micro_batch_size = 1;  // the graph's batch
  bool at_size = false;          // a --micro-batch-sizes row
  double seconds_per_batch = 0;
  double search_seconds = 0;
  // What rows compare (the step's samples being the same in every row).
  double seconds_per_sample() const {
    return seconds_per_batch / static_cast<double>(micro_batch_size);
  }
};

// The graph's batch (1 when no input says).
int64_t MicroBatchSize(const PolicyInput& input) {
  return std::max<int64_t>(1, GraphBatch(input.view.forward()));
}

// The model at another micro batch size: its graph, view and simulation
// context, each referring to the one before it.
struct SizedModel {
  LoadedModel model;
  std::optional<TrainingView> view;
  std::unique_ptr<ReadyOrder> order;
  std::optional<SimulationContext> context;
};

// An op placement run as a gradient-accumulation loop of M micro-batches:
// its strategy (StrategyOfPlacement), simulated as any strategy is.
StrategyRow FromPolicy(const PolicyRun& run, const SimulationContext& context,
                       int micro_batches) {
  StrategyRow row;
  row.name = run.policy;
  row.status = run.status;
  row.placement = run.placement;
  row.search_seconds = run.placement_seconds;
  row.micro_batches = micro_batches;
  row.micro_batch_size =
      std::max<int64_t>(1, GraphBatch(context.view().forward()));
  if (!run.status.ok()) return row;
  absl::StatusOr<StrategySimulation> r = SimulateStrategy(
      context, StrategyOfPlacement(run.placement, micro_batches));
  if (!r.ok()) {
    row.status = r.status();
    return row;
  }
  row.step = std::move(r->step);
  row.seconds_per_batch = r->seconds_per_batch;
  return row;
}

// The whole model on the pool's first device, M micro-batches accumulated.
StrategyRow OneDevice(const PolicyInput& input, int micro_batches) {
  StrategyRow row;
  row.name = "single";
  row.micro_batch_size = MicroBatchSize(input);
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
  row.micro_batch_size = MicroBatchSize(input);
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
                         double single_per_sample, const std::string& chosen) {
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
        single_per_sample / r.seconds_per_sample(),
        HumanBytes(MaxPeakBytes(r.step)), HumanBytes(r.step.bytes_moved),
        r.search_seconds,
        absl::StrCat(r.step.oom ? "  OUT OF MEMORY" : "",
                     r.name == chosen ? "  <- chosen" : ""));
  }
  out +=
      "Every row runs the same micro-batches (mb) per step, each the "
      "graph's batch, then one update; op placements run them one after "
      "another (gradient accumulation). s/batch: step seconds per "
      "micro-batch; speedup: single's step over the row's. A row named "
      "with b=N ran micro-batches of N samples (--micro-batch-sizes), as "
      "many as the global batch needs.\n";
  return out;
}

std::string StrategyJson(const std::vector<StrategyRow>& rows,
                         double single_per_sample, const std::string& chosen,
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
    e["micro_batch_size"].set_number_value(
        static_cast<double>(r.micro_batch_size));
    e["seconds_per_batch"].set_number_value(r.seconds_per_batch);
    // Per sample, which is per batch where the rows share a batch.
    e["speedup_per_batch_over_single"].set_number_value(
        single_per_sample / r.seconds_per_sample());
    e["strategy"].set_string_value(
        r.strategy ? DescribeStrategy(*r.strategy) : "op placement");
  }
  return ReportJson(s);
}

}  // namespace

int PlaceWithStrategies(Parallelism mode, const std::string& spec,
                        const LoadedModel& model, const Cluster& cluster,
                        const PolicyInput& input,
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
  // --micro-batch-sizes: each a divisor of the global batch.
  std::vector<int64_t> sizes;
  for (const std::string& text : flags.micro_batch_sizes) {
    int64_t size = 0;
    if (!absl::SimpleAtoi(text, &size) || size < 1) {
      return UsageError(absl::StrCat("--micro-batch-sizes: '", text,
                                     "' is not a positive size"));
    }
    if (flags.global_batch == 0) {
      return UsageError(
          "--micro-batch-sizes needs --global-batch: the step's samples, the "
          "same at every size");
    }
    if (flags.global_batch % size != 0 ||
        flags.global_batch / size > std::numeric_limits<int>::max()) {
      return UsageError(absl::StrCat("--micro-batch-sizes: ", size,
                                     " does not divide --global-batch ",
                                     flags.global_batch));
    }
    sizes.push_back(size);
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
  // The model at the chosen row's size, when that is not the graph's own.
  std::unique_ptr<SizedModel> chosen_size;
  if (!sizes.empty()) {
    // Each size: the model reloaded at it, its view and context (the
    // training options and cost model the graph's own), and the mode's
    // search alone, over global batch / size micro-batches.
    double best = 0;
    for (int64_t size : sizes) {
      if (StopOnSignal::requested()) break;
      const std::string name = absl::StrCat(ParallelismName(mode), " b=", size);
      absl::StatusOr<LoadedModel> loaded = LoadModelFromFlagsAtBatch(spec, size);
      if (!loaded.ok()) {
        StrategyRow failed;
        failed.name = name;
        failed.status = loaded.status();
        rows.push_back(std::move(failed));
        continue;
      }
      auto sized = std::make_unique<SizedModel>();
      sized->model = std::move(*loaded);
      sized->view.emplace(
          BuildTrainingView(sized->model.graph, input.view.options()));
      sized->order = NewCriticalPathReadyOrder();
      sized->context.emplace(SimulationContext::Create(
          *sized->view, cluster, input.costs, *sized->order));
      const PolicyInput at{*sized->view, cluster, input.costs,
                           *sized->context};
      StrategySearchOptions search = fixed;
      search.micro_batches = static_cast<int>(flags.global_batch / size);
      InsidePlacements inside_at;  // op placements of this view's nodes
      search.inside_placements = &inside_at;
      rows.push_back(FromSearch(mode, at, options, search));
      StrategyRow& row = rows.back();
      row.name = name;
      row.at_size = true;
      if (row.status.ok() && !row.step.oom &&
          (chosen_size == nullptr || row.seconds_per_sample() < best)) {
        best = row.seconds_per_sample();
        chosen_size = std::move(sized);
      }
    }
  } else if (mode == Parallelism::kAuto) {
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
    if (chosen == nullptr ||
        r.seconds_per_sample() < chosen->seconds_per_sample()) {
      chosen = &r;
    }
  }
  const double single_per_sample =
      rows[0].status.ok() ? rows[0].seconds_per_sample() : 0;
  const std::string chosen_name = chosen ? chosen->name : "";
  std::cout << (flags.json
                    ? StrategyJson(rows, single_per_sample, chosen_name, cluster)
                    : StrategyText(rows, single_per_sample, chosen_name));
  if (chosen == nullptr) return Fail(WithAttentionHint(model.graph, rows.back().status));
  // The chosen row's graph: at its --micro-batch-sizes size (the best of
  // those rows, kept), or the graph's own.
  const Graph& chosen_graph =
      chosen->at_size ? chosen_size->model.graph : model.graph;
  if (chosen->at_size && !flags.json) {
    std::cout << "The chosen plan's micro batch size is "
              << chosen->micro_batch_size << ": give --batch "
              << chosen->micro_batch_size
              << " to simulate or run it.\n";
  }
  if (emit_format) {
    if (!chosen->strategy) {
      std::cout << "\n--emit " << flags.emit << ": the chosen plan is an op "
                << "placement, which " << flags.emit << " does not run\n";
    } else {
      EmitInput emit_input{&chosen_graph, &*chosen->strategy,
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
            ? StrategyToJson(*chosen->strategy, chosen_graph, cluster, info,
                             chosen->seconds_per_batch)
            : PlacementToJson(chosen->placement, chosen_graph, cluster, info);
    absl::Status s = WriteFileAtomically(UserPath(out), json);
    if (!s.ok()) return Fail(s);
    ReportWrote(out, chosen->strategy ? DescribeStrategy(*chosen->strategy)
                                      : chosen->name);
  }
  return StopOnSignal::requested() ? 130 : 0;
}

}  // namespace placer
