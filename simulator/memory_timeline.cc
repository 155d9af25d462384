#include "simulator/memory_timeline.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace placer {

MemoryTimeline::MemoryTimeline(const SimulationContext& context,
                               const LoweredPlacement& lowered,
                               const MemoryTimelineOptions& options)
    : context_(context),
      view_(context.view()),
      lowered_(lowered),
      record_(options.record),
      later_(options.later_micro_batch),
      shards_(std::max(1, options.gradient_shards)),
      devices_(context.num_devices()) {
  const int num_values = static_cast<int>(view_.values().size());
  const std::vector<int>& device_of = lowered.device_of_node;
  memory_.assign(devices_, 0);
  peak_.assign(devices_, 0);
  peak_task_.assign(devices_, -1);
  peak_at_end_.assign(devices_, 0);
  peak_seconds_.assign(devices_, 0);
  forward_peak_.assign(devices_, 0);
  backward_started_.assign(devices_, 0);
  users_ = PairTable<int>(num_values, devices_, 0);
  const int num_sums = static_cast<int>(view_.gradient_sums().size());
  buffer_bytes_ = PairTable<int64_t>(num_sums, devices_, -1);
  additions_ = PartialAdditions(context, devices_);
  // Set below, once the resident bytes are allocated.
  accumulators_.assign(devices_, 0);
  later_extra_.assign(devices_, 0);
  later_peak_.assign(devices_, 0);
  later_peak_by_use_.assign(devices_, {});
  source_device_.assign(num_values, -1);
  const RankShares* shares = options.rank_shares;
  value_bytes_.resize(num_values);
  for (int v = 0; v < num_values; ++v) {
    value_bytes_[v] =
        shares != nullptr ? shares->value_bytes[v] : context.value_bytes(v);
  }
  const int num_nodes = static_cast<int>(view_.nodes().size());
  saved_workspace_.resize(num_nodes);
  scratch_.resize(num_nodes);
  for (int n = 0; n < num_nodes; ++n) {
    const TrainingNode& node = view_.node(n);
    const double share = shares != nullptr ? shares->node_share[n] : 1.0;
    saved_workspace_[n] = static_cast<int64_t>(
        static_cast<double>(node.saved_workspace_bytes) * share);
    scratch_[n] =
        static_cast<int64_t>(static_cast<double>(node.scratch_bytes) * share);
  }
  const Rebuilds* rebuilds = options.rebuilds;
  if (rebuilds != nullptr) {
    rebuilt_values_.assign(num_nodes, {});
    rebuilt_workspace_.assign(num_nodes, {});
    holds_ending_.assign(num_nodes, {});
    rebuilt_readers_.assign(num_values, -1);
    workspace_rebuilt_.assign(num_nodes, 0);
  }
  transient_.assign(num_values, 0);
  use_.assign(num_values, kActivations);
  by_use_.assign(devices_, {});
  peak_by_use_.assign(devices_, {});
  std::vector<char> present(static_cast<size_t>(devices_), 0);
  const double state = view_.options().optimizer_state_per_parameter_byte();
  for (int v = 0; v < num_values; ++v) {
    const TrainingValue& value = view_.value(v);
    transient_[v] = value.kind == ValueKind::kActivation ||
                    value.kind == ValueKind::kGradient;
    switch (value.kind) {
      case ValueKind::kParameter:
        use_[v] = kParameters;
        break;
      case ValueKind::kGradient:
        use_[v] = kGradients;
        break;
      case ValueKind::kGraphInput:
      case ValueKind::kConstant:
        use_[v] = kInputs;
        break;
      case ValueKind::kActivation:
        use_[v] = kActivations;
        break;
    }
    if (view_.sum_of(v) >= 0) continue;  // accumulated, not read as such
    // Rebuilt on its producer's device for the backward readers there.
    const int rebuild_at =
        rebuilds != nullptr && value.producer >= 0 ? rebuilds->value_at[v] : -1;
    const int made_on = value.producer >= 0 ? device_of[value.producer] : -1;
    const bool rebuilt = rebuild_at >= 0 && device_of[rebuild_at] == made_on;
    if (rebuilt) rebuilt_readers_[v] = 0;
    for (int consumer : value.consumers) {
      if (rebuilt && device_of[consumer] == made_on &&
          view_.node(consumer).kind == NodeKind::kBackward) {
        ++rebuilt_readers_[v];
      } else {
        ++users_.at(v, device_of[consumer]);
      }
    }
    if (rebuilt && rebuilt_readers_[v] > 0) {
      rebuilt_values_[rebuild_at].push_back(v);
    }
    switch (value.kind) {
      case ValueKind::kParameter: {
        const int g = context.home_group(v);
        if (g < 0) break;
        const int home = lowered.device_of_group[g];
        source_device_[v] = home;
        const int64_t bytes = value_bytes_[v];
        Allocate(home, bytes + static_cast<int64_t>(state * bytes),
                 kParameters);
        break;
      }
      case ValueKind::kGraphInput:
      case ValueKind::kConstant:
        std::fill(present.begin(), present.end(), 0);
        for (int consumer : value.consumers) {
          const int d = device_of[consumer];
          if (!present[d]) {
            present[d] = 1;
            Allocate(d, value_bytes_[v], kInputs);
          }
        }
        break;
      default:
        source_device_[v] =
            value.producer >= 0 ? device_of[value.producer] : -1;
        break;
    }
  }
  // A copy's source holds the value until the copy ends.
  for (const CopyTask& copy : lowered.copies) {
    if (copy.gradient_sum < 0) {
      ++users_.at(copy.value, copy.src);
    }
  }
  if (rebuilds != nullptr) {
    // Saved workspace made again where its forward node ran; what a rerun
    // reads, held there until its rebuild node ends.
    for (int n = 0; n < num_nodes; ++n) {
      const int at = rebuilds->workspace_at[n];
      if (at < 0 || saved_workspace_[n] <= 0 || device_of[at] != device_of[n]) {
        continue;
      }
      workspace_rebuilt_[n] = 1;
      rebuilt_workspace_[at].push_back(n);
    }
    for (const Rebuilds::Hold& hold : rebuilds->holds) {
      const int v = hold.value, until = hold.until_node;
      if (users_.at(v, device_of[until]) == 0) continue;
      ++users_.at(v, device_of[until]);
      holds_ending_[until].push_back(v);
    }
  }
  // Each parameter's accumulator on its update's device (its shard), and
  // what reaches that device of its sum: its own partials, one buffer from
  // each other device that makes some.
  if (!later_ && shards_ == 1) return;
  home_of_sum_.assign(num_sums, -1);
  to_complete_.assign(num_sums, 0);
  std::vector<int> seen(devices_, -1);
  for (int s = 0; s < num_sums; ++s) {
    const GradientSum& sum = view_.gradient_sums()[s];
    if (view_.node(sum.sink).kind != NodeKind::kUpdate || sum.partials.empty()) {
      continue;
    }
    const int home = device_of[sum.sink];
    home_of_sum_[s] = home;
    for (int v : sum.partials) {
      const int d = device_of[view_.value(v).producer];
      if (d == home || seen[d] != s) ++to_complete_[s];
      seen[d] = s;
    }
    if (later_) {
      accumulators_[home] +=
          (value_bytes_[sum.partials[0]] + shards_ - 1) / shards_;
    }
  }
  if (!later_) return;
  later_extra_ = accumulators_;
  later_peak_.assign(devices_, 0);
  for (int d = 0; d < devices_; ++d) NoteLater(d);
}

