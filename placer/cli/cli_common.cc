#include "placer/cli/cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <new>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_helpers.h"
#include "profiles/measured_cost_model.h"

// Flags (cli_flags.cc) that only the readers here use.
ABSL_DECLARE_FLAG(std::string, attention);
ABSL_DECLARE_FLAG(std::string, elementwise);
ABSL_DECLARE_FLAG(std::string, mixed_precision);
ABSL_DECLARE_FLAG(std::string, fp8_recipe);
ABSL_DECLARE_FLAG(std::string, optimizer);
ABSL_DECLARE_FLAG(std::string, precision);

namespace placer {

bool AbslParseFlag(absl::string_view text, FlagSeconds* out,
                   std::string* error) {
  double scale = 1;
  absl::string_view number = text;
  if (!text.empty()) {
    switch (text.back()) {
      case 's': scale = 1; break;
      case 'm': scale = 60; break;
      case 'h': scale = 3600; break;
      default: scale = 0; break;
    }
    if (scale > 0) number.remove_suffix(1);
    if (scale == 0) scale = 1;
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !(value >= 0)) {
    *error = "expected a duration like 30, 30s, 10m or 1h";
    return false;
  }
  out->seconds = value * scale;
  return true;
}

std::string AbslUnparseFlag(FlagSeconds value) {
  return absl::StrCat(value.seconds);
}

// Under `bazel run` the process starts in the runfiles tree; paths the user
// typed are relative to where they ran bazel.
std::string UserPath(const std::string& path) {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (dir == nullptr || path.empty() || path[0] == '/' ||
      path.rfind("zoo:", 0) == 0) {
    return path;
  }
  return absl::StrCat(dir, "/", path);
}

std::vector<const absl::CommandLineFlag*> PlacerFlags() {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "placer/")) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(), [](const auto* a, const auto* b) {
    return a->Name() < b->Name();
  });
  return flags;
}

const std::map<std::string, std::vector<std::string>>& CommandFlags() {
  static const auto* table = [] {
    using Flags = std::vector<std::string>;
    auto join = [](std::initializer_list<Flags> parts) {
      Flags out;
      for (const Flags& p : parts) out.insert(out.end(), p.begin(), p.end());
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      return out;
    };
    // What the shared readers read: LoadModelFromFlags (and the zoo's
    // sizes), PolicyOptionsFromFlags, CostModelFromFlags.
    const Flags model = {"batch",  "input_shape", "dim",        "layers",
                         "seq_len", "hidden",     "vocab",      "image_size",
                         "weights", "attention",  "elementwise", "seed"};
    const Flags policy = {"policy", "budget", "evaluations",
                          "memory_headroom", "seed"};
    const Flags costs = {"profile"};
    const Flags ranks = {"nproc", "world_size", "rank", "master", "bind",
                         "rank_timeout"};
    return new std::map<std::string, Flags>{
        {"inspect", join({model, {"json"}})},
        {"zoo", join({model, {"o", "json"}})},
        {"simulate", join({model,
                           costs,
                           {"cluster", "placement", "trace", "report", "order",
                            "json", "optimizer", "precision", "mixed_precision",
                            "fp8_recipe"}})},
        {"place",
         join({model,
               policy,
               costs,
               {"cluster", "compare", "o", "report", "checkpoint", "json",
                "parallelism", "micro_batches", "recompute", "zero", "tensor",
                "stages", "replicas", "sequence_parallel",
                "overlap_param_gather", "emit",
                "global_batch", "micro_batch_sizes", "optimizer", "precision",
                "mixed_precision", "fp8_recipe"}})},
        {"bench", join({model,
                        policy,
                        {"models", "clusters", "policies", "out_dir", "json",
                         "optimizer", "precision", "mixed_precision",
                         "fp8_recipe"}})},
        {"profile", join({model,
                          ranks,
                          {"cluster", "devices", "repeats", "reference_steps",
                           "warmup", "threads", "pin_cores", "budget", "o",
                           "resume", "json", "optimizer"}})},
        {"run", join({model,
                      policy,
                      costs,
                      ranks,
                      {"cluster", "placement", "profile_out", "steps", "warmup",
                       "threads", "pin_cores", "json", "optimizer", "precision",
                       "mixed_precision",
                       "input_values"}})},
        {"worker", join({ranks})},
        {"calibrate",
         join({model,
               policy,
               {"cluster", "placements", "rounds", "steps", "warmup", "threads",
                "pin_cores", "repeats", "profile", "o", "json", "optimizer"}})},
        {"train", join({model,
                        costs,
                        {"cluster",
                         "budget",
                         "checkpoint",
                         "resume",
                         "curve",
                         "samples",
                         "samples_per_step",
                         "warm_start",
                         "imitation_steps",
                         "joint",
                         "learning_rate",
                         "entropy",
                         "entropy_target",
                         "max_kl",
                         "groups",
                         "sage_layers",
                         "sage_hidden",
                         "device_agnostic",
                         "heuristic_input",
                         "memory_mask",
                         "checkpoint_every",
                         "reward",
                         "steps",
                         "warmup",
                         "threads",
                         "pin_cores",
                         "o",
                         "json",
                         "optimizer"}})},
        {"serve",
         join({{"listen", "max_ops", "max_placing", "max_request_mb",
                "max_searches", "max_threads", "state_dir",
                "max_searches_per_client", "max_placing_per_client",
                "max_calls_per_second_per_client", "max_state_mb", "tls_cert",
                "tls_key", "tls_ca", "access", "insecure"}})},
        {"token", Flags{"roles"}},
        {"remote", join({{"server",
                          "deadline",
                          "step_seconds",
                          "send_weights",
                          "use_reported_profiles",
                          "profile_clients",
                          "cluster",
                          "policy",
                          "budget",
                          "evaluations",
                          "seed",
                          "placement",
                          "profile",
                          "o",
                          "report",
                          "json",
                          "batch",
                          "input_shape",
                          "attention",
                          "elementwise",
                          "tls_ca",
                          "tls_cert",
                          "tls_key",
                          "tls_server_name",
                          "token_file"}})},
    };
  }();
  return *table;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "placer: error: %s\n", std::string(status.message()).c_str());
  return 1;
}

