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

}  // namespace placer
