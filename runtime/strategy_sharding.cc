// ZeRO-2 and ZeRO-3 in the strategy executor (runtime/strategy_executor.h):
// the parameters' shards, ZeRO-3's parameters gathered whole from them for
// each pass and let go after their last reader there, and the gradients
// summed round by round on their shards' devices (the reduce-scatter).
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <set>
#include <utility>

#include "runtime/strategy_executor_impl.h"

namespace placer {
namespace {

// The storage of `tensor` released (its bytes freed; the tensor and every
// view of it keep their sizes and read nothing until RefillStorage).
void FreeStorage(const torch::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, tensor.device()));
  storage->set_nbytes(0);
}

bool StorageFreed(const torch::Tensor& tensor) {
  return tensor.storage().nbytes() == 0 && tensor.numel() > 0;
}

// The storage FreeStorage released allocated again (its contents
// undefined), and an alias of `tensor` on it with a version counter of its
// own: writing through the alias, the saved graphs holding `tensor` still
// accept it.
torch::Tensor RefillStorage(const torch::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(tensor.numel()) *
                       static_cast<size_t>(tensor.element_size());
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
  torch::NoGradGuard no_grad;
  return torch::empty({0}, tensor.options())
      .set_(tensor.storage(), tensor.storage_offset(), tensor.sizes(),
            tensor.strides());
}

bool SharesStorage(const torch::Tensor& a, const torch::Tensor& b) {
  return a.defined() && b.defined() && a.has_storage() && b.has_storage() &&
         a.storage().unsafeGetStorageImpl() ==
             b.storage().unsafeGetStorageImpl();
}

}  // namespace

void TorchStrategyExecutor::InitSharding() {
  const size_t N = view_.nodes().size();
  released_after_forward_.assign(N, {});
  restored_before_backward_.assign(N, {});
  released_after_backward_.assign(N, {});
  auto parameters_of = [&](int n) {
    std::vector<int> parameters;
    const Op& op = graph_.op(view_.node(n).forward_op);
    if (AllOutputsFolded(graph_, op)) return parameters;
    for (int t : op.inputs) {
      const int v = t >= 0 ? value_of_tensor_[t] : -1;
      if (v >= 0 && view_.value(v).kind == ValueKind::kParameter) {
        parameters.push_back(v);
      }
    }
    return parameters;
  };
  first_read_.assign(N, {});
  prefetched_before_.assign(N, {});
  next_restored_.assign(N, -1);
  for (int s = 0; s < S_; ++s) {
    if (!ShardsParametersOf(s)) continue;
    // A pass reads each parameter first at one node and last at one.
    std::map<int, int> last;
    std::set<int> seen;
    for (int n : forward_[s]) {
      std::vector<int> read = parameters_of(n);
      for (int v : std::set<int>(read.begin(), read.end())) {
        if (seen.insert(v).second) first_read_[n].push_back(v);
        last[v] = n;
      }
    }
    for (const auto& [v, n] : last) released_after_forward_[n].push_back(v);
    // Before each node, the next one's gathers (FSDP's prefetch).
    int next = -1;
    for (auto n = forward_[s].rbegin(); n != forward_[s].rend(); ++n) {
      if (next >= 0) prefetched_before_[*n] = first_read_[next];
      if (!first_read_[*n].empty()) next = *n;
    }
    last.clear();
    for (int b : backward_[s]) {
      std::vector<int> read = parameters_of(b);
      std::set<int> unique(read.begin(), read.end());
      restored_before_backward_[b].assign(unique.begin(), unique.end());
      for (int v : unique) last[v] = b;
    }
    for (const auto& [v, b] : last) released_after_backward_[b].push_back(v);
    next = -1;
    for (auto b = backward_[s].rbegin(); b != backward_[s].rend(); ++b) {
      next_restored_[*b] = next;
      if (!restored_before_backward_[*b].empty()) next = *b;
    }
  }
}

std::pair<int64_t, int64_t> TorchStrategyExecutor::ShardRange(int v,
                                                             int k) const {
  const int g = group_of_parameter_[v];
  const int64_t replicas =
      strategy_.stages[strategy_.stage_of_op[g]].num_replicas();
  const int64_t elements = host_[v].numel();
  const int64_t run = (elements + replicas - 1) / replicas;
  const int64_t first = std::min(elements, k * run);
  return {first, std::min(elements, first + run) - first};
}

torch::Tensor TorchStrategyExecutor::Shard(const torch::Tensor& whole, int v,
                                           int k) const {
  const auto [first, length] = ShardRange(v, k);
  return whole.reshape({-1}).narrow(0, first, length);
}