namespace {
std::atomic<bool> stop_signal_received{false};
extern "C" void OnStopSignal(int) { stop_signal_received = true; }
}  // namespace

StopOnSignal::StopOnSignal() {
  stop_signal_received = false;
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

StopOnSignal::~StopOnSignal() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

bool StopOnSignal::requested() { return stop_signal_received.load(); }

void ReportWrote(const std::string& path, const std::string& detail) {
  std::cerr << "wrote " << path << (detail.empty() ? "" : ": ") << detail
            << "\n";
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "placer: %s\nRun `placer --help` for usage.\n",
               message.c_str());
  return 2;
}

absl::StatusOr<TrainingOptions> TrainingOptionsFromFlags() {
  absl::StatusOr<Optimizer> optimizer =
      ParseOptimizer(absl::GetFlag(FLAGS_optimizer));
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", optimizer.status().message()));
  }
  TrainingOptions options = TrainingOptionsFor(*optimizer);
  absl::StatusOr<Precision> precision =
      ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", precision.status().message()));
  }
  options.precision = *precision;
  absl::StatusOr<MixedPrecision> mixed =
      ParseMixedPrecision(absl::GetFlag(FLAGS_mixed_precision));
  if (!mixed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", mixed.status().message()));
  }
  options.mixed = *mixed;
  absl::StatusOr<Fp8Recipe> recipe =
      ParseFp8Recipe(absl::GetFlag(FLAGS_fp8_recipe));
  if (!recipe.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", recipe.status().message()));
  }
  options.fp8_recipe = *recipe;
  if (options.precision != Precision::kFp32 &&
      !absl::GetFlag(FLAGS_profile).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--precision ", PrecisionName(options.precision), " with --profile ",
        absl::GetFlag(FLAGS_profile),
        ": profiles hold fp32 measurements; plan this precision from the "
        "cluster's rates (leave --profile out)"));
  }
  return options;
}

absl::Status CheckMeasuredStepDefaults() {
  if (absl::GetFlag(FLAGS_optimizer) == "momentum" &&
      absl::GetFlag(FLAGS_precision) == "fp32") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--optimizer ", absl::GetFlag(FLAGS_optimizer), " --precision ",
      absl::GetFlag(FLAGS_precision),
      ": profiles (profile, calibrate, train, run --profile-out) are "
      "measured from fp32 steps with momentum only (simulate, place, bench "
      "and run take the others)"));
}

PolicyOptions PolicyOptionsFromFlags() {
  PolicyOptions options;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.budget_seconds = absl::GetFlag(FLAGS_budget).seconds;
  options.max_evaluations = absl::GetFlag(FLAGS_evaluations);
  options.memory_headroom = absl::GetFlag(FLAGS_memory_headroom);
  return options;
}

zoo::ZooParams ZooParamsFromFlags() {
  zoo::ZooParams p;
  p.batch_size = absl::GetFlag(FLAGS_batch);
  p.layers = absl::GetFlag(FLAGS_layers);
  p.seq_len = absl::GetFlag(FLAGS_seq_len);
  p.hidden = absl::GetFlag(FLAGS_hidden);
  p.vocab = absl::GetFlag(FLAGS_vocab);
  p.image_size = absl::GetFlag(FLAGS_image_size);
  p.seed = absl::GetFlag(FLAGS_seed);
  p.weights = absl::GetFlag(FLAGS_weights);
  return p;
}

