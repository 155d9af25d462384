// placer profile [MODEL] --cluster C [--devices cpu,gpu]
//   [--reference-steps 5] [--nproc N [--world-size W] ...] [--resume]
//   -o PROFILE
// Op-by-op timings of the model's nodes and the links between devices,
// overlaid (unless --reference-steps 0) with the node and link times
// measured inside the steps of a reference placement, and, where a host has
// devices of more than one kind, the times of each kind alone (every node
// on its first device: the profile's alone times). As ranks (--nproc,
// --world-size and `placer worker`, as for run), the links between
// devices of different ranks are measured over the ranks' transport
// (runtime/link_probe.h) and replace the in-process ones; rank 0 writes
// the profile. SIGINT or SIGTERM while timing ops stops it there: what was
// measured is written (no reference steps), exit 130, and `--resume` with
// the same -o keeps those timings and measures the rest.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_helpers.h"
#include "google/protobuf/struct.pb.h"
#include "graph/training_view.h"
#include "placer/cli/cli_common.h"
#include "placer/cli/ranks.h"
#include "placer/json_report.h"
#include "placer/model_source.h"
#include "profiles/cluster.h"
#include "profiles/measured_cost_model.h"
#include "profiles/signature.h"
#include "runtime/executor.h"
#include "runtime/link_probe.h"
#include "runtime/measurement.h"
#include "runtime/profiler.h"

