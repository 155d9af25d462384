// ReportJson: the one way the command line prints a report as JSON.
//
// Contract: one line and a newline; object keys sorted at every level (a
// google::protobuf::Struct is a map, whose iteration order — and so
// protobuf's own JSON printer's key order — may change between runs);
// numbers, strings, booleans and nulls as protobuf's JSON printer writes
// them. The same report gives the same bytes on every run.
#ifndef PLACER_PLACER_JSON_REPORT_H_
#define PLACER_PLACER_JSON_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "profiles/cluster.h"
#include "simulator/simulator.h"

namespace placer {

std::string ReportJson(const google::protobuf::Struct& report);

// A simulated step, as every report shows it (simulate and remote simulate
// print it; each row of place and remote place has its fields):
//   step_seconds, lower_bound_seconds, bytes_moved (numbers),
//   out_of_memory (boolean), estimated_nodes (nodes whose cost is a guess),
//   peak_memory_bytes and busy_seconds (objects: device name -> number),
//   and for op placements peak_breakdown (device name -> {parameters,
//   activations, gradients, workspace, inputs}: what was live at that
//   device's peak, adding up to its peak_memory_bytes).
// Byte counts are JSON numbers (exact below 2^53), never strings.
struct SimulationSummary {
  double step_seconds = 0;
  double lower_bound_seconds = 0;
  int64_t bytes_moved = 0;
  bool out_of_memory = false;
  int estimated_nodes = 0;
  std::vector<std::string> devices;
  std::vector<int64_t> peak_memory_bytes;  // per device
  std::vector<double> busy_seconds;        // per device
  std::vector<MemoryBreakdown> peak_breakdown;  // per device, or empty
};
void AddSimulationFields(const SimulationSummary& summary,
                         google::protobuf::Struct* report);
SimulationSummary Summarize(const SimulationResult& result,
                            const Cluster& cluster);

}  // namespace placer

#endif  // PLACER_PLACER_JSON_REPORT_H_
