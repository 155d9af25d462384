#include "runtime/measurement.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "profiles/signature.h"
#include "runtime/strategy_executor.h"

namespace placer {
namespace {

class ExecutorEvaluator : public StepEvaluator {
 public:
  ExecutorEvaluator(const TrainingView& view, const Cluster& cluster,
                    MeasureOptions options)
      : view_(view), cluster_(cluster), options_(std::move(options)) {}

  absl::StatusOr<Evaluation> Evaluate(const Placement& placement) override {
    ASSIGN_OR_RETURN(
        std::unique_ptr<StrategyExecutor> e,
        StrategyExecutor::Create(view_, cluster_, placement, options_.executor));
    ASSIGN_OR_RETURN(Measurement m, MeasureSteps(*e, options_));
    return Evaluation{m.step_seconds, m.peak_memory_bytes};
  }

 private:
  const TrainingView& view_;
  const Cluster cluster_;
  MeasureOptions options_;
};

}  // namespace

absl::StatusOr<Measurement> MeasureSteps(
    StepRunner& executor, const MeasureOptions& options,
    const std::function<void(int, const StepReport&)>& progress) {
  if (options.steps < 1 || options.warmup < 0) {
    return absl::InvalidArgumentError("steps must be >= 1 and warmup >= 0");
  }
  Measurement m;
  std::map<std::pair<int, int>, std::vector<double>> node_times;
  std::vector<std::vector<double>> busy;
  for (int step = 0; step < options.warmup + options.steps; ++step) {
    absl::StatusOr<StepReport> r = executor.Step();
    if (!r.ok()) {
      return WithContext(r.status(), absl::StrCat("step ", step + 1, ": "));
    }
    m.step_times.push_back(r->seconds);
    m.losses.push_back(r->loss);
    if (m.peak_memory_bytes.empty()) m.peak_memory_bytes = r->peak_memory_bytes;
    for (size_t d = 0; d < r->peak_memory_bytes.size(); ++d) {
      m.peak_memory_bytes[d] = std::max(m.peak_memory_bytes[d], r->peak_memory_bytes[d]);
    }
    if (step >= options.warmup) {
      m.allocated_peak_bytes.resize(r->allocated_peak_bytes.size(), 0);
      for (size_t d = 0; d < r->allocated_peak_bytes.size(); ++d) {
        m.allocated_peak_bytes[d] =
            std::max(m.allocated_peak_bytes[d], r->allocated_peak_bytes[d]);
      }
      for (const NodeRun& run : r->node_runs) {
        node_times[{run.node, run.device}].push_back(run.seconds);
      }
      busy.resize(r->busy_seconds.size());
      for (size_t d = 0; d < r->busy_seconds.size(); ++d) {
        busy[d].push_back(r->busy_seconds[d]);
      }
      m.transfers.insert(m.transfers.end(), r->transfers.begin(), r->transfers.end());
      m.handoff_seconds.insert(m.handoff_seconds.end(),
                               r->handoff_seconds.begin(),
                               r->handoff_seconds.end());
    }
    if (progress) progress(step, *r);
  }
  m.step_seconds = Median(std::vector<double>(
      m.step_times.begin() + options.warmup, m.step_times.end()));
  for (auto& [at, times] : node_times) {
    m.nodes.push_back({at.first, at.second, Median(times),
                       static_cast<int>(times.size())});
  }
  for (auto& b : busy) m.busy_seconds.push_back(Median(b));
  return m;
}

MeasuredProfile ProfileFromMeasurement(const TrainingView& view,
                                       const Cluster& cluster,
                                       const Measurement& measurement) {
  MeasuredProfile profile;
  profile.source = "placer run: medians of nodes measured inside training steps";
  std::map<std::pair<std::string, DeviceKind>, std::vector<double>> ops;
  // Devices used per host: with one each, no device had a neighbour in
  // use, and the times are alone times too.
  std::map<std::string, std::set<int>> used;
  for (const MeasuredNode& node : measurement.nodes) {
    const Device& device = cluster.device(node.device);
    ops[{NodeSignature(view, node.node), device.kind}].push_back(node.seconds);
    used[device.host].insert(node.device);
  }
  bool alone = true;
  for (const auto& [host, devices] : used) alone &= devices.size() <= 1;
  for (auto& [key, times] : ops) {
    profile.ops[key] = {Median(times), static_cast<int>(times.size())};
    if (alone) profile.alone_ops[key] = profile.ops[key].first;
  }
  if (!measurement.handoff_seconds.empty()) {
    // A mean, since hand-offs add up along a step's paths, without the 5%
    // at each end: the rare worker descheduled for milliseconds moved a
    // plain mean between 35 and 70 us from run to run (GNMT-2 on cpu2).
    profile.handoff_seconds = TrimmedMean(measurement.handoff_seconds, 0.05);
  }
  std::map<std::pair<int, int>, std::map<int64_t, std::vector<double>>> links;
  for (const MeasuredTransfer& t : measurement.transfers) {
    links[{t.src, t.dst}][t.bytes].push_back(t.seconds);
  }
  for (auto& [pair, by_size] : links) {
    MeasuredLink link;
    for (auto& [bytes, times] : by_size) {
      link.samples.push_back({bytes, Median(times)});
    }
    absl::StatusOr<LinkParams> fit = FitLink(link.samples);
    if (!fit.ok()) continue;
    link.fit = *fit;
    profile.links[{cluster.device(pair.first).name,
                   cluster.device(pair.second).name}] = std::move(link);
  }
  return profile;
}

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

absl::StatusOr<MeasuredProfile> OverlayStepMeasurement(
    const TrainingView& view, const Cluster& cluster,
    const Placement& reference, MeasuredProfile base,
    const MeasureOptions& options) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<StrategyExecutor> executor,
      StrategyExecutor::Create(view, cluster, reference, options.executor));
  ASSIGN_OR_RETURN(Measurement m, MeasureSteps(*executor, options));
  MeasuredProfile overlaid = MergeProfiles(
      std::move(base), ProfileFromMeasurement(view, cluster, m));
  // Where a host has devices of more than one kind (a GPU's driving thread
  // shares the host's cores with the CPU device's threads): each device
  // kind alone, every node on the first device of that kind, for the times
  // with no neighbour in use. Hosts of CPU devices only are left as they
  // are: on cpu2 (2 cores) one placement's step moved by 50% within the
  // hour, and 5 alone steps added that noise, not information
  // (docs/calibration.md).
  std::map<std::string, std::set<DeviceKind>> kinds_on_host;
  bool mixed_host = false;
  for (const Device& d : cluster.devices()) {
    std::set<DeviceKind>& k = kinds_on_host[d.host];
    k.insert(d.kind);
    mixed_host |= k.size() > 1;
  }
  if (!mixed_host) return overlaid;
  std::set<DeviceKind> kinds;
  for (int d = 0; d < cluster.num_devices(); ++d) {
    if (!kinds.insert(cluster.device(d).kind).second) continue;
    Placement one{std::vector<int>(reference.device_of_op.size(), d)};
    absl::StatusOr<std::unique_ptr<StrategyExecutor>> alone =
        StrategyExecutor::Create(view, cluster, one, options.executor);
    absl::StatusOr<Measurement> a =
        alone.ok() ? MeasureSteps(**alone, options)
                   : absl::StatusOr<Measurement>(alone.status());
    // A model that does not fit one device keeps the times measured beside
    // others for that kind.
    if (a.status().code() == absl::StatusCode::kResourceExhausted) continue;
    if (!a.ok()) {
      return WithContext(a.status(),
                         absl::StrCat("measuring every node alone on ",
                                      cluster.device(d).name, ": "));
    }
    MeasuredProfile times = ProfileFromMeasurement(view, cluster, *a);
    MeasuredProfile only_alone;
    only_alone.source = absl::StrCat("every node alone on ", cluster.device(d).name);
    only_alone.alone_ops = std::move(times.alone_ops);
    overlaid = MergeProfiles(std::move(overlaid), only_alone);
  }
  return overlaid;
}

std::unique_ptr<StepEvaluator> NewExecutorEvaluator(const TrainingView& view,
                                                    const Cluster& cluster,
                                                    MeasureOptions options) {
  return std::make_unique<ExecutorEvaluator>(view, cluster, std::move(options));
}

}  // namespace placer
