#include "graph/input_shapes.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placer {

absl::StatusOr<std::map<std::string, ShapeInfo>> FixInputShapes(
    const onnx::GraphProto& g,
    const absl::flat_hash_set<std::string>& initializer_names,
    const ImportOptions& options, const std::string& source) {
  auto Error = [&](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", message));
  };
  std::map<std::string, ShapeInfo> fixed;
  std::set<std::string> named;
  for (const auto& [name, shape] : options.input_shapes) named.insert(name);
  for (const onnx::ValueInfoProto& in : g.input()) named.erase(in.name());
  // What the file declares, for the messages below: the inputs, their
  // shapes as NAME=D0xD1 and every symbolic dim's name.
  std::vector<std::string> real_inputs, declared;
  std::set<std::string> symbolic;
  bool batch_applies = false;
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (initializer_names.count(in.name())) continue;
    real_inputs.push_back(in.name());
    std::vector<std::string> dims;
    const ShapeInfo info = FromTypeProto(in.type());
    for (size_t k = 0; k < info.dims.size(); ++k) {
      const Dim& d = info.dims[k];
      dims.push_back(d.value >= 0 ? absl::StrCat(d.value) : d.param);
      if (!d.param.empty()) symbolic.insert(d.param);
      if (k == 0 && d.value < 0 && !options.input_shapes.count(in.name())) {
        batch_applies = true;
      }
    }
    declared.push_back(absl::StrCat(in.name(), "=", absl::StrJoin(dims, "x")));
  }
  const ImportOptionNames& says = options.names;
  if (!named.empty()) {
    return Error(absl::StrCat(says.input_shapes, " names '", *named.begin(),
                              "', which is not a graph input; the inputs are ",
                              absl::StrJoin(real_inputs, ", ")));
  }
  for (const auto& [name, value] : options.dim_values) {
    if (symbolic.count(name)) continue;
    return Error(absl::StrCat(
        says.dim_values, " ", name, "=", value,
        " names no symbolic dim of the inputs (",
        symbolic.empty()
            ? std::string("they have none")
            : absl::StrCat("they have ", absl::StrJoin(symbolic, ", ")),
        ")"));
  }
  if (options.batch_size.has_value() && !batch_applies) {
    return Error(absl::StrCat(
        says.batch_size, " ", *options.batch_size,
        " changes nothing: no graph input has a symbolic first dim (",
        absl::StrJoin(declared, ", "),
        "); the file fixes the batch: re-export it with a dynamic batch "
        "axis, or drop ",
        says.batch_size));
  }
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (initializer_names.count(in.name())) continue;
    ShapeInfo info = FromTypeProto(in.type());
    auto it = options.input_shapes.find(in.name());
    if (it != options.input_shapes.end()) {
      info.has_shape = true;
      info.dims.clear();
      for (int64_t d : it->second) info.dims.push_back({d, ""});
    } else if (info.has_shape) {
      for (size_t k = 0; k < info.dims.size(); ++k) {
        Dim& d = info.dims[k];
        if (d.value >= 0) continue;
        auto named_dim = options.dim_values.find(d.param);
        if (!d.param.empty() && named_dim != options.dim_values.end()) {
          d.value = named_dim->second;
        } else if (k == 0 && options.batch_size.has_value()) {
          d.value = *options.batch_size;
        }
      }
    }
    if (!info.fully_known()) {
      std::string what = "its shape is missing";
      if (info.has_shape) {
        for (size_t k = 0; k < info.dims.size(); ++k) {
          if (info.dims[k].value >= 0) continue;
          what = absl::StrCat(
              "dim ", k, " is ",
              info.dims[k].param.empty()
                  ? std::string("unknown")
                  : absl::StrCat("symbolic '", info.dims[k].param, "'"));
          break;
        }
      }
      std::string fix =
          absl::StrCat(says.input_shapes, " ", in.name(), "=D0xD1x...");
      if (info.has_shape) {
        for (size_t k = 0; k < info.dims.size(); ++k) {
          if (info.dims[k].value >= 0) continue;
          // The options that would fix this dim, the caller's first.
          std::vector<std::string> options_that_fix;
          if (k == 0 && !says.batch_size.empty()) {
            options_that_fix.push_back(absl::StrCat(says.batch_size, " N"));
          }
          if (!info.dims[k].param.empty() && !says.dim_values.empty()) {
            options_that_fix.push_back(
                absl::StrCat(says.dim_values, " ", info.dims[k].param, "=N"));
          }
          if (!options_that_fix.empty()) {
            fix = absl::StrCat(absl::StrJoin(options_that_fix, " or "), ", or ",
                               fix);
          }
          break;
        }
      }
      return Error(absl::StrCat("unresolved shape: graph input '", in.name(),
                                "': ", what, "; fix it with ", fix));
    }
    fixed[in.name()] = info;
  }
  return fixed;
}

}  // namespace placer
