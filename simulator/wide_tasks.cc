#include "simulator/wide_tasks.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

#include "simulator/engine.h"
#include "simulator/partial_additions.h"
#include "simulator/task_graph.h"

namespace placer {
namespace {

// The dependencies between the nodes of one pass of a stage (`nodes`, its
// forward or backward list) as (from, to) positions in it
// (TaskDependencies; `position`: StagePlan's position_in_pass).
std::vector<std::pair<int, int>> PassEdges(const TrainingView& view,
                                           const Strategy& strategy,
                                           const std::vector<int>& nodes,
                                           const std::vector<int>& position) {
  std::vector<std::pair<int, int>> edges;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int m : TaskDependencies(view, strategy, nodes[i])) {
      edges.emplace_back(position[m], static_cast<int>(i));
    }
  }
  return edges;
}

// A wide pass's partial additions as they happen (PartialAdditions, one
// place per slot): each node lengthened by its own, each slot's busy time
// with them. Tasks: the pass's nodes, then its copies (`read_of_copy`:
// each copy's SlotRead in `reads`).
class WideAdditions final : public TaskObserver {
 public:
  WideAdditions(const std::vector<int>& nodes,
                const std::vector<int>& slot_of_node,
                const PipelineStage& stage, int replica,
                const std::vector<SlotRead>& reads,
                const std::vector<int>& read_of_copy,
                PartialAdditions* additions, std::vector<double>* busy)
      : nodes_(nodes),
        slot_of_node_(slot_of_node),
        stage_(stage),
        replica_(replica),
        reads_(reads),
        read_of_copy_(read_of_copy),
        additions_(*additions),
        busy_(*busy) {}

  double Started(int task, double, double, double end) override {
    if (task >= static_cast<int>(nodes_.size())) return end;
    const int slot = slot_of_node_[nodes_[task]];
    const double seconds = additions_.NodeStarts(
        nodes_[task], slot, stage_.device(replica_, slot));
    busy_[slot] += seconds;
    return end + seconds;
  }
  void Ended(int task, double) override {
    const int copy = task - static_cast<int>(nodes_.size());
    if (copy < 0) return;
    const SlotRead& read = reads_[read_of_copy_[copy]];
    if (read.sum >= 0) additions_.BufferArrives(read.sum, read.to_slot);
  }

 private:
  const std::vector<int>& nodes_;
  const std::vector<int>& slot_of_node_;
  const PipelineStage& stage_;
  const int replica_;
  const std::vector<SlotRead>& reads_;
  const std::vector<int>& read_of_copy_;
  PartialAdditions& additions_;
  std::vector<double>& busy_;
};

// The position in `value`'s consumers of its first reader on `slot`: where
// the op placement's lowering makes its copy there.
int FirstReaderOn(const SimulationContext& context,
                  const std::vector<int>& slot_of_node, int value, int slot) {
  const absl::Span<const int> consumers = context.consumers(value);
  for (size_t k = 0; k < consumers.size(); ++k) {
    if (slot_of_node[consumers[k]] == slot) return static_cast<int>(k);
  }
  return static_cast<int>(consumers.size());
}

// Where in node `node`'s outputs the value `read` copies (or the partial
// of its sum) is.
int OutputIndex(const SimulationContext& context, int node,
                const SlotRead& read) {
  const absl::Span<const int> outputs = context.outputs(node);
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (read.sum >= 0 ? context.view().sum_of(outputs[k]) == read.sum
                      : outputs[k] == read.value) {
      return static_cast<int>(k);
    }
  }
  return static_cast<int>(outputs.size());
}

// One pass of a wide stage (`nodes`, its forward or backward list)
// lowered to a task graph once for all its replicas, as the op placement's
// lowering (placement_lowering.h) would lower the nodes on a replica's
// devices: each node a task on its slot, which runs, whenever it is free,
// its ready node with the lowest priority (the context's ready order, then
// node key), a node being ready once its `edges` (PassEdges) and the
// copies it reads have ended. What crosses slots (`reads`) is a copy on
// the link between the two slots, booked in the order copies become ready
// (weights, ready at the start, by value and then by their first reader on
// each slot; those a node releases, by its outputs' order and then by
// their first reader on each slot). Durations are a replica's
// (RunWidePass sets them).
struct WidePass {
  TaskGraph graph;
  // Tasks: the pass's nodes, then the copies: each copy's SlotRead.
  std::vector<int> read_of_copy;
};