void MemoryTimeline::Allocate(int device, int64_t bytes, Use use) {
  memory_[device] += bytes;
  by_use_[device][use] += bytes;
  if (memory_[device] > peak_[device]) {
    peak_[device] = memory_[device];
    peak_task_[device] = task_;
    peak_at_end_[device] = ending_;
    peak_seconds_[device] = now_;
    peak_by_use_[device] = by_use_[device];
    if (!backward_started_[device]) forward_peak_[device] = memory_[device];
  }
  NoteLater(device);
  if (record_) samples_.push_back({now_, device, memory_[device]});
}

void MemoryTimeline::NewLaterPeak(int device, int64_t later) {
  later_peak_[device] = later;
  later_peak_by_use_[device] = by_use_[device];
  later_peak_by_use_[device][kGradients] += later_extra_[device];
}

void MemoryTimeline::Free(int device, int64_t bytes, Use use) {
  memory_[device] -= bytes;
  by_use_[device][use] -= bytes;
  if (record_) samples_.push_back({now_, device, memory_[device]});
}

void MemoryTimeline::Release(int v, int device) {
  if (--users_.at(v, device) == 0 &&
      (transient_[v] || device != source_device_[v])) {
    Free(device, value_bytes_[v], static_cast<Use>(use_[v]));
    if (freed_ != nullptr) freed_->push_back({v, device});
  }
}

