#include "simulator/stage_crossings.h"

#include <algorithm>

namespace placer {

StageCrossings::StageCrossings(const TrainingView& view,
                               const Strategy& strategy)
    : stages_(static_cast<int>(strategy.stages.size())) {
  const size_t pairs = static_cast<size_t>(stages_) * stages_;
  values_.assign(pairs, {});
  sums_.assign(pairs, {});
  value_bytes_.assign(pairs, 0);
  sum_bytes_.assign(pairs, 0);
  value_sources_.assign(stages_, {});
  sum_sources_.assign(stages_, {});
  auto stage_of_node = [&](int n) {
    return strategy.stage_of_op[view.node(n).forward_op];
  };
  // Values in ascending order, each appended once per stage reading it.
  std::vector<int> read_in;
  for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
    const TrainingValue& value = view.value(v);
    if (value.kind != ValueKind::kActivation || value.producer < 0) continue;
    const int from = stage_of_node(value.producer);
    read_in.clear();
    for (int c : value.consumers) {
      const int to = stage_of_node(c);
      if (to != from) read_in.push_back(to);
    }
    std::sort(read_in.begin(), read_in.end());
    read_in.erase(std::unique(read_in.begin(), read_in.end()), read_in.end());
    for (int to : read_in) {
      values_[from * stages_ + to].push_back(v);
      value_bytes_[from * stages_ + to] += value.bytes;
    }
  }
  // Sums likewise, once per stage making partials of them.
  std::vector<int> makers;
  const int num_sums = static_cast<int>(view.gradient_sums().size());
  for (int sm = 0; sm < num_sums; ++sm) {
    const GradientSum& sum = view.gradient_sums()[sm];
    const int to = stage_of_node(sum.sink);
    makers.clear();
    for (int p : sum.partials) {
      const int from = stage_of_node(view.value(p).producer);
      if (from != to) makers.push_back(from);
    }
    std::sort(makers.begin(), makers.end());
    makers.erase(std::unique(makers.begin(), makers.end()), makers.end());
    for (int from : makers) {
      sums_[from * stages_ + to].push_back(sm);
      sum_bytes_[from * stages_ + to] += sum.bytes;
    }
  }
  for (int from = 0; from < stages_; ++from) {
    for (int to = 0; to < stages_; ++to) {
      if (!values(from, to).empty()) value_sources_[to].push_back(from);
      if (!sums(from, to).empty()) sum_sources_[to].push_back(from);
    }
  }
}

}  // namespace placer
