// The strategy executor's collectives among the replicas of a slot
// (runtime/strategy_executor_impl.h, "Replica exchanges"): this process's
// replicas leave their parts; the last to arrive issues c10d's all-to-all
// on the subgroup of the slot's ranks for all of them (an all-gather's
// parts the same to every member), and the first to finish waits for it
// and reads it for all of them.
#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "runtime/rank_group.h"
#include "runtime/strategy_executor_impl.h"

namespace placer {

absl::Status TorchStrategyExecutor::InitReplicaSubgroups() {
  replica_subgroup_.assign(static_cast<size_t>(S_) * W_ * T_, -1);
  if (!Distributed()) return absl::OkStatus();
  // In stage, slot and tensor rank order on every rank (after the tensor
  // groups'), so that no two ranks wait on each other's subgroups.
  for (int s = 0; s < S_; ++s) {
    for (const std::vector<int>& replicas : ReplicaLists(s)) {
      std::set<int> ranks;
      for (int d : replicas) ranks.insert(RankOf(d));
      if (ranks.size() < 2 || ranks.count(rank_) == 0) continue;
      const int d = replicas[0];
      ASSIGN_OR_RETURN(
          replica_subgroup_[SlotKey(s, slot_of_device_[d],
                                    tensor_rank_of_device_[d])],
          options_.ranks->AddSubgroup(
              std::vector<int>(ranks.begin(), ranks.end()),
              absl::StrCat("replicas/", s, "/", slot_of_device_[d], "/",
                           tensor_rank_of_device_[d])));
    }
  }
  return absl::OkStatus();
}

std::vector<std::vector<int>> TorchStrategyExecutor::ExchangeChunks(
    const std::vector<int>& parameters) const {
  std::vector<std::vector<int>> chunks;
  int64_t bytes = 0;
  for (int p : parameters) {
    // The view's bytes: the same on every replica (what a replica holds
    // of a parameter may not be: ZeRO-3's shards).
    const int64_t b = view_.value(p).bytes;
    if (chunks.empty() ||
        (bytes + b > options_.exchange_chunk_bytes && !chunks.back().empty())) {
      chunks.emplace_back();
      bytes = 0;
    }
    chunks.back().push_back(p);
    bytes += b;
  }
  return chunks;
}

absl::Status TorchStrategyExecutor::UnpackRemote(
    const std::vector<torch::Tensor>& got, int d, absl::string_view what,
    const std::function<std::vector<int>(int)>& parameters_of,
    const std::function<int(int)>& shard_of,
    std::vector<std::map<int, torch::Tensor>>* out) const {
  const std::vector<int> replicas = ReplicaDevices(d);
  out->assign(replicas.size(), {});
  for (size_t k = 0; k < got.size(); ++k) {
    if (!got[k].defined()) continue;
    const int q = static_cast<int>(k);
    using Parts = std::vector<std::pair<int, torch::Tensor>>;
    ASSIGN_OR_RETURN(Parts parts, Unpack(got[k], parameters_of(q), replicas[k],
                                         d, what, shard_of(q)));
    for (auto& [p, t] : parts) (*out)[k][p] = std::move(t);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<torch::Tensor>>
TorchStrategyExecutor::ReplicaAllGather(
    int d, const torch::Tensor& mine,
    const std::function<int64_t(int)>& elements) {
  ASSIGN_OR_RETURN(
      ReplicaTicket ticket,
      StartReplicaExchange(d, {mine}, [&](int k, int) { return elements(k); },
                           /*gather=*/true));
  return FinishReplicaExchange(d, ticket);
}

absl::StatusOr<std::vector<torch::Tensor>>
TorchStrategyExecutor::ReplicaAllToAll(
    int d, std::vector<torch::Tensor> to,
    const std::function<int64_t(int, int)>& elements) {
  ASSIGN_OR_RETURN(
      ReplicaTicket ticket,
      StartReplicaExchange(d, std::move(to), elements, /*gather=*/false));
  return FinishReplicaExchange(d, ticket);
}

absl::StatusOr<TorchStrategyExecutor::ReplicaTicket>
TorchStrategyExecutor::StartReplicaExchange(
    int d, std::vector<torch::Tensor> to,
    const std::function<int64_t(int, int)>& elements, bool gather) {
  const int s = stage_of_device_[d];
  const size_t slot_key =
      SlotKey(s, slot_of_device_[d], tensor_rank_of_device_[d]);
  const std::vector<int> replicas = ReplicaDevices(d);
  const int R = static_cast<int>(replicas.size());
  if (replica_subgroup_[slot_key] < 0) return ReplicaTicket{slot_key, -1};
  const int me = replica_of_device_[d];
  // The parts' dtype (every replica's the same: its parameters' or their
  // gradients').
  torch::ScalarType dtype = torch::kFloat;
  for (const torch::Tensor& part : to) {
    if (part.defined()) {
      dtype = part.scalar_type();
      break;
    }
  }
  // This replica's parts, on the CPU.
  RETURN_IF_ERROR(CatchExceptions("exchange: ", [&]() -> absl::Status {
    for (size_t q = 0; q < to.size(); ++q) {
      const int dst = gather ? -1 : static_cast<int>(q);
      if (!gather && Local(replicas[q])) {
        to[q] = torch::Tensor();
        continue;
      }
      const int64_t expected = elements(me, gather ? 0 : dst);
      const int64_t got = to[q].defined() ? to[q].numel() : 0;
      if (got != expected) {
        return absl::InternalError(absl::StrCat(
            cluster_.device(d).name, "'s part for replica ", q, " has ", got,
            " elements, not ", expected));
      }
      // Each caller's part is its own (made for the exchange) and left
      // alone until the exchange is done: no copy on the CPU.
      if (to[q].defined()) to[q] = to[q].reshape({-1}).to(torch::kCPU);
    }
    return absl::OkStatus();
  }));
  const ReplicaTicket ticket{slot_key, replica_exchanges_made_[d]++};
  const int local = LocalReplicas(d);
  bool leader = false;
  {
    absl::MutexLock lock(&mu_);
    ReplicaExchange& exchange = replica_exchanges_[ticket];
    if (exchange.sent.empty()) {
      exchange.sent.resize(R);
      exchange.received.assign(R, std::vector<torch::Tensor>(R));
    }
    exchange.sent[me] = std::move(to);
    leader = ++exchange.arrived == local;
  }
  if (leader) {
    absl::Status status = CatchExceptions("exchange: ", [&]() -> absl::Status {
      return IssueReplicaExchange(ticket, d, dtype, elements, gather);
    });
    if (!status.ok()) Fail(status);  // wakes every waiter
    absl::MutexLock lock(&mu_);
    replica_exchanges_[ticket].issued = true;
    group_cv_.SignalAll();
  }
  return ticket;
}

absl::StatusOr<std::vector<torch::Tensor>>
TorchStrategyExecutor::FinishReplicaExchange(int d,
                                             const ReplicaTicket& ticket) {
  const int me = replica_of_device_[d];
  if (ticket.second < 0) {
    return std::vector<torch::Tensor>(ReplicaDevices(d).size());
  }
  const auto start = SteadyClock::now();
  const int local = LocalReplicas(d);
  std::shared_ptr<PendingCollective> pending;
  {
    absl::MutexLock lock(&mu_);
    ReplicaExchange& exchange = replica_exchanges_[ticket];
    while (failure_.ok() && !exchange.issued) group_cv_.Wait(&mu_);
    if (!failure_.ok()) return absl::AbortedError("failed elsewhere");
    // The first of this process's replicas to get here waits for the
    // collective and reads it for all of them.
    if (!exchange.finishing) {
      exchange.finishing = true;
      pending = exchange.pending;
    }
  }
  if (pending != nullptr) {
    absl::Status status = CatchExceptions("exchange: ", [&]() -> absl::Status {
      ASSIGN_OR_RETURN(std::vector<torch::Tensor> by_member,
                       options_.ranks->FinishAllToAll(*pending));
      pending.reset();
      absl::MutexLock lock(&mu_);
      ReplicaExchange& exchange = replica_exchanges_[ticket];
      exchange.pending.reset();
      for (const ReplicaExchange::Part& part : exchange.parts) {
        const torch::Tensor piece =
            by_member[part.member].narrow(0, part.offset, part.bytes).view(
                exchange.dtype);
        exchange.received[part.to][part.from] = piece;
      }
      return absl::OkStatus();
    });
    if (!status.ok()) Fail(status);
    absl::MutexLock lock(&mu_);
    replica_exchanges_[ticket].done = true;
    group_cv_.SignalAll();
  }
  std::vector<torch::Tensor> from;
  {
    absl::MutexLock lock(&mu_);
    ReplicaExchange& exchange = replica_exchanges_[ticket];
    while (failure_.ok() && !exchange.done) group_cv_.Wait(&mu_);
    if (!failure_.ok()) return absl::AbortedError("failed elsewhere");
    from = exchange.received[me];
    if (++exchange.taken == local) replica_exchanges_.erase(ticket);
  }
  waited_seconds_[d] += SecondsSince(start);
  return from;
}

absl::Status TorchStrategyExecutor::IssueReplicaExchange(
    const ReplicaTicket& ticket, int d, torch::ScalarType dtype,
    const std::function<int64_t(int, int)>& elements, bool gather) {
  const std::vector<int> replicas = ReplicaDevices(d);
  const int R = static_cast<int>(replicas.size());
  const int subgroup = replica_subgroup_[ticket.first];
  // The subgroup's members (ascending ranks) and the replicas of each, in
  // replica order.
  std::vector<int> members;
  for (int r : replicas) members.push_back(RankOf(r));
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  std::vector<std::vector<int>> of_member(members.size());
  for (int k = 0; k < R; ++k) {
    const size_t m = std::lower_bound(members.begin(), members.end(),
                                      RankOf(replicas[k])) -
                     members.begin();
    of_member[m].push_back(k);
  }
  const size_t mine = std::lower_bound(members.begin(), members.end(), rank_) -
                      members.begin();
  const int64_t element_bytes = c10::elementSize(dtype);
  // The parts left here (under mu_ until now; only the issuer reads them).
  std::vector<std::vector<torch::Tensor>> sent;
  {
    absl::MutexLock lock(&mu_);
    sent.swap(replica_exchanges_[ticket].sent);
  }
  auto bytes_of = [](const torch::Tensor& t) {
    return t.defined() && t.numel() > 0 ? t.contiguous().view(torch::kByte)
                                        : torch::empty({0}, torch::kByte);
  };
  // To each other member: for each replica here, its part (an all-gather:
  // the same to every member) or its parts for that member's replicas, in
  // replica order; from each, as many of its replicas' parts for ours.
  std::vector<torch::Tensor> to(members.size());
  std::vector<int64_t> from_bytes(members.size(), 0);
  std::vector<ReplicaExchange::Part> parts;
  for (size_t m = 0; m < members.size(); ++m) {
    if (m == mine) continue;
    std::vector<torch::Tensor> pieces;
    for (int k : of_member[mine]) {
      if (gather) {
        pieces.push_back(bytes_of(sent[k][0]));
        continue;
      }
      for (int q : of_member[m]) pieces.push_back(bytes_of(sent[k][q]));
    }
    to[m] = pieces.size() == 1 ? pieces[0] : torch::cat(pieces);
    for (int k : of_member[m]) {
      if (gather) {
        const int64_t n = elements(k, 0) * element_bytes;
        for (int q : of_member[mine]) {
          parts.push_back({static_cast<int>(m), from_bytes[m], n, q, k});
        }
        from_bytes[m] += n;
        continue;
      }
      for (int q : of_member[mine]) {
        const int64_t n = elements(k, q) * element_bytes;
        parts.push_back({static_cast<int>(m), from_bytes[m], n, q, k});
        from_bytes[m] += n;
      }
    }
  }
  sent.clear();
  ASSIGN_OR_RETURN(std::shared_ptr<PendingCollective> pending,
                   options_.ranks->StartAllToAll(subgroup, to, from_bytes));
  absl::MutexLock lock(&mu_);
  ReplicaExchange& exchange = replica_exchanges_[ticket];
  exchange.pending = std::move(pending);
  exchange.parts = std::move(parts);
  exchange.dtype = dtype;
  return absl::OkStatus();
}

}  // namespace placer
