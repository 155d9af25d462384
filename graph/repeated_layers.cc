#include "graph/repeated_layers.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/autocast.h"

namespace placer {

OpLayers FindRepeatedLayers(const Graph& forward_graph) {
  OpLayers layers;
  const int ops = static_cast<int>(forward_graph.ops().size());
  layers.layer_of_op.assign(ops, -1);
  const std::vector<int>& forward = forward_graph.topological_order();
  std::vector<int> position(ops, -1);
  for (size_t i = 0; i < forward.size(); ++i) position[forward[i]] = i;
  // What each tensor depends on: a graph input, a parameter.
  const std::vector<Tensor>& tensors = forward_graph.tensors();
  const size_t values = tensors.size();
  std::vector<char> from_input(values, 0), from_parameter(values, 0);
  for (size_t v = 0; v < values; ++v) {
    from_input[v] = tensors[v].kind == TensorKind::kGraphInput;
    from_parameter[v] = tensors[v].kind == TensorKind::kParameter;
  }
  for (int n : forward) {
    char input = 0, parameter = 0;
    for (int v : forward_graph.op(n).inputs) {
      if (v < 0) continue;
      input |= from_input[v];
      parameter |= from_parameter[v];
    }
    for (int v : forward_graph.op(n).outputs) {
      if (v < 0) continue;
      from_input[v] = input;
      from_parameter[v] = parameter;
    }
  }
  // Weights as autocast counts them.
  const std::vector<char> weight_tensors = WeightTensors(forward_graph);
  auto weight = [&](int v) { return v >= 0 && weight_tensors[v] != 0; };
  // Per boundary (after forward position i): the stream values live
  // across it, as counts of the nodes that made them.
  std::vector<std::vector<std::pair<int, int>>> changes(forward.size() + 1);
  std::vector<char> stream_node(ops, 0);
  for (size_t v = 0; v < values; ++v) {
    const Tensor& value = tensors[v];
    if (value.kind != TensorKind::kActivation || value.producer < 0 ||
        !from_input[v] || !from_parameter[v]) {
      continue;
    }
    stream_node[value.producer] = 1;
    const int made = position[value.producer];
    int last = made;
    for (int c : value.consumers) last = std::max(last, position[c]);
    if (last == made) continue;
    changes[made].push_back({value.producer, 1});
    changes[last].push_back({value.producer, -1});
  }
  // Segments: the stream nodes between cuts, and their signatures.
  std::vector<std::vector<int>> segments(1);
  std::vector<int> signature;
  std::map<std::string, int> signatures = {{"", 0}};
  const int empty = 0;
  std::string types;
  std::map<int, int> crossing;  // producer -> its values live across
  for (size_t i = 0; i < forward.size(); ++i) {
    const int n = forward[i];
    if (stream_node[n]) {
      segments.back().push_back(n);
      // The ops that read weights, and their weights' sizes: exporters
      // leave shape arithmetic that differs from block to block.
      bool weights = false;
      for (int v : forward_graph.op(n).inputs) {
        if (!weight(v)) continue;
        if (!weights) absl::StrAppend(&types, forward_graph.op(n).op_type);
        weights = true;
        absl::StrAppend(&types, ":", tensors[v].bytes());
      }
      if (weights) types += ",";
    }
    for (const auto& [producer, change] : changes[i]) {
      if ((crossing[producer] += change) == 0) crossing.erase(producer);
    }
    if (crossing.size() <= 1 && !segments.back().empty()) {
      signature.push_back(
          signatures.emplace(types, static_cast<int>(signatures.size()))
              .first->second);
      types.clear();
      segments.emplace_back();
    }
  }
  if (segments.back().empty()) segments.pop_back();
  if (signature.size() < segments.size()) {
    signature.push_back(
        signatures.emplace(types, static_cast<int>(signatures.size()))
            .first->second);
  }
  // Runs of repeated groups of segments, the shortest groups first: a
  // ResNet's identical bottlenecks make layers of one segment before its
  // stages' (projection, bottleneck, bottleneck) could make them of three.
  const int m = static_cast<int>(segments.size());
  auto same = [&](int a, int b, int p) {
    return std::equal(signature.begin() + a, signature.begin() + a + p,
                      signature.begin() + b);
  };
  // Whether a group of segments reads any weight (a run of segments
  // without weights, such as a loss's shape arithmetic, is no layer).
  auto weighed = [&](int from, int count) {
    for (int k = from; k < from + count; ++k) {
      if (signature[k] != empty) return true;
    }
    return false;
  };
  std::vector<char> taken(m, 0);
  auto free = [&](int from, int count) {
    return std::none_of(taken.begin() + from, taken.begin() + from + count,
                        [](char t) { return t != 0; });
  };
  std::map<int, std::pair<int, int>> runs;  // first segment -> period, k
  for (int p = 1; p <= kMaxLayerPeriod; ++p) {
    for (int i = 0; i + 2 * p <= m;) {
      if (!free(i, 2 * p) || !same(i, i + p, p) || !weighed(i, p)) {
        ++i;
        continue;
      }
      int k = 2;
      while (i + (k + 1) * p <= m && free(i + k * p, p) &&
             same(i, i + k * p, p)) {
        ++k;
      }
      std::fill(taken.begin() + i, taken.begin() + i + k * p, 1);
      runs[i] = {p, k};
      i += k * p;
    }
  }
  for (const auto& [first, run] : runs) {
    const auto [period, k] = run;
    for (int layer = 0; layer < k; ++layer) {
      for (int s = 0; s < period; ++s) {
        for (int n : segments[first + layer * period + s]) {
          layers.layer_of_op[n] = layers.count;
        }
      }
      ++layers.count;
    }
  }
  return layers;
}

RepeatedLayers FindRepeatedLayers(const TrainingView& view) {
  const OpLayers of_ops = FindRepeatedLayers(view.forward());
  const std::vector<char> products = WeightProducts(view.forward());
  RepeatedLayers layers;
  layers.count = of_ops.count;
  layers.layer_of_node.assign(view.nodes().size(), -1);
  layers.weight_product.assign(view.nodes().size(), 0);
  for (size_t n = 0; n < view.nodes().size(); ++n) {
    const TrainingNode& node = view.node(n);
    if (node.kind != NodeKind::kForward) continue;
    layers.layer_of_node[n] = of_ops.layer_of_op[node.forward_op];
    layers.weight_product[n] = products[node.forward_op];
  }
  return layers;
}

}  // namespace placer