void MemoryTimeline::Accumulate(int sum, int device, int64_t bytes) {
  int64_t& buffer = buffer_bytes_.at(sum, device);
  if (buffer >= 0) {
    Free(device, bytes, kGradients);  // added
  } else {
    buffer = bytes;
  }
  if (home_of_sum_.empty() || device != home_of_sum_[sum] ||
      --to_complete_[sum] > 0) {
    return;
  }
  // Complete: reduce-scattered to its shard.
  if (shards_ > 1) {
    const int64_t shard = (buffer + shards_ - 1) / shards_;
    Free(device, buffer - shard, kGradients);
    buffer = shard;
  }
  // A later micro-batch adds the completed sum into its accumulator and
  // frees it, where this step keeps it until the update.
  if (later_) later_extra_[device] -= buffer;
}

double MemoryTimeline::Started(int task, double now, double start,
                               double end) {
  (void)start;
  now_ = now;
  task_ = task;
  ending_ = false;
  if (lowered_.is_barrier(task)) return end;
  if (lowered_.is_copy(task)) {
    const CopyTask& copy = lowered_.copy(task);
    Allocate(copy.dst, value_bytes_[copy.value],
             copy.gradient_sum >= 0 ? kGradients
                                    : static_cast<Use>(use_[copy.value]));
    return end;
  }
  const int d = lowered_.device_of_node[task];
  if (!backward_started_[d] && context_.kind(task) == NodeKind::kBackward) {
    backward_started_[d] = 1;
  }
  // Partials added into buffers the device holds (PartialAdditions).
  end += additions_.NodeStarts(task, d, d);
  for (int out : context_.outputs(task)) {
    Allocate(d, value_bytes_[out], static_cast<Use>(use_[out]));
  }
  // What the op keeps for its backward besides values (a fused recurrent
  // layer's steps), until its backward node ends.
  if (saved_workspace_[task] > 0) {
    Allocate(d, saved_workspace_[task], kWorkspace);
  }
  if (scratch_[task] > 0) Allocate(d, scratch_[task], kWorkspace);
  // What recomputation makes again for this node and those after it.
  if (!rebuilt_values_.empty()) {
    for (int v : rebuilt_values_[task]) {
      Allocate(d, value_bytes_[v], static_cast<Use>(use_[v]));
      users_.at(v, d) += rebuilt_readers_[v];
    }
    for (int n : rebuilt_workspace_[task]) {
      Allocate(d, saved_workspace_[n], kWorkspace);
    }
  }
  return end;
}

