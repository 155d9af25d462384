#include "simulator/parameter_gathers.h"

#include <algorithm>
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

std::map<int, std::vector<int>> LayerRerunParameters(
    const TrainingView& view, const RepeatedLayers& layers,
    const std::vector<char>& rerun, const std::vector<int>& forward) {
  std::map<int, std::vector<int>> read;
  for (int n : forward) {
    if (!rerun[n] || layers.layer_of_node[n] < 0) continue;
    std::vector<int>& parameters = read[layers.layer_of_node[n]];
    for (int v : view.node(n).inputs) {
      if (view.value(v).kind == ValueKind::kParameter) parameters.push_back(v);
    }
  }
  for (auto& [layer, parameters] : read) {
    std::sort(parameters.begin(), parameters.end());
    parameters.erase(std::unique(parameters.begin(), parameters.end()),
                     parameters.end());
  }
  return read;
}

void GatherAtLayerReruns(const TrainingView& view, const RepeatedLayers& layers,
                         const std::vector<char>& rerun,
                         const std::vector<int>& forward,
                         const std::vector<int>& layer_start,
                         PassGathers* gathers) {
  std::map<int, int> gathered_at;  // parameter -> its earliest rerun
  for (const auto& [layer, parameters] :
       LayerRerunParameters(view, layers, rerun, forward)) {
    if (layer >= static_cast<int>(layer_start.size()) ||
        layer_start[layer] < 0) {
      continue;
    }
    for (int v : parameters) {
      auto [at, added] = gathered_at.emplace(v, layer_start[layer]);
      if (!added) at->second = std::min(at->second, layer_start[layer]);
    }
  }
  if (gathered_at.empty()) return;
  std::map<int, int> first;  // parameter -> its first read in the pass
  for (int i = 0; i < static_cast<int>(gathers->first_read.size()); ++i) {
    for (int v : gathers->first_read[i]) first[v] = i;
  }
  for (auto [v, at] : gathered_at) {
    auto read = first.find(v);
    if (read == first.end()) {
      // Read by the rerun only: held while it runs.
      gathers->first_read[at].push_back(v);
      gathers->last_read[at].push_back(v);
      continue;
    }
    if (read->second <= at) continue;
    std::vector<int>& from = gathers->first_read[read->second];
    from.erase(std::find(from.begin(), from.end(), v));
    gathers->first_read[at].push_back(v);
  }
  for (auto* lists : {&gathers->first_read, &gathers->last_read}) {
    for (std::vector<int>& list : *lists) std::sort(list.begin(), list.end());
  }
}

}  // namespace placer
