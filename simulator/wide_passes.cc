#include "simulator/wide_passes.h"

#include <vector>

namespace placer {

std::vector<WideStagePasses> LowerWidePasses(const SimulationContext& context,
                                             const Strategy& strategy,
                                             const StagePlan& plan) {
  std::vector<WideStagePasses> passes(strategy.stages.size());
  for (size_t s = 0; s < strategy.stages.size(); ++s) {
    const StageModel& st = plan.stages[s];
    if (st.width == 1) continue;
    const int stage = static_cast<int>(s);
    passes[s].wide = true;
    passes[s].forward =
        LowerStagePass(context.index(), context.priorities(), strategy, stage,
                       false, st.forward, plan.slot_of_node);
    passes[s].backward =
        LowerStagePass(context.index(), context.priorities(), strategy, stage,
                       true, st.backward, plan.slot_of_node);
    const LoweredPlacement& backward = passes[s].backward;
    passes[s].update_buffers.assign(st.width, {});
    for (size_t c = 0; c < backward.copies.size(); ++c) {
      const CopyTask& copy = backward.copies[c];
      if (copy.gradient_sum >= 0 &&
          context.kind(
              context.view().gradient_sums()[copy.gradient_sum].sink) ==
              NodeKind::kUpdate) {
        passes[s].update_buffers[copy.dst].push_back(
            backward.copy_task(static_cast<int>(c)));
      }
    }
  }
  return passes;
}

PlacedWidePass PlaceWidePass(const SimulationContext& context,
                             const LoweredPlacement& pass,
                             const PipelineStage& stage, int replica,
                             absl::FunctionRef<int(int, int)> link) {
  const TaskGraph& own = pass.graph;
  // The pass's resources: a slot's is its device; what copy a link
  // carries decides which.
  std::vector<int> resource_of(own.num_resources(), -1);
  for (int slot = 0; slot < stage.width(); ++slot) {
    resource_of[slot] = stage.device(replica, slot);
  }
  for (size_t c = 0; c < pass.copies.size(); ++c) {
    const CopyTask& copy = pass.copies[c];
    const int r = own.resource(pass.copy_task(static_cast<int>(c)));
    if (resource_of[r] < 0) {
      resource_of[r] = link(stage.device(replica, copy.src),
                            stage.device(replica, copy.dst));
    }
  }
  PlacedWidePass placed;
  placed.resource.reserve(own.num_tasks());
  placed.seconds.reserve(own.num_tasks());
  for (int t = 0; t < own.num_tasks(); ++t) {
    placed.resource.push_back(resource_of[own.resource(t)]);
    if (pass.is_node(t)) {
      const int node = pass.node_of_task[t];
      placed.seconds.push_back(context.node_seconds(
          node, stage.device(replica, pass.device_of_node[node])));
    } else {
      const CopyTask& copy = pass.copy(t);
      placed.seconds.push_back(context.costs().TransferSeconds(
          copy.bytes, context.cluster(), stage.device(replica, copy.src),
          stage.device(replica, copy.dst)));
    }
  }
  return placed;
}

int InlineWidePass(const LoweredPlacement& pass, const PlacedWidePass& placed,
                   int begin, TaskGraph* graph) {
  const TaskGraph& own = pass.graph;
  const int first = graph->num_tasks();
  for (int t = 0; t < own.num_tasks(); ++t) {
    graph->AddTask(
        {placed.resource[t], placed.seconds[t], own.priority(t), own.tie(t)});
  }
  for (int t = 0; t < own.num_tasks(); ++t) {
    if (own.num_predecessors(t) == 0) graph->AddEdge(begin, first + t);
  }
  for (const TaskEdge& edge : own.edges()) {
    if (edge.lag_seconds < 0) {
      graph->AddEdge(first + edge.from, first + edge.to);
    } else {
      graph->AddStartEdge(first + edge.from, first + edge.to, edge.lag_seconds);
    }
  }
  return first;
}

}  // namespace placer
