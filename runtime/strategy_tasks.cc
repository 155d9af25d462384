// The strategy executor's device workers (runtime/strategy_executor.h):
// a device's tasks in its replica's order — forward, backward and the
// recomputation before it — the accumulation after each backward, then
// the stage's allreduce and update.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/host_setup.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "profiles/signature.h"
#include "runtime/cpu_cores.h"
#include "runtime/initial_values.h"
#include "runtime/op_autograd.h"
#include "runtime/rank_group.h"
#include "runtime/step_exchange.h"
#include "runtime/strategy_executor_impl.h"
#include "runtime/torch_devices.h"

namespace placer {

absl::StatusOr<std::vector<torch::Tensor>> TorchStrategyExecutor::ForwardNode(
    int n, int j, int d, bool autograd, bool rerun,
    std::map<int, torch::Tensor>* copied,
    const std::function<torch::Tensor(int value)>& activation) {
  const TrainingNode& node = view_.node(n);
  const Op& op = graph_.op(node.forward_op);
  const int lane = Lane(j, d);
  std::vector<torch::Tensor> inputs;
  if (!AllOutputsFolded(graph_, op)) {
    for (int t : op.inputs) {
      if (t < 0) {
        inputs.emplace_back();
        continue;
      }
      const int v = value_of_tensor_[t];
      const TrainingValue& value = view_.value(v);
      torch::Tensor in;
      if (value.kind == ValueKind::kParameter) {
        const int holder = ParameterDevice(v, replica_of_device_[d],
                                           tensor_rank_of_device_[d]);
        if (ShardsParametersOf(StageOfNode(n))) {
          // Gathered before the node (GatherBefore).
          auto at = copied->find(v);
          if (at == copied->end()) {
            return absl::InternalError(absl::StrCat(
                "ZeRO-3: '", value.name, "' was not gathered for ", node.key));
          }
          in = at->second;
        } else if (holder == d) {
          in = params_[d][v];
        } else {
          auto [at, fresh] = copied->emplace(v, torch::Tensor());
          if (fresh) at->second = On(params_[holder][v], holder, d);
          in = at->second;
        }
      } else if (value.kind == ValueKind::kGraphInput) {
        in = batches_[j].value[v].to(devices_[d]);
      } else if (value.producer < 0) {
        in = rerun ? host_[v].to(devices_[d], /*non_blocking=*/false,
                                          /*copy=*/true)
                            : host_[v].to(devices_[d]);
      } else {
        in = activation(v);
      }
      if (!in.defined()) {
        return absl::InternalError(absl::StrCat(
            "'", graph_.tensor(t).name, "' is not there for ", node.key));
      }
      inputs.push_back(in);
    }
  }
  if (T_ > 1) {
    return TensorParallelForward(n, j, d, std::move(inputs), autograd, rerun);
  }
  return ForwardOp(graph_, op, std::move(inputs), devices_[d], precision_,
                   autograd ? &needs_gradient_[node.forward_op] : nullptr,
                   &saved_[lane][node.forward_op]);
}

absl::Status TorchStrategyExecutor::RunForward(int s, int j, int d) {
  // Values and weights made on other devices, copied here once per task
  // (ZeRO-3: every weight, gathered, until its last reader of the task).
  std::map<int, torch::Tensor> copied;
  std::set<int> pinned;
  int current = -1;  // the node reading
  const int lane = Lane(j, d);
  // What other stages made, as this task reads it.
  auto activation = [&](int v) {
    std::lock_guard<std::mutex> lock(mu_);
    torch::Tensor& held = values_[lane][v];
    const int from = value_device_[lane * V_ + v];
    torch::Tensor in;
    if (from == d || copied.count(v) == 0) {
      in = On(held, from, d);
      if (from != d) copied[v] = in;
    } else {
      in = copied[v];
    }
    // Freed after its last read, as a framework frees it (what is not
    // freed early page-faults in fresh memory every step).
    if (--reads_left_[lane * V_ + v] == 0) held = torch::Tensor();
    // Kept for the rerun: what a rerun node reads that no rerun node of
    // this stage makes.
    const int producer = view_.value(v).producer;
    if (current >= 0 && Reruns(current) &&
        !(StageOfNode(producer) == s && Reruns(producer)) &&
        kept_[KeptIndex(s, j, d)].emplace(v, in).second &&
        RecomputesByLayer(strategy_.stages[s].recompute)) {
      kept_reads_[KeptIndex(s, j, d)][v] = rerun_reads_[s][v];
    }
    return in;
  };
  for (int n : forward_[s]) {
    if (SlotOfNode(n) != slot_of_device_[d]) continue;
    if (!WaitForOtherSlots(n, j, d)) {
      return absl::OkStatus();  // failed elsewhere
    }
    const TrainingNode& node = view_.node(n);
    RETURN_IF_ERROR(BeforeNode(node));
    const Op& op = graph_.op(node.forward_op);
    // Rerun at the backward, the rerun keeps what the op saves instead.
    const bool autograd =
        view_.backward_node(node.forward_op) >= 0 && !Reruns(n);
    current = n;
    RETURN_IF_ERROR(GatherBefore(n, d, &copied));
    absl::StatusOr<std::vector<torch::Tensor>> results = ForwardNode(
        n, j, d, autograd, /*rerun=*/false, &copied, activation);
    if (!results.ok()) {
      return WithContext(results.status(),
                         absl::StrCat(node.key, " (micro-batch ", j, "): "));
    }
    ReleaseAfterForward(n, j, d, autograd, *results, &copied, &pinned);
    const double loss = OutputLosses(graph_, op, *results, targets_[d][j],
                                     1.0 / M_, &seeds_[lane]);
    {
      std::lock_guard<std::mutex> lock(mu_);
      // A tensor-parallel group's devices each have the whole loss.
      if (tensor_rank_of_device_[d] == 0) loss_[j] += loss;
      for (int v : node.outputs) {
        const int t = view_.value(v).tensor;
        for (size_t k = 0; k < op.outputs.size() && k < results->size(); ++k) {
          // Kept while a reader of this process, or a send, needs it.
          if (op.outputs[k] == t && reads_left_[lane * V_ + v] > 0) {
            values_[lane][v] = (*results)[k];
            value_device_[lane * V_ + v] = d;
          }
        }
      }
    }
    MarkNodeDone(n, j);
  }
  return absl::OkStatus();
}

absl::Status TorchStrategyExecutor::RunBackward(int s, int j, int d) {
  if (strategy_.stages[s].recompute == Recompute::kFull) {
    RETURN_IF_ERROR(Rerun(s, j, d));
  }
  // Tensors are only moved in and out of the shared slots under the lock;
  // the additions run outside it, so that workers do not wait for each
  // other's arithmetic. A slot PartialIndex(sum, s, slot) has one writer:
  // the device running that slot of stage s's micro-batch j.
  const int my_slot = slot_of_device_[d];
  const int lane = Lane(j, d);
  for (int n : backward_[s]) {
    if (SlotOfNode(n) != my_slot) continue;
    if (!WaitForOtherSlots(n, j, d)) {
      return absl::OkStatus();  // failed elsewhere
    }
    const TrainingNode& node = view_.node(n);
    RETURN_IF_ERROR(BeforeNode(node));
    const Op& op = graph_.op(node.forward_op);
    std::vector<std::vector<torch::Tensor>> parts(op.outputs.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        const int t = op.outputs[k];
        if (t < 0) continue;
        parts[k].push_back(std::move(seeds_[lane][t]));
        seeds_[lane][t] = torch::Tensor();
        for (int sm : view_.sums_read_by(n)) {
          if (view_.gradient_sums()[sm].tensor != t) continue;
          // This node is the sum's only reader (its sink).
          for (int x = 0; x < S_; ++x) {
            for (int slot = 0; slot < W_; ++slot) {
              torch::Tensor& part =
                  partials_[lane][PartialIndex(sm, x, slot)];
              parts[k].push_back(std::move(part));
              part = torch::Tensor();
            }
          }
        }
      }
    }
    std::vector<torch::Tensor> output_gradients(op.outputs.size());
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      torch::Tensor& sum = output_gradients[k];
      for (const torch::Tensor& g : parts[k]) {
        if (!g.defined()) continue;
        torch::Tensor here = g.to(devices_[d]);
        sum = sum.defined() ? sum + here : here;
      }
    }
    parts.clear();
    std::vector<int> tensors;
    for (int v : node.outputs) tensors.push_back(view_.value(v).tensor);
    // Recomputing by layer: the layers whose first backward node this is.
    for (int layer : reruns_before_[n]) {
      RETURN_IF_ERROR(RerunLayer(s, layer, j, d));
    }
    RETURN_IF_ERROR(RestoreBefore(n, j, d));
    absl::StatusOr<std::vector<torch::Tensor>> grads =
        T_ > 1 ? TensorParallelBackward(n, j, d, std::move(output_gradients),
                                        tensors)
               : BackwardOp(graph_, op, std::move(saved_[lane][node.forward_op]),
                            output_gradients, tensors);
    saved_[lane][node.forward_op] = SavedOp();
    ReleaseAfterBackward(n, j, d);
    if (!grads.ok()) {
      return WithContext(grads.status(),
                         absl::StrCat(node.key, " (micro-batch ", j, "): "));
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int sm = view_.sum_of(node.outputs[k]);
      if (sm < 0) continue;
      torch::Tensor buffer;
      {
        std::lock_guard<std::mutex> lock(mu_);
        buffer = std::move(partials_[lane][PartialIndex(sm, s, my_slot)]);
        partials_[lane][PartialIndex(sm, s, my_slot)] = torch::Tensor();
      }
      buffer = buffer.defined() ? buffer + (*grads)[k] : (*grads)[k];
      std::lock_guard<std::mutex> lock(mu_);
      partials_[lane][PartialIndex(sm, s, my_slot)] = std::move(buffer);
    }
    MarkNodeDone(n, j);
  }
  return absl::OkStatus();
}

