// What the stages of a Strategy (simulator/strategy.h) send each other in
// every micro-batch, by value: the activations a stage makes that a later
// one reads, and the gradient sums whose partials one stage's backward
// makes for a sink in another. The strategy lowering times the transfers
// by these lists' bytes (stage_plan.h); the executor sends, counts and
// waits for the lists themselves (runtime/strategy_messages.cc), so that
// the rule is written once.
//
// Contract: a StageCrossings is a pure function of (view, strategy), which
// must have passed CheckStrategy; it keeps no pointer to either. Built, it
// is read-only and may be shared across threads.
#ifndef PLACER_SIMULATOR_STAGE_CROSSINGS_H_
#define PLACER_SIMULATOR_STAGE_CROSSINGS_H_

#include <cstdint>
#include <vector>

#include "graph/training_view.h"
#include "simulator/strategy.h"

namespace placer {

class StageCrossings {
 public:
  StageCrossings() = default;  // no stages
  StageCrossings(const TrainingView& view, const Strategy& strategy);

  int num_stages() const { return stages_; }
  // Activations made by a forward node of stage `from` and read by a node
  // of stage `to` (from != to), ascending: each is sent once per
  // micro-batch, `from`'s forward to `to`.
  const std::vector<int>& values(int from, int to) const {
    return values_[from * stages_ + to];
  }
  // Gradient sums whose sink is in stage `to` and some of whose partials
  // stage `from`'s backward makes (from != to), ascending: `from` sends
  // its partials of each, summed, once per micro-batch.
  const std::vector<int>& sums(int from, int to) const {
    return sums_[from * stages_ + to];
  }
  // The stages that send `to` values (its forward waits for them) and
  // those that send it sums (its backward waits for them), ascending.
  const std::vector<int>& value_sources(int to) const {
    return value_sources_[to];
  }
  const std::vector<int>& sum_sources(int to) const { return sum_sources_[to]; }
  // The bytes of values(from, to) and of sums(from, to).
  int64_t value_bytes(int from, int to) const {
    return value_bytes_[from * stages_ + to];
  }
  int64_t sum_bytes(int from, int to) const {
    return sum_bytes_[from * stages_ + to];
  }

 private:
  int stages_ = 0;
  // [from * stages_ + to]
  std::vector<std::vector<int>> values_, sums_;
  std::vector<int64_t> value_bytes_, sum_bytes_;
  std::vector<std::vector<int>> value_sources_, sum_sources_;  // per stage
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_STAGE_CROSSINGS_H_
