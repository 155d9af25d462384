// What the placer commands share: their flags, turning flags into options,
// and how errors are printed. Each command lives in its own *_command.cc.
#ifndef PLACER_PLACER_CLI_CLI_COMMON_H_
#define PLACER_PLACER_CLI_CLI_COMMON_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "placer/human_bytes.h"  // HumanBytes, for every table
#include "placer/model_source.h"
#include "policies/policy.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "zoo/zoo.h"

namespace placer {
// A duration flag in seconds: "90", "90s", "10m" or "1.5h".
struct FlagSeconds {
  double seconds = 0;
};
bool AbslParseFlag(absl::string_view text, FlagSeconds* out,
                   std::string* error);
std::string AbslUnparseFlag(FlagSeconds value);
}  // namespace placer

ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(int64_t, batch);
ABSL_DECLARE_FLAG(std::vector<std::string>, input_shape);
ABSL_DECLARE_FLAG(std::vector<std::string>, dim);
ABSL_DECLARE_FLAG(std::vector<std::string>, input_values);
ABSL_DECLARE_FLAG(int64_t, layers);
ABSL_DECLARE_FLAG(int64_t, seq_len);
ABSL_DECLARE_FLAG(int64_t, hidden);
ABSL_DECLARE_FLAG(int64_t, vocab);
ABSL_DECLARE_FLAG(int64_t, image_size);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(bool, weights);
ABSL_DECLARE_FLAG(std::string, o);
ABSL_DECLARE_FLAG(std::string, cluster);
ABSL_DECLARE_FLAG(std::string, placement);
ABSL_DECLARE_FLAG(std::string, trace);
ABSL_DECLARE_FLAG(std::string, report);
ABSL_DECLARE_FLAG(std::string, order);
ABSL_DECLARE_FLAG(std::string, profile);
ABSL_DECLARE_FLAG(std::string, devices);
ABSL_DECLARE_FLAG(int32_t, repeats);
ABSL_DECLARE_FLAG(int32_t, reference_steps);
ABSL_DECLARE_FLAG(int32_t, warmup);
ABSL_DECLARE_FLAG(int32_t, threads);
ABSL_DECLARE_FLAG(bool, pin_cores);
ABSL_DECLARE_FLAG(placer::FlagSeconds, budget);
ABSL_DECLARE_FLAG(int64_t, evaluations);
ABSL_DECLARE_FLAG(double, memory_headroom);
ABSL_DECLARE_FLAG(std::string, policy);
ABSL_DECLARE_FLAG(bool, compare);
ABSL_DECLARE_FLAG(std::string, parallelism);
ABSL_DECLARE_FLAG(int32_t, micro_batches);
ABSL_DECLARE_FLAG(std::string, recompute);
ABSL_DECLARE_FLAG(std::string, zero);
ABSL_DECLARE_FLAG(std::string, tensor);
ABSL_DECLARE_FLAG(std::string, stages);
ABSL_DECLARE_FLAG(std::string, replicas);
ABSL_DECLARE_FLAG(bool, sequence_parallel);
ABSL_DECLARE_FLAG(bool, overlap_param_gather);
ABSL_DECLARE_FLAG(std::string, emit);
ABSL_DECLARE_FLAG(int64_t, global_batch);
ABSL_DECLARE_FLAG(std::vector<std::string>, micro_batch_sizes);
ABSL_DECLARE_FLAG(int32_t, steps);
ABSL_DECLARE_FLAG(std::string, profile_out);
ABSL_DECLARE_FLAG(int32_t, placements);
ABSL_DECLARE_FLAG(int32_t, rounds);
ABSL_DECLARE_FLAG(std::string, checkpoint);
ABSL_DECLARE_FLAG(bool, resume);
ABSL_DECLARE_FLAG(std::string, curve);
ABSL_DECLARE_FLAG(int64_t, samples);
ABSL_DECLARE_FLAG(int32_t, samples_per_step);
ABSL_DECLARE_FLAG(bool, warm_start);
ABSL_DECLARE_FLAG(int32_t, imitation_steps);
ABSL_DECLARE_FLAG(bool, joint);
ABSL_DECLARE_FLAG(double, learning_rate);
ABSL_DECLARE_FLAG(double, entropy);
ABSL_DECLARE_FLAG(double, entropy_target);
ABSL_DECLARE_FLAG(double, max_kl);
ABSL_DECLARE_FLAG(int32_t, groups);
ABSL_DECLARE_FLAG(int32_t, sage_layers);
ABSL_DECLARE_FLAG(int32_t, sage_hidden);
ABSL_DECLARE_FLAG(bool, device_agnostic);
ABSL_DECLARE_FLAG(bool, heuristic_input);
ABSL_DECLARE_FLAG(bool, memory_mask);
ABSL_DECLARE_FLAG(placer::FlagSeconds, checkpoint_every);
ABSL_DECLARE_FLAG(std::string, reward);
ABSL_DECLARE_FLAG(int32_t, nproc);
ABSL_DECLARE_FLAG(int32_t, world_size);
ABSL_DECLARE_FLAG(int32_t, rank);
ABSL_DECLARE_FLAG(std::string, master);
ABSL_DECLARE_FLAG(std::string, bind);
ABSL_DECLARE_FLAG(placer::FlagSeconds, rank_timeout);

