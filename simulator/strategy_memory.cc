#include "simulator/strategy_memory.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace placer {

std::string DescribePeakPass(const PeakPass& moment) {
  if (moment.stage < 0) return "from the step's start (what is resident)";
  return absl::StrFormat(
      "at %sstage %d's %s of micro-batch %d (%.6f s into the step)",
      moment.at_end ? "the end of " : "", moment.stage,
      moment.backward ? "backward" : "forward", moment.micro_batch,
      moment.seconds);
}

StrategyMemoryTimeline::StrategyMemoryTimeline(
    const Strategy& strategy, const StagePlan& plan,
    const LoweredStrategy& lowered, int num_devices,
    double optimizer_state_per_byte, const StrategyMemoryOptions& options)
    : strategy_(strategy), lowered_(lowered), record_(options.record) {
  devices_.assign(num_devices, Device());
  peak_.assign(num_devices, 0);
  peak_parts_.assign(num_devices, MemoryBreakdown());
  peak_pass_.assign(num_devices, PeakPass());
  most_in_flight_.assign(num_devices, 0);
  const double state = 1 + optimizer_state_per_byte;
  const int M = strategy.micro_batches;
  const int S = static_cast<int>(strategy.stages.size());
  bytes_.resize(S);
  replicas_.resize(S);
  for (int s = 0; s < S; ++s) {
    const PipelineStage& stage = strategy.stages[s];
    const StageModel& st = plan.stages[s];
    const int R = stage.num_replicas();
    replicas_[s].assign(R, ReplicaState());
    for (int k = 0; k < R; ++k) {
      replicas_[s][k].accumulates = (M - k + R - 1) / R > 1;
    }
    bytes_[s].resize(stage.width());
    const bool zero = strategy.zero != ZeroStage::kNone && R > 1;
    for (int slot = 0; slot < stage.width(); ++slot) {
      const int64_t parameters = st.parameter_bytes[slot];
      const int64_t whole =
          static_cast<int64_t>(static_cast<double>(parameters) * state);
      SlotBytes& b = bytes_[s][slot];
      b.resident = whole;
      if (zero && strategy.zero == ZeroStage::kParameters) {
        b.resident = static_cast<int64_t>(std::ceil(
                         state * static_cast<double>(parameters) / R)) +
                     st.gathered_window_bytes;
      } else if (zero) {
        b.resident = parameters +
                     static_cast<int64_t>(std::ceil(
                         (state - 1) * static_cast<double>(parameters) / R));
      }
      b.kept = st.kept_bytes(slot);
      b.accumulators = ShardsGradients(strategy.zero) && R > 1
                           ? (parameters + R - 1) / R
                           : parameters;
      // What a micro-batch's peak holds beyond the whole optimizer state
      // and what it keeps (a stage recomputing in part: the peak of its
      // timeline that lets go and makes again what it reruns).
      auto rest_of = [&](int64_t peak) {
        return std::max<int64_t>(0, peak - whole - b.kept);
      };
      b.first_rest = rest_of(st.one_batch_peak_bytes[slot]);
      // A forward pass: what its part of the run held beyond the resident
      // state and a whole stash (the stash it builds counted whole from
      // its start), at most a pass's rest.
      b.forward_rest =
          std::min(b.first_rest,
                   std::max<int64_t>(0, st.one_batch_forward_peak_bytes[slot] -
                                            whole - b.kept));
      // Read from a replica's second backward on; measured wherever some
      // replica of the stage runs more than one micro-batch.
      b.later_rest = rest_of(st.later_batch_peak_bytes[slot]);
    }
    for (int k = 0; k < R; ++k) {
      for (int slot = 0; slot < stage.width(); ++slot) {
        ForDevicesOfSlot(stage, k, slot, [&](int g) {
          devices_[g].parts.parameters += bytes_[s][slot].resident;
          Note(g, 0, nullptr, false);
        });
      }
    }
  }
  pass_started_by_.assign(lowered.graph().num_tasks(), -1);
  pass_ended_by_.assign(lowered.graph().num_tasks(), -1);
  for (size_t p = 0; p < lowered.passes().size(); ++p) {
    const PassTask& pass = lowered.passes()[p];
    pass_started_by_[pass.entry_task()] = static_cast<int>(p);
    pass_ended_by_[pass.end_task] = static_cast<int>(p);
  }
}

template <typename Visit>
void StrategyMemoryTimeline::ForDevicesOfSlot(const PipelineStage& stage,
                                              int replica, int slot,
                                              Visit visit) {
  const Replica& r = stage.replicas[replica];
  if (slot == 0 && !r.tensor_devices.empty()) {
    for (int g : r.tensor_devices) visit(g);
  } else {
    visit(r.device_of_slot[slot]);
  }
}

template <typename Change>
void StrategyMemoryTimeline::ForDevicesOf(const PassTask& pass, double seconds,
                                          bool at_end, Change change) {
  const PipelineStage& stage = strategy_.stages[pass.stage];
  for (int slot = 0; slot < stage.width(); ++slot) {
    const SlotBytes& b = bytes_[pass.stage][slot];
    ForDevicesOfSlot(stage, pass.replica, slot, [&](int g) {
      change(b, devices_[g]);
      most_in_flight_[g] = std::max(most_in_flight_[g], devices_[g].in_flight);
      Note(g, seconds, &pass, at_end);
    });
  }
}

void StrategyMemoryTimeline::Note(int device, double seconds,
                                  const PassTask* pass, bool at_end) {
  const MemoryBreakdown& parts = devices_[device].parts;
  const int64_t live = parts.parameters + parts.activations + parts.gradients +
                       parts.workspace + parts.inputs;
  if (live > peak_[device]) {
    peak_[device] = live;
    peak_parts_[device] = parts;
    peak_pass_[device] = pass == nullptr
                             ? PeakPass()
                             : PeakPass{pass->stage, pass->micro_batch,
                                        pass->backward, at_end, seconds};
  }
  if (record_) samples_.push_back({seconds, device, live});
}

double StrategyMemoryTimeline::Started(int task, double now, double start,
                                       double end) {
  (void)now;
  // A backward after its rerun holds the rest from the rerun's start.
  const int p = pass_started_by_[task];
  if (p < 0) return end;
  const PassTask& pass = lowered_.passes()[p];
  const bool later = replicas_[pass.stage][pass.replica].backward_ended;
  ForDevicesOf(pass, start, false, [&](const SlotBytes& b, Device& device) {
    if (pass.backward) {
      device.parts.workspace = later ? b.later_rest : b.first_rest;
      return;
    }
    ++device.in_flight;
    device.parts.activations += b.kept;
    device.parts.workspace = b.forward_rest;
  });
  return end;
}

void StrategyMemoryTimeline::Ended(int task, double now) {
  const int p = pass_ended_by_[task];
  if (p < 0) return;
  const PassTask& pass = lowered_.passes()[p];
  ReplicaState& replica = replicas_[pass.stage][pass.replica];
  const bool hold_accumulators =
      pass.backward && !replica.backward_ended && replica.accumulates;
  ForDevicesOf(pass, now, true, [&](const SlotBytes& b, Device& device) {
    device.parts.workspace = 0;
    if (!pass.backward) return;
    --device.in_flight;
    device.parts.activations -= b.kept;
    if (hold_accumulators) device.parts.gradients += b.accumulators;
  });
  if (pass.backward) replica.backward_ended = true;
}

}  // namespace placer
