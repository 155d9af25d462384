#include "simulator/partial_additions.h"

namespace placer {

PartialAdditions::PartialAdditions(const SimulationContext& context,
                                   int places) {
  if (!context.has_partial_adds()) return;
  context_ = &context;
  const int64_t sums =
      static_cast<int64_t>(context.view().gradient_sums().size());
  held_ = PairTable<char>(sums, places, 0);
  arrived_ = PairTable<int>(sums, places, 0);
}

double PartialAdditions::Charge(int node, int place, int device) {
  const TrainingView& view = context_->view();
  double seconds = 0;
  for (int out : context_->outputs(node)) {
    const int sum = view.sum_of(out);
    if (sum < 0) continue;
    char& held = held_.at(sum, place);
    if (held) seconds += context_->partial_add_seconds(sum, device);
    held = 1;
  }
  for (int sum : view.sums_read_by(node)) {
    seconds += arrived_.get(sum, place) *
               context_->partial_add_seconds(sum, device);
  }
  return seconds;
}

}  // namespace placer
