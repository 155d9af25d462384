#include "simulator/wide_tasks.h"

#include <algorithm>
#include <utility>

#include "simulator/engine.h"
#include "simulator/partial_additions.h"
#include "simulator/task_graph.h"

namespace placer {
namespace {

// A wide pass's partial additions as they happen (PartialAdditions, one
// place per slot): each node lengthened by its own, each slot's busy time
// with them; a slot's buffer arriving at another.
class WideAdditions final : public TaskObserver {
 public:
  WideAdditions(const LoweredPlacement& pass, const PipelineStage& stage,
                int replica, PartialAdditions* additions,
                std::vector<double>* busy)
      : pass_(pass),
        stage_(stage),
        replica_(replica),
        additions_(*additions),
        busy_(*busy) {}

  double Started(int task, double, double, double end) override {
    if (!pass_.is_node(task)) return end;
    const int node = pass_.node_of_task[task];
    const int slot = pass_.device_of_node[node];
    const double seconds =
        additions_.NodeStarts(node, slot, stage_.device(replica_, slot));
    busy_[slot] += seconds;
    return end + seconds;
  }
  void Ended(int task, double) override {
    if (!pass_.is_copy(task)) return;
    const CopyTask& copy = pass_.copy(task);
    if (copy.gradient_sum >= 0) {
      additions_.BufferArrives(copy.gradient_sum, copy.dst);
    }
  }

 private:
  const LoweredPlacement& pass_;
  const PipelineStage& stage_;
  const int replica_;
  PartialAdditions& additions_;
  std::vector<double>& busy_;
};

// `pass` (LowerStagePass's) run for replica `replica` of `stage` on the
// event engine, its tasks timed on the replica's devices. `additions` (a
// backward's; null for a forward) charges the partial additions as they
// happen and is left as the pass ends. Returns each node's end, from the
// task's start, and fills each slot's busy seconds, (`arrived`, when
// given) when the last buffer its updates read arrives (0: none) and
// (`schedule`, when given) every node's and copy's start and end.
std::vector<double> RunWidePass(
    const SimulationContext& context, LoweredPlacement* pass,
    PartialAdditions* additions, const PipelineStage& stage, int replica,
    std::vector<double>* busy, std::vector<double>* arrived = nullptr,
    WideTaskTimes::PassSchedule* schedule = nullptr) {
  const int width = stage.width();
  const int num_nodes = pass->num_nodes;
  TaskGraph& graph = pass->graph;
  busy->assign(width, 0);
  for (int k = 0; k < num_nodes; ++k) {
    const int node = pass->node_of_task[k];
    const int slot = pass->device_of_node[node];
    const double seconds =
        context.node_seconds(node, stage.device(replica, slot));
    (*busy)[slot] += seconds;
    graph.set_seconds(k, seconds);
  }
  for (size_t c = 0; c < pass->copies.size(); ++c) {
    const CopyTask& copy = pass->copies[c];
    graph.set_seconds(
        pass->copy_task(static_cast<int>(c)),
        context.costs().TransferSeconds(copy.bytes, context.cluster(),
                                        stage.device(replica, copy.src),
                                        stage.device(replica, copy.dst)));
  }
  TaskSchedule ran;
  if (additions != nullptr && additions->charges()) {
    WideAdditions observer(*pass, stage, replica, additions, busy);
    ran = RunTaskGraph(graph, &observer);
  } else {
    ran = RunTaskGraph(graph);
  }
  std::vector<double>& ends = ran.end_seconds;
  if (schedule != nullptr) {
    schedule->node_start.assign(ran.start_seconds.begin(),
                                ran.start_seconds.begin() + num_nodes);
    schedule->node_end.assign(ends.begin(), ends.begin() + num_nodes);
    schedule->copies = pass->copies;
    schedule->copy_start.assign(ran.start_seconds.begin() + pass->first_copy,
                                ran.start_seconds.end());
    schedule->copy_end.assign(ends.begin() + pass->first_copy, ends.end());
  }
  if (arrived != nullptr) {
    // Buffers for updates: copies no task waits for.
    arrived->assign(width, 0);
    for (size_t c = 0; c < pass->copies.size(); ++c) {
      const CopyTask& copy = pass->copies[c];
      if (copy.gradient_sum < 0 ||
          context.kind(
              context.view().gradient_sums()[copy.gradient_sum].sink) !=
              NodeKind::kUpdate) {
        continue;
      }
      (*arrived)[copy.dst] = std::max(
          (*arrived)[copy.dst], ends[pass->copy_task(static_cast<int>(c))]);
    }
  }
  ends.resize(num_nodes);
  return std::move(ends);
}

}  // namespace

std::vector<std::vector<WideTaskTimes>> ScheduleWideTasks(
    const SimulationContext& context, const Strategy& strategy,
    const StagePlan& plan, bool record) {
  const TrainingView& view = context.view();
  const Cluster& cluster = context.cluster();
  const int S = static_cast<int>(strategy.stages.size());
  std::vector<std::vector<WideTaskTimes>> wide(S);
  for (int s = 0; s < S; ++s) {
    const StageModel& st = plan.stages[s];
    if (st.width == 1) continue;
    // The same for every replica.
    LoweredPlacement forward =
        LowerStagePass(context.index(), context.priorities(), strategy, s,
                       false, st.forward, plan.slot_of_node);
    LoweredPlacement backward =
        LowerStagePass(context.index(), context.priorities(), strategy, s, true,
                       st.backward, plan.slot_of_node);
    const PipelineStage& stage = strategy.stages[s];
    for (int replica = 0; replica < stage.num_replicas(); ++replica) {
      WideTaskTimes w;
      for (const LoweredPlacement* pass : {&forward, &backward}) {
        for (const CopyTask& copy : pass->copies) {
          ++w.copies;
          w.copied_bytes += copy.bytes;
        }
      }
      std::vector<double> ends = RunWidePass(
          context, &forward, nullptr, stage, replica, &w.forward_busy, nullptr,
          record ? &w.forward_schedule : nullptr);
      for (double e : ends) w.forward = std::max(w.forward, e);
      PartialAdditions additions(context, st.width);
      for (int slot = 0; slot < st.width; ++slot) {
        for (int x : st.held_at_start[slot]) {
          additions.BufferArrives(x, slot);
        }
      }
      w.backward_end = RunWidePass(context, &backward, &additions, stage,
                                   replica, &w.backward_busy, &w.arrived,
                                   record ? &w.backward_schedule : nullptr);
      w.slot_end.assign(st.width, 0);
      for (size_t i = 0; i < st.backward.size(); ++i) {
        double& e = w.slot_end[plan.slot_of_node[st.backward[i]]];
        e = std::max(e, w.backward_end[i]);
      }
      w.accumulate.assign(st.width, 0);
      w.merge.assign(st.width, 0);
      for (int u : st.update) {
        const int slot = plan.slot_of_node[u];
        const int device = stage.device(replica, slot);
        w.accumulate[slot] +=
            context.costs().AccumulateSeconds(view, u, cluster.device(device));
        // Other slots' buffers that arrived into one held, added before
        // the update (PartialAdditions: before the sum's reader starts).
        for (int x : view.sums_read_by(u)) {
          w.merge[slot] += additions.arrived(x, slot) *
                           context.partial_add_seconds(x, device);
        }
      }
      for (double e : w.slot_end) w.backward = std::max(w.backward, e);
      wide[s].push_back(std::move(w));
    }
  }
  return wide;
}

}  // namespace placer
