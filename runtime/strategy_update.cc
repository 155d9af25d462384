// The end of a replica's step in the strategy executor
// (runtime/strategy_executor.h): the allreduce of its slot's gradients
// among the stage's replicas (through memory here, c10d's all-gather
// across ranks), its update, and ZeRO-1/2's all-gather of what the
// replicas updated.
#include <map>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "runtime/strategy_executor_impl.h"
#include "runtime/torch_devices.h"

namespace placer {

void TorchStrategyExecutor::ReduceAndUpdate(int s, int d, double* busy) {
  // The devices of d's slot in every replica of the stage, and the
  // updates of that slot's parameters.
  const std::vector<int> replicas = ReplicaDevices(d);
  std::vector<int> updates;
  for (int u : update_[s]) {
    if (SlotOfNode(u) == slot_of_device_[d]) updates.push_back(u);
  }
  // The allreduce: across ranks, every replica's accumulators, flattened
  // into one bucket as DDP's (a 2-replica zoo:chain step as two processes:
  // 9 ms with a message per parameter, 1.4-2.8 ms with one), all-gathered
  // (ReplicaAllGather); in this process, read where they are. Every
  // replica then sums them in replica order on its own device: the same
  // additions in the same order, the same bits everywhere.
  // (ZeRO-2/3: reduce-scattered after each round instead.)
  const std::vector<int> slot_parameters = SlotParameters(s, slot_of_device_[d]);
  std::vector<std::map<int, torch::Tensor>> remote(replicas.size());
  if (!updates.empty() && !ShardsGradientsOf(s) && HasRemoteReplicas(d)) {
    torch::Tensor bucket;
    absl::Status status = CatchExceptions("allreduce: ", [&] {
      std::vector<torch::Tensor> flat;
      for (int p : slot_parameters) {
        const torch::Tensor& g = accum_[d][p];
        flat.push_back(g.defined() ? g.reshape({-1})
                                   : torch::zeros({params_[d][p].numel()},
                                                  params_[d][p].options()));
      }
      bucket = torch::cat(flat);
      return absl::OkStatus();
    });
    absl::StatusOr<std::vector<torch::Tensor>> got =
        status.ok() ? ReplicaAllGather(d, bucket,
                                       [&](int) { return bucket.numel(); })
                    : absl::StatusOr<std::vector<torch::Tensor>>(status);
    if (got.ok()) {
      status = UnpackRemote(
          *got, d, "gradient", [&](int) { return slot_parameters; },
          [](int) { return -1; }, &remote);
    }
    if (!got.ok() || !status.ok()) {
      Fail(got.ok() ? status : got.status());
      return;
    }
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    tasks_done_[d] = 1;
    ++workers_finished_;
    cv_.notify_all();
    cv_.wait(lock, [&] {
      if (!failure_.ok()) return true;
      for (int r : replicas) {
        if (Local(r) && !tasks_done_[r]) return false;
      }
      return true;
    });
    if (!failure_.ok()) return;
  }
  // As soon as the stage's replicas are done (overlapping other stages'
  // tasks), the sums.
  std::vector<torch::Tensor> totals(updates.size());
  absl::Status status = CatchExceptions("allreduce: ", [&] {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < updates.size(); ++i) {
      const int p = view_.node(updates[i]).parameter;
      if (updates_[d][p] == nullptr) continue;  // ZeRO: another's shard
      if (ShardsGradientsOf(s)) {
        // Reduce-scattered already (this replica's shard): every delivery
        // is in.
        std::lock_guard<std::mutex> lock(fold_mu_);
        FoldRounds(p, replica_of_device_[d], tensor_rank_of_device_[d],
                   /*flush=*/true);
        totals[i] = accum_[d][p];
        continue;
      }
      for (size_t k = 0; k < replicas.size(); ++k) {
        const int r = replicas[k];
        const torch::Tensor g =
            Local(r) ? accum_[r][p]
                     : (remote[k].count(p) ? remote[k].at(p) : torch::Tensor());
        if (!g.defined()) continue;
        torch::Tensor here = g.to(devices_[d]);
        totals[i] = totals[i].defined() ? totals[i] + here : here;
      }
    }
    return absl::OkStatus();
  });
  if (!status.ok()) {
    Fail(status);
    return;
  }
  // Updates once every task of this process has succeeded (a failed step
  // updates nothing here), each device its own replica's parameters.
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock,
             [&] { return !failure_.ok() || workers_finished_ == workers_; });
    if (!failure_.ok()) return;
  }
  const auto start = SteadyClock::now();
  status = CatchExceptions("update: ", [&] {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < updates.size(); ++i) {
      if (!totals[i].defined()) continue;
      const int p = view_.node(updates[i]).parameter;
      updates_[d][p]->Apply(totals[i]);
    }
    Synchronize(devices_[d]);
    return absl::OkStatus();
  });
  *busy += SecondsSince(start);
  if (!status.ok()) {
    Fail(status);
    return;
  }
  // ZeRO-3: each replica holds its shards only.
  if (strategy_.zero == ZeroStage::kNone || replicas.size() < 2 ||
      ShardsParametersOf(s)) {
    return;
  }
  // ZeRO-1's all-gather: across ranks, what each replica updated (ZeRO-1:
  // the parameters dealt to it; ZeRO-2: its shard of each), one flat
  // bucket each (ReplicaAllGather); once every replica of the slot here
  // has updated, the parameters others updated are copied.
  const int slot = slot_of_device_[d];
  const bool shards = ShardsGradientsOf(s);
  std::vector<std::map<int, torch::Tensor>> gathered(replicas.size());
  if (HasRemoteReplicas(d) && !slot_parameters.empty()) {
    const int k = replica_of_device_[d];
    torch::Tensor bucket;
    status = CatchExceptions("all-gather: ", [&] {
      std::vector<torch::Tensor> flat;
      for (int p : SlotParameters(s, slot, shards ? -1 : k)) {
        flat.push_back(shards ? Shard(params_[d][p], p, k)
                              : params_[d][p].reshape({-1}));
      }
      bucket = flat.empty() ? torch::empty({0}, params_[d][slot_parameters[0]]
                                                       .options()
                                                       .device(torch::kCPU))
                            : torch::cat(flat);
      return absl::OkStatus();
    });
    auto elements = [&](int q) {
      int64_t n = 0;
      for (int p : SlotParameters(s, slot, shards ? -1 : q)) {
        n += shards ? ShardRange(p, q).second : params_[d][p].numel();
      }
      return n;
    };
    absl::StatusOr<std::vector<torch::Tensor>> got =
        status.ok() ? ReplicaAllGather(d, bucket, elements)
                    : absl::StatusOr<std::vector<torch::Tensor>>(status);
    if (got.ok()) {
      status = UnpackRemote(
          *got, d, "parameter",
          [&](int q) { return SlotParameters(s, slot, shards ? -1 : q); },
          [&](int q) { return shards ? q : -1; }, &gathered);
    }
    if (!got.ok() || !status.ok()) {
      Fail(got.ok() ? status : got.status());
      return;
    }
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    const size_t key = SlotKey(s, slot, tensor_rank_of_device_[d]);
    ++updated_[key];
    cv_.notify_all();
    const int local = LocalReplicas(d);
    cv_.wait(lock,
             [&] { return !failure_.ok() || updated_[key] == local; });
    if (!failure_.ok()) return;
  }
  const auto copied = SteadyClock::now();
  status = CatchExceptions("all-gather: ", [&] {
    torch::NoGradGuard no_grad;
    for (int u : updates) {
      const int p = view_.node(u).parameter;
      if (shards) {
        // ZeRO-2: the other replicas' shards, as they updated them.
        for (size_t k = 0; k < replicas.size(); ++k) {
          if (static_cast<int>(k) == replica_of_device_[d]) continue;
          torch::Tensor part = Shard(params_[d][p], p, static_cast<int>(k));
          if (part.numel() == 0) continue;
          const int r = replicas[k];
          part.copy_(Local(r) ? Shard(params_[r][p], p, static_cast<int>(k))
                              : gathered[k].at(p));
        }
        continue;
      }
      if (updates_[d][p] != nullptr) continue;
      const int owner = owner_[p];
      params_[d][p].copy_(Local(replicas[owner])
                              ? params_[replicas[owner]][p]
                              : gathered[owner].at(p));
    }
    Synchronize(devices_[d]);
    return absl::OkStatus();
  });
  *busy += SecondsSince(copied);
  if (!status.ok()) Fail(status);
}

}  // namespace placer
