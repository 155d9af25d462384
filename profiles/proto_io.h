// Reading and writing the project's protobuf files (clusters, profiles,
// placements) in text format or JSON, with errors that name the file and
// the line or field.
//
// Contract: ParseTextOrJson picks JSON for sources ending in ".json" and
// protobuf text format otherwise; WriteFileAtomically leaves either the old
// or the new file, never a torn one, even if the process or the machine
// dies mid-write (the data is on disk before the rename); concurrent writers
// of one path each leave a whole file.
#ifndef PLACER_PROFILES_PROTO_IO_H_
#define PLACER_PROFILES_PROTO_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace placer {

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

absl::Status ParseTextOrJson(const std::string& text, const std::string& source,
                             google::protobuf::Message* message);

// JSON with the proto field names, indented.
std::string FormatJson(const google::protobuf::Message& message);

// Text format, or JSON with the proto field names when `path` ends in
// ".json".
std::string FormatTextOrJson(const google::protobuf::Message& message,
                             const std::string& path);

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);

}  // namespace placer

#endif  // PLACER_PROFILES_PROTO_IO_H_
