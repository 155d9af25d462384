#include <iostream>

#include "absl/flags/flag.h"
#include "placer/cli/cli_common.h"
#include "placer/inspect.h"
#include "placer/model_source.h"

namespace placer {

int InspectCommand(const std::vector<std::string>& args) {
  if (args.size() != 1) return UsageError("inspect takes one MODEL");
  absl::StatusOr<LoadedModel> model = LoadModelFromFlags(args[0]);
  if (!model.ok()) return Fail(model.status());
  InspectReport report =
      placer::Inspect(model->source, model->graph, model->import_seconds);
  std::cout << (absl::GetFlag(FLAGS_json) ? FormatInspectJson(report)
                                          : FormatInspectText(report));
  return 0;
}

}  // namespace placer
