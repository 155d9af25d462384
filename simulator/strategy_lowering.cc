#include "simulator/strategy_lowering.h"

#include <algorithm>
#include <vector>

#include "simulator/allreduce.h"

namespace placer {
namespace {

// The nodes' time on `device`, each its share (tensor parallelism).
double SecondsOf(const SimulationContext& context, const StagePlan& plan,
                 const std::vector<int>& nodes, int device) {
  double t = 0;
  for (int n : nodes) {
    t += context.node_seconds(n, device) * plan.share_of_node[n];
  }
  return t;
}

// What node `i` of `st`'s backward spends on `device` adding partials
// (StageModel::adds), its share.
double AddsSeconds(const SimulationContext& context, const StagePlan& plan,
                   const StageModel& st, size_t i, int device) {
  double seconds = 0;
  for (int x : st.adds[i]) seconds += context.partial_add_seconds(x, device);
  return seconds * plan.share_of_node[st.backward[i]];
}

// A tensor-parallel group's collective.
double GroupSeconds(const SimulationContext& context,
                    const std::vector<int>& group, const GroupCollective& c) {
  return CollectiveSeconds(context.costs(), context.cluster(), group, c.bytes,
                           c.kind);
}

// ZeRO-3: a pass's nodes on replica `k`'s device with the stage's
// parameters gathered before the nodes that read them, one gather at a
// time (`gathers`, GatherTimes), each starting once the node of the
// gather before it has started (one unit prefetched). Each node takes its
// share of its time (a backward's partial adds too) and is followed by the
// tensor-parallel group's collectives placed after it. Returns each
// node's end from the pass's start.
std::vector<double> GatheredEnds(const SimulationContext& context,
                                 const StagePlan& plan, const StageModel& st,
                                 const PipelineStage& stage, int k,
                                 bool backward, const GatherTimes& gathers) {
  const std::vector<int>& nodes = backward ? st.backward : st.forward;
  const std::vector<double>& gather_seconds =
      backward ? gathers.backward : gathers.forward;
  const std::vector<int64_t>& gather_bytes =
      backward ? st.backward_gather_bytes : st.forward_gather_bytes;
  const std::vector<int> group = stage.TensorGroup(k);
  const int device = group[0];
  std::vector<double> ends;
  double node_end = 0, gather_end = 0, unit_start = 0;
  size_t c = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const double share = plan.share_of_node[nodes[i]];
    double seconds = context.node_seconds(nodes[i], device) * share;
    if (backward) seconds += AddsSeconds(context, plan, st, i, device);
    double start = node_end;
    if (gather_bytes[i] > 0) {
      gather_end = std::max(gather_end, unit_start) + gather_seconds[i];
      start = std::max(start, gather_end);
      unit_start = start;
    }
    node_end = start + seconds;
    for (; backward && c < st.backward_collectives.size() &&
           st.backward_collectives[c].first <= static_cast<int>(i);
         ++c) {
      node_end +=
          GroupSeconds(context, group, st.backward_collectives[c].second);
    }
    ends.push_back(node_end);
  }
  return ends;
}

// How long each pass of replica `k` of stage `s` takes, and each slot's
// busy time in it (wide stages).
struct PassSeconds {
  double forward = 0;
  double backward = 0;    // the replica's first backward
  double accumulate = 0;  // added to every later one
  std::vector<double> forward_busy, backward_busy;  // wide: per slot
  std::vector<double> accumulate_busy;              // wide: per slot
  std::vector<double> merge_busy;                   // wide: per slot
};

// Where, from the start of a replica's backward pass, each backward node of
// the stage ends: when the gradients it makes are final.
std::vector<double> BackwardOffsets(const SimulationContext& context,
                                    const StagePlan& plan,
                                    const StageModel& stage,
                                    const std::vector<int>& group) {
  std::vector<double> offsets;
  double t = 0;
  size_t c = 0;
  const int device = group[0];
  for (size_t i = 0; i < stage.backward.size(); ++i) {
    const double share = plan.share_of_node[stage.backward[i]];
    t += context.node_seconds(stage.backward[i], device) * share;
    t += AddsSeconds(context, plan, stage, i, device);
    for (; c < stage.backward_collectives.size() &&
           stage.backward_collectives[c].first <= static_cast<int>(i);
         ++c) {
      t += GroupSeconds(context, group, stage.backward_collectives[c].second);
    }
    offsets.push_back(t);
  }
  return offsets;
}

// The GatherTimes of `stage` (their contract in strategy_lowering.h).
GatherTimes StageGatherTimes(const SimulationContext& context,
                             const StageModel& st, const PipelineStage& stage,
                             AllreduceAlgorithm allreduce) {
  const std::vector<int> ring = SlotDevices(stage, 0);
  auto times = [&](const std::vector<int64_t>& gathers) {
    std::vector<double> seconds(gathers.size(), 0);
    for (size_t i = 0; i < gathers.size(); ++i) {
      if (gathers[i] > 0) {
        seconds[i] = AllGatherSeconds(context.costs(), context.cluster(), ring,
                                      gathers[i], allreduce);
      }
    }
    return seconds;
  };
  return {times(st.forward_gather_bytes), times(st.backward_gather_bytes)};
}

// A wide stage's pass `pass` (its stage, micro-batch, replica and
// direction set): its graph inlined (as `forward` or `backward` places it
// on the replica) between a start and an end mark on `marks`, after
// `*previous` (a recomputing backward: the forward's graph before it),
// each slot's nodes and the weights it sends at the start also after that
// slot's task in `*slot_tasks` (the previous backward's; empty: none). A
// backward's slot tasks follow its end, each adding `accumulate_share` of its
// slot's `slot_accumulate` (0 for the replica's first backward) once the
// buffers its updates read have arrived. Leaves in `*previous` the pass's end
// and in `*slot_tasks` its slot tasks (a forward: none).
void LowerWideTask(const StageModel& st, const PipelineStage& stage,
                   const WideStagePasses& wide, const PlacedWidePass& forward,
                   const PlacedWidePass& backward, int marks,
                   double accumulate_share,
                   const std::vector<double>& slot_accumulate, int* previous,
                   std::vector<int>* slot_tasks, PassTask* pass,
                   TaskGraph* graph) {
  const int k = pass->replica;
  // Returns the pass graph's first task; `*start` and `*end` its marks.
  auto inline_graph = [&](bool is_backward, int* start, int* end) {
    *start = graph->AddTask({marks, 0});
    if (*previous >= 0) graph->AddEdge(*previous, *start);
    const LoweredPlacement& own = wide.pass(is_backward);
    const int first =
        InlineWidePass(own, is_backward ? backward : forward, *start, graph);
    // A slot's nodes, and the weights it sends at the pass's start, after
    // its task.
    for (int i = 0; !slot_tasks->empty() && i < own.graph.num_tasks(); ++i) {
      if (own.is_node(i)) {
        graph->AddEdge((*slot_tasks)[own.device_of_node[own.node_of_task[i]]],
                       first + i);
      } else if (own.graph.num_predecessors(i) == 0) {
        graph->AddEdge((*slot_tasks)[own.copy(i).src], first + i);
      }
    }
    slot_tasks->clear();
    *end = graph->AddTask({marks, 0});
    for (int i = 0; i < own.num_nodes; ++i) graph->AddEdge(first + i, *end);
    *previous = *end;
    return first;
  };
  if (pass->backward && st.recompute != Recompute::kNone) {
    pass->recompute_first_inlined =
        inline_graph(false, &pass->recompute_task, &pass->recompute_end_task);
  }
  pass->first_inlined =
      inline_graph(pass->backward, &pass->task, &pass->end_task);
  if (!pass->backward) return;
  for (int slot = 0; slot < st.width; ++slot) {
    const int t = graph->AddTask(
        {stage.device(k, slot), accumulate_share * slot_accumulate[slot]});
    graph->AddEdge(pass->end_task, t);
    for (int copy : wide.update_buffers[slot]) {
      graph->AddEdge(pass->first_inlined + copy, t);
    }
    pass->slot_tasks.push_back(t);
  }
  *slot_tasks = pass->slot_tasks;
}

}  // namespace

