// Runs one placement policy and simulates its result: what `placer place`
// and `placer bench` report for each policy.
#ifndef PLACER_PLACER_POLICY_RUN_H_
#define PLACER_PLACER_POLICY_RUN_H_

#include <string>

#include "absl/status/status.h"
#include "simulator/simulator.h"
#include "policies/policy.h"

namespace placer {

struct PolicyRun {
  std::string policy;
  absl::Status status;     // the policy's error, if any
  Placement placement;
  SimulationResult result;
  double placement_seconds = 0;  // wall time of Place
};

PolicyRun RunPolicy(const std::string& name, const PolicyInput& input,
                    const PolicyOptions& options);

int64_t MaxPeakBytes(const SimulationResult& result);

}  // namespace placer

#endif  // PLACER_PLACER_POLICY_RUN_H_
