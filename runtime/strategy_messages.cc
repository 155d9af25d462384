// What the strategy executor's ranks send each other
// (runtime/strategy_executor.h, distributed): a task's values or partial
// gradients for another rank's stage, packed, and the receivers that put
// them where a local worker would have.
#include <algorithm>
#include <cstring>
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
#include "runtime/step_exchange.h"
#include "runtime/strategy_executor_impl.h"
#include "runtime/torch_devices.h"

namespace placer {

absl::Status TorchStrategyExecutor::SendAfter(int s, int j, int d,
                                              bool backward) {
  if (!Distributed()) return absl::OkStatus();
  // A tensor-parallel group's first device sends its lane (what crosses
  // stages is whole on every device of the group).
  const int lane = Lane(j, d);
  for (int to = 0; to < S_; ++to) {
    const int dst = DeviceOf(to, j);
    if (Local(dst)) continue;
    const std::vector<int>& items =
        backward ? crossings_.sums(s, to) : crossings_.values(s, to);
    if (items.empty()) continue;
    // Per item: the value, or the stage's partials of the sum per slot.
    std::vector<std::vector<torch::Tensor>> slot_parts;
    {
      absl::MutexLock lock(&mu_);
      for (int item : items) {
        slot_parts.emplace_back();
        if (!backward) {
          slot_parts.back().push_back(values_[lane][item]);
          continue;
        }
        for (int slot = 0; slot < W_; ++slot) {
          slot_parts.back().push_back(partials_[lane].at(item, s, slot));
        }
      }
    }
    absl::Status sent = CatchExceptions("sending: ", [&]() -> absl::Status {
      // A wide stage's slots' partials, added up here in slot order.
      std::vector<torch::Tensor> parts;
      for (const std::vector<torch::Tensor>& of_item : slot_parts) {
        torch::Tensor sum;
        for (const torch::Tensor& part : of_item) {
          if (!part.defined()) continue;
          sum = sum.defined() ? sum + part.to(sum.device()) : part;
        }
        parts.push_back(sum);
      }
      torch::Tensor index = torch::zeros(
          {kIndexHead + kItemWords * static_cast<int64_t>(items.size())},
          torch::kLong);
      int64_t* w = index.data_ptr<int64_t>();
      w[0] = static_cast<int64_t>(items.size());
      w[1] = s;
      w[2] = to;
      w[3] = j;
      w[4] = backward ? 1 : 0;
      int64_t total = 0;
      for (size_t k = 0; k < items.size(); ++k) {
        int64_t* it = w + kIndexHead + kItemWords * k;
        it[0] = items[k];
        if (!parts[k].defined()) {  // no gradient flowed
          it[2] = -1;
          continue;
        }
        parts[k] = parts[k].to(torch::kCPU).contiguous();
        if (parts[k].dim() > kMaxPackedDims) {
          return absl::InvalidArgumentError(
              absl::StrCat("a tensor of rank ", parts[k].dim(),
                           " crosses ranks (at most ", kMaxPackedDims, ")"));
        }
        it[1] = static_cast<int64_t>(parts[k].scalar_type());
        it[2] = parts[k].dim();
        for (int64_t x = 0; x < parts[k].dim(); ++x)
          it[3 + x] = parts[k].size(x);
        total += parts[k].numel() * parts[k].element_size();
      }
      torch::Tensor data = torch::empty({total}, torch::kByte);
      int64_t at = 0;
      for (const torch::Tensor& t : parts) {
        if (!t.defined()) continue;
        const int64_t bytes = t.numel() * t.element_size();
        std::memcpy(data.data_ptr<uint8_t>() + at, t.data_ptr(), bytes);
        at += bytes;
      }
      RETURN_IF_ERROR(options_.ranks->SendTensor(index, kPacked, RankOf(dst),
                                                 Channel(d, dst)));
      return options_.ranks->SendTensor(data, kPacked, RankOf(dst),
                                        Channel(d, dst));
    });
    if (!sent.ok()) {
      return absl::Status(
          sent.code(),
          absl::StrCat(sent.message(), " (", cluster_.device(d).name, " -> ",
                       cluster_.device(dst).name, ")"));
    }
  }
  // A send counts as a read; a partial buffer sent is done with here.
  absl::MutexLock lock(&mu_);
  for (int to = 0; to < S_; ++to) {
    if (Local(DeviceOf(to, j))) continue;
    for (int item :
         backward ? crossings_.sums(s, to) : crossings_.values(s, to)) {
      if (backward) {
        // The group's other devices made the same; none is sent.
        for (int r = 0; r < T_; ++r) {
          for (int slot = 0; slot < W_; ++slot) {
            partials_[j * T_ + r].at(item, s, slot) = torch::Tensor();
          }
        }
      } else if (--reads_left_[lane * V_ + item] == 0) {
        values_[lane][item] = torch::Tensor();
      }
    }
  }
  return absl::OkStatus();
}

void TorchStrategyExecutor::ReceiveLocalSums(int s, int j, int d) {
  if (W_ > 1 || T_ > 1) return;
  const int lane = Lane(j, d);
  for (int from : crossings_.sum_sources(s)) {
    const int src = DeviceOf(from, j);
    if (src == d || !Local(src)) continue;
    for (int item : crossings_.sums(from, s)) {
      torch::Tensor part;
      {
        absl::MutexLock lock(&mu_);
        part = std::move(partials_[lane].at(item, from, 0));
        partials_[lane].at(item, from, 0) = torch::Tensor();
      }
      if (!part.defined()) continue;
      part = CopyIn(part, view_.gradient_sums()[item].partials[0], src, d);
      absl::MutexLock lock(&mu_);
      partials_[lane].at(item, from, 0) = std::move(part);
    }
  }
}

absl::StatusOr<std::vector<std::pair<int, torch::Tensor>>>
TorchStrategyExecutor::Unpack(torch::Tensor bucket,
                              const std::vector<int>& parameters, int src,
                              int dst, absl::string_view what,
                              int shard) const {
  std::vector<std::pair<int, torch::Tensor>> parts;
  RETURN_IF_ERROR(CatchExceptions("receiving: ", [&]() -> absl::Status {
    bucket = bucket.to(devices_[dst]);
    int64_t at = 0;
    for (int p : parameters) {
      // With tensor parallelism, dst's part (src's is of the same rank).
      const std::vector<int64_t> shape =
          T_ > 1 ? params_[dst][p].sizes().vec() : graph_.tensor(p).shape;
      int64_t n = 1;
      for (int64_t e : shape) n *= e;
      if (shard >= 0) n = ShardRange(p, shard).second;
      if (at + n > bucket.numel()) break;
      torch::Tensor part = bucket.narrow(0, at, n);
      parts.emplace_back(p, shard >= 0 ? part : part.reshape(shape));
      at += n;
    }
    if (at != bucket.numel()) {
      return absl::DataLossError(absl::StrCat(
          "rank ", RankOf(src), " sent a ", what, " bucket of ", bucket.numel(),
          " elements for stage ", stage_of_device_[src], ", which has ", at,
          " (or more)"));
    }
    return absl::OkStatus();
  }));
  return parts;
}

void TorchStrategyExecutor::Receiver(int src, int dst, int expected) {
  auto reporting = ReportAllocations(dst);
  auto receive = [&]() -> absl::StatusOr<std::pair<int64_t, torch::Tensor>> {
    absl::StatusOr<std::pair<int64_t, torch::Tensor>> got =
        options_.ranks->RecvTensor(RankOf(src), Channel(src, dst));
    if (!got.ok()) {
      return absl::Status(
          got.status().code(),
          absl::StrCat(got.status().message(), " (", cluster_.device(src).name,
                       " -> ", cluster_.device(dst).name, ")"));
    }
    return got;
  };
  auto foreign = [&](int64_t what) {
    return absl::DataLossError(
        absl::StrCat("rank ", RankOf(src), " sent item ", what,
                     ", which the link ", cluster_.device(src).name, " -> ",
                     cluster_.device(dst).name, " does not carry"));
  };
  int k = 0;
  while (k < expected) {
    absl::StatusOr<std::pair<int64_t, torch::Tensor>> got = receive();
    if (!got.ok()) {
      Fail(got.status());
      return;
    }
    ++k;
    if (got->first != kPacked || got->second.dim() != 1 ||
        got->second.scalar_type() != torch::kLong ||
        got->second.numel() < kIndexHead || k >= expected) {
      Fail(foreign(got->first));
      return;
    }
    // A stage pair's packed values (or partial gradients) of a micro-batch:
    // the index, then the data.
    const torch::Tensor index = got->second;
    absl::StatusOr<std::pair<int64_t, torch::Tensor>> data = receive();
    if (!data.ok()) {
      Fail(data.status());
      return;
    }
    ++k;
    absl::Status status = CatchExceptions("receiving: ", [&]() -> absl::Status {
      const int64_t* w = index.data_ptr<int64_t>();
      const int64_t count = w[0];
      const int from = static_cast<int>(w[1]), to = static_cast<int>(w[2]);
      const int j = static_cast<int>(w[3]);
      const bool backward = w[4] != 0;
      if (from < 0 || from >= S_ || to < 0 || to >= S_ || j < 0 || j >= M_ ||
          DeviceOf(from, j) != src || DeviceOf(to, j) != dst ||
          index.numel() != kIndexHead + kItemWords * count ||
          count != static_cast<int64_t>((backward ? crossings_.sums(from, to)
                                                  : crossings_.values(from, to))
                                            .size())) {
        return foreign(w[0]);
      }
      const std::vector<int>& expected_items =
          backward ? crossings_.sums(from, to) : crossings_.values(from, to);
      const torch::Tensor bytes = data->second;
      int64_t at = 0;
      std::vector<torch::Tensor> parts(count);
      for (int64_t x = 0; x < count; ++x) {
        const int64_t* it = w + kIndexHead + kItemWords * x;
        if (it[0] != expected_items[x]) return foreign(it[0]);
        if (it[2] < 0) continue;  // undefined
        if (it[2] > kMaxPackedDims || it[1] < 0 ||
            it[1] >= static_cast<int64_t>(c10::ScalarType::NumOptions)) {
          return foreign(it[0]);
        }
        std::vector<int64_t> shape(it + 3, it + 3 + it[2]);
        torch::Tensor t = torch::empty(
            shape,
            torch::TensorOptions().dtype(static_cast<c10::ScalarType>(it[1])));
        const int64_t n = t.numel() * t.element_size();
        if (at + n > bytes.numel()) return foreign(it[0]);
        std::memcpy(t.data_ptr(), bytes.data_ptr<uint8_t>() + at, n);
        at += n;
        parts[x] = t.to(devices_[dst]);
      }
      absl::MutexLock lock(&mu_);
      // Into every lane of dst's group (each reads it whole).
      for (int64_t x = 0; x < count; ++x) {
        const int item = expected_items[x];
        for (int lane = j * T_; lane < (j + 1) * T_; ++lane) {
          if (backward) {
            if (parts[x].defined()) {
              partials_[lane].at(item, from, 0) = parts[x];
            }
          } else {
            values_[lane][item] = parts[x];
            value_device_[static_cast<size_t>(lane) * V_ + item] = dst;
          }
        }
      }
      arrived_[from].at(to, j, backward) += static_cast<int>(count);
      tasks_given_ = SteadyClock::now();
      cv_.SignalAll();
      return absl::OkStatus();
    });
    if (!status.ok()) {
      Fail(status);
      return;
    }
  }
}

}  // namespace placer
