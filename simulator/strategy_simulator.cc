#include "simulator/strategy_simulator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "simulator/engine.h"
#include "simulator/stage_plan.h"
#include "simulator/strategy_lowering.h"
#include "simulator/strategy_memory.h"
#include "simulator/wide_additions.h"

namespace placer {
namespace {

// A wide pass's nodes and copies between its slots (its graph inlined at
// `first`, `own`), as they ran, into `out`.
void RecordWidePass(const LoweredPlacement& own, const PipelineStage& stage,
                    const PassTask& pass, int first, const TaskSchedule& ran,
                    StrategySimulation* out) {
  for (int i = 0; i < own.num_nodes; ++i) {
    const int node = own.node_of_task[i];
    out->nodes.push_back({node, pass.micro_batch,
                          stage.device(pass.replica, own.device_of_node[node]),
                          ran.start_seconds[first + i],
                          ran.end_seconds[first + i]});
  }
  for (size_t c = 0; c < own.copies.size(); ++c) {
    const CopyTask& copy = own.copies[c];
    const int t = first + own.copy_task(static_cast<int>(c));
    ScheduledTransfer x;
    x.value = copy.value;
    x.gradient_sum = copy.gradient_sum;
    x.src = stage.device(pass.replica, copy.src);
    x.dst = stage.device(pass.replica, copy.dst);
    x.bytes = copy.bytes;
    x.start_seconds = ran.start_seconds[t];
    x.end_seconds = ran.end_seconds[t];
    out->step.transfers.push_back(x);
  }
}

// What the nodes of a wide pass's graph inlined at `first` kept each
// device busy (their partial additions included) into `busy`.
void AddWideBusy(const LoweredPlacement& own, const PipelineStage& stage,
                 int replica, int first, const TaskSchedule& ran,
                 std::vector<double>* busy) {
  for (int i = 0; i < own.num_nodes; ++i) {
    const int node = own.node_of_task[i];
    (*busy)[stage.device(replica, own.device_of_node[node])] +=
        ran.end_seconds[first + i] - ran.start_seconds[first + i];
  }
}

}  // namespace

absl::StatusOr<StrategySimulation> SimulateStrategy(
    const SimulationContext& context, const Strategy& strategy,
    const SimulationOptions& options) {
  const TrainingView& view = context.view();
  const Cluster& cluster = context.cluster();
  RETURN_IF_ERROR(CheckStrategy(view, cluster, strategy));
  ASSIGN_OR_RETURN(const StagePlan plan, MakeStagePlan(context, strategy));
  const int M = strategy.micro_batches;
  const int D = context.num_devices();
  const LoweredStrategy lowered = LowerStrategy(context, strategy, plan);
  StrategyMemoryOptions memory_options;
  memory_options.record = options.record_schedule;
  StrategyMemoryTimeline memory(
      strategy, plan, lowered, D,
      view.options().optimizer_state_per_parameter_byte(), memory_options);
  WideAdditions additions(context, strategy, plan, lowered);
  ObserverPair observers(&additions, &memory);
  const TaskSchedule ran = RunTaskGraph(
      lowered.graph(),
      additions.charges() ? static_cast<TaskObserver*>(&observers) : &memory);
  if (ran.finished != lowered.graph().num_tasks()) {
    int passes = 0;
    for (const PassTask& pass : lowered.passes()) {
      passes += ran.end_seconds[pass.end_task] >= 0;
    }
    return absl::InternalError(absl::StrCat(
        "strategy simulation stalled after ", passes, " of ",
        lowered.passes().size(), " tasks (", DescribeStrategy(strategy), ")"));
  }

  StrategySimulation out;
  SimulationResult& step = out.step;
  out.micro_batches = M;
  step.step_seconds = ran.makespan_seconds;
  step.busy_seconds.assign(D, 0);
  step.inaccurate_nodes = context.inaccurate_nodes();
  // Copies between the slots of wide stages' passes, M of each (a rerun's
  // not counted).
  for (int s = 0; s < static_cast<int>(strategy.stages.size()); ++s) {
    const WideStagePasses& wide = lowered.wide_passes(s);
    if (!wide.wide) continue;
    for (const LoweredPlacement* own : {&wide.forward, &wide.backward}) {
      for (const CopyTask& copy : own->copies) {
        step.bytes_moved += static_cast<int64_t>(M) * copy.bytes;
        step.transfers_count += M;
      }
    }
  }
  // Busy time, device by device.
  for (int d = 0; d < D; ++d) {
    for (int index : lowered.device_passes()[d]) {
      const PassTask& pass = lowered.passes()[index];
      const PipelineStage& stage = strategy.stages[pass.stage];
      if (pass.wide()) {
        const WideStagePasses& wide = lowered.wide_passes(pass.stage);
        if (pass.recompute_first_inlined >= 0) {
          AddWideBusy(wide.forward, stage, pass.replica,
                      pass.recompute_first_inlined, ran, &step.busy_seconds);
        }
        AddWideBusy(wide.pass(pass.backward), stage, pass.replica,
                    pass.first_inlined, ran, &step.busy_seconds);
        for (size_t slot = 0; slot < pass.slot_tasks.size(); ++slot) {
          const int t = pass.slot_tasks[slot];
          step.busy_seconds[stage.device(pass.replica,
                                         static_cast<int>(slot))] +=
              ran.end_seconds[t] - ran.start_seconds[t];
        }
        continue;
      }
      double busy = lowered.graph().seconds(pass.task);
      if (pass.recompute_task >= 0) {
        busy += lowered.graph().seconds(pass.recompute_task);
      }
      for (int g : stage.TensorGroup(pass.replica)) {
        step.busy_seconds[g] += busy;
      }
    }
  }
  // Tensor-parallel collectives: every pass's (a rerun's forward ones
  // again), on its replica's group.
  for (const PassTask& pass : lowered.passes()) {
    const StageModel& st = plan.stages[pass.stage];
    if (st.tensor < 2) continue;
    const std::vector<int> group =
        strategy.stages[pass.stage].TensorGroup(pass.replica);
    auto add = [&](const GroupCollective& c) {
      step.bytes_moved += CollectiveWireBytes(c.kind, st.tensor, c.bytes);
      step.transfers_count += CollectiveMessages(c.kind, st.tensor);
      out.tensor_seconds +=
          CollectiveSeconds(context.costs(), cluster, group, c.bytes, c.kind);
    };
    const int runs = pass.backward ? (st.recompute == Recompute::kFull ||
                                              st.recompute == Recompute::kLayers
                                          ? 1
                                          : 0)
                                   : 1;
    for (int r = 0; r < runs; ++r) {
      for (const GroupCollective& c : st.forward_collectives) add(c);
    }
    if (pass.backward) {
      for (const auto& [after, c] : st.backward_collectives) add(c);
    }
  }
  // ZeRO-3's gathers: one all-gather per round (replica 0's passes) and
  // tensor-parallel rank; an overlapped ZeRO-1/2 gather: the first
  // round's forward only.
  for (int s = 0; s < static_cast<int>(strategy.stages.size()); ++s) {
    const PipelineStage& stage = strategy.stages[s];
    const int R = stage.num_replicas();
    if (R < 2 || (strategy.zero != ZeroStage::kParameters &&
                  !strategy.overlap_parameter_gather)) {
      continue;
    }
    const StageModel& st = plan.stages[s];
    const GatherTimes& times = lowered.gather_times(s);
    std::vector<ReplicaTask> tasks = ReplicaTaskOrder(strategy, s, 0);
    if (strategy.zero != ZeroStage::kParameters) tasks = {ReplicaTask()};
    for (const ReplicaTask& task : tasks) {
      // A recomputing stage's backward reruns its forward first.
      const int runs =
          task.backward && st.recompute == Recompute::kFull ? 2 : 1;
      for (int r = 0; r < runs; ++r) {
        const bool backward = task.backward && r == runs - 1;
        const std::vector<int64_t>& gathers =
            backward ? st.backward_gather_bytes : st.forward_gather_bytes;
        const std::vector<double>& seconds =
            backward ? times.backward : times.forward;
        for (size_t i = 0; i < gathers.size(); ++i) {
          if (gathers[i] == 0) continue;
          step.bytes_moved +=
              stage.tensor() *
              CollectiveWireBytes(Collective::kAllGather, R, gathers[i]);
          step.transfers_count +=
              stage.tensor() * CollectiveMessages(Collective::kAllGather, R);
          out.allreduce_seconds += seconds[i];
        }
      }
    }
  }
  for (const TransferTask& transfer : lowered.transfers()) {
    step.bytes_moved += transfer.bytes;
    ++step.transfers_count;
  }
  if (options.record_schedule) {
    // In the order they were sent.
    std::vector<int> transfer_of_task(lowered.graph().num_tasks(), -1);
    for (size_t x = 0; x < lowered.transfers().size(); ++x) {
      transfer_of_task[lowered.transfers()[x].task] = static_cast<int>(x);
    }
    for (int t : ran.start_order) {
      if (transfer_of_task[t] < 0) continue;
      const TransferTask& transfer = lowered.transfers()[transfer_of_task[t]];
      ScheduledTransfer x;
      x.src = transfer.src;
      x.dst = transfer.dst;
      x.bytes = transfer.bytes;
      x.start_seconds = ran.start_seconds[t];
      x.end_seconds = ran.end_seconds[t];
      step.transfers.push_back(x);
    }
  }
  for (const BucketTask& bucket : lowered.buckets()) {
    const int replicas = strategy.stages[bucket.stage].num_replicas();
    if (options.record_schedule) {
      out.buckets.push_back({bucket.stage, bucket.slot, bucket.bytes,
                             ran.start_seconds[bucket.task],
                             ran.end_seconds[bucket.task], bucket.collective});
    }
    out.allreduce_seconds += lowered.graph().seconds(bucket.task);
    // Every rank of the replicas' tensor-parallel groups reduces its share.
    const int ranks = strategy.stages[bucket.stage].tensor();
    step.bytes_moved +=
        ranks * CollectiveWireBytes(bucket.collective, replicas, bucket.bytes);
    step.transfers_count +=
        ranks * (bucket.collective == Collective::kAllreduce &&
                         strategy.allreduce == AllreduceAlgorithm::kTree
                     ? 2 * (replicas - 1)
                     : CollectiveMessages(bucket.collective, replicas));
  }

  // Updates.
  for (const UpdateTask& update : lowered.updates()) {
    const PipelineStage& stage = strategy.stages[update.stage];
    const std::vector<int> group = update.slot == 0
                                       ? stage.TensorGroup(update.replica)
                                       : std::vector<int>{update.device};
    for (int g : group) {
      step.busy_seconds[g] += lowered.graph().seconds(update.task);
    }
    if (options.record_schedule) {
      out.tasks.push_back({update.stage, -1, update.device, false,
                           ran.start_seconds[update.task],
                           ran.end_seconds[update.task]});
    }
  }
  // Memory: the strategy's timeline (simulator/strategy_memory.h).
  step.peak_memory_bytes = memory.peak_bytes();
  step.peak_breakdown = memory.peak_breakdown();
  out.most_in_flight = memory.most_in_flight();
  out.peak_passes = memory.peak_passes();
  for (int d = 0; d < D; ++d) {
    step.oom |= step.peak_memory_bytes[d] > cluster.device(d).memory_bytes;
  }
  if (options.record_schedule) {
    step.memory = std::move(memory.samples());
    for (const PassTask& pass : lowered.passes()) {
      const PipelineStage& stage = strategy.stages[pass.stage];
      std::vector<int> devices = stage.TensorGroup(pass.replica);
      for (int slot = 1; slot < stage.width(); ++slot) {
        devices.push_back(stage.device(pass.replica, slot));
      }
      for (int d : devices) {
        if (pass.recompute_task >= 0) {
          out.tasks.push_back({pass.stage, pass.micro_batch, d, false,
                               ran.start_seconds[pass.recompute_task],
                               ran.end_seconds[pass.recompute_end_task], true});
        }
        out.tasks.push_back({pass.stage, pass.micro_batch, d, pass.backward,
                             ran.start_seconds[pass.task],
                             ran.end_seconds[pass.end_task]});
      }
      for (size_t slot = 0; slot < pass.slot_tasks.size(); ++slot) {
        const int t = pass.slot_tasks[slot];
        if (ran.end_seconds[t] <= ran.start_seconds[t]) continue;
        out.tasks.push_back({pass.stage, pass.micro_batch,
                             stage.device(pass.replica, static_cast<int>(slot)),
                             true, ran.start_seconds[t], ran.end_seconds[t],
                             false, /*adds=*/true});
      }
      if (pass.wide()) {
        RecordWidePass(lowered.wide_passes(pass.stage).pass(pass.backward),
                       stage, pass, pass.first_inlined, ran, &out);
      }
    }
  }
  double work = 0;
  for (int n = 0; n < context.num_nodes(); ++n) {
    work += context.min_node_seconds(n) *
            (view.node(n).kind == NodeKind::kUpdate ? 1 : M);
  }
  step.lower_bound_seconds = std::max(context.lower_bound_seconds(), work / D);
  out.seconds_per_batch = step.step_seconds / M;
  return out;
}

}  // namespace placer
