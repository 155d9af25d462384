// The strategy executor's collectives among the replicas of a slot
// (runtime/strategy_executor_impl.h, "Replica exchanges"): this process's
// replicas leave their parts; the last to arrive runs c10d's all-gather or
// all-to-all on the subgroup of the slot's ranks for all of them.
#include <algorithm>
#include <map>
#include <mutex>
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
  return ExchangeWithReplicas(d, {mine}, [&](int k, int) { return elements(k); },
                              /*gather=*/true);
}

absl::StatusOr<std::vector<torch::Tensor>>
TorchStrategyExecutor::ReplicaAllToAll(
    int d, std::vector<torch::Tensor> to,
    const std::function<int64_t(int, int)>& elements) {
  return ExchangeWithReplicas(d, std::move(to), elements, /*gather=*/false);
}

absl::StatusOr<std::vector<torch::Tensor>>
TorchStrategyExecutor::ExchangeWithReplicas(
    int d, std::vector<torch::Tensor> to,
    const std::function<int64_t(int, int)>& elements, bool gather) {
  const int s = stage_of_device_[d];
  const size_t slot_key =
      SlotKey(s, slot_of_device_[d], tensor_rank_of_device_[d]);
  const std::vector<int> replicas = ReplicaDevices(d);
  const int R = static_cast<int>(replicas.size());
  const int subgroup = replica_subgroup_[slot_key];
  if (subgroup < 0) return std::vector<torch::Tensor>(R);
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
  // This replica's parts, on the CPU (the exchange's own copies).
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
  const auto start = SteadyClock::now();
  const std::pair<size_t, int> key{slot_key, replica_exchanges_made_[d]++};
  const int local = LocalReplicas(d);
  bool leader = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ReplicaExchange& exchange = replica_exchanges_[key];
    if (exchange.sent.empty()) {
      exchange.sent.resize(R);
      exchange.received.assign(R, std::vector<torch::Tensor>(R));
    }
    exchange.sent[me] = std::move(to);
    leader = ++exchange.arrived == local;
  }
  if (leader) {
    absl::Status status = CatchExceptions("exchange: ", [&]() -> absl::Status {
      return RunReplicaExchange(key, d, dtype, elements, gather);
    });
    if (!status.ok()) Fail(status);  // wakes every waiter
    std::lock_guard<std::mutex> lock(mu_);
    replica_exchanges_[key].done = true;
    group_cv_.notify_all();
  }
  std::vector<torch::Tensor> from;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ReplicaExchange& exchange = replica_exchanges_[key];
    group_cv_.wait(lock, [&] { return !failure_.ok() || exchange.done; });
    if (!failure_.ok()) return absl::AbortedError("failed elsewhere");
    from = exchange.received[me];
    if (++exchange.taken == local) replica_exchanges_.erase(key);
  }
  waited_seconds_[d] += SecondsSince(start);
  return from;
}

absl::Status TorchStrategyExecutor::RunReplicaExchange(
    const std::pair<size_t, int>& key, int d, torch::ScalarType dtype,
    const std::function<int64_t(int, int)>& elements, bool gather) {
  const std::vector<int> replicas = ReplicaDevices(d);
  const int R = static_cast<int>(replicas.size());
  const int subgroup = replica_subgroup_[key.first];
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
  // The parts left here (under mu_ until now; only the leader reads them
  // until it marks the exchange done).
  std::vector<std::vector<torch::Tensor>> sent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sent = replica_exchanges_[key].sent;
  }
  auto bytes_of = [](const torch::Tensor& t) {
    return t.defined() && t.numel() > 0 ? t.contiguous().view(torch::kByte)
                                        : torch::empty({0}, torch::kByte);
  };
  std::vector<std::vector<torch::Tensor>> received(
      R, std::vector<torch::Tensor>(R));
  if (gather) {
    // Each member's replicas' parts one after another, padded to the
    // largest member's (c10d's all-gather moves one size).
    std::vector<int64_t> member_bytes(members.size(), 0);
    for (size_t m = 0; m < members.size(); ++m) {
      for (int k : of_member[m]) member_bytes[m] += elements(k, 0) * element_bytes;
    }
    const int64_t padded =
        *std::max_element(member_bytes.begin(), member_bytes.end());
    if (padded == 0) return absl::OkStatus();
    std::vector<torch::Tensor> parts;
    for (int k : of_member[mine]) parts.push_back(bytes_of(sent[k][0]));
    if (padded > member_bytes[mine]) {
      parts.push_back(
          torch::zeros({padded - member_bytes[mine]}, torch::kByte));
    }
    // One part as it is (a copy of it would be one more bucket held).
    torch::Tensor contribution =
        parts.size() == 1 ? parts[0] : torch::cat(parts);
    parts.clear();
    sent.clear();
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> by_member,
                     options_.ranks->AllGather(subgroup, contribution));
    contribution = torch::Tensor();
    for (size_t m = 0; m < members.size(); ++m) {
      if (m == mine) continue;
      int64_t at = 0;
      for (int k : of_member[m]) {
        const int64_t n = elements(k, 0) * element_bytes;
        const torch::Tensor part = by_member[m].narrow(0, at, n).view(dtype);
        at += n;
        for (int q : of_member[mine]) received[q][k] = part;
      }
    }
  } else {
    // To each member: for each replica here, its parts for that member's
    // replicas, in replica order.
    std::vector<torch::Tensor> to(members.size());
    std::vector<int64_t> from_bytes(members.size(), 0);
    for (size_t m = 0; m < members.size(); ++m) {
      if (m == mine) continue;
      std::vector<torch::Tensor> parts;
      for (int k : of_member[mine]) {
        for (int q : of_member[m]) parts.push_back(bytes_of(sent[k][q]));
      }
      to[m] = torch::cat(parts);
      for (int k : of_member[m]) {
        for (int q : of_member[mine]) {
          from_bytes[m] += elements(k, q) * element_bytes;
        }
      }
    }
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> by_member,
                     options_.ranks->AllToAll(subgroup, to, from_bytes));
    for (size_t m = 0; m < members.size(); ++m) {
      if (m == mine) continue;
      int64_t at = 0;
      for (int k : of_member[m]) {
        for (int q : of_member[mine]) {
          const int64_t n = elements(k, q) * element_bytes;
          received[q][k] = by_member[m].narrow(0, at, n).view(dtype);
          at += n;
        }
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  ReplicaExchange& exchange = replica_exchanges_[key];
  exchange.received = std::move(received);
  exchange.sent.clear();
  return absl::OkStatus();
}

}  // namespace placer