namespace placer {

namespace {

// 130 after a stop signal. One that came after the ops were timed (during
// the reference steps, which run to their end) left the profile whole.
int ExitCode(bool stopped_timing_ops) {
  if (!StopOnSignal::requested()) return 0;
  if (!stopped_timing_ops) {
    std::cerr << "profile: stopped by signal during the reference steps, "
                 "which were finished: the profile is whole\n";
  }
  return 130;
}

}  // namespace

namespace {

// The flags profile reads, read once.
struct ProfileFlags {
  std::string devices;
  std::string output_path;  // -o
  std::string cluster;
  int32_t reference_steps = 0;
  int32_t repeats = 0;
  int32_t warmup = 0;
  int32_t threads = 0;
  bool pin_cores = false;
  FlagSeconds budget;
  int32_t nproc = 0;
  int32_t world_size = 0;
  int32_t rank = 0;
  bool resume = false;
  uint64_t seed = 0;
  bool json = false;
};

ProfileFlags ReadProfileFlags() {
  ProfileFlags f;
  f.devices = absl::GetFlag(FLAGS_devices);
  f.output_path = absl::GetFlag(FLAGS_o);
  f.cluster = absl::GetFlag(FLAGS_cluster);
  f.reference_steps = absl::GetFlag(FLAGS_reference_steps);
  f.repeats = absl::GetFlag(FLAGS_repeats);
  f.warmup = absl::GetFlag(FLAGS_warmup);
  f.threads = absl::GetFlag(FLAGS_threads);
  f.pin_cores = absl::GetFlag(FLAGS_pin_cores);
  f.budget = absl::GetFlag(FLAGS_budget);
  f.nproc = absl::GetFlag(FLAGS_nproc);
  f.world_size = absl::GetFlag(FLAGS_world_size);
  f.rank = absl::GetFlag(FLAGS_rank);
  f.resume = absl::GetFlag(FLAGS_resume);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.json = absl::GetFlag(FLAGS_json);
  return f;
}

}  // namespace

int ProfileCommand(const std::vector<std::string>& args) {
  const ProfileFlags flags = ReadProfileFlags();
  if (absl::Status s = CheckMeasuredStepDefaults(); !s.ok()) return Fail(s);
  if (args.size() > 1) return UsageError("profile takes at most one MODEL");
  std::vector<DeviceKind> kinds;
  for (absl::string_view name :
       absl::StrSplit(flags.devices, ',', absl::SkipEmpty())) {
    if (name == "cpu") {
      kinds.push_back(DeviceKind::kCpu);
    } else if (name == "gpu") {
      kinds.push_back(DeviceKind::kGpu);
    } else {
      return UsageError(absl::StrCat("--devices: '", name,
                                     "' is neither cpu nor gpu"));
    }
  }
  std::string out = flags.output_path;
  if (out.empty()) return UsageError("profile needs -o FILE.pbtxt");
  std::string cluster_spec = flags.cluster;
  absl::StatusOr<Cluster> cluster =
      LoadUserCluster(cluster_spec.empty() ? "cpu2" : cluster_spec);
  if (!cluster.ok()) return Fail(cluster.status());
  NoteUnpinnedCpuDevices(*cluster);

  std::optional<LoadedModel> model;
  std::optional<TrainingView> view;
  if (!args.empty()) {
    absl::StatusOr<LoadedModel> loaded = LoadModelFromFlags(args[0]);
    if (!loaded.ok()) return Fail(loaded.status());
    model = std::move(*loaded);
    view = BuildTrainingView(model->graph);
  }
  // Ops without a LibTorch kernel are named before anything is measured:
  // the reference steps could not run them; op by op, they fall back to
  // the roofline.
  const int reference_steps = flags.reference_steps;
  if (model) {
    if (absl::Status runnable = CheckRunnable(model->graph); !runnable.ok()) {
      if (reference_steps > 0) {
        return Fail(absl::Status(
            runnable.code(),
            absl::StrCat(runnable.message(), "; --reference-steps 0 measures "
                         "the other ops one by one")));
      }
      std::cerr << "profile: " << runnable.message()
                << " (they fall back to the roofline)\n";
    }
  }
  ProfilerOptions options;
  options.repeats = flags.repeats;
  options.warmup = flags.warmup;
  options.threads = flags.threads;
  options.pin_cores = flags.pin_cores;
  options.budget_seconds = flags.budget.seconds;
  options.kinds = std::move(kinds);

  // As ranks: the links between them first (every rank takes part), then
  // rank 0 goes on alone.
  std::map<std::pair<std::string, std::string>, MeasuredLink> rank_links;
  int ranks_joined = 1;
  if (flags.nproc > 1 || flags.world_size > 0 ||
      flags.rank > 0) {
    absl::StatusOr<std::unique_ptr<RankSetup>> ranks =
        JoinRanks(*cluster, RerunArguments("profile", args));
    if (!ranks.ok()) return Fail(ranks.status());
    RankSetup& setup = **ranks;
    if (setup.group != nullptr) {
      ranks_joined = setup.group->world_size();
      absl::StatusOr<std::map<std::pair<std::string, std::string>, MeasuredLink>>
          measured = MeasureLinksAcrossRanks(
              *setup.group, *cluster, setup.rank_of_device, options,
              [](const std::string& line) {
                std::cerr << "profile: " << line << "\n";
              });
      absl::Status status = FinishRanks(setup, measured.status());
      if (!status.ok()) {
        if (setup.rank > 0) {
          status = WithContext(status, absl::StrCat("rank ", setup.rank, ": "));
        }
        return Fail(status);
      }
      if (setup.rank > 0) return 0;
      rank_links = *std::move(measured);
    }
  }
  if (flags.resume) {
    absl::StatusOr<MeasuredProfile> earlier = LoadProfile(UserPath(out));
    if (!earlier.ok()) {
      return Fail(WithContext(earlier.status(), "--resume: "));
    }
    options.resume = std::move(*earlier);
  }
  // Ctrl-C: what was timed so far is written, to be resumed.
  StopOnSignal stop_on_signal;
  options.stop = [] { return StopOnSignal::requested(); };
  absl::StatusOr<ProfileReport> report = ProfileDevices(
      view ? &*view : nullptr, *cluster, options,
      [](const std::string& line) { std::cerr << "profile: " << line << "\n"; });
  if (!report.ok()) return Fail(report.status());
  // In-step times of a reference placement: what a node costs inside the
  // executor's steps, which op-by-op timing misses.
  std::string reference_note;
  if (report->stopped) {
    reference_note = absl::StrCat(
        "; stopped by signal before ", report->signatures_stopped,
        " node signatures, no reference steps (the same command with "
        "--resume measures the rest)");
  } else if (view && reference_steps > 0) {
    bool every_kind = true;
    for (const Device& d : cluster->devices()) {
      every_kind &= options.kinds.empty() ||
                    std::count(options.kinds.begin(), options.kinds.end(),
                               d.kind) > 0;
    }
    if (!every_kind) {
      reference_note = "; no reference steps (not every device kind of the "
                       "cluster was measured)";
    } else {
      MeasureOptions measure;
      measure.steps = reference_steps;
      measure.warmup = flags.warmup;
      measure.executor.seed = flags.seed;
      measure.executor.threads_per_cpu_device = options.threads;
      measure.executor.pin_cpu_devices = options.pin_cores;
      Placement reference = RandomRuns(model->graph, cluster->num_devices(),
                                       ~flags.seed);
      std::cerr << "profile: " << reference_steps
                << " steps of a reference placement\n";
      absl::StatusOr<MeasuredProfile> overlaid = OverlayStepMeasurement(
          *view, *cluster, reference, std::move(report->profile), measure);
      if (!overlaid.ok()) return Fail(overlaid.status());
      report->profile = std::move(*overlaid);
      reference_note = absl::StrFormat(
          "; overlaid with %d steps of a reference placement (thread "
          "hand-off %.1f us)",
          reference_steps, 1e6 * report->profile.handoff_seconds);
      if (!report->profile.alone_ops.empty()) {
        absl::StrAppend(&reference_note, " and ",
                        report->profile.alone_ops.size(),
                        " node signatures' times alone on their device kind");
      }
    }
  }
  for (auto& [pair, link] : rank_links) report->profile.links[pair] = link;
  if (!rank_links.empty()) {
    absl::StrAppend(&reference_note, "; ", rank_links.size(),
                    " links between the ", ranks_joined,
                    " ranks measured over their transport");
  }
  if (absl::Status s = SaveProfile(report->profile, UserPath(out)); !s.ok()) {
    return Fail(s);
  }
  // What the written profile leaves to the roofline: node signatures of the
  // view, on each device kind measured, with no time op by op nor from the
  // reference steps.
  std::set<std::pair<std::string, DeviceKind>> wanted;
  if (view) {
    std::set<DeviceKind> kinds;
    for (const Device& d : cluster->devices()) {
      if (options.kinds.empty() ||
          std::count(options.kinds.begin(), options.kinds.end(), d.kind) > 0) {
        kinds.insert(d.kind);
      }
    }
    for (int n = 0; n < static_cast<int>(view->nodes().size()); ++n) {
      for (DeviceKind kind : kinds) wanted.insert({NodeSignature(*view, n), kind});
    }
  }
  int left = 0;
  for (const auto& key : wanted) left += report->profile.ops.count(key) == 0;
  const bool stepped = view && reference_steps > 0 &&
                       reference_note.find("overlaid") != std::string::npos;
  std::string over_budget;
  if (report->signatures_over_budget > 0) {
    over_budget = absl::StrFormat(
        " (--budget %s ran out: %s)",
        AbslUnparseFlag(flags.budget),
        stepped ? "timed inside the reference steps only; raise it to time "
                  "them op by op too"
                : "raise it to measure them");
  }
  ReportWrote(
      out, absl::StrFormat(
               "%d node signatures, %d links measured op by op; %d nodes "
               "without a LibTorch kernel; %d signatures past the budget%s; "
               "%d failed%s%s; %d of %d node signatures left to the roofline",
               report->measured_signatures, report->profile.links.size(),
               report->nodes_without_kernel, report->signatures_over_budget,
               over_budget, report->failed_signatures, reference_note,
               options.resume
                   ? absl::StrCat("; ", report->resumed_signatures,
                                  " node signatures kept from the profile "
                                  "resumed")
                   : "",
               left, wanted.size()));
  if (flags.json) {
    google::protobuf::Struct s;
    auto& f = *s.mutable_fields();
    f["profile"].set_string_value(out);
    f["measured_signatures"].set_number_value(report->measured_signatures);
    f["links"].set_number_value(
        static_cast<double>(report->profile.links.size()));
    f["nodes_without_kernel"].set_number_value(report->nodes_without_kernel);
    f["signatures_over_budget"].set_number_value(
        report->signatures_over_budget);
    f["failed_signatures"].set_number_value(report->failed_signatures);
    f["resumed_signatures"].set_number_value(report->resumed_signatures);
    f["stopped"].set_bool_value(report->stopped);
    f["signatures_stopped"].set_number_value(report->signatures_stopped);
    f["node_signatures"].set_number_value(static_cast<double>(wanted.size()));
    f["signatures_left_to_roofline"].set_number_value(left);
    auto* failures = f["failures"].mutable_list_value();
    for (const std::string& failure : report->failures) {
      failures->add_values()->set_string_value(failure);
    }
    std::cout << ReportJson(s);
    return ExitCode(report->stopped);
  }
  for (const std::string& f : report->failures) {
    std::cout << "  failed: " << f << "\n";
  }
  return ExitCode(report->stopped);
}

}  // namespace placer
