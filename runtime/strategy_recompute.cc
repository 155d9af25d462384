// Recomputation in the strategy executor (runtime/strategy_executor.h): a
// stage recomputed whole reruns its forward at each backward (Rerun); one
// recomputed by layer (Recompute::kLayers, kSelectiveOp) reruns a layer's
// rerun nodes (simulator/selective_recompute.h, the simulator's rule) at
// the layer's first backward node (RerunLayer).
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "runtime/op_autograd.h"
#include "runtime/strategy_executor_impl.h"

namespace placer {

absl::Status TorchStrategyExecutor::InitRecompute() {
  const size_t N = view_.nodes().size();
  reruns_before_.assign(N, {});
  layer_reruns_.assign(S_, {});
  layer_parameters_.assign(S_, {});
  rerun_reads_.assign(S_, {});
  ASSIGN_OR_RETURN(selective_, FindSelectiveRecompute(view_, strategy_));
  for (int s = 0; s < S_; ++s) {
    if (!RecomputesByLayer(strategy_.stages[s].recompute)) continue;
    std::map<int, std::set<int>> weights;  // per layer, its rerun's
    for (int n : forward_[s]) {
      if (!selective_.rerun[n]) continue;
      const int layer = selective_.layers.layer_of_node[n];
      layer_reruns_[s][layer].push_back(n);
      std::set<int>& read = weights[layer];
      const Op& op = graph_.op(view_.node(n).forward_op);
      if (AllOutputsFolded(graph_, op)) continue;
      for (int t : op.inputs) {
        const int v = t >= 0 ? value_of_tensor_[t] : -1;
        if (v < 0) continue;
        ++rerun_reads_[s][v];
        if (view_.value(v).kind == ValueKind::kParameter) read.insert(v);
      }
    }
    for (const auto& [layer, read] : weights) {
      layer_parameters_[s][layer].assign(read.begin(), read.end());
    }
    // Each layer's rerun before the first of its backward nodes, in the
    // stage's backward order (as torch's checkpoint reruns a block when
    // its backward starts).
    std::set<int> started;
    for (int b : backward_[s]) {
      const int n = view_.node(b).forward_op;  // its forward node
      const int layer = selective_.layers.layer_of_node[n];
      if (layer < 0 || layer_reruns_[s].count(layer) == 0) continue;
      if (started.insert(layer).second) reruns_before_[b].push_back(layer);
    }
  }
  return absl::OkStatus();
}

bool TorchStrategyExecutor::HasBackward(int n) const {
  return view_.backward_node(view_.node(n).forward_op) >= 0;
}

absl::StatusOr<std::vector<torch::Tensor>> TorchStrategyExecutor::RerunNode(
    int n, int j, int d, std::map<int, torch::Tensor>* copied,
    const std::function<torch::Tensor(int value)>& activation) {
  // Under autograd into saved_; constants copied: kernels that update state
  // in place (BatchNormalization's running statistics) did so in the
  // forward.
  absl::StatusOr<std::vector<torch::Tensor>> results =
      ForwardNode(n, j, d, HasBackward(n), /*rerun=*/true, copied,
                  activation);
  if (!results.ok()) {
    return WithContext(results.status(),
                       absl::StrCat(view_.node(n).key, " (micro-batch ", j,
                                    ", recomputed): "));
  }
  return results;
}

bool TorchStrategyExecutor::Reruns(int n) const {
  const Recompute recompute = strategy_.stages[StageOfNode(n)].recompute;
  return recompute == Recompute::kFull ||
         (RecomputesInPart(recompute) && !selective_.rerun.empty() &&
          selective_.rerun[n]);
}

absl::Status TorchStrategyExecutor::Rerun(int s, int j, int d) {
  // The stage's own values of this micro-batch, each freed after its last
  // read in the rerun (what the ops save for the backward stays in saved_);
  // what other stages made, as the forward kept it.
  std::map<int, torch::Tensor> made, kept, copied;
  std::map<int, int> reads_left;
  std::set<int> pinned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    kept.swap(kept_[KeptIndex(s, j, d)]);
  }
  auto activation = [&](int v) {
    torch::Tensor in;
    if (StageOfNode(view_.value(v).producer) != s) {
      if (auto at = kept.find(v); at != kept.end()) in = at->second;
    } else if (auto at = made.find(v); at != made.end()) {
      in = at->second;
      if (--reads_left[v] == 0) made.erase(at);
    }
    return in;
  };
  for (int n : forward_[s]) {
    const Op& op = graph_.op(view_.node(n).forward_op);
    RETURN_IF_ERROR(GatherBefore(n, d, &copied));
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> results,
                     RerunNode(n, j, d, &copied, activation));
    ReleaseAfterForward(n, j, d, HasBackward(n), results, &copied, &pinned);
    for (size_t k = 0; k < op.outputs.size() && k < results.size(); ++k) {
      const int t = op.outputs[k];
      const int v = t >= 0 ? value_of_tensor_[t] : -1;
      if (v < 0 || forward_reads_[s][v] == 0) continue;
      made[v] = results[k];
      reads_left[v] = forward_reads_[s][v];
    }
  }
  return absl::OkStatus();
}


