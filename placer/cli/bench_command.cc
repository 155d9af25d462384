// placer bench: every policy on every model and cluster, as a Markdown
// table (stdout) and, with --out-dir DIR, DIR/bench.md and DIR/bench.csv.
#include <filesystem>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/training_view.h"
#include "google/protobuf/struct.pb.h"
#include "placer/cli/cli_common.h"
#include "placer/json_report.h"
#include "placer/model_source.h"
#include "placer/policy_run.h"
#include "simulator/simulator.h"
#include "policies/policy.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "profiles/proto_io.h"

ABSL_FLAG(std::vector<std::string>, models,
          std::vector<std::string>({"inception_v3", "resnet50", "gnmt2",
                                    "gnmt4", "gnmt8", "rnnlm",
                                    "transformer_big"}),
          "bench: zoo models or ONNX files, comma separated.");
ABSL_FLAG(std::vector<std::string>, clusters,
          std::vector<std::string>({"p100x4", "v100x8"}),
          "bench: cluster presets or files, comma separated.");
ABSL_FLAG(std::vector<std::string>, policies, {},
          "bench: policies to run (default: all).");
ABSL_FLAG(std::string, out_dir, "",
          "bench: a folder to write bench.md and bench.csv into; without "
          "it, the table goes to stdout only.");

