// Running the placer binary as a user would, for the command-line tests:
// a shell command's exit code and output, JSON output as a Struct, and
// files in the test's temporary directory.
#ifndef PLACER_TESTS_PLACER_RUN_PLACER_H_
#define PLACER_TESTS_PLACER_RUN_PLACER_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace placer::test {

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

inline RunResult RunCommand(const std::string& shell_command) {
  std::string command = shell_command + " 2>&1";
  RunResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    r.out.append(buffer.data(), n);
  }
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `args` after the binary built by Bazel (a data dependency of the test).
inline RunResult RunPlacer(const std::string& args) {
  return RunCommand("placer/placer " + args);
}

inline google::protobuf::Struct Json(const std::string& text) {
  google::protobuf::Struct s;
  auto status = google::protobuf::util::JsonStringToMessage(text, &s);
  EXPECT_TRUE(status.ok()) << text;
  return s;
}

// The JSON report on a line of its own in `out` (place --json prints its
// progress and "wrote FILE" around it).
inline google::protobuf::Struct JsonLine(const std::string& out) {
  const size_t open = out.find('{');
  return Json(open == std::string::npos
                  ? ""
                  : out.substr(open, out.find('\n', open) - open));
}

inline double Number(const google::protobuf::Struct& s,
                     const std::string& key) {
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << key;
  return it == s.fields().end() ? -1 : it->second.number_value();
}

inline std::string TmpFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// `text` as the whole of the file at `path` (a failed assertion when it
// cannot be opened).
inline void WriteFile(const std::string& path, const std::string& text) {
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  fputs(text.c_str(), f);
  fclose(f);
}

}  // namespace placer::test

#endif  // PLACER_TESTS_PLACER_RUN_PLACER_H_