absl::Status TorchStrategyExecutor::Accumulate(int s, int j, int d) {
  // Parameters whose sums this backward completed (a weight's readers are
  // all in its stage, on any of its slots).
  std::vector<std::pair<int, torch::Tensor>> completed;
  const int lane = Lane(j, d);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int u : update_[s]) {
      if (SlotOfNode(u) != slot_of_device_[d]) continue;
      const int p = view_.node(u).parameter;
      for (int sm : view_.sums_read_by(u)) {
        for (int slot = 0; slot < W_; ++slot) {
          torch::Tensor& part = partials_[lane][PartialIndex(sm, s, slot)];
          if (!part.defined()) continue;
          completed.emplace_back(p, std::move(part));
          part = torch::Tensor();
        }
      }
    }
  }
  if (ShardsGradientsOf(s)) return ReduceScatter(s, j, d, &completed);
  std::set<int> made_here;  // buffers that are this call's first part
  for (auto& [p, g] : completed) {
    if (g.device() != devices_[d]) g = g.to(devices_[d]);
    // The first micro-batch's gradient becomes the buffer; later ones are
    // added in place (PyTorch's AccumulateGrad; the strategy simulator
    // charges the cost model's AccumulateSeconds for each). A wide stage's
    // second slot part of the same micro-batch is added out of place: the
    // first part may be a tensor its backward op also handed elsewhere.
    torch::Tensor& acc = accum_[d][p];
    if (!acc.defined()) {
      acc = g;
      made_here.insert(p);
    } else if (made_here.count(p) > 0) {
      acc = acc + g;
      made_here.erase(p);
    } else {
      acc.add_(g);
    }
  }
  return absl::OkStatus();
}

