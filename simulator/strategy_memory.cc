#include "simulator/strategy_memory.h"

#include <algorithm>
#include <cmath>

namespace placer {

StrategyMemoryTimeline::StrategyMemoryTimeline(
    const Strategy& strategy, const StagePlan& plan,
    const LoweredStrategy& lowered, int num_devices,
    double optimizer_state_per_byte, const StrategyMemoryOptions& options)
    : strategy_(strategy), lowered_(lowered), record_(options.record) {
  devices_.assign(num_devices, Device());
  peak_.assign(num_devices, 0);
  peak_parts_.assign(num_devices, MemoryBreakdown());
  most_in_flight_.assign(num_devices, 0);
  const double state = 1 + optimizer_state_per_byte;
  const int M = strategy.micro_batches;
  const int S = static_cast<int>(strategy.stages.size());
  bytes_.resize(S);
  accumulating_.resize(S);
  for (int s = 0; s < S; ++s) {
    const PipelineStage& stage = strategy.stages[s];
    const StageModel& st = plan.stages[s];
    const int R = stage.num_replicas();
    accumulating_[s].assign(R, 0);
    bytes_[s].resize(static_cast<size_t>(stage.width()) * R);
    const bool zero = strategy.zero != ZeroStage::kNone && R > 1;
    for (int slot = 0; slot < stage.width(); ++slot) {
      const int64_t parameters = st.parameter_bytes[slot];
      const int64_t whole =
          static_cast<int64_t>(static_cast<double>(parameters) * state);
      int64_t resident = whole;
      if (zero && strategy.zero == ZeroStage::kParameters) {
        resident = static_cast<int64_t>(
                       std::ceil(state * static_cast<double>(parameters) / R)) +
                   st.gathered_window_bytes;
      } else if (zero) {
        resident = parameters +
                   static_cast<int64_t>(std::ceil(
                       (state - 1) * static_cast<double>(parameters) / R));
      }
      const int64_t kept = st.kept_bytes(slot);
      // What a micro-batch's peak holds beyond the whole optimizer state
      // and what it keeps (a selectively recomputing stage rebuilds its
      // stash only in part at a time).
      auto rest_of = [&](int64_t peak) {
        return RecomputesInPart(st.recompute)
                   ? std::max<int64_t>(0, peak - whole - st.stash_bytes[slot]) +
                         st.selective_rebuilt_bytes[slot]
                   : std::max<int64_t>(0, peak - whole - kept);
      };
      for (int k = 0; k < R; ++k) {
        SlotBytes& b = bytes_[s][slot * R + k];
        b.resident = resident;
        b.kept = kept;
        b.accumulates = (M - k + R - 1) / R > 1;
        b.accumulators = ShardsGradients(strategy.zero) && R > 1
                             ? (parameters + R - 1) / R
                             : parameters;
        b.first_rest = rest_of(st.one_batch_peak_bytes[slot]);
        // A forward pass: what its part of the run held beyond the
        // resident state and a whole stash (the stash it builds counted
        // whole from its start), at most a pass's rest.
        b.forward_rest = std::min(
            b.first_rest,
            std::max<int64_t>(
                0, st.one_batch_forward_peak_bytes[slot] - whole - kept));
        b.later_rest =
            b.accumulates ? rest_of(st.later_batch_peak_bytes[slot]) : 0;
        const int d = stage.device(k, slot);
        for (int g : slot == 0 ? stage.TensorGroup(k) : std::vector<int>{d}) {
          devices_[g].parts.parameters += resident;
          Note(g, 0);
        }
      }
    }
  }
  pass_of_task_.assign(lowered.graph().num_tasks(), -1);
  for (size_t p = 0; p < lowered.passes().size(); ++p) {
    const PassTask& pass = lowered.passes()[p];
    pass_of_task_[pass.task] = static_cast<int>(p);
    if (pass.recompute_task >= 0) {
      pass_of_task_[pass.recompute_task] = static_cast<int>(p);
    }
  }
}

template <typename Change>
void StrategyMemoryTimeline::ForDevicesOf(const PassTask& pass, double seconds,
                                          Change change) {
  const PipelineStage& stage = strategy_.stages[pass.stage];
  const int R = stage.num_replicas();
  for (int slot = 0; slot < stage.width(); ++slot) {
    const SlotBytes& b = bytes_[pass.stage][slot * R + pass.replica];
    const int d = stage.device(pass.replica, slot);
    for (int g :
         slot == 0 ? stage.TensorGroup(pass.replica) : std::vector<int>{d}) {
      change(b, devices_[g]);
      most_in_flight_[g] = std::max(most_in_flight_[g], devices_[g].in_flight);
      Note(g, seconds);
    }
  }
}

void StrategyMemoryTimeline::Note(int device, double seconds) {
  const MemoryBreakdown& parts = devices_[device].parts;
  const int64_t live = parts.parameters + parts.activations + parts.gradients +
                       parts.workspace + parts.inputs;
  if (live > peak_[device]) {
    peak_[device] = live;
    peak_parts_[device] = parts;
  }
  if (record_) samples_.push_back({seconds, device, live});
}

double StrategyMemoryTimeline::Started(int task, double now, double start,
                                       double end) {
  (void)now;
  const int p = pass_of_task_[task];
  if (p < 0) return end;
  const PassTask& pass = lowered_.passes()[p];
  const bool later = accumulating_[pass.stage][pass.replica];
  const bool rerun = task == pass.recompute_task;
  ForDevicesOf(pass, start, [&](const SlotBytes& b, Device& device) {
    if (!pass.backward) {
      ++device.in_flight;
      device.parts.activations += b.kept;
    }
    if (!pass.backward) {
      device.parts.workspace = b.forward_rest;
      return;
    }
    // A backward after its rerun holds the rest from the rerun's start.
    if (pass.recompute_task >= 0 && !rerun) return;
    device.parts.workspace = later ? b.later_rest : b.first_rest;
  });
  return end;
}

void StrategyMemoryTimeline::Ended(int task, double now) {
  const int p = pass_of_task_[task];
  if (p < 0) return;
  const PassTask& pass = lowered_.passes()[p];
  if (task == pass.recompute_task) return;
  char& accumulating = accumulating_[pass.stage][pass.replica];
  const bool first_backward = pass.backward && !accumulating;
  ForDevicesOf(pass, now, [&](const SlotBytes& b, Device& device) {
    device.parts.workspace = 0;
    if (!pass.backward) return;
    --device.in_flight;
    device.parts.activations -= b.kept;
    if (first_backward && b.accumulates) {
      device.parts.gradients += b.accumulators;
    }
  });
  if (pass.backward) accumulating = 1;
}

}  // namespace placer
