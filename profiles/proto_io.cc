#include "profiles/proto_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
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

std::string FormatJson(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &text, options);
  return text;
}

std::string FormatTextOrJson(const google::protobuf::Message& message,
                             const std::string& path) {
  std::string text;
  if (absl::EndsWith(path, ".json")) {
    text = FormatJson(message);
  } else {
    google::protobuf::TextFormat::PrintToString(message, &text);
  }
  return text;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  // A temporary name of its own per writer, so concurrent writers of the
  // same path never share one; written, flushed to disk, then renamed over
  // `path` (atomic on POSIX), then the directory entry flushed too.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = absl::StrCat(path, ".tmp.", getpid(), ".", counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  }
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::UnavailableError(absl::StrCat(path, ": cannot write: ", why));
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": cannot flush: ", why));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot replace the file: ", why));
  }
  std::string dir = path.substr(0, path.find_last_of('/') + 1);
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace placer
