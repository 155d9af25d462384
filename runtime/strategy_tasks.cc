// The strategy executor's device workers (runtime/strategy_executor.h):
// a device's tasks in its replica's order — forward, backward and the
// recomputation before it — the accumulation after each backward, then
// the stage's allreduce and update.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
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
#include "runtime/storage_parking.h"
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
  for (int t : op.inputs) {
    if (t < 0) {
      inputs.emplace_back();
      continue;
    }
    const int v = value_of_tensor_[t];
    const TrainingValue& value = view_.value(v);
    torch::Tensor in;
    if (value.kind == ValueKind::kParameter) {
      const int holder =
          ParameterDevice(v, replica_of_device_[d], tensor_rank_of_device_[d]);
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
        if (fresh) {
          // A wide replica's other slot sent it (strategy_links.cc).
          {
            absl::MutexLock lock(&mu_);
            at->second = TakeArrivedLocked(lane, v, d);
          }
          if (!at->second.defined()) {
            at->second = CopyIn(params_[holder][v], v, holder, d);
          }
        }
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
      return absl::InternalError(absl::StrCat("'", graph_.tensor(t).name,
                                              "' is not there for ", node.key));
    }
    inputs.push_back(in);
  }
  if (T_ > 1) {
    return TensorParallelForward(n, j, d, std::move(inputs), autograd, rerun);
  }
  return ForwardOp(graph_, op, std::move(inputs), devices_[d], precision_,
                   autograd ? &needs_gradient_[node.forward_op] : nullptr,
                   &saved_[lane][node.forward_op]);
}

torch::Tensor TorchStrategyExecutor::CopyIn(const torch::Tensor& tensor, int v,
                                            int from, int d) {
  if (from == d) return tensor;
  if (!devices_[d].is_cpu() && !options_.time_gpu_nodes) {
    return On(tensor, from, d);  // untimed: no wait for the device
  }
  const SteadyClock::time_point start = SteadyClock::now();
  torch::Tensor copy = On(tensor, from, d);
  Synchronize(devices_[d]);
  const double seconds = SecondsSince(start);
  copy_seconds_[d] += seconds;
  transfers_[d].push_back({v, from, d, TensorBytes(copy), seconds});
  return copy;
}

void TorchStrategyExecutor::RecordRun(int n, int d,
                                      SteadyClock::time_point start,
                                      double copies, double waited) {
  // A tensor-parallel device runs its part of the op: not the node's time.
  // A GPU is timed only when asked (each wait stalls its queue).
  if (T_ > 1 || (!devices_[d].is_cpu() && !options_.time_gpu_nodes)) return;
  Synchronize(devices_[d]);
  const double seconds = SecondsSince(start) - (copy_seconds_[d] - copies) -
                         (waited_seconds_[d] - waited);
  node_runs_[d].push_back({n, d, std::max(seconds, 0.0)});
}

