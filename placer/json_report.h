// ReportJson: the one way the command line prints a report as JSON.
//
// Contract: one line and a newline; object keys sorted at every level (a
// google::protobuf::Struct is a map, whose iteration order — and so
// protobuf's own JSON printer's key order — may change between runs);
// numbers, strings, booleans and nulls as protobuf's JSON printer writes
// them. The same report gives the same bytes on every run.
#ifndef PLACER_PLACER_JSON_REPORT_H_
#define PLACER_PLACER_JSON_REPORT_H_

#include <string>

#include "google/protobuf/struct.pb.h"

namespace placer {

std::string ReportJson(const google::protobuf::Struct& report);

}  // namespace placer

#endif  // PLACER_PLACER_JSON_REPORT_H_
