// StepEvaluator: what a search or the RL trainer calls to score a placement,
// in process: the simulator (NewSimulatorEvaluator, here) or measurement on
// real devices (NewExecutorEvaluator, runtime/measurement.h), behind one
// interface.
//
// Contract: Evaluate returns the step time of one training step under the
// placement and the peak memory per device, or an error saying why the
// placement failed (ResourceExhausted for out of memory, naming the device).
// Evaluators are not thread-safe; make one per thread.
#ifndef PLACER_SIMULATOR_EVALUATOR_H_
#define PLACER_SIMULATOR_EVALUATOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/simulator.h"

namespace placer {

struct Evaluation {
  double step_seconds = 0;
  std::vector<int64_t> peak_memory_bytes;  // per device
};

class StepEvaluator {
 public:
  virtual ~StepEvaluator() = default;
  virtual absl::StatusOr<Evaluation> Evaluate(const Placement& placement) = 0;
};

// Simulates; a device over its capacity (the cluster's memory_bytes) is a
// ResourceExhausted error. `context` must outlive the evaluator.
std::unique_ptr<StepEvaluator> NewSimulatorEvaluator(
    const SimulationContext& context);

}  // namespace placer

#endif  // PLACER_SIMULATOR_EVALUATOR_H_