WidePass LowerWidePass(const SimulationContext& context,
                       const std::vector<int>& nodes,
                       const std::vector<SlotRead>& reads,
                       const std::vector<std::pair<int, int>>& edges,
                       const std::vector<int>& slot_of_node, int width) {
  const int num_nodes = static_cast<int>(nodes.size());
  WidePass pass;
  TaskGraph& graph = pass.graph;
  for (int slot = 0; slot < width; ++slot) {
    graph.AddResource(ResourceOrder::kPriority);
  }
  for (int i = 0; i < num_nodes; ++i) {
    // Task i is node i of the pass.
    graph.AddTask({slot_of_node[nodes[i]], 0, context.priority(nodes[i]),
                   context.key_rank(nodes[i])});
  }
  // Each copy's first reader on its slot (among all the value's readers).
  std::vector<int> first_reader(reads.size(), 0);
  for (size_t r = 0; r < reads.size(); ++r) {
    if (reads[r].value >= 0) {
      first_reader[r] = FirstReaderOn(context, slot_of_node, reads[r].value,
                                      reads[r].to_slot);
    }
  }
  // The copies, tasks after the nodes: weights first, by value and first
  // reader, then the rest as listed.
  std::vector<int>& read_of_copy = pass.read_of_copy;
  read_of_copy.resize(reads.size());
  for (size_t r = 0; r < reads.size(); ++r) {
    read_of_copy[r] = static_cast<int>(r);
  }
  std::stable_sort(read_of_copy.begin(), read_of_copy.end(),
                   [&](int a, int b) {
                     const bool wa = reads[a].made_by.empty();
                     const bool wb = reads[b].made_by.empty();
                     if (wa != wb) return wa;
                     if (!wa) return false;
                     return std::make_pair(reads[a].value, first_reader[a]) <
                            std::make_pair(reads[b].value, first_reader[b]);
                   });
  std::map<std::pair<int, int>, int> links;  // (from, to) slot: resource
  // (source, its output's index, first reader, copy task)
  std::vector<std::array<int, 4>> copy_edges;
  for (int r : read_of_copy) {
    const SlotRead& read = reads[r];
    auto [link, fresh] =
        links.emplace(std::make_pair(read.from_slot, read.to_slot),
                      graph.num_resources());
    if (fresh) graph.AddResource(ResourceOrder::kArrival);
    const int copy = graph.AddTask({link->second, 0, 0, graph.num_tasks()});
    for (int from : read.made_by) {
      copy_edges.push_back({from, OutputIndex(context, nodes[from], read),
                            first_reader[r], copy});
    }
  }
  // Edges, source by source: a node's to the nodes that wait for it, then
  // to its copies in the order above; a copy's to its readers.
  std::sort(copy_edges.begin(), copy_edges.end());
  std::vector<std::pair<int, int>> node_edges = edges;
  std::stable_sort(node_edges.begin(), node_edges.end(),
                   [](const auto& a, const auto& b) {
                     return a.first < b.first;
                   });
  size_t next = 0;
  for (const auto& [from, to] : node_edges) {
    for (; next < copy_edges.size() && copy_edges[next][0] < from; ++next) {
      graph.AddEdge(copy_edges[next][0], copy_edges[next][3]);
    }
    graph.AddEdge(from, to);
  }
  for (; next < copy_edges.size(); ++next) {
    graph.AddEdge(copy_edges[next][0], copy_edges[next][3]);
  }
  for (int k = 0; k < static_cast<int>(read_of_copy.size()); ++k) {
    for (int reader : reads[read_of_copy[k]].readers) {
      graph.AddEdge(num_nodes + k, reader);
    }
  }
  return pass;
}

