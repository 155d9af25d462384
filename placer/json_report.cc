#include "placer/json_report.h"

#include <algorithm>
#include <vector>

#include "google/protobuf/util/json_util.h"

namespace placer {
namespace {

void Append(const google::protobuf::Value& v, std::string* out);

void AppendStruct(const google::protobuf::Struct& s, std::string* out) {
  std::vector<const std::string*> keys;
  for (const auto& [key, value] : s.fields()) keys.push_back(&key);
  std::sort(keys.begin(), keys.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  *out += '{';
  for (size_t k = 0; k < keys.size(); ++k) {
    if (k > 0) *out += ',';
    google::protobuf::Value key;
    key.set_string_value(*keys[k]);
    Append(key, out);
    *out += ':';
    Append(s.fields().at(*keys[k]), out);
  }
  *out += '}';
}

void Append(const google::protobuf::Value& v, std::string* out) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kStructValue:
      AppendStruct(v.struct_value(), out);
      return;
    case google::protobuf::Value::kListValue: {
      *out += '[';
      for (int i = 0; i < v.list_value().values_size(); ++i) {
        if (i > 0) *out += ',';
        Append(v.list_value().values(i), out);
      }
      *out += ']';
      return;
    }
    default: {
      std::string leaf;
      (void)google::protobuf::util::MessageToJsonString(v, &leaf);
      *out += leaf.empty() ? "null" : leaf;
      return;
    }
  }
}

}  // namespace

std::string ReportJson(const google::protobuf::Struct& report) {
  std::string out;
  AppendStruct(report, &out);
  return out + "\n";
}

SimulationSummary Summarize(const SimulationResult& result,
                            const Cluster& cluster) {
  SimulationSummary s;
  s.step_seconds = result.step_seconds;
  s.lower_bound_seconds = result.lower_bound_seconds;
  s.bytes_moved = result.bytes_moved;
  s.out_of_memory = result.oom;
  s.estimated_nodes = result.inaccurate_nodes;
  for (const Device& d : cluster.devices()) s.devices.push_back(d.name);
  s.peak_memory_bytes = result.peak_memory_bytes;
  s.busy_seconds = result.busy_seconds;
  s.peak_breakdown = result.peak_breakdown;
  return s;
}

void AddSimulationFields(const SimulationSummary& summary,
                         google::protobuf::Struct* report) {
  auto& f = *report->mutable_fields();
  f["step_seconds"].set_number_value(summary.step_seconds);
  f["lower_bound_seconds"].set_number_value(summary.lower_bound_seconds);
  f["bytes_moved"].set_number_value(static_cast<double>(summary.bytes_moved));
  f["out_of_memory"].set_bool_value(summary.out_of_memory);
  f["estimated_nodes"].set_number_value(summary.estimated_nodes);
  auto& peak = *f["peak_memory_bytes"].mutable_struct_value()->mutable_fields();
  auto& busy = *f["busy_seconds"].mutable_struct_value()->mutable_fields();
  for (size_t d = 0; d < summary.devices.size(); ++d) {
    if (d < summary.peak_memory_bytes.size()) {
      peak[summary.devices[d]].set_number_value(
          static_cast<double>(summary.peak_memory_bytes[d]));
    }
    if (d < summary.busy_seconds.size()) {
      busy[summary.devices[d]].set_number_value(summary.busy_seconds[d]);
    }
  }
  if (summary.peak_breakdown.empty()) return;
  auto& breakdown =
      *f["peak_breakdown"].mutable_struct_value()->mutable_fields();
  for (size_t d = 0; d < summary.devices.size(); ++d) {
    if (d >= summary.peak_breakdown.size()) break;
    const MemoryBreakdown& at = summary.peak_breakdown[d];
    auto& e =
        *breakdown[summary.devices[d]].mutable_struct_value()->mutable_fields();
    e["parameters"].set_number_value(static_cast<double>(at.parameters));
    e["activations"].set_number_value(static_cast<double>(at.activations));
    e["gradients"].set_number_value(static_cast<double>(at.gradients));
    e["workspace"].set_number_value(static_cast<double>(at.workspace));
    e["inputs"].set_number_value(static_cast<double>(at.inputs));
  }
}

}  // namespace placer
