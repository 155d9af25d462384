#include "simulator/evaluator.h"

#include "absl/strings/str_cat.h"

namespace placer {
namespace {

class SimulatorEvaluator : public StepEvaluator {
 public:
  explicit SimulatorEvaluator(const SimulationContext& context)
      : context_(context) {}

  absl::StatusOr<Evaluation> Evaluate(const Placement& placement) override {
    absl::StatusOr<SimulationResult> r = Simulate(context_, placement);
    if (!r.ok()) return r.status();
    const Cluster& cluster = context_.cluster();
    for (int d = 0; d < cluster.num_devices(); ++d) {
      if (r->peak_memory_bytes[d] > cluster.device(d).memory_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "out of memory: ", cluster.device(d).name, " needs ",
            r->peak_memory_bytes[d], " bytes, over its ",
            cluster.device(d).memory_bytes));
      }
    }
    return Evaluation{r->step_seconds, r->peak_memory_bytes};
  }

 private:
  const SimulationContext& context_;
};

}  // namespace

std::unique_ptr<StepEvaluator> NewSimulatorEvaluator(
    const SimulationContext& context) {
  return std::make_unique<SimulatorEvaluator>(context);
}

}  // namespace placer