void MemoryTimeline::Ended(int task, double now) {
  now_ = now;
  task_ = task;
  ending_ = true;
  if (lowered_.is_barrier(task)) return;
  if (lowered_.is_copy(task)) {
    const CopyTask& copy = lowered_.copy(task);
    if (copy.gradient_sum >= 0) {
      const int64_t bytes = value_bytes_[copy.value];
      Free(copy.src, bytes, kGradients);  // the sender's buffer, sent
      Accumulate(copy.gradient_sum, copy.dst, bytes);
      additions_.BufferArrives(copy.gradient_sum, copy.dst);
    } else {
      Release(copy.value, copy.src);
    }
    return;
  }
  const int d = lowered_.device_of_node[task];
  const TrainingNode& node = view_.node(task);
  for (int in : context_.inputs(task)) {
    if (view_.sum_of(in) < 0) Release(in, d);
  }
  for (int s : view_.sums_read_by(task)) {
    // The summed buffer.
    const int64_t held = buffer_bytes_.get(s, d);
    Free(d, std::max<int64_t>(held, 0), kGradients);
    // A later micro-batch freed it when it completed.
    if (later_ && d == home_of_sum_[s] && held >= 0) {
      later_extra_[d] += held;
    }
  }
  Free(d, scratch_[task], kWorkspace);
  if (node.kind == NodeKind::kBackward) {
    Free(d, saved_workspace_[node.forward_op], kWorkspace);
  }
  if (!rebuilt_values_.empty()) {
    // Recomputation lets the workspace go until its rebuild.
    if (workspace_rebuilt_[task]) Free(d, saved_workspace_[task], kWorkspace);
    for (int v : holds_ending_[task]) Release(v, d);
  }
  for (int out : context_.outputs(task)) {
    const int s = view_.sum_of(out);
    if (s >= 0) {
      Accumulate(s, d, value_bytes_[out]);
    } else if (context_.consumers(out).empty() ||
               (!rebuilt_readers_.empty() && rebuilt_readers_[out] >= 0 &&
                users_.at(out, d) == 0)) {
      Free(d, value_bytes_[out], static_cast<Use>(use_[out]));
      if (freed_ != nullptr) freed_->push_back({out, d});
    }
  }
}

namespace {

std::vector<MemoryBreakdown> Breakdowns(
    const std::vector<std::array<int64_t, 5>>& by_use) {
  std::vector<MemoryBreakdown> out;
  out.reserve(by_use.size());
  for (const std::array<int64_t, 5>& at : by_use) {
    out.push_back({at[0], at[1], at[2], at[3], at[4]});
  }
  return out;
}

}  // namespace

std::vector<MemoryBreakdown> MemoryTimeline::PeakBreakdown() const {
  static_assert(kUses == 5 && kParameters == 0 && kActivations == 1 &&
                    kGradients == 2 && kWorkspace == 3 && kInputs == 4,
                "MemoryBreakdown's fields in Use's order");
  return Breakdowns(peak_by_use_);
}

std::vector<PeakMoment> MemoryTimeline::PeakMoments() const {
  std::vector<PeakMoment> moments(devices_);
  for (int d = 0; d < devices_; ++d) {
    const int task = peak_task_[d];
    moments[d].seconds = peak_seconds_[d];
    moments[d].at_end = peak_at_end_[d] != 0;
    if (task < 0 || lowered_.is_barrier(task)) continue;
    if (lowered_.is_copy(task)) {
      moments[d].copied_value = lowered_.copy(task).value;
    } else {
      moments[d].node = task;
    }
  }
  return moments;
}

std::string DescribePeakMoment(const TrainingView& view,
                               const PeakMoment& moment) {
  if (moment.node >= 0) {
    return absl::StrFormat("when node '%s' %s (%.6f s into the step)",
                           view.node(moment.node).key,
                           moment.at_end ? "ended" : "started", moment.seconds);
  }
  if (moment.copied_value >= 0) {
    return absl::StrFormat("when a copy of '%s' %s (%.6f s into the step)",
                           view.value(moment.copied_value).name,
                           moment.at_end ? "arrived" : "started arriving",
                           moment.seconds);
  }
  return "from the step's start (what is resident)";
}

std::vector<MemoryBreakdown> MemoryTimeline::LaterPeakBreakdown() const {
  return Breakdowns(later_peak_by_use_);
}

}  // namespace placer