LoweredStrategy LowerStrategy(const SimulationContext& context,
                              const Strategy& strategy, const StagePlan& plan) {
  const TrainingView& view = context.view();
  const Cluster& cluster = context.cluster();
  const int S = static_cast<int>(strategy.stages.size());
  const int M = strategy.micro_batches;
  const int D = context.num_devices();
  LoweredStrategy lowered;
  TaskGraph& graph = lowered.graph_;
  for (int d = 0; d < D; ++d) graph.AddResource(ResourceOrder::kPriority);
  std::vector<int> links(static_cast<size_t>(D) * D, -1);  // [src * D + dst]
  auto link = [&](int src, int dst) {
    int& resource = links[static_cast<size_t>(src) * D + dst];
    if (resource < 0) resource = graph.AddResource(ResourceOrder::kArrival);
    return resource;
  };

  for (int s = 0; s < S; ++s) {
    lowered.gather_times_.push_back(StageGatherTimes(
        context, plan.stages[s], strategy.stages[s], strategy.allreduce));
  }
  lowered.wide_passes_ = LowerWidePasses(context, strategy, plan);
  // A wide pass's marks of start and end, of no time.
  int marks = -1;
  // Room for every micro-batch's copy of the wide passes' graphs (their
  // forward again where a stage recomputes) beside the rest.
  int64_t tasks = 4LL * S * M + 64, edges = 8LL * S * M + 64;
  for (int s = 0; s < S; ++s) {
    const WideStagePasses& passes = lowered.wide_passes_[s];
    if (!passes.wide) continue;
    if (marks < 0) marks = graph.AddResource(ResourceOrder::kArrival);
    const int reruns = plan.stages[s].recompute != Recompute::kNone ? 2 : 1;
    const TaskGraph& f = passes.forward.graph;
    const TaskGraph& b = passes.backward.graph;
    tasks +=
        static_cast<int64_t>(M) * (reruns * (f.num_tasks() + 2) +
                                   b.num_tasks() + 3 + plan.stages[s].width);
    // Per task: its start mark or a slot task, its end mark.
    edges += static_cast<int64_t>(M) *
             (reruns * (3 * f.num_tasks() + f.edges().size()) +
              3 * b.num_tasks() + b.edges().size() + 4 * plan.stages[s].width);
  }
  graph.Reserve(static_cast<int>(tasks), static_cast<int>(edges));

  // Passes, in each replica's order.
  lowered.passes_ = PassTable<PassTask>(S, M);
  lowered.device_passes_.assign(D, {});
  for (int s = 0; s < S; ++s) {
    const StageModel& st = plan.stages[s];
    const std::vector<int> replicas = strategy.stages[s].FirstDevices();
    const GatherTimes& gathers = lowered.gather_times_[s];
    for (int k = 0; k < static_cast<int>(replicas.size()); ++k) {
      const int d = replicas[k];
      const std::vector<int> group = strategy.stages[s].TensorGroup(k);
      // f: a forward pass; first_f: the replica's first in the step.
      double f = 0, first_f = 0, b = 0, accumulate = 0;
      const WideStagePasses& wide = lowered.wide_passes_[s];
      // A wide replica's slots: each adds into its accumulators.
      std::vector<double> slot_accumulate;
      PlacedWidePass placed_forward, placed_backward;
      if (wide.wide) {
        placed_forward =
            PlaceWidePass(context, wide.forward, strategy.stages[s], k, link);
        placed_backward =
            PlaceWidePass(context, wide.backward, strategy.stages[s], k, link);
        slot_accumulate.assign(st.width, 0);
        for (int u : st.update) {
          const int slot = plan.slot_of_node[u];
          slot_accumulate[slot] += context.costs().AccumulateSeconds(
              view, u, cluster.device(strategy.stages[s].device(k, slot)));
        }
      } else {
        f = SecondsOf(context, plan, st.forward, d);
        b = SecondsOf(context, plan, st.backward, d);
        for (size_t i = 0; i < st.adds.size(); ++i) {
          b += AddsSeconds(context, plan, st, i, d);
        }
        for (const GroupCollective& c : st.forward_collectives) {
          f += GroupSeconds(context, group, c);
        }
        for (const auto& [after, c] : st.backward_collectives) {
          b += GroupSeconds(context, group, c);
        }
        // A forward pass that gathers the stage's parameters as it goes.
        auto gathered_forward = [&] {
          const std::vector<double> forward =
              GatheredEnds(context, plan, st, strategy.stages[s], k, false,
                           gathers);
          double seconds = forward.empty() ? 0 : forward.back();
          for (const GroupCollective& c : st.forward_collectives) {
            seconds += GroupSeconds(context, group, c);
          }
          return seconds;
        };
        if (strategy.zero == ZeroStage::kParameters && replicas.size() > 1) {
          const std::vector<double> backward =
              GatheredEnds(context, plan, st, strategy.stages[s], k, true,
                           gathers);
          f = gathered_forward();
          b = backward.empty() ? 0 : backward.back();
        }
        first_f = f;
        if (strategy.overlap_parameter_gather && replicas.size() > 1) {
          first_f = gathered_forward();
        }
        // A replica's first backward makes its gradient buffers; every
        // later one adds into them.
        for (int u : st.update) {
          accumulate +=
              context.costs().AccumulateSeconds(view, u, cluster.device(d)) *
              plan.share_of_node[u];
        }
      }
      // ZeRO-2 and -3 add the reduce-scattered 1/R of the gradients.
      const double shard =
          ShardsGradients(strategy.zero) ? 1.0 / replicas.size() : 1.0;
      accumulate *= shard;
      bool first_forward = true, first_backward = true;
      int previous = -1;
      std::vector<int> slot_tasks;  // a wide replica's last backward's
      const std::vector<ReplicaTask> tasks = ReplicaTaskOrder(strategy, s, k);
      for (const ReplicaTask& order : tasks) {
        const int index = static_cast<int>(
            lowered.passes_.index(s, order.micro_batch, order.backward));
        PassTask& pass = lowered.passes_.all()[index];
        pass.stage = s;
        pass.micro_batch = order.micro_batch;
        pass.replica = k;
        pass.device = d;
        pass.backward = order.backward;
        const double priority =
            static_cast<double>(lowered.device_passes_[d].size());
        if (wide.wide) {
          LowerWideTask(st, strategy.stages[s], wide, placed_forward,
                        placed_backward, marks, first_backward ? 0 : shard,
                        slot_accumulate, &previous, &slot_tasks, &pass, &graph);
        } else {
          const double seconds = order.backward
                                     ? b + (first_backward ? 0 : accumulate)
                                     : (first_forward ? first_f : f);
          if (order.backward && st.recompute != Recompute::kNone) {
            double rerun = RecomputesInPart(st.recompute)
                               ? SecondsOf(context, plan, st.selective_rerun, d)
                               : f;
            if (st.recompute == Recompute::kLayers) {
              for (const GroupCollective& c : st.forward_collectives) {
                rerun += GroupSeconds(context, group, c);
              }
            }
            pass.recompute_task = graph.AddTask({d, rerun, priority, 0});
            pass.recompute_end_task = pass.recompute_task;
            if (previous >= 0) graph.AddEdge(previous, pass.recompute_task);
            previous = pass.recompute_task;
          }
          pass.task = graph.AddTask({d, seconds, priority, 0});
          pass.end_task = pass.task;
          if (previous >= 0) graph.AddEdge(previous, pass.task);
          previous = pass.task;
        }
        if (order.backward) first_backward = false;
        if (!order.backward) first_forward = false;
        lowered.device_passes_[d].push_back(index);
      }
    }
  }

  // Transfers between stages, from each pass in stage order.
  auto send = [&](const PassTask& from, const PassTask& to, int64_t bytes) {
    const int t = graph.AddTask({link(from.device, to.device),
                                 context.costs().TransferSeconds(
                                     bytes, cluster, from.device, to.device)});
    graph.AddEdge(from.end_task, t);
    graph.AddEdge(t, to.entry_task());
    lowered.transfers_.push_back({t, from.device, to.device, bytes});
  };
  for (const PassTask& pass : lowered.passes_.all()) {
    for (int other = 0; other < S; ++other) {
      const int s = pass.stage, j = pass.micro_batch;
      if (!pass.backward && other > s &&
          plan.crossings.value_bytes(s, other) > 0) {
        send(pass, lowered.pass(other, j, false),
             plan.crossings.value_bytes(s, other));
      }
      if (pass.backward && other < s &&
          plan.crossings.sum_bytes(s, other) > 0) {
        send(pass, lowered.pass(other, j, true),
             plan.crossings.sum_bytes(s, other));
      }
    }
  }

  // Buckets and updates, per stage and slot.
  for (int s = 0; s < S; ++s) {
    const StageModel& st = plan.stages[s];
    const PipelineStage& stage = strategy.stages[s];
    const std::vector<int> replicas = stage.FirstDevices();
    const int R = static_cast<int>(replicas.size());
    const GatherTimes& gathers = lowered.gather_times_[s];
    // Per replica: its last backward pass (an index into passes_).
    std::vector<int> last(R);
    // Per replica, what each slot's updates wait for: its task after the
    // replica's last backward, or that pass.
    std::vector<std::vector<int>> finished(R);
    // Per replica, its backward passes in its order.
    std::vector<std::vector<int>> backwards(R);
    // Per replica (a stage of one slot): where each backward node ends,
    // from the pass's start.
    std::vector<std::vector<double>> offsets(R);
    for (int k = 0; k < R; ++k) {
      last[k] = lowered.device_passes_[replicas[k]].back();
      const PassTask& final_pass = lowered.passes_.all()[last[k]];
      finished[k] = final_pass.slot_tasks;
      if (finished[k].empty()) finished[k].assign(st.width, final_pass.task);
      for (int index : lowered.device_passes_[replicas[k]]) {
        if (lowered.passes_.all()[index].backward) {
          backwards[k].push_back(index);
        }
      }
      if (lowered.wide_passes_[s].wide) continue;
      offsets[k] =
          strategy.zero == ZeroStage::kParameters && R > 1
              ? GatheredEnds(context, plan, st, stage, k, true, gathers)
              : BackwardOffsets(context, plan, st, stage.TensorGroup(k));
    }
    // Task t waits until backward pass `index` of replica k has made the
    // gradients of its node at `position` (-1: from its start).
    auto made = [&](int index, int k, int position, int t) {
      const PassTask& pass = lowered.passes_.all()[index];
      if (pass.wide() && position >= 0) {
        graph.AddEdge(pass.first_inlined + position, t);
      } else {
        graph.AddStartEdge(pass.task, t,
                           position < 0 ? 0 : offsets[k][position]);
      }
    };
    const bool zero = strategy.zero != ZeroStage::kNone && R > 1;
    for (int slot = 0; slot < st.width; ++slot) {
      const std::vector<std::pair<int, int64_t>>& gradients =
          st.gradients[slot];
      const std::vector<int> ring = SlotDevices(stage, slot);
      int reduced = -1;  // the slot's last collective
      const int collective =
          R > 1 ? graph.AddResource(ResourceOrder::kArrival) : -1;
      // The slot's gradients in buckets, each reduced once every replica's
      // pass in `after` has made it.
      auto reduce = [&](const std::vector<int>& after, Collective kind) {
        size_t i = 0;
        while (i < gradients.size()) {
          int64_t bytes = 0;
          int position = -1;
          do {
            bytes += gradients[i].second;
            position = std::max(position, gradients[i].first);
            ++i;
          } while (i < gradients.size() &&
                   bytes + gradients[i].second <= strategy.bucket_bytes);
          const double seconds =
              kind == Collective::kAllreduce
                  ? AllreduceSeconds(context.costs(), cluster, ring, bytes,
                                     strategy.allreduce)
                  : ReduceScatterSeconds(context.costs(), cluster, ring, bytes,
                                         strategy.allreduce);
          const int t = graph.AddTask({collective, seconds});
          if (reduced >= 0) graph.AddEdge(reduced, t);
          for (int k = 0; k < R; ++k) made(after[k], k, position, t);
          lowered.buckets_.push_back({t, s, slot, bytes, kind});
          reduced = t;
        }
      };
      if (R > 1 && ShardsGradients(strategy.zero)) {
        // Every round: the n-th backward of each replica (CheckStrategy:
        // as many each).
        for (size_t n = 0; n < backwards[0].size(); ++n) {
          std::vector<int> round(R);
          for (int k = 0; k < R; ++k) round[k] = backwards[k][n];
          reduce(round, Collective::kReduceScatter);
        }
      } else if (R > 1) {
        reduce(last,
               zero ? Collective::kReduceScatter : Collective::kAllreduce);
      }
      std::vector<int> updated(R);
      for (int k = 0; k < R; ++k) {
        double seconds = 0;
        for (int u : st.update) {
          if (plan.slot_of_node[u] == slot) {
            seconds += context.node_seconds(u, ring[k]) * plan.share_of_node[u];
          }
        }
        if (zero) seconds /= R;  // its shard
        const int t = graph.AddTask({ring[k], seconds});
        graph.AddEdge(finished[k][slot], t);
        if (reduced >= 0) graph.AddEdge(reduced, t);
        lowered.updates_.push_back({t, s, slot, k, ring[k]});
        updated[k] = t;
      }
      // ZeRO-3 keeps the updated parameters sharded, and an overlapped
      // gather waits for them: the next step's passes gather them.
      if (!zero || strategy.zero == ZeroStage::kParameters ||
          strategy.overlap_parameter_gather) {
        continue;
      }
      const int64_t parameter_bytes = st.parameter_bytes[slot];
      const int t =
          graph.AddTask({collective, AllGatherSeconds(context.costs(), cluster,
                                                      ring, parameter_bytes,
                                                      strategy.allreduce)});
      for (int u : updated) graph.AddEdge(u, t);
      lowered.buckets_.push_back(
          {t, s, slot, parameter_bytes, Collective::kAllGather});
    }
  }
  return lowered;
}

}  // namespace placer
