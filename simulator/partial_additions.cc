#include "simulator/partial_additions.h"

namespace placer {

PartialAdditions::PartialAdditions(const SimulationContext& context,
                                   int places) {
  if (!context.has_partial_adds()) return;
  *this = PartialAdditions(context.view(), places);
  context_ = &context;
}

PartialAdditions::PartialAdditions(const TrainingView& view, int places)
    : view_(&view) {
  const int64_t sums = static_cast<int64_t>(view.gradient_sums().size());
  held_ = PairTable<char>(sums, places, 0);
  arrived_ = PairTable<int>(sums, places, 0);
}

double PartialAdditions::Charge(int node, int place, int device) {
  double seconds = 0;
  auto price = [&](int sum, int count) {
    seconds += count * context_->partial_add_seconds(sum, device);
  };
  Follow(context_->outputs(node), node, place, price);
  return seconds;
}

}  // namespace placer
