// ZeRO in the strategy executor (runtime/strategy_executor.h): the shards
// of the parameters each replica updates; ZeRO-3's parameters
// gathered whole from them for each pass (across ranks, exchanged at each
// gather) and let go after their last reader there, and the gradients
// summed round by round on their shards' devices (the reduce-scatter).

#include <algorithm>
#include <set>
#include <utility>

#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "runtime/rank_group.h"
#include "runtime/storage_parking.h"
#include "runtime/strategy_executor_impl.h"
#include "simulator/parameter_gathers.h"

namespace placer {
int TorchStrategyExecutor::LocalReplicas(int d) const {
  int local = 0;
  for (int q : ReplicaDevices(d)) local += Local(q);
  return local;
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::ParameterShard(
    absl::string_view name, int replica) const {
  ASSIGN_OR_RETURN(LocalParameterAt at, LocalParameter(name, replica));
  const int s = strategy_.stage_of_op[group_of_parameter_[at.value]];
  if (!ShardsStateOf(s)) {
    return absl::FailedPreconditionError(
        absl::StrCat("parameter '", name, "': stage ", s,
                     " is not sharded (ZeRO over replicas)"));
  }
  // ZeRO-3 holds the shard itself, ZeRO-1/2 the whole parameter.
  const torch::Tensor& held = params_[at.device][at.value];
  const torch::Tensor shard =
      ShardsParametersOf(s) ? held : Shard(held, at.value, replica);
  return shard.to(torch::kCPU).clone();
}

void TorchStrategyExecutor::InitSharding() {
  const size_t N = view_.nodes().size();
  gathers_.released_after_forward.assign(N, {});
  gathers_.released_after_backward.assign(N, {});
  gathers_.forward.assign(N, {});
  gathers_.backward.assign(N, {});
  gathers_.next.assign(N, -1);
  // A pass's gathers (PlanPassGathers, the stage model's rule): before a
  // node, what it reads first, let go after its last reader. A forward
  // node gathers the next first reader's too (FSDP's prefetch of the next
  // unit). A backward node refills only its own (what its op keeps, parked
  // since the forward): refilled ahead, a weight would be held whole while
  // the nodes before its reader run. Either way the pass's next gather is
  // started before the node computes (GatherWithPrefetch, gathers_.next),
  // so that across ranks its transfer overlaps it.
  auto plan = [&](const std::vector<int>& pass, bool backward,
                  std::vector<std::vector<int>>* gathers,
                  std::vector<std::vector<int>>* released) {
    const PassGathers reads = PlanPassGathers(view_, pass);
    std::set<int> have;
    for (size_t i = 0; i < pass.size(); ++i) {
      (*released)[pass[i]] = reads.last_read[i];
      std::set<int> now(reads.first_read[i].begin(), reads.first_read[i].end());
      for (size_t x = i + 1; !backward && x < pass.size(); ++x) {
        if (reads.first_read[x].empty()) continue;
        now.insert(reads.first_read[x].begin(), reads.first_read[x].end());
        break;
      }
      for (int v : now) {
        if (have.insert(v).second) (*gathers)[pass[i]].push_back(v);
      }
    }
    int last = -1;
    for (int n : pass) {
      if ((*gathers)[n].empty()) continue;
      if (last >= 0) gathers_.next[last] = n;
      last = n;
    }
  };
  for (int s = 0; s < S_; ++s) {
    if (!ShardsParametersOf(s)) continue;
    plan(forward_[s], false, &gathers_.forward,
         &gathers_.released_after_forward);
    plan(backward_[s], true, &gathers_.backward,
         &gathers_.released_after_backward);
  }
}

std::pair<int64_t, int64_t> TorchStrategyExecutor::ShardRange(int v,
                                                             int k) const {
  const int g = group_of_parameter_[v];
  const int64_t replicas =
      strategy_.stages[strategy_.stage_of_op[g]].num_replicas();
  int64_t elements = 1;
  for (int64_t e : PartShape(v)) elements *= e;
  const int64_t run = (elements + replicas - 1) / replicas;
  const int64_t first = std::min(elements, k * run);
  return {first, std::min(elements, first + run) - first};
}

std::vector<int64_t> TorchStrategyExecutor::PartShape(int v) const {
  std::vector<int64_t> shape = host_[v].sizes().vec();
  const TensorLayout layout = HeldLayout(view_.value(v).tensor);
  if (layout.kind == TensorLayout::Kind::kSplit) shape[layout.dim] /= T_;
  return shape;
}

torch::Tensor TorchStrategyExecutor::Shard(const torch::Tensor& whole, int v,
                                           int k) const {
  const auto [first, length] = ShardRange(v, k);
  return whole.reshape({-1}).narrow(0, first, length);
}

void TorchStrategyExecutor::FillFromShards(
    const torch::Tensor& whole, int v,
    const std::map<int, torch::Tensor>& others, int r) const {
  torch::NoGradGuard no_grad;
  const int g = group_of_parameter_[v];
  const PipelineStage& stage = strategy_.stages[strategy_.stage_of_op[g]];
  for (int k = 0; k < stage.num_replicas(); ++k) {
    torch::Tensor part = Shard(whole, v, k);
    if (part.numel() == 0) continue;
    auto at = others.find(k);
    part.copy_(at != others.end() ? at->second
                                  : params_[ParameterDevice(v, k, r)][v]);
  }
}

torch::Tensor TorchStrategyExecutor::Gather(
    int v, int d, const std::map<int, torch::Tensor>& others) const {
  torch::Tensor whole = torch::empty(
      PartShape(v), params_[d][v].options().device(devices_[d]));
  FillFromShards(whole, v, others, tensor_rank_of_device_[d]);
  return whole;
}

absl::StatusOr<TorchStrategyExecutor::ReplicaTicket>
TorchStrategyExecutor::StartShards(int d, const std::vector<int>& parameters) {
  if (parameters.empty() || !HasRemoteReplicas(d)) {
    return ReplicaTicket{0, -1};
  }
  torch::Tensor bucket;
  RETURN_IF_ERROR(CatchExceptions("all-gather: ", [&] {
    std::vector<torch::Tensor> mine;
    for (int v : parameters) mine.push_back(params_[d][v].reshape({-1}));
    bucket = torch::cat(mine);
    return absl::OkStatus();
  }));
  return StartReplicaExchange(
      d, {bucket},
      [&](int k, int) {
        int64_t n = 0;
        for (int v : parameters) n += ShardRange(v, k).second;
        return n;
      },
      /*gather=*/true);
}

absl::StatusOr<std::vector<std::map<int, torch::Tensor>>>
TorchStrategyExecutor::FinishShards(int d, const ReplicaTicket& ticket,
                                    const std::vector<int>& parameters) {
  std::vector<std::map<int, torch::Tensor>> others(parameters.size());
  if (ticket.second < 0) return others;
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> got,
                   FinishReplicaExchange(d, ticket));
  std::vector<std::map<int, torch::Tensor>> by_replica;
  RETURN_IF_ERROR(UnpackRemote(
      got, d, "parameter", [&](int) { return parameters; },
      [](int k) { return k; }, &by_replica));
  // Per parameter, by replica.
  for (size_t i = 0; i < parameters.size(); ++i) {
    for (size_t k = 0; k < by_replica.size(); ++k) {
      auto at = by_replica[k].find(parameters[i]);
      if (at != by_replica[k].end()) {
        others[i][static_cast<int>(k)] = std::move(at->second);
      }
    }
  }
  return others;
}

absl::StatusOr<std::vector<std::map<int, torch::Tensor>>>
TorchStrategyExecutor::ExchangeShards(int d,
                                      const std::vector<int>& parameters) {
  ASSIGN_OR_RETURN(ReplicaTicket ticket, StartShards(d, parameters));
  return FinishShards(d, ticket, parameters);
}

absl::StatusOr<std::vector<std::map<int, torch::Tensor>>>
TorchStrategyExecutor::GatherWithPrefetch(
    int n, int d, const std::vector<std::vector<int>>& gathers) {
  const std::vector<int>& parameters = gathers[n];
  ReplicaTicket ticket{0, -1};
  if (prefetched_[d].first == n) {
    ticket = prefetched_[d].second;
    prefetched_[d] = {-1, {0, -1}};
  } else {
    ASSIGN_OR_RETURN(ticket, StartShards(d, parameters));
  }
  // The pass's next gather starts now and runs while this node computes.
  const int next = gathers_.next[n];
  if (next >= 0) {
    ASSIGN_OR_RETURN(ReplicaTicket ahead, StartShards(d, gathers[next]));
    prefetched_[d] = {next, ahead};
  }
  return FinishShards(d, ticket, parameters);
}

absl::Status TorchStrategyExecutor::GatherBefore(
    int n, int d, std::map<int, torch::Tensor>* copied) {
  const std::vector<int>& parameters = gathers_.forward[n];
  if (parameters.empty()) return absl::OkStatus();
  using Others = std::vector<std::map<int, torch::Tensor>>;
  ASSIGN_OR_RETURN(Others others, GatherWithPrefetch(n, d, gathers_.forward));
  for (size_t i = 0; i < parameters.size(); ++i) {
    (*copied)[parameters[i]] = Gather(parameters[i], d, others[i]);
  }
  return absl::OkStatus();
}

void TorchStrategyExecutor::ReleaseAfterForward(
    int n, int j, int d, bool autograd,
    const std::vector<torch::Tensor>& outputs,
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
  for (int v : gathers_.released_after_forward[n]) {
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
    parked_[Lane(j, d)][v] = std::move(gathered);
  }
}

absl::Status TorchStrategyExecutor::RestoreBefore(int b, int j, int d) {
  const std::vector<int>& parameters = gathers_.backward[b];
  if (parameters.empty()) return absl::OkStatus();
  using Others = std::vector<std::map<int, torch::Tensor>>;
  ASSIGN_OR_RETURN(Others others, GatherWithPrefetch(b, d, gathers_.backward));
  for (size_t i = 0; i < parameters.size(); ++i) {
    const torch::Tensor& gathered = parked_[Lane(j, d)][parameters[i]];
    if (!gathered.defined() || !StorageFreed(gathered)) continue;
    FillFromShards(RefillStorage(gathered), parameters[i], others[i],
                   tensor_rank_of_device_[d]);
  }
  return absl::OkStatus();
}

void TorchStrategyExecutor::ReleaseAfterBackward(int b, int j, int d) {
  for (int v : gathers_.released_after_backward[b]) {
    parked_[Lane(j, d)][v] = torch::Tensor();
  }
}

absl::Status TorchStrategyExecutor::ReduceScatter(
    int s, int j, int d,
    std::vector<std::pair<int, torch::Tensor>>* completed) {
  // The micro-batch's gradient (its slots' parts added in slot order).
  std::map<int, torch::Tensor> gradient;
  torch::NoGradGuard no_grad;
  for (auto& [p, g] : *completed) {
    torch::Tensor& sum = gradient[p];
    sum = sum.defined() ? sum + g.to(sum.device()) : std::move(g);
  }
  // Each shard's part, a copy of its own held here (the send buffer) so
  // that the gradient goes before the next one's parts are made, for the
  // shard's replica; its device receives the parts when the round's
  // reduce-scatter runs (GradientRounds). For the replicas on other ranks,
  // the parts of every parameter of the slot (zeros where no gradient
  // flowed) go by c10d's all-to-all (ReplicaAllToAll), chunk by chunk
  // (ExchangeChunks: one flat bucket per replica and chunk), which brings
  // theirs for this replica's shards.
  const int slot = slot_of_device_[d];
  const int rank = tensor_rank_of_device_[d];
  const std::vector<int> replicas = ReplicaDevices(d);
  const int R = static_cast<int>(replicas.size());
  const std::vector<int> parameters = SlotParameters(s, slot);
  if (parameters.empty()) return absl::OkStatus();
  const bool remote = HasRemoteReplicas(d);
  const int mine = replica_of_device_[d];
  for (const std::vector<int>& chunk :
       remote ? ExchangeChunks(parameters)
              : std::vector<std::vector<int>>{parameters}) {
    std::vector<std::vector<torch::Tensor>> buckets(R);
    for (int p : chunk) {
      auto at = gradient.find(p);
      for (int k = 0; k < R; ++k) {
        if (!Local(replicas[k])) {
          buckets[k].push_back(
              at != gradient.end()
                  ? Shard(at->second, p, k)
                        .to(torch::Device(torch::kCPU), /*non_blocking=*/false,
                            /*copy=*/true)
                  : torch::zeros({ShardRange(p, k).second},
                                 params_[d][p].options().device(torch::kCPU)));
          continue;
        }
      }
      if (at == gradient.end()) continue;
      DeliverShards(s, p, j, d, at->second);
      at->second = torch::Tensor();
    }
    if (!remote) continue;
    std::vector<torch::Tensor> to(R);
    for (int k = 0; k < R; ++k) {
      if (!buckets[k].empty()) to[k] = torch::cat(buckets[k]);
    }
    buckets.clear();
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> got,
                     ReplicaAllToAll(d, std::move(to), [&](int, int q) {
                       int64_t n = 0;
                       for (int p : chunk) n += ShardRange(p, q).second;
                       return n;
                     }));
    std::vector<std::map<int, torch::Tensor>> from;
    RETURN_IF_ERROR(UnpackRemote(
        got, d, "gradient", [&](int) { return chunk; },
        [&](int) { return mine; }, &from));
    for (int k = 0; k < R; ++k) {
      for (auto& [p, t] : from[k]) {
        if (t.numel() > 0) Deliver(s, p, j, k, mine, rank, std::move(t));
      }
    }
  }
  // As the collective it is, the round's reduce-scatter ends once every
  // replica has delivered its parts to this process's replicas: a
  // replica does not run ahead with its rounds' parts piling up on the
  // others.
  const int local = LocalReplicas(d);
  const size_t key = RoundKey(s, slot, j / R, rank);
  const auto start = SteadyClock::now();
  absl::MutexLock lock(&mu_);
  rounds_delivered_[key] += local + (remote ? R - local : 0);
  cv_.SignalAll();
  while (failure_.ok() && rounds_delivered_[key] != local * R) cv_.Wait(&mu_);
  waited_seconds_[d] += SecondsSince(start);
  return absl::OkStatus();
}

void TorchStrategyExecutor::DeliverShards(int s, int p, int j, int d,
                                          const torch::Tensor& g) {
  torch::NoGradGuard no_grad;
  const std::vector<int> replicas = ReplicaDevices(d);
  for (int k = 0; k < static_cast<int>(replicas.size()); ++k) {
    if (!Local(replicas[k])) continue;
    torch::Tensor part = Shard(g, p, k);
    if (part.numel() == 0) continue;
    Deliver(s, p, j, replica_of_device_[d], k, tensor_rank_of_device_[d],
            part.clone());
  }
}

void TorchStrategyExecutor::Deliver(int s, int p, int j, int from, int to,
                                    int r, torch::Tensor g) {
  const int replicas = strategy_.stages[s].num_replicas();
  const int device = ParameterDevice(p, to, r);
  // The sums are the shard's device's memory, whichever worker adds (the
  // parts are their senders' until their round is added).
  auto reporting = ReportAllocations(device);
  gradient_rounds_.Deliver(p, to * T_ + r, j / replicas, from, replicas,
                           std::move(g), devices_[device],
                           &accum_[device][p]);
}

}  // namespace placer