absl::Status TorchStrategyExecutor::RerunLayer(int s, int layer, int j,
                                               int d) {
  // What the layer's rerun nodes make, each freed after its last read in
  // the rerun (what the ops save for the backward stays in saved_); what
  // they read from elsewhere, as the forward kept it, let go after the
  // last rerun that reads it.
  std::map<int, torch::Tensor> made, copied;
  std::map<int, int> reads_left;
  std::set<int> pinned;
  const std::vector<int>& nodes = layer_reruns_[s].at(layer);
  // ZeRO-3: the weights the layer's rerun reads, gathered whole from the
  // shards at once (across ranks, one exchange); the copies stay with the
  // saved graphs until the layer's backward has read them (as FSDP's
  // backward gathers the layer again).
  if (ShardsParametersOf(s)) {
    const std::vector<int>& parameters = layer_parameters_[s].at(layer);
    using Others = std::vector<std::map<int, torch::Tensor>>;
    ASSIGN_OR_RETURN(Others others, ExchangeShards(d, parameters));
    for (size_t i = 0; i < parameters.size(); ++i) {
      copied[parameters[i]] = Gather(parameters[i], d, others[i]);
    }
  }
  for (int n : nodes) {
    const Op& op = graph_.op(view_.node(n).forward_op);
    for (int t : op.inputs) {
      const int v = t >= 0 ? value_of_tensor_[t] : -1;
      if (v >= 0 && view_.value(v).producer >= 0 &&
          Reruns(view_.value(v).producer) &&
          StageOfNode(view_.value(v).producer) == s) {
        ++reads_left[v];
      }
    }
  }
  auto activation = [&](int v) {
    torch::Tensor in;
    const int producer = view_.value(v).producer;
    if (StageOfNode(producer) == s && Reruns(producer)) {
      if (auto at = made.find(v); at != made.end()) {
        in = at->second;
        if (--reads_left[v] == 0) made.erase(at);
      }
      return in;
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::map<int, torch::Tensor>& kept = kept_[KeptIndex(s, j, d)];
    if (auto at = kept.find(v); at != kept.end()) {
      in = at->second;
      if (--kept_reads_[KeptIndex(s, j, d)][v] == 0) kept.erase(at);
    }
    return in;
  };
  for (int n : nodes) {
    const Op& op = graph_.op(view_.node(n).forward_op);
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> results,
                     RerunNode(n, j, d, &copied, activation));
    for (size_t k = 0; k < op.outputs.size() && k < results.size(); ++k) {
      const int t = op.outputs[k];
      const int v = t >= 0 ? value_of_tensor_[t] : -1;
      if (v < 0 || reads_left.count(v) == 0) continue;
      made[v] = results[k];
    }
  }
  return absl::OkStatus();
}

}  // namespace placer