namespace placer {
namespace {

struct Cell {
  std::string model, cluster;
  double lower_bound = 0;
  PolicyRun run;
};

std::string CsvField(std::string s) {
  for (char& c : s) {
    if (c == '"') c = '\'';
  }
  return absl::StrCat("\"", s, "\"");
}

}  // namespace

namespace {

// The flags bench reads, read once.
struct BenchFlags {
  std::string out_dir;
  std::vector<std::string> policies;
  std::vector<std::string> models;
  std::vector<std::string> clusters;
  bool json = false;
};

BenchFlags ReadBenchFlags() {
  BenchFlags f;
  f.out_dir = absl::GetFlag(FLAGS_out_dir);
  f.policies = absl::GetFlag(FLAGS_policies);
  f.models = absl::GetFlag(FLAGS_models);
  f.clusters = absl::GetFlag(FLAGS_clusters);
  f.json = absl::GetFlag(FLAGS_json);
  return f;
}

}  // namespace

int BenchCommand(const std::vector<std::string>& args) {
  const BenchFlags flags = ReadBenchFlags();
  if (!args.empty()) return UsageError("bench takes no positional arguments");
  // The output folder first, so that minutes of work are not lost to it.
  const std::string dir = flags.out_dir.empty()
                              ? std::string()
                              : UserPath(flags.out_dir);
  std::error_code made;
  if (!dir.empty()) std::filesystem::create_directories(dir, made);
  if (!dir.empty() && (made || !std::filesystem::is_directory(dir))) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "--out-dir ", dir, ": cannot create the folder",
        made ? ": " + made.message() : "")));
  }
  std::vector<std::string> policies = flags.policies;
  if (policies.empty()) {
    for (const PolicyInfo& p : Policies()) policies.push_back(p.name);
  }
  for (const std::string& p : policies) {
    if (absl::StatusOr<std::unique_ptr<PlacementPolicy>> made = NewPolicy(p);
        !made.ok()) {
      return Fail(made.status());
    }
  }
  absl::StatusOr<ImportOptions> import_options = ImportOptionsFromFlags();
  if (!import_options.ok()) return Fail(import_options.status());
  zoo::ZooParams zoo_params = ZooParamsFromFlags();
  zoo_params.weights = false;  // placement needs sizes, not bytes
  PolicyOptions options = PolicyOptionsFromFlags();
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();

  std::vector<Cell> cells;
  for (const std::string& spec : flags.models) {
    std::string source = spec.find('.') != std::string::npos
                             ? UserPath(spec)
                             : (spec.rfind("zoo:", 0) == 0 ? spec
                                                           : "zoo:" + spec);
    absl::StatusOr<LoadedModel> model =
        LoadModel(source, *import_options, zoo_params);
    if (!model.ok()) return Fail(model.status());
    absl::StatusOr<TrainingOptions> training = TrainingOptionsFromFlags();
    if (!training.ok()) return Fail(training.status());
    TrainingView view = BuildTrainingView(model->graph, *training);
    for (const std::string& cluster_spec : flags.clusters) {
      absl::StatusOr<Cluster> cluster = LoadUserCluster(cluster_spec);
      if (!cluster.ok()) return Fail(cluster.status());
      SimulationContext context =
          SimulationContext::Create(view, *cluster, *costs, *order);
      PolicyInput input{view, *cluster, *costs, context};
      for (const std::string& p : policies) {
        std::cerr << absl::StrFormat("bench: %s on %s by %s\n", spec,
                                     cluster->name(), p);
        cells.push_back({spec, cluster->name(), context.lower_bound_seconds(),
                         RunPolicy(p, input, options)});
      }
    }
  }

  // Markdown: one row per model and cluster, one column per policy, the
  // simulated step in ms (the best in bold), then placement times.
  std::string md = absl::StrCat(
      "Simulated training step (ms) per policy; **bold**: the best; "
      "OOM/error: no valid placement. Budget ",
      options.budget_seconds, " s per search, seed ", options.seed, ".\n\n| model | cluster | bound |");
  for (const std::string& p : policies) absl::StrAppend(&md, " ", p, " |");
  md += "\n|---|---|---|";
  for (size_t i = 0; i < policies.size(); ++i) md += "---|";
  md += "\n";
  std::string times = "\nPlacement time (s):\n\n| model | cluster |";
  for (const std::string& p : policies) absl::StrAppend(&times, " ", p, " |");
  times += "\n|---|---|";
  for (size_t i = 0; i < policies.size(); ++i) times += "---|";
  times += "\n";
  for (size_t i = 0; i < cells.size(); i += policies.size()) {
    double best = 0;
    for (size_t k = 0; k < policies.size(); ++k) {
      const PolicyRun& r = cells[i + k].run;
      if (r.status.ok() && (best == 0 || r.result.step_seconds < best)) {
        best = r.result.step_seconds;
      }
    }
    absl::StrAppendFormat(&md, "| %s | %s | %.4g |", cells[i].model,
                          cells[i].cluster, cells[i].lower_bound * 1e3);
    absl::StrAppendFormat(&times, "| %s | %s |", cells[i].model,
                          cells[i].cluster);
    for (size_t k = 0; k < policies.size(); ++k) {
      const PolicyRun& r = cells[i + k].run;
      absl::StrAppendFormat(&times, " %.3f |", r.placement_seconds);
      if (!r.status.ok()) {
        md += r.status.code() == absl::StatusCode::kResourceExhausted
                  ? " OOM |"
                  : " error |";
        continue;
      }
      std::string ms = absl::StrFormat("%.4g", r.result.step_seconds * 1e3);
      md += r.result.step_seconds == best ? absl::StrCat(" **", ms, "** |")
                                          : absl::StrCat(" ", ms, " |");
    }
    md += "\n";
    times += "\n";
  }
  md += times;

  std::string csv =
      "model,cluster,policy,ok,step_seconds,lower_bound_seconds,"
      "max_peak_memory_bytes,bytes_moved,placement_seconds,error\n";
  for (const Cell& c : cells) {
    const PolicyRun& r = c.run;
    absl::StrAppendFormat(
        &csv, "%s,%s,%s,%d,%.9g,%.9g,%d,%d,%.6f,%s\n", CsvField(c.model),
        c.cluster, r.policy, r.status.ok() ? 1 : 0,
        r.status.ok() ? r.result.step_seconds : 0, c.lower_bound,
        r.status.ok() ? MaxPeakBytes(r.result) : 0,
        r.status.ok() ? r.result.bytes_moved : 0, r.placement_seconds,
        CsvField(std::string(r.status.message())));
  }
  if (flags.json) {
    // The CSV's rows as one JSON report.
    google::protobuf::Struct s;
    auto& f = *s.mutable_fields();
    f["budget_seconds"].set_number_value(options.budget_seconds);
    f["seed"].set_number_value(static_cast<double>(options.seed));
    auto* list = f["results"].mutable_list_value();
    for (const Cell& c : cells) {
      const PolicyRun& r = c.run;
      auto& e = *list->add_values()->mutable_struct_value()->mutable_fields();
      e["model"].set_string_value(c.model);
      e["cluster"].set_string_value(c.cluster);
      e["policy"].set_string_value(r.policy);
      e["ok"].set_bool_value(r.status.ok());
      e["lower_bound_seconds"].set_number_value(c.lower_bound);
      e["placement_seconds"].set_number_value(r.placement_seconds);
      if (!r.status.ok()) {
        e["error"].set_string_value(std::string(r.status.message()));
        continue;
      }
      e["step_seconds"].set_number_value(r.result.step_seconds);
      e["max_peak_memory_bytes"].set_number_value(
          static_cast<double>(MaxPeakBytes(r.result)));
      e["bytes_moved"].set_number_value(
          static_cast<double>(r.result.bytes_moved));
    }
    std::cout << ReportJson(s);
  } else {
    std::cout << md;
  }
  if (dir.empty()) return 0;
  for (const auto& [name, text] :
       {std::pair<std::string, std::string>{"bench.md", md},
        {"bench.csv", csv}}) {
    if (absl::Status s = WriteFileAtomically(dir + "/" + name, text); !s.ok()) {
      return Fail(s);
    }
    ReportWrote(dir + "/" + name);
  }
  return 0;
}

}  // namespace placer