void TorchStrategyExecutor::Worker(int d, double* busy) {
  auto reporting = ReportAllocations(d);
  if (!cores_.empty()) (void)PinThisThread(cores_[d]);  // else as before
  if (devices_[d].is_cpu())
    at::set_num_threads(options_.threads_per_cpu_device);
  // A GPU's worker makes its device current and queues on its default
  // stream, which orders its tasks with the copies other workers make to
  // and from it; it waits for each task, so that busy times are real.
  std::optional<c10::DeviceGuard> current;
  if (!devices_[d].is_cpu()) current.emplace(devices_[d]);
  const int s = stage_of_device_[d];
  // The replica's devices: its slots, or its tensor-parallel group (those
  // of this process: a group over ranks has one device on each).
  int width = 0;
  for (int member : ReplicaMembers(d)) width += Local(member) ? 1 : 0;
  for (const ReplicaTask& task :
       ReplicaTaskOrder(strategy_, s, replica_of_device_[d])) {
    const int j = task.micro_batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return !failure_.ok() || ReadyLocked(s, j, task.backward);
      });
      if (!failure_.ok()) return;
    }
    const auto start = SteadyClock::now();
    waited_seconds_[d] = 0;
    absl::Status status = CatchExceptions("", [&] {
      absl::Status ran =
          task.backward ? RunBackward(s, j, d) : RunForward(s, j, d);
      Synchronize(devices_[d]);
      return ran;
    });
    // Not busy while it waited for another slot of its replica.
    *busy += SecondsSince(start) - waited_seconds_[d];
    // A wide replica's task is sent on by its first device once every
    // slot is done (below); others' as soon as it ends.
    if (status.ok() && width == 1) status = SendAfter(s, j, d, task.backward);
    if (!status.ok()) {
      Fail(status);
      return;
    }
    {
      // The task ends when every slot of the replica has run its part.
      std::unique_lock<std::mutex> lock(mu_);
      const size_t key =
          (static_cast<size_t>(s) * M_ + j) * 2 + (task.backward ? 1 : 0);
      if (++slots_done_[key] == width) {
        (task.backward ? backward_done_ : forward_done_)[s * M_ + j] = 1;
        cv_.notify_all();
      }
      cv_.wait(lock,
               [&] { return !failure_.ok() || slots_done_[key] == width; });
      if (!failure_.ok()) return;
    }
    if (width > 1 && slot_of_device_[d] == 0 &&
        tensor_rank_of_device_[d] == 0) {
      status = SendAfter(s, j, d, task.backward);
      if (!status.ok()) {
        Fail(status);
        return;
      }
    }
    if (task.backward) {
      const auto added = SteadyClock::now();
      waited_seconds_[d] = 0;
      status = CatchExceptions("", [&] {
        absl::Status result = Accumulate(s, j, d);
        Synchronize(devices_[d]);
        return result;
      });
      // Not busy while the reduce-scatter waited for the other replicas.
      *busy += SecondsSince(added) - waited_seconds_[d];
      if (!status.ok()) {
        Fail(status);
        return;
      }
    }
  }
  ReduceAndUpdate(s, d, busy);
}

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
