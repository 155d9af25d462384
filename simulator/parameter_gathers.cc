#include "simulator/parameter_gathers.h"

#include <map>
#include <utility>

namespace placer {

PassGathers PlanPassGathers(const TrainingView& view,
                            const std::vector<int>& nodes) {
  const int count = static_cast<int>(nodes.size());
  std::map<int, std::pair<int, int>> readers;  // value -> first, last
  for (int i = 0; i < count; ++i) {
    for (int v : view.node(nodes[i]).inputs) {
      if (view.value(v).kind != ValueKind::kParameter) continue;
      readers.emplace(v, std::make_pair(i, i)).first->second.second = i;
    }
  }
  PassGathers gathers;
  gathers.first_read.assign(count, {});
  gathers.last_read.assign(count, {});
  for (const auto& [v, range] : readers) {
    gathers.first_read[range.first].push_back(v);
    gathers.last_read[range.second].push_back(v);
  }
  return gathers;
}

}  // namespace placer