absl::StatusOr<LoadedModel> LoadModelFromFlags(const std::string& spec) {
  ASSIGN_OR_RETURN(ImportOptions options, ImportOptionsFromFlags());
  return LoadModel(UserPath(spec), options, ZooParamsFromFlags());
}

absl::StatusOr<LoadedModel> LoadModelFromFlagsAtBatch(const std::string& spec,
                                                      int64_t batch) {
  ASSIGN_OR_RETURN(ImportOptions options, ImportOptionsFromFlags());
  return LoadModel(UserPath(spec), options, ZooParamsFromFlags(), batch);
}

absl::StatusOr<bool> FuseAttentionFromFlag() {
  const std::string attention = absl::GetFlag(FLAGS_attention);
  if (attention == "fused") return true;
  if (attention == "as-exported") return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "--attention '", attention, "': expected as-exported or fused"));
}

absl::StatusOr<bool> FuseElementwiseFromFlag() {
  const std::string elementwise = absl::GetFlag(FLAGS_elementwise);
  if (elementwise == "fused") return true;
  if (elementwise == "as-exported") return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "--elementwise '", elementwise, "': expected as-exported or fused"));
}

absl::StatusOr<ImportOptions> ImportOptionsFromFlags() {
  ImportOptions options;
  options.names.batch_size = "--batch";
  options.names.input_shapes = "--input-shape";
  options.names.dim_values = "--dim";
  options.names.weights_optional = "--noweights";
  options.weights_optional = !absl::GetFlag(FLAGS_weights);
  ASSIGN_OR_RETURN(options.fuse_attention, FuseAttentionFromFlag());
  ASSIGN_OR_RETURN(options.fuse_elementwise, FuseElementwiseFromFlag());
  if (int64_t batch = absl::GetFlag(FLAGS_batch); batch > 0) {
    options.batch_size = batch;
  } else if (batch < 0) {
    return absl::InvalidArgumentError("--batch must be positive");
  }
  for (const std::string& s : absl::GetFlag(FLAGS_input_shape)) {
    const size_t equals = s.find('=');
    if (equals == std::string::npos || equals == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input-shape '", s,
                       "': expected NAME=D0xD1x..., e.g. input=32x3x224x224"));
    }
    absl::StatusOr<std::vector<int64_t>> dims = ParseDims(s.substr(equals + 1));
    if (!dims.ok()) {
      return WithContext(dims.status(),
                         absl::StrCat("--input-shape '", s, "': "));
    }
    options.input_shapes[s.substr(0, equals)] = *std::move(dims);
  }
  for (const std::string& s : absl::GetFlag(FLAGS_dim)) {
    std::vector<std::string> kv = absl::StrSplit(s, '=');
    int64_t value;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &value) || value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dim '", s, "': expected NAME=POSITIVE_INTEGER"));
    }
    options.dim_values[kv[0]] = value;
  }
  return options;
}

absl::StatusOr<Cluster> LoadUserCluster(const std::string& spec) {
  return LoadCluster(spec.find('.') != std::string::npos ? UserPath(spec)
                                                         : spec);
}

absl::StatusOr<std::unique_ptr<CostModel>> CostModelFromFlags() {
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  if (std::string path = absl::GetFlag(FLAGS_profile); !path.empty()) {
    ASSIGN_OR_RETURN(MeasuredProfile profile, LoadProfile(UserPath(path)));
    costs = NewMeasuredCostModel(std::move(profile), std::move(costs));
  }
  return costs;
}

