// placer calibrate MODEL... --cluster cpu2 [--placements 10] [--steps N]
//   [--warmup W] [--profile P.pbtxt] [-o results.csv]
// How far the simulator is from real execution: profiles each model on
// this machine (unless --profile is given), then for each of a set of
// placements (every heuristic policy, then seeded random ones) simulates
// with the profile and measures with the executor. Prints each pair, the
// median relative error and Spearman's rank correlation, per model and
// over all.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <random>
#include <set>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/training_view.h"
#include "placer/cli_common.h"
#include "placer/model_source.h"
#include "placer/policy_run.h"
#include "placer/simulator.h"
#include "policies/policy.h"
#include "profiles/measured_cost_model.h"
#include "profiles/profiler.h"
#include "profiles/proto_io.h"
#include "runtime/executor.h"
#include "runtime/measurement.h"

namespace placer {
namespace {

struct Row {
  std::string model;
  std::string placement;
  double simulated = 0;
  double measured = 0;
};

std::vector<double> Ranks(const std::vector<double>& x) {
  std::vector<int> idx(x.size());
  for (size_t i = 0; i < x.size(); ++i) idx[i] = static_cast<int>(i);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && x[idx[j + 1]] == x[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) rank[idx[k]] = 0.5 * (i + j) + 1;
    i = j + 1;
  }
  return rank;
}

}  // namespace

// Spearman's rho: Pearson's correlation of the ranks (ties averaged).
double SpearmanRho(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(a.size());
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ma += ra[i] / n;
    mb += rb[i] / n;
  }
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0;
}

namespace {

double MedianRelativeError(const std::vector<Row>& rows) {
  std::vector<double> e;
  for (const Row& r : rows) e.push_back(std::abs(r.simulated - r.measured) / r.measured);
  std::sort(e.begin(), e.end());
  if (e.empty()) return 0;
  return e.size() % 2 ? e[e.size() / 2]
                      : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
}

std::string Summary(const std::string& what, const std::vector<Row>& rows) {
  std::vector<double> s, m;
  for (const Row& r : rows) {
    s.push_back(r.simulated);
    m.push_back(r.measured);
  }
  return absl::StrFormat(
      "%-34s %3d placements  median |sim-meas|/meas %5.1f%%  Spearman rho %.3f\n",
      what, rows.size(), 100 * MedianRelativeError(rows), SpearmanRho(s, m));
}

// Contiguous runs of the topological order on random devices: the k-th
// random placement switches device with probability 1/8 at each op.
Placement RandomRuns(const Graph& g, int devices, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Placement p{std::vector<int>(g.ops().size(), 0)};
  int d = static_cast<int>(rng() % devices);
  for (int op : g.topological_order()) {
    if (rng() % 8 == 0) d = static_cast<int>(rng() % devices);
    p.device_of_op[op] = d;
  }
  return p;
}

}  // namespace

int CalibrateCommand(const std::vector<std::string>& args) {
  if (args.empty()) return UsageError("calibrate takes one or more MODELs");
  std::string cluster_spec = absl::GetFlag(FLAGS_cluster);
  absl::StatusOr<Cluster> cluster =
      LoadUserCluster(cluster_spec.empty() ? "cpu2" : cluster_spec);
  if (!cluster.ok()) return Fail(cluster.status());
  absl::StatusOr<ImportOptions> import_options = ImportOptionsFromFlags();
  if (!import_options.ok()) return Fail(import_options.status());
  const int wanted = absl::GetFlag(FLAGS_placements);
  std::optional<MeasuredProfile> given;
  if (std::string path = absl::GetFlag(FLAGS_profile); !path.empty()) {
    absl::StatusOr<MeasuredProfile> p = LoadProfile(UserPath(path));
    if (!p.ok()) return Fail(p.status());
    given = std::move(*p);
  }
  MeasureOptions measure;
  measure.steps = absl::GetFlag(FLAGS_steps);
  measure.warmup = absl::GetFlag(FLAGS_warmup);
  measure.executor.seed = absl::GetFlag(FLAGS_seed);
  measure.executor.threads_per_cpu_device = absl::GetFlag(FLAGS_threads);

  std::vector<Row> all;
  std::string summaries;
  for (const std::string& spec : args) {
    absl::StatusOr<LoadedModel> model =
        LoadModel(UserPath(spec), *import_options, ZooParamsFromFlags());
    if (!model.ok()) return Fail(model.status());
    if (absl::Status s = CheckRunnable(model->graph); !s.ok()) return Fail(s);
    TrainingView view = BuildTrainingView(model->graph);
    MeasuredProfile profile;
    if (given) {
      profile = *given;
    } else {
      ProfilerOptions po;
      po.threads = measure.executor.threads_per_cpu_device;
      absl::StatusOr<ProfileReport> report =
          ProfileCpu(&view, *cluster, po, [&](const std::string& line) {
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
    measure.executor.priorities.clear();
    for (int i = 0; i < context.num_nodes(); ++i) {
      measure.executor.priorities.push_back(context.priority(i));
    }

    // The placements: each heuristic's (duplicates dropped), then random.
    std::vector<std::pair<std::string, Placement>> placements;
    std::set<std::vector<int>> seen;
    PolicyInput input{view, *cluster, *costs, context};
    PolicyOptions po;
    po.seed = absl::GetFlag(FLAGS_seed);
    po.budget_seconds = absl::GetFlag(FLAGS_budget);
    po.max_evaluations = absl::GetFlag(FLAGS_evaluations);
    for (const PolicyInfo& info : Policies()) {
      if (static_cast<int>(placements.size()) >= wanted) break;
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

    std::vector<Row> rows;
    std::cout << absl::StrFormat("%-34s %-14s %12s %12s %8s\n", "model",
                                 "placement", "simulated s", "measured s",
                                 "error");
    for (auto& [name, placement] : placements) {
      absl::StatusOr<SimulationResult> sim = Simulate(context, placement);
      if (!sim.ok()) return Fail(sim.status());
      absl::StatusOr<std::unique_ptr<Executor>> executor =
          Executor::Create(view, *cluster, placement, measure.executor);
      if (!executor.ok()) return Fail(executor.status());
      absl::StatusOr<Measurement> m = MeasureSteps(**executor, measure);
      if (!m.ok()) {
        std::cout << absl::StrFormat("%-34s %-14s failed: %s\n", spec, name,
                                     m.status().message());
        continue;
      }
      Row row{spec, name, sim->step_seconds, m->step_seconds};
      std::cout << absl::StrFormat("%-34s %-14s %12.6f %12.6f %+7.1f%%\n", spec,
                                   name, row.simulated, row.measured,
                                   100 * (row.simulated - row.measured) / row.measured);
      std::cout.flush();
      rows.push_back(row);
      all.push_back(row);
    }
    summaries += Summary(spec, rows);
  }
  std::cout << "\n" << summaries << Summary("all models", all);
  if (std::string out = absl::GetFlag(FLAGS_o); !out.empty()) {
    std::string csv = "model,placement,simulated_seconds,measured_seconds\n";
    for (const Row& r : all) {
      absl::StrAppendFormat(&csv, "%s,%s,%.9g,%.9g\n", r.model, r.placement,
                            r.simulated, r.measured);
    }
    if (absl::Status s = WriteFileAtomically(UserPath(out), csv); !s.ok()) {
      return Fail(s);
    }
  }
  return 0;
}

}  // namespace placer
