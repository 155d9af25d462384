// The placer command line. Each command is one entry of kCommands; flags
// are Abseil flags (--help lists them; --flag-name and --flag_name both
// work).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "graph/onnx_import.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "placer/inspect.h"
#include "placer/model_source.h"
#include "zoo/zoo.h"

ABSL_FLAG(bool, json, false, "Print one JSON object instead of tables.");
ABSL_FLAG(int64_t, batch, 0,
          "Batch size: fixes the first dim of every graph input whose first "
          "dim is symbolic; for zoo models, the batch they are built with.");
ABSL_FLAG(std::vector<std::string>, input_shape, {},
          "Full shapes of named graph inputs, NAME=D0xD1x..., comma "
          "separated (e.g. input=32x3x224x224).");
ABSL_FLAG(std::vector<std::string>, dim, {},
          "Values of symbolic dims by name, NAME=VALUE, comma separated "
          "(e.g. seq_len=128).");
ABSL_FLAG(int64_t, layers, 0, "Zoo: layers (or toy depth/width).");
ABSL_FLAG(int64_t, seq_len, 0, "Zoo: sequence length / unrolled steps.");
ABSL_FLAG(int64_t, hidden, 0, "Zoo: hidden size / model width.");
ABSL_FLAG(int64_t, vocab, 0, "Zoo: vocabulary size.");
ABSL_FLAG(int64_t, image_size, 0, "Zoo: image height and width (CNNs).");
ABSL_FLAG(uint64_t, seed, 1, "Zoo: seed of the deterministic weights.");
ABSL_FLAG(bool, weights, true,
          "Zoo: write real (random) weights; with --noweights initializers "
          "are external data with no file (for placement only).");
ABSL_FLAG(std::string, o, "", "Output file (zoo export).");

namespace placer {
namespace {

constexpr char kUsage[] = R"(placer: device placement for ML training graphs.

Usage:
  placer inspect MODEL [--json] [--batch N] [--input-shape NAME=AxBxC]
      What MODEL contains: ops by type, parameter bytes, forward and
      training FLOPs, the longest path in FLOPs, ops without a cost model.
  placer zoo list
      The built-in benchmark models and their default sizes.
  placer zoo export NAME -o FILE.onnx [--batch N --layers N ...]
      Writes a zoo model as an ONNX file.

MODEL is a path to an ONNX file or zoo:NAME (see `placer zoo list`); zoo
models take --batch, --layers, --seq-len, --hidden, --vocab, --image-size.
)";

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

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "placer: error: %s\n", std::string(status.message()).c_str());
  return 1;
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "placer: %s\nRun `placer --help` for usage.\n",
               message.c_str());
  return 2;
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

absl::StatusOr<ImportOptions> ImportOptionsFromFlags() {
  ImportOptions options;
  if (int64_t batch = absl::GetFlag(FLAGS_batch); batch > 0) {
    options.batch_size = batch;
  } else if (batch < 0) {
    return absl::InvalidArgumentError("--batch must be positive");
  }
  for (const std::string& s : absl::GetFlag(FLAGS_input_shape)) {
    if (absl::Status st = ParseInputShapeFlag(s, &options); !st.ok()) return st;
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

int Inspect(const std::vector<std::string>& args) {
  if (args.size() != 1) return UsageError("inspect takes one MODEL");
  absl::StatusOr<ImportOptions> options = ImportOptionsFromFlags();
  if (!options.ok()) return Fail(options.status());
  absl::StatusOr<LoadedModel> model =
      LoadModel(UserPath(args[0]), *options, ZooParamsFromFlags());
  if (!model.ok()) return Fail(model.status());
  InspectReport report =
      placer::Inspect(model->source, model->graph, model->import_seconds);
  std::cout << (absl::GetFlag(FLAGS_json) ? FormatInspectJson(report)
                                          : FormatInspectText(report));
  return 0;
}

int Zoo(const std::vector<std::string>& args) {
  if (args.empty()) return UsageError("zoo takes `list` or `export NAME`");
  if (args[0] == "list" && args.size() == 1) {
    std::cout << absl::StrFormat("%-16s %6s %7s %6s %7s %7s  %s\n", "name",
                                 "batch", "layers", "steps", "hidden",
                                 "vocab", "description");
    for (const zoo::ZooModel& m : zoo::ZooModels()) {
      const zoo::ZooParams& d = m.defaults;
      std::cout << absl::StrFormat("%-16s %6d %7d %6d %7d %7d  %s\n", m.name,
                                   d.batch_size, d.layers, d.seq_len,
                                   d.hidden, d.vocab, m.description);
    }
    return 0;
  }
  if (args[0] == "export" && args.size() == 2) {
    std::string out = absl::GetFlag(FLAGS_o);
    if (out.empty()) return UsageError("zoo export needs -o FILE");
    out = UserPath(out);
    absl::StatusOr<onnx::ModelProto> model =
        zoo::BuildZooModel(args[1], ZooParamsFromFlags());
    if (!model.ok()) return Fail(model.status());
    try {
      // Without weights the external data files do not exist, which the
      // checker would reject; the graph itself is checked by the zoo tests.
      if (absl::GetFlag(FLAGS_weights)) onnx::checker::check_model(*model);
    } catch (const std::exception& e) {
      return Fail(absl::InternalError(
          absl::StrCat("zoo model ", args[1], " fails onnx::checker: ",
                       e.what())));
    }
    std::ofstream file(out, std::ios::binary | std::ios::trunc);
    if (!file || !model->SerializeToOstream(&file) || !file.flush()) {
      return Fail(absl::UnavailableError(
          absl::StrCat(out, ": cannot write the file")));
    }
    std::cerr << absl::StrFormat("wrote %s: %d nodes, %d bytes\n", out,
                                 model->graph().node_size(),
                                 model->ByteSizeLong());
    return 0;
  }
  return UsageError("zoo takes `list` or `export NAME -o FILE`");
}

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
};

constexpr Command kCommands[] = {
    {"inspect", Inspect},
    {"zoo", Zoo},
};

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

}  // namespace
}  // namespace placer

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(placer::kUsage);
  std::vector<std::string> storage;
  std::vector<char*> normalized =
      placer::NormalizeFlagNames(argc, argv, storage);
  std::vector<char*> positional = absl::ParseCommandLine(
      static_cast<int>(normalized.size()), normalized.data());
  if (positional.size() < 2) {
    std::cout << placer::kUsage;
    return positional.size() < 2 && argc > 1 ? 2 : 0;
  }
  std::string command = positional[1];
  std::vector<std::string> args(positional.begin() + 2, positional.end());
  for (const placer::Command& c : placer::kCommands) {
    if (command == c.name) return c.run(args);
  }
  return placer::UsageError(absl::StrCat("unknown command '", command, "'"));
}