namespace placer {

// Under `bazel run` the process starts in the runfiles tree; paths the user
// typed are relative to where they ran bazel.
std::string UserPath(const std::string& path);
// Prints "placer: error: ..." and returns exit code 1.
int Fail(const absl::Status& status);

// The flags placer itself defines (not Abseil's own), sorted by name.
std::vector<const absl::CommandLineFlag*> PlacerFlags();
// Per command, the flags it reads (its own and those of the shared
// readers below), sorted: what `placer COMMAND --help` lists.
const std::map<std::string, std::vector<std::string>>& CommandFlags();
// Prints the problem and a pointer to --help; returns exit code 2.
int UsageError(const std::string& message);
// While alive, SIGINT and SIGTERM ask the command to stop (requested())
// instead of killing it, so that it can write what it has: the best
// placement so far, a checkpoint. The default actions come back after.
class StopOnSignal {
 public:
  StopOnSignal();
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  static bool requested();
};

// "wrote PATH[: detail]" on stderr: every command says what it wrote on
// the one stream that stays clear of its report (stdout, --json).
void ReportWrote(const std::string& path, const std::string& detail = "");

zoo::ZooParams ZooParamsFromFlags();
// --seed, --budget, --evaluations and --memory-headroom as PolicyOptions.
PolicyOptions PolicyOptionsFromFlags();
// --optimizer and --precision as TrainingOptions; INVALID_ARGUMENT naming
// the flag (also for a precision below fp32 with --profile's fp32
// measurements).
absl::StatusOr<TrainingOptions> TrainingOptionsFromFlags();
// For the commands that measure steps into profiles and rewards (profile,
// calibrate, train): OK for momentum at fp32, else an error naming them.
absl::Status CheckMeasuredStepDefaults();
// A preset name, or a cluster file relative to the user's directory.
absl::StatusOr<Cluster> LoadUserCluster(const std::string& spec);
// The roofline model, or the --profile measurements over it.
absl::StatusOr<std::unique_ptr<CostModel>> CostModelFromFlags();
// --attention: true for "fused", false for "as-exported"; INVALID_ARGUMENT
// naming the flag otherwise.
absl::StatusOr<bool> FuseAttentionFromFlag();
// --elementwise: true for "fused", false for "as-exported"; INVALID_ARGUMENT
// naming the flag otherwise.
absl::StatusOr<bool> FuseElementwiseFromFlag();
absl::StatusOr<ImportOptions> ImportOptionsFromFlags();
// LoadModel of a MODEL argument (relative to the user's directory) with
// the import and zoo flags.
absl::StatusOr<LoadedModel> LoadModelFromFlags(const std::string& spec);
// The same at graph batch `batch` (> 0), over --batch and a zoo spec's.
absl::StatusOr<LoadedModel> LoadModelFromFlagsAtBatch(const std::string& spec,
                                                      int64_t batch);

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
};

// Parses flags (accepting --flag-name for --flag_name) and runs the command
// named by the first positional argument. Commands for which `elsewhere`
// says true (it is asked after the flags are parsed) are run by exec'ing
// the sibling binary `elsewhere_binary` with the same arguments (the
// LibTorch commands live in placer_torch, so that placer itself starts
// fast).
int RunCli(int argc, char** argv, const char* usage,
           const std::vector<Command>& commands,
           const std::function<bool(const std::string& command)>& elsewhere =
               {},
           const std::string& elsewhere_binary = "");

int InspectCommand(const std::vector<std::string>& args);
int ZooCommand(const std::vector<std::string>& args);
int SimulateCommand(const std::vector<std::string>& args);
int ProfileCommand(const std::vector<std::string>& args);
int RunCommand(const std::vector<std::string>& args);
int CalibrateCommand(const std::vector<std::string>& args);
int PlaceCommand(const std::vector<std::string>& args);
int BenchCommand(const std::vector<std::string>& args);
int ServeCommand(const std::vector<std::string>& args);
int RemoteCommand(const std::vector<std::string>& args);
int TokenCommand(const std::vector<std::string>& args);
int TrainCommand(const std::vector<std::string>& args);
int WorkerCommand(const std::vector<std::string>& args);

}  // namespace placer

#endif  // PLACER_PLACER_CLI_CLI_COMMON_H_