absl::Status TorchStrategyExecutor::RunForward(int s, int j, int d) {
  // Values and weights made on other devices, copied here once per task
  // (ZeRO-3: every weight, gathered, until its last reader of the task).
  std::map<int, torch::Tensor> copied;
  std::set<int> pinned;
  int current = -1;  // the node reading
  const int lane = Lane(j, d);
  // Recomputing in part: what rerun nodes of this stage made, as read
  // (ParkSaved frees what kept ops saved of it once its reads are done),
  // but what a node's output shares storage with (a view, the tensor
  // itself), which lives on as another value. Tensor-parallel groups save
  // converted parts: nothing is parked.
  const bool in_part = RecomputesInPart(strategy_.stages[s].recompute);
  const bool parks = in_part && T_ == 1;
  std::map<int, torch::Tensor> rerun_made;
  // Values a rerun node made in storage of their own (no input's, no
  // other holder's), and those a reader's output shares storage with.
  std::set<int> fresh, aliased;
  // Of each value another slot of this wide stage made (its link's copy),
  // and of each another stage made on another device (copied in), the
  // reads here still to come.
  std::map<int, int> linked_reads, copied_reads;
  const bool wide = strategy_.stages[s].width() > 1;
  // What other stages made, as this task reads it.
  auto activation = [&](int v) {
    absl::MutexLock lock(&mu_);
    const int producer = view_.value(v).producer;
    if (W_ > 1 && producer >= 0 && StageOfNode(producer) == s &&
        SlotOfNode(producer) != slot_of_device_[d]) {
      auto [left, first] = linked_reads.try_emplace(v, 0);
      if (first) {
        left->second = slot_reads_[s][slot_of_device_[d]][v];
        copied[v] = TakeArrivedLocked(lane, v, d);
      }
      torch::Tensor in = copied[v];
      // Let go after its last read here (as the timeline frees it).
      if (--left->second == 0) copied.erase(v);
      return in;
    }
    torch::Tensor& held = values_[lane][v];
    const int from = value_device_[lane * V_ + v];
    torch::Tensor in;
    if (from == d || copied.count(v) == 0) {
      in = CopyIn(held, v, from, d);
      if (from != d) {
        copied[v] = in;
        copied_reads[v] =
            wide ? slot_reads_[s][slot_of_device_[d]][v] : forward_reads_[s][v];
      }
    } else {
      in = copied[v];
    }
    // The copy let go after its last read here (as the timeline frees it).
    if (from != d && --copied_reads[v] <= 0) {
      copied.erase(v);
      copied_reads.erase(v);
    }
    // Freed after its last read, as a framework frees it (what is not
    // freed early page-faults in fresh memory every step).
    if (--reads_left_[lane * V_ + v] == 0) held = torch::Tensor();
    // Kept for the rerun: what a rerun node reads that no rerun node of
    // this stage makes.
    const bool rerun_value = StageOfNode(producer) == s && Reruns(producer);
    if (current >= 0 && Reruns(current) && !rerun_value &&
        kept_[KeptIndex(s, j, d)].emplace(v, in).second && in_part) {
      kept_reads_[KeptIndex(s, j, d)][v] = reruns_.reads[s][v];
    }
    if (parks && rerun_value && from == d && fresh.count(v) > 0 &&
        aliased.count(v) == 0) {
      rerun_made[v] = in;
    }
    return in;
  };
  std::vector<std::pair<int, StrategySlotCopy>> outgoing;  // SendToSlots'
  // The weights other slots of a wide replica read, to their links.
  if (auto at = link_tables_.weights.find({s, slot_of_device_[d]});
      at != link_tables_.weights.end()) {
    for (auto [v, slot] : at->second) {
      const int to = strategy_.stages[s].device(replica_of_device_[d], slot);
      outgoing.push_back({to, {LinkKey(lane, v, to), v, params_[d][v]}});
    }
    SendToSlots(d, &outgoing);
  }
  // -1: every node has run, or the step failed elsewhere.
  std::vector<int> pending = SlotNodes(forward_[s], d);
  for (int n = NextNode(&pending, j, d); n >= 0;
       n = NextNode(&pending, j, d)) {
    const TrainingNode& node = view_.node(n);
    RETURN_IF_ERROR(BeforeNode(node));
    const Op& op = graph_.op(node.forward_op);
    // Rerun at the backward, the rerun keeps what the op saves instead.
    const bool autograd =
        view_.backward_node(node.forward_op) >= 0 && !Reruns(n);
    current = n;
    RETURN_IF_ERROR(GatherBefore(n, d, &copied));
    const SteadyClock::time_point started = SteadyClock::now();
    const double copies = copy_seconds_[d], waited = waited_seconds_[d];
    absl::StatusOr<std::vector<torch::Tensor>> results = ForwardNode(
        n, j, d, autograd, /*rerun=*/false, &copied, activation);
    if (!results.ok()) {
      return WithContext(results.status(),
                         absl::StrCat(node.key, " (micro-batch ", j, "): "));
    }
    RecordRun(n, d, started, copies, waited);
    if (parks && Reruns(n)) {
      // Held by the results alone, in storage no other tensor holds: not
      // an input (or a view of one), a weight or a constant.
      for (size_t k = 0; k < op.outputs.size() && k < results->size(); ++k) {
        const torch::Tensor& out = (*results)[k];
        const int t = op.outputs[k];
        if (t >= 0 && value_of_tensor_[t] >= 0 && out.defined() &&
            out.use_count() == 1 && out.has_storage() &&
            out.storage().use_count() == 1) {
          fresh.insert(value_of_tensor_[t]);
        }
      }
    }
    ReleaseAfterForward(n, j, d, autograd, *results, &copied, &pinned);
    for (const torch::Tensor& out : *results) {
      for (auto at = rerun_made.begin(); at != rerun_made.end();) {
        if (!SharesStorage(out, at->second)) {
          ++at;
          continue;
        }
        aliased.insert(at->first);
        at = rerun_made.erase(at);
      }
    }
    const double loss = OutputLosses(graph_, op, *results, targets_[d][j],
                                     1.0 / M_, &seeds_[lane]);
    absl::Status tracked;  // an op placement's memory (memory_)
    {
      absl::MutexLock lock(&mu_);
      // A tensor-parallel group's devices each have the whole loss.
      if (tensor_rank_of_device_[d] == 0) loss_[j] += loss;
      std::vector<int64_t> bytes(node.outputs.size(), 0);  // as made
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        const int v = node.outputs[i];
        const int t = view_.value(v).tensor;
        for (size_t k = 0; k < op.outputs.size() && k < results->size(); ++k) {
          if (op.outputs[k] != t) continue;
          bytes[i] = TensorBytes((*results)[k]);
          // Kept while a reader of this process, or a send, needs it.
          if (reads_left_[lane * V_ + v] > 0) {
            values_[lane][v] = (*results)[k];
            value_device_[lane * V_ + v] = d;
          }
        }
      }
      if (memory_ != nullptr) tracked = memory_->NodeRan(n, bytes);
      // What other slots read of it, to their links (as made: on a replica
      // split over ranks, no reader of this process may keep it).
      for (auto [v, slot] : link_tables_.sends[n]) {
        const int to = strategy_.stages[s].device(replica_of_device_[d], slot);
        torch::Tensor made;
        for (size_t k = 0; k < op.outputs.size() && k < results->size(); ++k) {
          if (op.outputs[k] == view_.value(v).tensor) made = (*results)[k];
        }
        outgoing.push_back({to, {LinkKey(lane, v, to), v, std::move(made)}});
      }
    }
    SendToSlots(d, &outgoing);
    results->clear();  // what this node made is held where it is needed
    if (!rerun_made.empty()) ParkSaved(s, j, d, &rerun_made);
    RETURN_IF_ERROR(tracked);
    RETURN_IF_ERROR(CheckMemory(n, j, d));
    MarkNodeDone(n, j);
  }
  return absl::OkStatus();
}

