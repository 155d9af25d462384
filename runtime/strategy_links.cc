// The strategy executor's links (runtime/strategy_executor.h): within a
// wide replica, what crosses slots (StageSlotCopies, simulator/
// slot_copies.h, read off the simulator's lowering of a pass) is copied once
// made: a value of the forward, once its node has run; a weight, at the
// forward task's start; a slot's summed partial gradients of a sum whose
// sink (a backward node, or a parameter's update) is on another slot,
// once the slot's last partial of the task is made.
// Between GPUs (or a GPU and the CPU) the link's own worker copies; between
// CPU devices the sender does, right away (a core copies either way, and a
// hand-off to another thread costs more than small copies take). The
// reading node waits for the copy.
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "runtime/executor_ops.h"
#include "runtime/strategy_executor_impl.h"
#include "runtime/torch_devices.h"

namespace placer {

void TorchStrategyExecutor::InitLinks(
    const std::vector<std::vector<SlotCopy>>& crossing) {
  const int N = static_cast<int>(view_.nodes().size());
  link_tables_ = StrategyLinkTables();
  link_tables_.sends.assign(N, {});
  link_tables_.reads.assign(N, {});
  std::map<std::pair<int, int>, int> expected;  // per (src, dst) device
  for (int s = 0; s < S_; ++s) {
    const PipelineStage& stage = strategy_.stages[s];
    std::vector<std::pair<int, int>> sent;  // (from, to) slot, per copy
    for (const SlotCopy& copy : crossing[s]) {
      if (copy.sum >= 0) {
        const int item = SumItem(copy.sum, copy.from_slot);
        if (copy.to_update) {
          // Taken by the update's device once the task ends (Accumulate).
          link_tables_.updates[{s, copy.from_slot}].push_back(
              {copy.sum, copy.to_slot});
        } else {
          link_tables_.reads[copy.readers[0]].push_back(item);
        }
        link_tables_.partials[{copy.sum, copy.from_slot}] =
            static_cast<int>(copy.made_by.size());
        for (int m : copy.made_by) {
          link_tables_.sends[m].push_back({copy.sum, copy.to_slot});
        }
      } else {
        for (int c : copy.readers) link_tables_.reads[c].push_back(copy.value);
        std::vector<std::pair<int, int>>& from =
            copy.made_by.empty() ? link_tables_.weights[{s, copy.from_slot}]
                                 : link_tables_.sends[copy.made_by[0]];
        from.push_back({copy.value, copy.to_slot});
      }
      sent.emplace_back(copy.from_slot, copy.to_slot);
    }
    // Copies per step on each link this process sends or receives on.
    for (int j = 0; j < M_; ++j) {
      const int k = j % stage.num_replicas();
      for (auto [from, to] : sent) {
        const int src = stage.device(k, from), dst = stage.device(k, to);
        if (Local(src) || Local(dst)) ++expected[{src, dst}];
      }
    }
  }
  for (const auto& [link, count] : expected) {
    if (CopiedBySender(link.first, link.second)) continue;  // no worker
    link_tables_.ordinal[link] = static_cast<int>(link_tables_.devices.size());
    link_tables_.devices.push_back(link);
    link_tables_.expected.push_back(count);
  }
}

int64_t TorchStrategyExecutor::LinkKey(int lane, int item, int d) const {
  const int64_t items =
      V_ + static_cast<int64_t>(view_.gradient_sums().size()) * W_;
  return (static_cast<int64_t>(lane) * items + item) * D_ + d;
}

bool TorchStrategyExecutor::CopiedBySender(int src, int dst) const {
  return devices_[src].is_cpu() && devices_[dst].is_cpu() && Local(src) &&
         Local(dst);
}

int TorchStrategyExecutor::LinkedSinkSlot(int n, int sum) const {
  for (auto [item, slot] : link_tables_.sends[n]) {
    if (item == sum) return slot;
  }
  return -1;
}

void TorchStrategyExecutor::QueueCopy(int src, int dst, StrategySlotCopy copy) {
  const int link = link_tables_.ordinal.at({src, dst});
  if (memory_ != nullptr) {
    if (absl::Status over = memory_->CopyQueued(copy.key); !over.ok()) {
      FailLocked(over);
    }
  }
  links_.queued[link].push_back(std::move(copy));
  links_.given[link] = SteadyClock::now();
  link_cv_.SignalAll();
}

void TorchStrategyExecutor::SendToSlots(
    int d, std::vector<std::pair<int, StrategySlotCopy>>* copies) {
  if (copies->empty()) return;
  std::vector<std::pair<int64_t, torch::Tensor>> made;
  for (auto& [to, copy] : *copies) {
    if (!CopiedBySender(d, to)) continue;
    if (!copy.tensor.defined()) {  // a partial no gradient flowed into
      made.emplace_back(copy.key, torch::Tensor());
      continue;
    }
    auto reporting = ReportAllocations(to);  // the copy is the reader's
    const SteadyClock::time_point start = SteadyClock::now();
    torch::Tensor here = On(copy.tensor, d, to);
    transfers_[d].push_back(
        {copy.value, d, to, TensorBytes(here), SecondsSince(start)});
    made.emplace_back(copy.key, std::move(here));
  }
  absl::MutexLock lock(&mu_);
  for (auto& [key, tensor] : made) {
    links_.arrived[key] = std::move(tensor);
    if (memory_ == nullptr) continue;
    if (absl::Status over = memory_->CopyQueued(key); !over.ok()) {
      FailLocked(over);
    }
    memory_->CopyDone(key);
  }
  for (auto& [to, copy] : *copies) {
    if (!CopiedBySender(d, to)) QueueCopy(d, to, std::move(copy));
  }
  copies->clear();
  if (!made.empty()) GiveToSlotsLocked();
}

bool TorchStrategyExecutor::ArrivedLocked(int n, int lane, int d) const {
  for (int item : link_tables_.reads[n]) {
    if (!links_.arrived.contains(LinkKey(lane, item, d))) return false;
  }
  return true;
}

torch::Tensor TorchStrategyExecutor::TakeArrivedLocked(int lane, int item,
                                                       int d) {
  auto at = links_.arrived.find(LinkKey(lane, item, d));
  if (at == links_.arrived.end()) return torch::Tensor();
  return std::exchange(at->second, torch::Tensor());
}

bool TorchStrategyExecutor::NextQueued(int link, StrategySlotCopy* copy) {
  absl::MutexLock lock(&mu_);
  std::deque<StrategySlotCopy>& queue = links_.queued[link];
  bool waited = false;
  while (failure_.ok() && queue.empty()) {
    link_cv_.Wait(&mu_);
    waited = true;
  }
  if (!failure_.ok()) return false;
  if (waited) handoffs_[D_ + link].push_back(SecondsSince(links_.given[link]));
  *copy = std::move(queue.front());
  queue.pop_front();
  return true;
}

void TorchStrategyExecutor::LinkWorker(int link) {
  const int src = link_tables_.devices[link].first;
  const int dst = link_tables_.devices[link].second;
  if (!Local(src)) {
    ReceiveLink(link);
    return;
  }
  if (!Local(dst)) {
    SendLink(link);
    return;
  }
  // What the copy allocates is the destination's.
  auto reporting = ReportAllocations(dst);
  const bool timed = devices_[dst].is_cpu() || options_.time_gpu_nodes;
  for (int k = 0; k < link_tables_.expected[link]; ++k) {
    StrategySlotCopy copy;
    if (!NextQueued(link, &copy)) return;
    torch::Tensor made;
    const absl::Status status = CatchExceptions("", [&] {
      if (!copy.tensor.defined()) return absl::OkStatus();  // none flowed
      const SteadyClock::time_point start = SteadyClock::now();
      made = On(copy.tensor, src, dst);
      copy.tensor = torch::Tensor();
      if (timed) {
        Synchronize(devices_[dst]);
        link_transfers_[link].push_back(
            {copy.value, src, dst, TensorBytes(made), SecondsSince(start)});
      }
      return absl::OkStatus();
    });
    if (!status.ok()) {
      Fail(status);
      return;
    }
    absl::MutexLock lock(&mu_);
    links_.arrived[copy.key] = std::move(made);
    if (memory_ != nullptr) memory_->CopyDone(copy.key);
    GiveToSlotsLocked();
  }
}

// An item's id on a link's channel: its key, or -1 - key for none (a
// partial no gradient flowed into).
void TorchStrategyExecutor::SendLink(int link) {
  const int src = link_tables_.devices[link].first;
  const int dst = link_tables_.devices[link].second;
  for (int k = 0; k < link_tables_.expected[link]; ++k) {
    StrategySlotCopy copy;
    if (!NextQueued(link, &copy)) return;
    const SteadyClock::time_point start = SteadyClock::now();
    const bool none = !copy.tensor.defined();
    const torch::Tensor sent = none ? torch::zeros({0}) : copy.tensor;
    absl::Status status =
        options_.ranks->SendTensor(sent, none ? -1 - copy.key : copy.key,
                                   RankOf(dst), LinkChannel(src, dst));
    if (!status.ok()) {
      Fail(absl::Status(
          status.code(),
          absl::StrCat(status.message(), " (", cluster_.device(src).name,
                       " -> ", cluster_.device(dst).name, ")")));
      return;
    }
    if (memory_ != nullptr) {
      absl::MutexLock lock(&mu_);
      memory_->CopyDone(copy.key);
    }
    // Timed by the sender, until its send completed.
    if (!none) {
      link_transfers_[link].push_back(
          {copy.value, src, dst, TensorBytes(sent), SecondsSince(start)});
    }
  }
}

void TorchStrategyExecutor::ReceiveLink(int link) {
  const int src = link_tables_.devices[link].first;
  const int dst = link_tables_.devices[link].second;
  auto reporting = ReportAllocations(dst);  // what arrives is dst's
  auto about = [&] {
    return absl::StrCat(" (", cluster_.device(src).name, " -> ",
                        cluster_.device(dst).name, ")");
  };
  for (int k = 0; k < link_tables_.expected[link]; ++k) {
    absl::StatusOr<std::pair<int64_t, torch::Tensor>> got =
        options_.ranks->RecvTensor(RankOf(src), LinkChannel(src, dst));
    if (!got.ok()) {
      Fail(absl::Status(got.status().code(),
                        absl::StrCat(got.status().message(), about())));
      return;
    }
    const bool none = got->first < 0;
    const int64_t key = none ? -1 - got->first : got->first;
    if (key % D_ != dst) {
      Fail(absl::DataLossError(
          absl::StrCat("rank ", RankOf(src), " sent item ", got->first,
                       ", which is not for this link", about())));
      return;
    }
    torch::Tensor made;
    if (!none) {
      const absl::Status status = CatchExceptions("receiving: ", [&] {
        made = got->second.to(devices_[dst]);
        return absl::OkStatus();
      });
      if (!status.ok()) {
        Fail(status);
        return;
      }
    }
    absl::MutexLock lock(&mu_);
    if (memory_ != nullptr) {
      if (absl::Status over = memory_->CopyArrived(key, TensorBytes(made));
          !over.ok()) {
        FailLocked(over);
      }
    }
    links_.arrived[key] = std::move(made);
    GiveToSlotsLocked();
  }
}

}  // namespace placer
