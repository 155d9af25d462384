#include "profiles/proto_io.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace placer {
namespace {

class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) {
      first_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ",
                            message);
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path + ": cannot open the file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::Status ParseTextOrJson(const std::string& text, const std::string& source,
                             google::protobuf::Message* message) {
  if (absl::EndsWith(source, ".json")) {
    auto status = google::protobuf::util::JsonStringToMessage(text, message);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": not a valid ", message->GetTypeName(), ": ",
                       status.message().as_string()));
    }
    return absl::OkStatus();
  }
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, message)) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", errors.first()));
  }
  return absl::OkStatus();
}

std::string FormatTextOrJson(const google::protobuf::Message& message,
                             const std::string& path) {
  std::string text;
  if (absl::EndsWith(path, ".json")) {
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(message, &text, options);
  } else {
    google::protobuf::TextFormat::PrintToString(message, &text);
  }
  return text;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << contents;
    if (!out.flush()) return absl::UnavailableError(path + ": cannot write");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(path + ": cannot replace the file");
  }
  return absl::OkStatus();
}

}  // namespace placer
