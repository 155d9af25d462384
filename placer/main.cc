// The placer command line. Each command is one entry of kCommands; flags
// are Abseil flags (--help lists them; --flag-name and --flag_name both
// work).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "placer/cli_common.h"

namespace placer {
namespace {

constexpr char kUsage[] = R"(placer: device placement for ML training graphs.

Usage:
  placer inspect MODEL [--json] [--batch N] [--input-shape NAME=AxBxC]
      What MODEL contains: ops by type, parameter bytes, forward and
      training FLOPs, the longest path in FLOPs, ops without a cost model.
  placer simulate MODEL --cluster C --placement P.json [--trace T.json]
      Simulates one training step of MODEL placed by P.json on cluster C
      (a preset such as p100x4, or a .pbtxt/.json file): step time, lower
      bound, bytes moved, peak memory per device, out-of-memory verdict.
  placer zoo list
      The built-in benchmark models and their default sizes.
  placer zoo export NAME -o FILE.onnx [--batch N --layers N ...]
      Writes a zoo model as an ONNX file.

MODEL is a path to an ONNX file or zoo:NAME (see `placer zoo list`); zoo
models take --batch, --layers, --seq-len, --hidden, --vocab, --image-size.
)";

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
};

constexpr Command kCommands[] = {
    {"inspect", InspectCommand},
    {"simulate", SimulateCommand},
    {"zoo", ZooCommand},
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
