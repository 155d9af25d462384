#include "simulator/evaluator.h"

#include "simulator/memory_check.h"

namespace placer {
namespace {

class SimulatorEvaluator : public StepEvaluator {
 public:
  explicit SimulatorEvaluator(const SimulationContext& context)
      : context_(context), capacities_(DeviceCapacities(context.cluster())) {}

  absl::StatusOr<Evaluation> Evaluate(const Placement& placement) override {
    absl::StatusOr<SimulationResult> r = Simulate(context_, placement);
    if (!r.ok()) return r.status();
    // What would fail on the hardware: the devices' capacities.
    if (absl::Status s = CheckMemory(context_.cluster(), r->peak_memory_bytes,
                                     capacities_);
        !s.ok()) {
      return s;
    }
    return Evaluation{r->step_seconds, r->peak_memory_bytes};
  }

 private:
  const SimulationContext& context_;
  const std::vector<int64_t> capacities_;
};

}  // namespace

std::unique_ptr<StepEvaluator> NewSimulatorEvaluator(
    const SimulationContext& context) {
  return std::make_unique<SimulatorEvaluator>(context);
}

}  // namespace placer