void TorchStrategyExecutor::FillFromShards(const torch::Tensor& whole,
                                           int v) const {
  torch::NoGradGuard no_grad;
  const int g = group_of_parameter_[v];
  const PipelineStage& stage = strategy_.stages[strategy_.stage_of_op[g]];
  for (int k = 0; k < stage.num_replicas(); ++k) {
    torch::Tensor part = Shard(whole, v, k);
    if (part.numel() > 0) part.copy_(params_[ParameterDevice(v, k)][v]);
  }
}

torch::Tensor TorchStrategyExecutor::Gather(int v, int d) const {
  torch::Tensor whole = torch::empty(
      host_[v].sizes(), params_[d][v].options().device(devices_[d]));
  FillFromShards(whole, v);
  return whole;
}

void TorchStrategyExecutor::Prefetch(
    int n, int d, std::map<int, torch::Tensor>* copied) const {
  for (int v : prefetched_before_[n]) {
    auto [at, fresh] = copied->emplace(v, torch::Tensor());
    if (fresh) at->second = Gather(v, d);
  }
}

void TorchStrategyExecutor::ReleaseAfterForward(
    int n, int j, bool autograd, const std::vector<torch::Tensor>& outputs,
    std::map<int, torch::Tensor>* copied, std::set<int>* pinned) {
  if (!ShardsParametersOf(StageOfNode(n))) return;
  // An output that shares a gathered parameter's storage (a view of it)
  // lives on past this node: that parameter's storage stays.
  const Op& op = graph_.op(view_.node(n).forward_op);
  for (int t : op.inputs) {
    const int v = t >= 0 ? value_of_tensor_[t] : -1;
    auto at = v >= 0 ? copied->find(v) : copied->end();
    if (at == copied->end()) continue;
    for (const torch::Tensor& out : outputs) {
      if (SharesStorage(out, at->second)) pinned->insert(v);
    }
  }
  for (int v : released_after_forward_[n]) {
    auto at = copied->find(v);
    if (at == copied->end()) continue;
    torch::Tensor gathered = std::move(at->second);
    copied->erase(at);
    // Held by nothing else: freed with this reference.
    if (!autograd || pinned->count(v) > 0 ||
        gathered.storage().use_count() <= 1) {
      continue;
    }
    FreeStorage(gathered);
    parked_[j][v] = std::move(gathered);
  }
}

void TorchStrategyExecutor::RestoreBeforeBackward(int b, int j) {
  if (b < 0) return;
  for (int v : restored_before_backward_[b]) {
    const torch::Tensor& gathered = parked_[j][v];
    if (!gathered.defined() || !StorageFreed(gathered)) continue;
    FillFromShards(RefillStorage(gathered), v);
  }
}

void TorchStrategyExecutor::ReleaseAfterBackward(int b, int j) {
  for (int v : released_after_backward_[b]) parked_[j][v] = torch::Tensor();
}

void TorchStrategyExecutor::Deliver(int s, int p, int j, int from, int to,
                                    torch::Tensor g) {
  const int replicas = strategy_.stages[s].num_replicas();
  std::lock_guard<std::mutex> lock(fold_mu_);
  std::vector<torch::Tensor>& round = rounds_[p][to][j / replicas];
  if (round.empty()) round.resize(replicas);
  round[from] = std::move(g);
  FoldRounds(p, to, /*flush=*/false);
}

void TorchStrategyExecutor::FoldRounds(int p, int to, bool flush) {
  const int device = ParameterDevice(p, to);
  std::map<int, std::vector<torch::Tensor>>& rounds = rounds_[p][to];
  torch::NoGradGuard no_grad;
  // The sums are the shard's device's memory, whichever worker adds (the
  // parts are their senders' until the round is erased).
  auto reporting = ReportAllocations(device);
  while (!rounds.empty()) {
    const auto [index, round] = *rounds.begin();
    int delivered = 0;
    for (const torch::Tensor& g : round) delivered += g.defined() ? 1 : 0;
    if (!flush && (index != next_round_[p][to] ||
                   delivered < static_cast<int>(round.size()))) {
      return;
    }
    torch::Tensor total;
    for (const torch::Tensor& g : round) {
      if (!g.defined()) continue;
      torch::Tensor here = g.to(devices_[device]);
      total = total.defined() ? total + here : here.clone();
    }
    torch::Tensor& accumulator = accum_[device][p];
    if (!accumulator.defined()) {
      accumulator = total;
    } else if (total.defined()) {
      accumulator.add_(total);
    }
    rounds.erase(rounds.begin());
    next_round_[p][to] = index + 1;
  }
}

}  // namespace placer