namespace {

// Abseil flag names use underscores; accept --input-shape as well.
std::vector<char*> NormalizeFlagNames(int argc, char** argv,
                                      std::vector<std::string>& storage) {
  storage.assign(argv, argv + argc);
  for (std::string& arg : storage) {
    if (arg.rfind("--", 0) != 0) continue;
    size_t end = arg.find('=');
    if (end == std::string::npos) end = arg.size();
    for (size_t i = 2; i < end; ++i) {
      if (arg[i] == '-') arg[i] = '_';
    }
  }
  std::vector<char*> out;
  for (std::string& arg : storage) out.push_back(arg.data());
  return out;
}


constexpr char kVersion[] = "0.1.0";

void PrintFlag(const absl::CommandLineFlag& flag) {
  std::string name(flag.Name());
  std::replace(name.begin(), name.end(), '_', '-');
  std::string def = flag.DefaultValue();
  std::cout << absl::StrFormat("  --%s (default: %s)\n      %s\n", name,
                               def.empty() ? "none" : def, flag.Help());
}

constexpr char kFlagSyntax[] =
    "Flags (--name VALUE or --name=VALUE; booleans --name / --noname):\n";

// The usage, then every flag with its default (as --flag-name).
void PrintHelp(const char* usage) {
  std::cout << usage << "\n" << kFlagSyntax;
  for (const absl::CommandLineFlag* flag : PlacerFlags()) PrintFlag(*flag);
}

// `placer COMMAND --help`: the command's paragraphs of the usage (lines
// from "  placer COMMAND" up to the next command's), then its flags.
void PrintCommandHelp(const char* usage, const std::string& command,
                      const std::vector<std::string>& flags) {
  std::vector<std::string> lines = absl::StrSplit(usage, '\n');
  const std::string mine = "  placer " + command;
  bool in = false, any = false;
  for (const std::string& line : lines) {
    const bool starts_command = absl::StartsWith(line, "  placer ");
    if (starts_command) {
      in = line == mine || absl::StartsWith(line, mine + " ");
    } else if (!absl::StartsWith(line, "  ")) {
      in = false;
    }
    if (in) {
      std::cout << line << "\n";
      any = true;
    }
  }
  if (!any) std::cout << "placer " << command << " (see `placer --help`)\n";
  std::cout << "\n" << kFlagSyntax;
  for (const std::string& name : flags) {
    if (const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name)) {
      PrintFlag(*flag);
    }
  }
}

// Help, version and unknown flags, before Abseil's parser (which exits 1
// for all three): help and version exit 0 (-1: go on), an unknown flag is a
// usage error (2) like an unknown command. `placer COMMAND --help` shows
// that command's usage and flags.
int EarlyArguments(const std::vector<char*>& args, const char* usage) {
  const auto all = absl::GetAllFlags();
  const std::string command =
      args.size() > 1 && args[1][0] != '-' ? args[1] : "";
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h" || arg == "--helpfull" ||
        arg == "--helpshort" || arg == "-help") {
      auto it = CommandFlags().find(command);
      if (it != CommandFlags().end()) {
        PrintCommandHelp(usage, command, it->second);
      } else {
        PrintHelp(usage);
      }
      return 0;
    }
    if (arg == "--version") {
      std::cout << "placer " << kVersion << "\n";
      return 0;
    }
    if (arg.size() < 2 || arg[0] != '-') continue;
    absl::string_view name = arg.substr(arg[1] == '-' ? 2 : 1);
    name = name.substr(0, name.find('='));
    if (all.contains(name) ||
        (absl::StartsWith(name, "no") && all.contains(name.substr(2)))) {
      continue;
    }
    return UsageError(absl::StrCat("unknown flag '", args[i], "'"));
  }
  return -1;
}

// The directory of the running executable.
std::string SelfDirectory() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string s(path, n);
  return s.substr(0, s.rfind('/'));
}

}  // namespace

int RunCli(int argc, char** argv, const char* usage,
           const std::vector<Command>& commands,
           const std::function<bool(const std::string& command)>& elsewhere,
           const std::string& elsewhere_binary) {
  absl::SetProgramUsageMessage(usage);
  std::vector<std::string> storage;
  std::vector<char*> normalized = NormalizeFlagNames(argc, argv, storage);
  if (int code = EarlyArguments(normalized, usage); code >= 0) return code;
  std::vector<char*> positional = absl::ParseCommandLine(
      static_cast<int>(normalized.size()), normalized.data());
  if (positional.size() < 2) {
    std::cout << usage;
    return argc > 1 ? 2 : 0;
  }
  std::string command = positional[1];
  if (elsewhere && elsewhere(command)) {
    std::string binary = SelfDirectory() + "/" + elsewhere_binary;
    std::vector<char*> args(argv, argv + argc);
    args[0] = binary.data();
    args.push_back(nullptr);
    execv(binary.c_str(), args.data());
    return Fail(absl::NotFoundError(absl::StrCat(
        "`", command, "` runs in ", binary,
        ", which could not be started; build //placer:", elsewhere_binary)));
  }
  std::vector<std::string> args(positional.begin() + 2, positional.end());
  for (const Command& c : commands) {
    if (command != c.name) continue;
    // The last line of defence: an allocation that fails, or any exception
    // a library throws past a command, is an error message, never an abort.
    try {
      return c.run(args);
    } catch (const std::bad_alloc&) {
      return Fail(absl::ResourceExhaustedError(
          absl::StrCat(command, ": out of memory")));
    } catch (const std::exception& e) {
      return Fail(absl::InternalError(absl::StrCat(command, ": ", e.what())));
    }
  }
  return UsageError(absl::StrCat("unknown command '", command, "'"));
}

}  // namespace placer