absl::Status TorchStrategyExecutor::RunBackward(int s, int j, int d) {
  ReceiveLocalSums(s, j, d);
  if (strategy_.stages[s].recompute == Recompute::kFull) {
    RETURN_IF_ERROR(Rerun(s, j, d));
  }
  // Tensors are only moved in and out of the shared slots under the lock;
  // the additions run outside it, so that workers do not wait for each
  // other's arithmetic. An entry partials_[lane].at(sum, s, slot) has one
  // writer: the device running that slot of stage s's micro-batch j.
  const int my_slot = slot_of_device_[d];
  const int lane = Lane(j, d);
  const bool selective = strategy_.stages[s].recompute == Recompute::kSelective;
  SelectiveRerun rerun;
  if (selective) rerun.done.assign(view_.nodes().size(), 0);
  // PyTorch's AccumulateGrad: a parameter's gradient of this micro-batch
  // goes into its accumulator as soon as its last partial is made, not at
  // the task's end (the simulator's memory: a later micro-batch holds the
  // buffers and one parameter's gradient at a time beside them).
  // ZeRO-2/3 with every replica in this process: cut into the shards'
  // parts and delivered then (DeliverShards), as the simulator frees it
  // and a framework's bucketed reduce-scatter runs during the backward.
  // Where the sum needs more than this device's partials (a wide stage's
  // other slots, a tensor-parallel group's, replicas on other ranks) at
  // the task's end (Accumulate). Per such sum: the partials still to
  // come, and the parameter.
  std::map<int, std::pair<int, int>> completing;
  const bool sharded = ShardsGradientsOf(s);
  if (W_ == 1 && T_ == 1 && !(sharded && HasRemoteReplicas(d))) {
    for (int u : update_[s]) {
      if (sharded && view_.sums_read_by(u).size() != 1) continue;
      for (int sm : view_.sums_read_by(u)) {
        completing[sm] = {
            static_cast<int>(view_.gradient_sums()[sm].partials.size()),
            view_.node(u).parameter};
      }
    }
  }
  // Per sum sent by link from this slot: its partials still to make.
  std::map<int, int> linked_left;
  std::vector<std::pair<int, StrategySlotCopy>> outgoing;  // SendToSlots'
  std::vector<int> pending = SlotNodes(backward_[s], d);
  for (int n = NextNode(&pending, j, d); n >= 0;
       n = NextNode(&pending, j, d)) {
    const TrainingNode& node = view_.node(n);
    RETURN_IF_ERROR(BeforeNode(node));
    const Op& op = graph_.op(node.forward_op);
    std::vector<std::vector<torch::Tensor>> parts(op.outputs.size());
    {
      absl::MutexLock lock(&mu_);
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        const int t = op.outputs[k];
        if (t < 0) continue;
        parts[k].push_back(std::move(seeds_[lane][t]));
        seeds_[lane][t] = torch::Tensor();
        for (int sm : view_.sums_read_by(n)) {
          if (view_.gradient_sums()[sm].tensor != t) continue;
          // This node is the sum's only reader (its sink). Other slots'
          // buffers of this stage came by their links.
          for (int x = 0; x < S_; ++x) {
            for (int slot = 0; slot < W_; ++slot) {
              if (x == s && slot != my_slot) {
                parts[k].push_back(
                    TakeArrivedLocked(lane, SumItem(sm, slot), d));
              }
              torch::Tensor& part = partials_[lane].at(sm, x, slot);
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
    for (int layer : reruns_.before[n]) {
      RETURN_IF_ERROR(RerunLayer(s, layer, j, d));
    }
    if (selective) RETURN_IF_ERROR(RerunFor(n, s, j, d, &rerun));
    if (RecomputesInPart(strategy_.stages[s].recompute)) {
      // What the op saved that a rerun made must be there again.
      const std::map<int, torch::Tensor>& parked =
          parked_reruns_[KeptIndex(s, j, d)];
      for (int t : op.inputs) {
        const int v = t >= 0 ? value_of_tensor_[t] : -1;
        if (v >= 0 && parked.count(v) > 0) {
          return absl::InternalError(absl::StrCat(
              node.key, " (micro-batch ", j, "): '", graph_.tensor(t).name,
              "', which it saved, was not made again by the rerun"));
        }
      }
    }
    RETURN_IF_ERROR(RestoreBefore(n, j, d));
    const SteadyClock::time_point started = SteadyClock::now();
    const double copies = copy_seconds_[d], waited = waited_seconds_[d];
    absl::StatusOr<std::vector<torch::Tensor>> grads =
        T_ > 1 ? TensorParallelBackward(n, j, d, std::move(output_gradients),
                                        tensors)
               : BackwardOp(graph_, op, std::move(saved_[lane][node.forward_op]),
                            output_gradients, tensors);
    saved_[lane][node.forward_op] = SavedOp();
    if (grads.ok()) RecordRun(n, d, started, copies, waited);
    ReleaseAfterBackward(n, j, d);
    if (!grads.ok()) {
      return WithContext(grads.status(),
                         absl::StrCat(node.key, " (micro-batch ", j, "): "));
    }
    absl::Status tracked;  // an op placement's memory (memory_)
    if (memory_ != nullptr) {
      std::vector<int64_t> bytes(node.outputs.size(), 0);
      for (size_t k = 0; k < bytes.size() && k < grads->size(); ++k) {
        bytes[k] = TensorBytes((*grads)[k]);
      }
      absl::MutexLock lock(&mu_);
      tracked = memory_->NodeRan(n, bytes);
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int sm = view_.sum_of(node.outputs[k]);
      if (sm < 0) continue;
      torch::Tensor buffer;
      {
        absl::MutexLock lock(&mu_);
        buffer = std::move(partials_[lane].at(sm, s, my_slot));
        partials_[lane].at(sm, s, my_slot) = torch::Tensor();
      }
      buffer = buffer.defined() ? buffer + (*grads)[k] : (*grads)[k];
      auto complete = completing.find(sm);
      if (complete != completing.end() && --complete->second.first == 0) {
        if (sharded) {
          DeliverShards(s, complete->second.second, j, d, buffer);
        } else {
          AddToAccumulator(d, complete->second.second, std::move(buffer));
        }
        continue;
      }
      absl::MutexLock lock(&mu_);
      // The slot's last partial of a sum whose sink is on another slot:
      // the buffer goes to its link.
      const int sink_slot = LinkedSinkSlot(n, sm);
      if (sink_slot >= 0) {
        auto [left, fresh] = linked_left.try_emplace(sm, 0);
        if (fresh) left->second = link_tables_.partials.at({sm, my_slot});
        if (--left->second == 0) {
          const int to =
              strategy_.stages[s].device(replica_of_device_[d], sink_slot);
          outgoing.push_back({to,
                              {LinkKey(lane, SumItem(sm, my_slot), to),
                               view_.node(n).outputs[k], std::move(buffer)}});
          continue;
        }
      }
      partials_[lane].at(sm, s, my_slot) = std::move(buffer);
    }
    SendToSlots(d, &outgoing);
    RETURN_IF_ERROR(tracked);
    RETURN_IF_ERROR(CheckMemory(n, j, d));
    MarkNodeDone(n, j);
  }
  if (RecomputesInPart(strategy_.stages[s].recompute)) {
    // What no rerun came to read (a node rerun only when a backward needs
    // it) goes with the task.
    parked_reruns_[KeptIndex(s, j, d)].clear();
    absl::MutexLock lock(&mu_);
    kept_[KeptIndex(s, j, d)].clear();
    kept_reads_[KeptIndex(s, j, d)].clear();
  }
  return absl::OkStatus();
}

absl::Status TorchStrategyExecutor::Accumulate(int s, int j, int d) {
  // Parameters whose sums this backward completed (a weight's readers are
  // all in its stage, on any of its slots): this slot's partials, and
  // each other slot's buffer of them, which came by its link during the
  // backward (InitLinks).
  std::vector<std::pair<int, torch::Tensor>> completed;
  const int lane = Lane(j, d);
  const int my_slot = slot_of_device_[d];
  {
    absl::MutexLock lock(&mu_);
    for (int u : update_[s]) {
      if (SlotOfNode(u) != my_slot) continue;
      const int p = view_.node(u).parameter;
      for (int sm : view_.sums_read_by(u)) {
        for (int slot = 0; slot < W_; ++slot) {
          torch::Tensor part;
          if (slot == my_slot) {
            part =
                std::exchange(partials_[lane].at(sm, s, slot), torch::Tensor());
          } else if (MakesUpdatePartials(s, slot, sm)) {
            const int64_t key = LinkKey(lane, SumItem(sm, slot), d);
            const auto start = SteadyClock::now();
            while (failure_.ok() && !links_.arrived.contains(key)) {
              slots_cv_.Wait(&mu_);
            }
            waited_seconds_[d] += SecondsSince(start);
            if (!failure_.ok()) return absl::OkStatus();  // it says why
            part = TakeArrivedLocked(lane, SumItem(sm, slot), d);
            links_.arrived.erase(key);
          }
          if (part.defined()) completed.emplace_back(p, std::move(part));
        }
      }
    }
  }
  if (ShardsGradientsOf(s)) return ReduceScatter(s, j, d, &completed);
  for (auto& [p, g] : completed) AddToAccumulator(d, p, std::move(g));
  return absl::OkStatus();
}

bool TorchStrategyExecutor::MakesUpdatePartials(int s, int slot,
                                                int sum) const {
  auto at = link_tables_.updates.find({s, slot});
  if (at == link_tables_.updates.end()) return false;
  for (auto [sm, to] : at->second) {
    if (sm == sum) return true;
  }
  return false;
}

void TorchStrategyExecutor::AddToAccumulator(int d, int p,
                                             torch::Tensor gradient) {
  if (gradient.device() != devices_[d]) gradient = gradient.to(devices_[d]);
  // The first micro-batch's gradient becomes the buffer as it is (what
  // PyTorch's AccumulateGrad steals). A later one is added in place where
  // the buffer's storage is its alone, else out of place, the sum becoming
  // the buffer: a backward op may hand one tensor, or views of one storage,
  // to several inputs, which an addition in place would change too. The
  // strategy simulator charges the cost model's AccumulateSeconds for each.
  torch::Tensor& acc = accum_[d][p];
  if (!acc.defined()) {
    acc = std::move(gradient);
  } else if (acc.use_count() == 1 && acc.storage().use_count() == 1) {
    acc.add_(gradient);
  } else {
    acc = acc + gradient;
  }
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
      absl::MutexLock lock(&mu_);
      bool waited = false;
      while (failure_.ok() && !ReadyLocked(s, j, task.backward)) {
        cv_.Wait(&mu_);
        waited = true;
      }
      if (!failure_.ok()) return;
      // Made ready by another device or a receiver since it began to wait.
      if (waited) handoffs_[d].push_back(SecondsSince(tasks_given_));
      // The pass's memory, before any of it is allocated (its replica's
      // first device here to start it).
      if (pass_memory_ != nullptr &&
          slots_started_.at(s, j, task.backward)++ == 0) {
        const absl::Status fits = pass_memory_->PassStarting(
            s, j, task.backward, SecondsSince(step_started_));
        if (!fits.ok()) {
          FailLocked(fits);
          return;
        }
      }
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
      absl::MutexLock lock(&mu_);
      int& slots_done = slots_done_.at(s, j, task.backward);
      if (++slots_done == width) {
        done_.at(s, j, task.backward) = 1;
        if (pass_memory_ != nullptr) {
          pass_memory_->PassEnded(s, j, task.backward,
                                  SecondsSince(step_started_));
        }
        tasks_given_ = SteadyClock::now();
        cv_.SignalAll();
      }
      while (failure_.ok() && slots_done != width) cv_.Wait(&mu_);
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

}  // namespace placer
