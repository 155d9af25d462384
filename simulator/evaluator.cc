#include "simulator/evaluator.h"

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "simulator/memory_check.h"

namespace placer {
namespace {

class SimulatorEvaluator : public StepEvaluator {
 public:
  explicit SimulatorEvaluator(const SimulationContext& context)
      : context_(context), capacities_(DeviceCapacities(context.cluster())) {}

  absl::StatusOr<Evaluation> Evaluate(const Placement& placement) override {
    SimulationOptions options;
    options.list_transfers = false;  // the step and peaks are the score
    ASSIGN_OR_RETURN(SimulationResult r,
                     Simulate(context_, placement, options));
    // What would fail on the hardware: the devices' capacities.
    RETURN_IF_ERROR(CheckMemory(
        context_.cluster(), r.peak_memory_bytes, capacities_, [&](int d) {
          return absl::StrCat(
              ", ", DescribePeakMoment(context_.view(), r.peak_moments[d]));
        }));
    return Evaluation{r.step_seconds, r.peak_memory_bytes};
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
