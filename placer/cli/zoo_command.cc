#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "google/protobuf/struct.pb.h"
#include "placer/cli/cli_common.h"
#include "placer/json_report.h"
#include "zoo/zoo.h"

namespace placer {

int ZooCommand(const std::vector<std::string>& args) {
  if (args.empty()) return UsageError("zoo takes `list` or `export NAME`");
  if (args[0] == "list" && args.size() == 1) {
    if (absl::GetFlag(FLAGS_json)) {
      google::protobuf::Struct s;
      auto* list = (*s.mutable_fields())["models"].mutable_list_value();
      for (const zoo::ZooModel& m : zoo::ZooModels()) {
        auto& e = *list->add_values()->mutable_struct_value()->mutable_fields();
        e["name"].set_string_value(m.name);
        e["description"].set_string_value(m.description);
        e["batch"].set_number_value(static_cast<double>(m.defaults.batch_size));
        e["layers"].set_number_value(static_cast<double>(m.defaults.layers));
        e["seq_len"].set_number_value(static_cast<double>(m.defaults.seq_len));
        e["hidden"].set_number_value(static_cast<double>(m.defaults.hidden));
        e["vocab"].set_number_value(static_cast<double>(m.defaults.vocab));
      }
      std::cout << ReportJson(s);
      return 0;
    }
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
    ReportWrote(out, absl::StrFormat("%d nodes, %d bytes",
                                     model->graph().node_size(),
                                     model->ByteSizeLong()));
    return 0;
  }
  return UsageError("zoo takes `list` or `export NAME -o FILE`");
}

}  // namespace placer