// `pass` (LowerWidePass of `nodes` and `reads`) run for replica `replica`
// of `stage` on the event engine, its tasks timed on the replica's
// devices. `additions` (a backward's; null for a forward) charges the
// partial additions as they happen and is left as the pass ends. Returns
// each node's end, from the task's start, and fills each slot's busy
// seconds, (`arrived`, when given) when the last buffer its updates read
// arrives (0: none) and (`schedule`, when given) every node's and copy's
// start and end.
std::vector<double> RunWidePass(
    const SimulationContext& context, WidePass* pass,
    const std::vector<int>& nodes, const std::vector<SlotRead>& reads,
    PartialAdditions* additions, const std::vector<int>& slot_of_node,
    const PipelineStage& stage, int replica, std::vector<double>* busy,
    std::vector<double>* arrived = nullptr,
    WideTaskTimes::PassSchedule* schedule = nullptr) {
  const int width = stage.width();
  const int num_nodes = static_cast<int>(nodes.size());
  TaskGraph& graph = pass->graph;
  const std::vector<int>& read_of_copy = pass->read_of_copy;
  busy->assign(width, 0);
  for (int i = 0; i < num_nodes; ++i) {
    const int slot = slot_of_node[nodes[i]];
    const double seconds =
        context.node_seconds(nodes[i], stage.device(replica, slot));
    (*busy)[slot] += seconds;
    graph.set_seconds(i, seconds);
  }
  for (int k = 0; k < static_cast<int>(read_of_copy.size()); ++k) {
    const SlotRead& read = reads[read_of_copy[k]];
    graph.set_seconds(num_nodes + k,
                      context.costs().TransferSeconds(
                          read.bytes, context.cluster(),
                          stage.device(replica, read.from_slot),
                          stage.device(replica, read.to_slot)));
  }
  TaskSchedule ran;
  if (additions != nullptr && additions->charges()) {
    WideAdditions observer(nodes, slot_of_node, stage, replica, reads,
                           read_of_copy, additions, busy);
    ran = RunTaskGraph(graph, &observer);
  } else {
    ran = RunTaskGraph(graph);
  }
  std::vector<double>& ends = ran.end_seconds;
  if (schedule != nullptr) {
    schedule->node_start.assign(ran.start_seconds.begin(),
                                ran.start_seconds.begin() + num_nodes);
    schedule->node_end.assign(ends.begin(), ends.begin() + num_nodes);
    schedule->copy_start.assign(reads.size(), 0);
    schedule->copy_end.assign(reads.size(), 0);
    for (int k = 0; k < static_cast<int>(read_of_copy.size()); ++k) {
      schedule->copy_start[read_of_copy[k]] = ran.start_seconds[num_nodes + k];
      schedule->copy_end[read_of_copy[k]] = ends[num_nodes + k];
    }
  }
  if (arrived != nullptr) {
    arrived->assign(width, 0);
    for (int k = 0; k < static_cast<int>(read_of_copy.size()); ++k) {
      const SlotRead& read = reads[read_of_copy[k]];
      if (!read.readers.empty()) continue;
      (*arrived)[read.to_slot] =
          std::max((*arrived)[read.to_slot], ends[num_nodes + k]);
    }
  }
  ends.resize(nodes.size());
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
    WidePass forward = LowerWidePass(
        context, st.forward, st.forward_reads,
        PassEdges(view, strategy, st.forward, plan.position_in_pass),
        plan.slot_of_node, st.width);
    WidePass backward = LowerWidePass(
        context, st.backward, st.backward_reads,
        PassEdges(view, strategy, st.backward, plan.position_in_pass),
        plan.slot_of_node, st.width);
    const PipelineStage& stage = strategy.stages[s];
    for (int replica = 0; replica < stage.num_replicas(); ++replica) {
      WideTaskTimes w;
      std::vector<double> ends = RunWidePass(
          context, &forward, st.forward, st.forward_reads, nullptr,
          plan.slot_of_node, stage, replica, &w.forward_busy, nullptr,
          record ? &w.forward_schedule : nullptr);
      for (double e : ends) w.forward = std::max(w.forward, e);
      PartialAdditions additions(context, st.width);
      for (int slot = 0; slot < st.width; ++slot) {
        for (int x : st.held_at_start[slot]) {
          additions.BufferArrives(x, slot);
        }
      }
      w.backward_end = RunWidePass(
          context, &backward, st.backward, st.backward_reads, &additions,
          plan.slot_of_node, stage, replica, &w.backward_busy, &w.arrived,
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
        w.accumulate[slot] += context.costs().AccumulateSeconds(
            view, u, cluster.device(device));
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
