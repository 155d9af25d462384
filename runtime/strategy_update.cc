// The end of a replica's step in the strategy executor
// (runtime/strategy_executor.h): the allreduce of its slot's gradients
// among the stage's replicas (through memory here, c10d's all-gather
// across ranks), its update, and ZeRO-1/2's all-gather of what the
// replicas updated.
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "runtime/strategy_executor_impl.h"
#include "runtime/torch_devices.h"

namespace placer {

void TorchStrategyExecutor::ReduceAndUpdate(int s, int d, double* busy) {
  // The devices of d's slot in every replica of the stage.
  const std::vector<int> replicas = ReplicaDevices(d);
  // The stage's replicas here done, the allreduce: in this process each
  // replica's accumulators read where they are; across ranks, all-gathered
  // (ReplicaAllGather) chunk by chunk (ExchangeChunks: a run of the slot's
  // parameters, flattened into one bucket as DDP's; a 2-replica zoo:chain
  // step as two processes: 9 ms with a message per parameter, 1.4-2.8 ms
  // with one), each chunk summed before the next is fetched so that the
  // exchange holds one chunk at a time. Every replica sums in replica order
  // on its own device: the same additions in the same order, the same bits
  // everywhere. (ZeRO-2/3: reduce-scattered after each round instead.)
  // The slot's parameters, in the order of their update nodes.
  const std::vector<int> slot_parameters = SlotParameters(s, slot_of_device_[d]);
  {
    absl::MutexLock lock(&mu_);
    tasks_done_[d] = 1;
    ++workers_finished_;
    cv_.SignalAll();
    for (size_t k = 0; failure_.ok() && k < replicas.size();) {
      if (!Local(replicas[k]) || tasks_done_[replicas[k]]) {
        ++k;
      } else {
        cv_.Wait(&mu_);
      }
    }
    if (!failure_.ok()) return;
  }
  // Per parameter this replica updates, its gradient summed over the
  // replicas.
  std::map<int, torch::Tensor> totals;
  // Parameter p's sum, from `remote` (by replica, what those on other
  // ranks sent) and this process's accumulators.
  auto sum = [&](int p, const std::vector<std::map<int, torch::Tensor>>& remote) {
    torch::NoGradGuard no_grad;
    if (updates_[d][p] == nullptr) return;  // ZeRO: an empty shard
    torch::Tensor& total = totals[p];
    if (ShardsGradientsOf(s)) {
      // Reduce-scattered already (this replica's shard): every delivery
      // is in.
      auto reporting = ReportAllocations(d);
      total = gradient_rounds_.Flush(
          p, replica_of_device_[d] * T_ + tensor_rank_of_device_[d],
          devices_[d], &accum_[d][p]);
      return;
    }
    for (size_t k = 0; k < replicas.size(); ++k) {
      const int r = replicas[k];
      const torch::Tensor g =
          Local(r) ? accum_[r][p]
                   : (k < remote.size() && remote[k].count(p)
                          ? remote[k].at(p)
                          : torch::Tensor());
      if (!g.defined()) continue;
      // ZeRO-1: this replica's shard of each (a reduce-scatter's part).
      torch::Tensor here =
          (ShardsStateOf(s) ? Shard(g, p, replica_of_device_[d]) : g)
              .to(devices_[d]);
      total = total.defined() ? total + here : here;
    }
  };
  absl::Status status;
  if (!ShardsGradientsOf(s) && HasRemoteReplicas(d)) {
    for (const std::vector<int>& chunk : ExchangeChunks(slot_parameters)) {
      torch::Tensor bucket;
      status = CatchExceptions("allreduce: ", [&] {
        std::vector<torch::Tensor> flat;
        for (int p : chunk) {
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
      bucket = torch::Tensor();
      std::vector<std::map<int, torch::Tensor>> remote;
      if (got.ok()) {
        status = UnpackRemote(
            *got, d, "gradient", [&](int) { return chunk; },
            [](int) { return -1; }, &remote);
      }
      if (got.ok() && status.ok()) {
        status = CatchExceptions("allreduce: ", [&] {
          for (int p : chunk) sum(p, remote);
          return absl::OkStatus();
        });
      }
      if (!got.ok() || !status.ok()) {
        Fail(got.ok() ? status : got.status());
        return;
      }
    }
  } else {
    // As soon as the stage's replicas are done (overlapping other stages'
    // tasks), the sums.
    status = CatchExceptions("allreduce: ", [&] {
      for (int p : slot_parameters) sum(p, {});
      return absl::OkStatus();
    });
  }
  if (!status.ok()) {
    Fail(status);
    return;
  }
  // Updates once every task of this process has succeeded (a failed step
  // updates nothing here), each device its own replica's parameters.
  {
    absl::MutexLock lock(&mu_);
    while (failure_.ok() && workers_finished_ != workers_) cv_.Wait(&mu_);
    if (!failure_.ok()) return;
  }
  const auto start = SteadyClock::now();
  // Each update node's run, where it updates its parameter whole.
  std::map<int, int> update_of;
  if (!ShardsStateOf(s)) {
    for (int u : update_[s]) update_of[view_.node(u).parameter] = u;
  }
  status = CatchExceptions("update: ", [&] {
    torch::NoGradGuard no_grad;
    for (const auto& [p, total] : totals) {
      auto u = update_of.find(p);
      // An op placement's memory: the update's run frees what it read (no
      // step fails over memory once its updates have begun).
      auto tell = [&] {
        if (memory_ == nullptr || u == update_of.end()) return;
        absl::MutexLock lock(&mu_);
        memory_->NodeRan(u->second, {}).IgnoreError();
      };
      if (!total.defined()) {
        tell();
        continue;
      }
      const SteadyClock::time_point started = SteadyClock::now();
      updates_[d][p]->Apply(total);
      if (u != update_of.end()) {
        RecordRun(u->second, d, started, copy_seconds_[d], waited_seconds_[d]);
      }
      tell();
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
  // ZeRO-1/2's all-gather: across ranks, each replica's updated shard of
  // every parameter, chunk by chunk (ExchangeChunks), one flat bucket each
  // (ReplicaAllGather), copied in as each chunk comes; once every replica
  // of the slot here has updated, their shards are copied.
  const int me = replica_of_device_[d];
  if (HasRemoteReplicas(d)) {
    for (const std::vector<int>& chunk : ExchangeChunks(slot_parameters)) {
      torch::Tensor bucket;
      status = CatchExceptions("all-gather: ", [&] {
        std::vector<torch::Tensor> flat;
        for (int p : chunk) flat.push_back(Shard(params_[d][p], p, me));
        bucket = flat.empty() ? torch::empty({0}, params_[d][chunk[0]]
                                                      .options()
                                                      .device(torch::kCPU))
                              : torch::cat(flat);
        return absl::OkStatus();
      });
      auto elements = [&](int q) {
        int64_t n = 0;
        for (int p : chunk) n += ShardRange(p, q).second;
        return n;
      };
      absl::StatusOr<std::vector<torch::Tensor>> got =
          status.ok() ? ReplicaAllGather(d, bucket, elements)
                      : absl::StatusOr<std::vector<torch::Tensor>>(status);
      bucket = torch::Tensor();
      std::vector<std::map<int, torch::Tensor>> gathered;
      if (got.ok()) {
        status = UnpackRemote(
            *got, d, "parameter", [&](int) { return chunk; },
            [](int q) { return q; }, &gathered);
      }
      // What replicas on other ranks updated, into d's copy now (no
      // replica here reads those parts of it).
      if (got.ok() && status.ok()) {
        status = CatchExceptions("all-gather: ", [&] {
          torch::NoGradGuard no_grad;
          for (int p : chunk) {
            for (size_t k = 0; k < replicas.size(); ++k) {
              const int q = static_cast<int>(k);
              if (q == me || Local(replicas[k])) continue;
              torch::Tensor part = Shard(params_[d][p], p, q);
              if (part.numel() > 0) part.copy_(gathered[k].at(p));
            }
          }
          Synchronize(devices_[d]);
          return absl::OkStatus();
        });
      }
      if (!got.ok() || !status.ok()) {
        Fail(got.ok() ? status : got.status());
        return;
      }
    }
  }
  {
    absl::MutexLock lock(&mu_);
    const size_t key =
        SlotKey(s, slot_of_device_[d], tensor_rank_of_device_[d]);
    ++updated_[key];
    cv_.SignalAll();
    const int local = LocalReplicas(d);
    while (failure_.ok() && updated_[key] != local) cv_.Wait(&mu_);
    if (!failure_.ok()) return;
  }
  // What this process's other replicas updated.
  const auto copied = SteadyClock::now();
  status = CatchExceptions("all-gather: ", [&] {
    torch::NoGradGuard no_grad;
    for (int p : slot_parameters) {
      for (size_t k = 0; k < replicas.size(); ++k) {
        const int q = static_cast<int>(k);
        const int r = replicas[k];
        if (q == me || !Local(r)) continue;
        torch::Tensor part = Shard(params_[d][p], p, q);
        if (part.numel() > 0) part.copy_(Shard(params_[r][p], p, q));
      }
    }
    Synchronize(devices_[d]);
    return absl::OkStatus();
  });
  *busy += SecondsSince(copied);
  if (!status.ok()) Fail(status);
}

}  // namespace placer
