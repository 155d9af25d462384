// Recomputation in the strategy executor (runtime/strategy_executor.h): a
// stage recomputed whole reruns its forward at each backward (Rerun); one
// recomputed by layer (Recompute::kLayers, kSelectiveOp) reruns a layer's
// rerun nodes (simulator/selective_recompute.h, the simulator's rule) at
// the layer's first backward node (RerunLayer); one recomputed selectively
// (kSelective) reruns each rerun node when a backward node first needs it
// (RerunFor). What a kept op saved of a rerun node's making is parked
// from the forward to the rerun (ParkSaved, Unpark).
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "runtime/op_autograd.h"
#include "runtime/storage_parking.h"
#include "runtime/strategy_executor_impl.h"
#include "simulator/parameter_gathers.h"

namespace placer {

absl::Status TorchStrategyExecutor::InitRecompute() {
  const size_t N = view_.nodes().size();
  reruns_.before.assign(N, {});
  reruns_.layer_nodes.assign(S_, {});
  reruns_.layer_parameters.assign(S_, {});
  reruns_.reads.assign(S_, {});
  ASSIGN_OR_RETURN(selective_, FindSelectiveRecompute(view_, strategy_));
  for (int s = 0; s < S_; ++s) {
    if (!RecomputesInPart(strategy_.stages[s].recompute)) continue;
    const bool by_layer = RecomputesByLayer(strategy_.stages[s].recompute);
    for (int n : forward_[s]) {
      if (!selective_.rerun[n]) continue;
      if (by_layer) {
        reruns_.layer_nodes[s][selective_.layers.layer_of_node[n]].push_back(n);
      }
      const Op& op = graph_.op(view_.node(n).forward_op);
      for (int t : op.inputs) {
        const int v = t >= 0 ? value_of_tensor_[t] : -1;
        if (v >= 0) ++reruns_.reads[s][v];
      }
    }
    if (!by_layer) continue;
    // What each layer's rerun gathers under ZeRO-3: the stage model's rule.
    reruns_.layer_parameters[s] = LayerRerunParameters(
        view_, selective_.layers, selective_.rerun, forward_[s]);
    // Each layer's rerun where LayerRerunPositions puts it.
    const std::vector<int> positions =
        LayerRerunPositions(view_, selective_.layers, backward_[s]);
    for (const auto& [layer, nodes] : reruns_.layer_nodes[s]) {
      if (positions[layer] >= 0) {
        reruns_.before[backward_[s][positions[layer]]].push_back(layer);
      }
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
    absl::MutexLock lock(&mu_);
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
  const std::vector<int>& nodes = reruns_.layer_nodes[s].at(layer);
  // ZeRO-3: the weights the layer's rerun reads, gathered whole from the
  // shards at once (across ranks, one exchange); the copies stay with the
  // saved graphs until the layer's backward has read them (as FSDP's
  // backward gathers the layer again).
  if (ShardsParametersOf(s)) {
    const std::vector<int>& parameters = reruns_.layer_parameters[s].at(layer);
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
    return TakeKept(s, j, d, v);
  };
  for (int n : nodes) {
    const Op& op = graph_.op(view_.node(n).forward_op);
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> results,
                     RerunNode(n, j, d, &copied, activation));
    Unpark(n, s, j, d, results);
    for (size_t k = 0; k < op.outputs.size() && k < results.size(); ++k) {
      const int t = op.outputs[k];
      const int v = t >= 0 ? value_of_tensor_[t] : -1;
      if (v < 0 || reads_left.count(v) == 0) continue;
      made[v] = results[k];
    }
  }
  return absl::OkStatus();
}

torch::Tensor TorchStrategyExecutor::TakeKept(int s, int j, int d, int v) {
  absl::MutexLock lock(&mu_);
  std::map<int, torch::Tensor>& kept = kept_[KeptIndex(s, j, d)];
  torch::Tensor in;
  if (auto at = kept.find(v); at != kept.end()) {
    in = at->second;
    if (--kept_reads_[KeptIndex(s, j, d)][v] == 0) kept.erase(at);
  }
  return in;
}

void TorchStrategyExecutor::ParkSaved(int s, int j, int d,
                                      std::map<int, torch::Tensor>* read) {
  const int lane = Lane(j, d);
  for (auto it = read->begin(); it != read->end();) {
    {
      absl::MutexLock lock(&mu_);
      if (reads_left_[static_cast<size_t>(lane) * V_ + it->first] > 0) {
        ++it;
        continue;
      }
    }
    const int v = it->first;
    torch::Tensor tensor = std::move(it->second);
    it = read->erase(it);
    // Made in storage of its own and no value's since (RunForward): what
    // still holds it besides this reference is a kept op's saved graph
    // (the tensor, or an alias autograd hands the op).
    if ((tensor.use_count() < 2 && tensor.storage().use_count() < 2) ||
        !Parkable(tensor)) {
      continue;
    }
    FreeStorage(tensor);
    parked_reruns_[KeptIndex(s, j, d)][v] = std::move(tensor);
  }
}

void TorchStrategyExecutor::Unpark(int n, int s, int j, int d,
                                   const std::vector<torch::Tensor>& results) {
  std::map<int, torch::Tensor>& parked = parked_reruns_[KeptIndex(s, j, d)];
  if (parked.empty()) return;
  const Op& op = graph_.op(view_.node(n).forward_op);
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < op.outputs.size() && k < results.size(); ++k) {
    const int t = op.outputs[k];
    const int v = t >= 0 ? value_of_tensor_[t] : -1;
    auto at = v >= 0 ? parked.find(v) : parked.end();
    if (at == parked.end()) continue;
    RefillStorage(at->second).copy_(results[k]);
    parked.erase(at);
  }
}

absl::Status TorchStrategyExecutor::RerunFor(int b, int s, int j, int d,
                                             SelectiveRerun* state) {
  const int n = view_.node(b).forward_op;  // its forward node
  std::vector<int> wanted;
  if (Reruns(n)) wanted.push_back(n);
  const std::map<int, torch::Tensor>& parked =
      parked_reruns_[KeptIndex(s, j, d)];
  for (int t : graph_.op(n).inputs) {
    const int v = t >= 0 ? value_of_tensor_[t] : -1;
    if (v >= 0 && parked.count(v) > 0) {
      wanted.push_back(view_.value(v).producer);
    }
  }
  for (int x : wanted) RETURN_IF_ERROR(RerunOne(x, s, j, d, state));
  return absl::OkStatus();
}

absl::Status TorchStrategyExecutor::RerunOne(int n, int s, int j, int d,
                                             SelectiveRerun* state) {
  if (state->done[n]) return absl::OkStatus();
  const Op& op = graph_.op(view_.node(n).forward_op);
  auto rerun_here = [&](int v) {
    const int producer = v >= 0 ? view_.value(v).producer : -1;
    return producer >= 0 && StageOfNode(producer) == s && Reruns(producer);
  };
  // First the rerun nodes whose values it reads (their producers' order is
  // the graph's: each runs before what reads it).
  for (int t : op.inputs) {
    const int v = t >= 0 ? value_of_tensor_[t] : -1;
    if (rerun_here(v) && !state->done[view_.value(v).producer] &&
        state->rebuilt.count(v) == 0) {
      RETURN_IF_ERROR(RerunOne(view_.value(v).producer, s, j, d, state));
    }
  }
  auto activation = [&](int v) {
    torch::Tensor in;
    if (rerun_here(v)) {
      auto at = state->rebuilt.find(v);
      if (at != state->rebuilt.end()) {
        in = at->second.first;
        if (--at->second.second == 0) state->rebuilt.erase(at);
      }
      return in;
    }
    return TakeKept(s, j, d, v);
  };
  std::map<int, torch::Tensor> copied;
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> results,
                   RerunNode(n, j, d, &copied, activation));
  state->done[n] = 1;
  Unpark(n, s, j, d, results);
  for (size_t k = 0; k < op.outputs.size() && k < results.size(); ++k) {
    const int t = op.outputs[k];
    const int v = t >= 0 ? value_of_tensor_[t] : -1;
    auto reads = v >= 0 ? reruns_.reads[s].find(v) : reruns_.reads[s].end();
    if (reads == reruns_.reads[s].end() || reads->second == 0) continue;
    state->rebuilt[v] = {results[k], reads->second};
  }
  return absl::OkStatus();
}

}  // namespace placer
