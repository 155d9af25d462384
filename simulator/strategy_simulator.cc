#include "simulator/strategy_simulator.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"

namespace placer {
namespace {

// What a node of a wide stage's task reads from another slot: made by the
// task's node at `made_at` (-1: before the task), copied from `from_slot`.
struct SlotRead {
  int made_at = -1;
  int from_slot = 0;
  int64_t bytes = 0;
};

// What a stage is, whatever devices run it. Per slot: what the device of
// that slot in each replica holds (one slot unless ops are placed inside
// the stage).
struct StageModel {
  int width = 1;
  std::vector<int> forward, backward, update;  // nodes, topological order
  std::vector<int64_t> parameter_bytes;        // per slot
  std::vector<int64_t> stash_bytes;            // per slot
  std::vector<int64_t> one_batch_peak_bytes;   // per slot: Simulate's, the
                                               // stage alone on replica 0
  // Per slot, parameters' gradients in the order they become final: the
  // position in `backward` of the node that makes the last partial, and
  // the bytes.
  std::vector<std::vector<std::pair<int, int64_t>>> gradients;
  // Per backward node (as `backward`): the gradient sums whose partial it
  // adds into a buffer its device already holds (made by an earlier node
  // of the stage on that slot, or arrived from a later stage or another
  // slot), as Simulate charges them.
  std::vector<std::vector<int>> adds;
  // Wide stages, per slot: the parameters' gradient sums whose buffers
  // from several slots that slot's device adds up after each task beyond
  // what `adds` charges (one entry per addition).
  std::vector<std::vector<int>> merges;
  // Wider stages: per forward and backward node (positions as in `forward`
  // and `backward`), what it reads from other slots.
  std::vector<std::vector<SlotRead>> forward_reads, backward_reads;
};

struct Plan {
  std::vector<StageModel> stages;
  std::vector<int> slot_of_node;
  // [a * S + b]: bytes stage a's forward sends stage b per micro-batch;
  // gradient bytes stage b's backward sends back to a.
  std::vector<int64_t> forward_bytes, gradient_bytes;
};

absl::StatusOr<Plan> MakePlan(const SimulationContext& context,
                              const Strategy& strategy) {
  const TrainingView& view = context.view();
  const int S = static_cast<int>(strategy.stages.size());
  Plan plan;
  plan.stages.resize(S);
  plan.forward_bytes.assign(static_cast<size_t>(S) * S, 0);
  plan.gradient_bytes.assign(static_cast<size_t>(S) * S, 0);
  auto stage_of_node = [&](int n) {
    return strategy.stage_of_op[view.node(n).forward_op];
  };
  plan.slot_of_node.assign(view.nodes().size(), 0);
  for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
    plan.slot_of_node[n] = SlotOfOp(strategy, view.node(n).forward_op);
  }
  const std::vector<int>& slot_of = plan.slot_of_node;
  for (int s = 0; s < S; ++s) {
    StageModel& st = plan.stages[s];
    st.width = strategy.stages[s].width();
    st.parameter_bytes.assign(st.width, 0);
    st.stash_bytes.assign(st.width, 0);
    st.one_batch_peak_bytes.assign(st.width, 0);
    st.gradients.assign(st.width, {});
  }
  std::vector<int> position(view.nodes().size(), -1);
  for (int n : view.topological_order()) {
    StageModel& st = plan.stages[stage_of_node(n)];
    // What an op keeps for its backward besides values is stashed too.
    st.stash_bytes[slot_of[n]] += view.node(n).saved_workspace_bytes;
    switch (view.node(n).kind) {
      case NodeKind::kForward:
        position[n] = static_cast<int>(st.forward.size());
        st.forward.push_back(n);
        break;
      case NodeKind::kBackward:
        position[n] = static_cast<int>(st.backward.size());
        st.backward.push_back(n);
        break;
      case NodeKind::kUpdate: st.update.push_back(n); break;
    }
  }
  std::vector<int> group_of_parameter(view.values().size(), -1);
  for (int g = 0; g < view.num_groups(); ++g) {
    for (int v : view.group_parameters(g)) {
      group_of_parameter[v] = g;
      plan.stages[strategy.stage_of_op[g]]
          .parameter_bytes[SlotOfOp(strategy, g)] += view.value(v).bytes;
    }
  }
  for (StageModel& st : plan.stages) {
    st.forward_reads.assign(st.forward.size(), {});
    st.backward_reads.assign(st.backward.size(), {});
  }
  // Values crossing stages (and slots), and what each stage's backward
  // keeps alive.
  for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
    const TrainingValue& value = view.value(v);
    const bool stashable = value.kind == ValueKind::kActivation ||
                           value.kind == ValueKind::kGraphInput;
    std::set<std::pair<int, int>> stashed_in;
    std::set<int> read_in;
    for (int c : value.consumers) {
      const int s = stage_of_node(c);
      read_in.insert(s);
      if (stashable && view.node(c).kind == NodeKind::kBackward) {
        stashed_in.insert({s, slot_of[c]});
      }
    }
    for (auto [s, slot] : stashed_in) {
      plan.stages[s].stash_bytes[slot] += value.bytes;
    }
    // Forward reads from another slot of the same stage: made in the task
    // (an activation) or before it (a weight of another slot).
    const bool weight = value.kind == ValueKind::kParameter;
    const bool made = value.kind == ValueKind::kActivation &&
                      value.producer >= 0 &&
                      view.node(value.producer).kind == NodeKind::kForward;
    if (weight || made) {
      int owner_slot = -1, owner_stage = -1;
      if (made) {
        owner_slot = slot_of[value.producer];
        owner_stage = stage_of_node(value.producer);
      } else if (group_of_parameter[v] >= 0) {
        owner_slot = SlotOfOp(strategy, group_of_parameter[v]);
        owner_stage = strategy.stage_of_op[group_of_parameter[v]];
      }
      // Copied once per task onto each other slot that reads it: by its
      // first reader there.
      std::map<int, int> first_reader;  // slot -> position in `forward`
      for (int c : value.consumers) {
        if (view.node(c).kind != NodeKind::kForward ||
            stage_of_node(c) != owner_stage || slot_of[c] == owner_slot ||
            owner_slot < 0) {
          continue;
        }
        auto [at, fresh] = first_reader.emplace(slot_of[c], position[c]);
        if (!fresh) at->second = std::min(at->second, position[c]);
      }
      for (auto [slot, reader] : first_reader) {
        plan.stages[owner_stage].forward_reads[reader].push_back(
            {made ? position[value.producer] : -1, owner_slot, value.bytes});
      }
    }
    if (value.kind != ValueKind::kActivation || value.producer < 0) continue;
    const int from = stage_of_node(value.producer);
    for (int to : read_in) {
      if (to != from) plan.forward_bytes[from * S + to] += value.bytes;
    }
  }
  // One summed buffer per gradient and stage making partials of it; within
  // a wide stage, the sink copies each other slot's buffer once that
  // slot's last partial is made.
  for (const GradientSum& sum : view.gradient_sums()) {
    const int to = stage_of_node(sum.sink);
    std::set<int> makers;
    std::map<int, int> last_on_slot;
    for (int p : sum.partials) {
      const int producer = view.value(p).producer;
      makers.insert(stage_of_node(producer));
      if (stage_of_node(producer) == to &&
          slot_of[producer] != slot_of[sum.sink]) {
        int& last = last_on_slot.emplace(slot_of[producer], -1).first->second;
        last = std::max(last, position[producer]);
      }
    }
    for (int from : makers) {
      if (from != to) plan.gradient_bytes[to * S + from] += sum.bytes;
    }
    if (view.node(sum.sink).kind != NodeKind::kBackward) continue;
    for (auto [slot, last] : last_on_slot) {
      plan.stages[to].backward_reads[position[sum.sink]].push_back(
          {last, slot, sum.bytes});
    }
  }
  // Partials added into buffers, per stage backward node.
  for (int s = 0; s < S; ++s) {
    StageModel& st = plan.stages[s];
    const size_t sums = view.gradient_sums().size();
    std::vector<std::vector<char>> held(st.width, std::vector<char>(sums, 0));
    for (size_t x = 0; x < sums; ++x) {
      const GradientSum& sum = view.gradient_sums()[x];
      if (stage_of_node(sum.sink) != s) continue;
      for (int p : sum.partials) {
        const int producer = view.value(p).producer;
        held[slot_of[sum.sink]][x] |= stage_of_node(producer) > s ||
                                      (stage_of_node(producer) == s &&
                                       slot_of[producer] != slot_of[sum.sink]);
      }
    }
    st.adds.assign(st.backward.size(), {});
    for (size_t k = 0; k < st.backward.size(); ++k) {
      const int slot = slot_of[st.backward[k]];
      for (int out : view.node(st.backward[k]).outputs) {
        const int x = view.sum_of(out);
        if (x < 0) continue;
        if (held[slot][x]) st.adds[k].push_back(x);
        held[slot][x] = 1;
      }
    }
    // The sink adds up one buffer per (stage, slot) that made partials:
    // parts - 1 additions, of which the above charged one where its own
    // slot made partials too (the first of them, into a buffer held).
    st.merges.assign(st.width, {});
    // One stage of one slot: every sum has one buffer at most.
    if (S == 1 && st.width == 1) continue;
    for (size_t x = 0; x < sums; ++x) {
      const GradientSum& sum = view.gradient_sums()[x];
      if (stage_of_node(sum.sink) != s) continue;
      std::set<std::pair<int, int>> parts;
      for (int p : sum.partials) {
        const int producer = view.value(p).producer;
        parts.insert({stage_of_node(producer), slot_of[producer]});
      }
      const bool own = parts.count({s, slot_of[sum.sink]}) > 0;
      const int extra = static_cast<int>(parts.size()) - 1 -
                        (own && parts.size() >= 2 ? 1 : 0);
      for (int e = 0; e < extra; ++e) {
        if (view.node(sum.sink).kind == NodeKind::kBackward) {
          st.adds[position[sum.sink]].push_back(static_cast<int>(x));
        } else {
          st.merges[slot_of[sum.sink]].push_back(static_cast<int>(x));
        }
      }
    }
  }
  // Parameters' gradients: final after the last of their partials.
  for (int s = 0; s < S; ++s) {
    StageModel& st = plan.stages[s];
    for (int u : st.update) {
      int last = -1;
      for (int sum : view.sums_read_by(u)) {
        for (int p : view.gradient_sums()[sum].partials) {
          last = std::max(last, position[view.value(p).producer]);
        }
      }
      st.gradients[slot_of[u]].emplace_back(
          last, view.value(view.node(u).parameter).bytes);
    }
    for (auto& gradients : st.gradients) {
      std::stable_sort(
          gradients.begin(), gradients.end(),
          [](const auto& a, const auto& b) { return a.first < b.first; });
    }
  }
  // One micro-batch's peak: the stage on its first replica's devices, the
  // rest on another one (their values arrive as they would from other
  // stages).
  const int D = context.num_devices();
  for (int s = 0; s < S; ++s) {
    const PipelineStage& stage = strategy.stages[s];
    std::vector<char> mine(D, 0);
    for (int slot = 0; slot < stage.width(); ++slot) {
      mine[stage.device(0, slot)] = 1;
    }
    int elsewhere = 0;
    while (elsewhere < D - 1 && mine[elsewhere]) ++elsewhere;
    Placement p;
    p.device_of_op.resize(strategy.stage_of_op.size());
    for (size_t g = 0; g < p.device_of_op.size(); ++g) {
      p.device_of_op[g] =
          strategy.stage_of_op[g] == s
              ? stage.device(0, SlotOfOp(strategy, static_cast<int>(g)))
              : elsewhere;
    }
    ASSIGN_OR_RETURN(SimulationResult r, Simulate(context, p));
    for (int slot = 0; slot < stage.width(); ++slot) {
      plan.stages[s].one_batch_peak_bytes[slot] =
          r.peak_memory_bytes[stage.device(0, slot)];
    }
  }
  return plan;
}

// One task of a replica over several devices (Strategy's contract): each
// node on its slot's device, each device running its nodes in `nodes`'
// order, a node starting once its device is free and what it reads from
// other slots has been made, then copying that in (the transfers' seconds
// on its own device) before it computes. `extra` is added to a node's
// time (its partial additions). Returns each node's end, from the task's
// start, and fills each slot's busy seconds.
std::vector<double> ScheduleWideTask(
    const SimulationContext& context, const std::vector<int>& nodes,
    const std::vector<std::vector<SlotRead>>& reads,
    const std::vector<double>& extra, const std::vector<int>& slot_of_node,
    const PipelineStage& stage, int replica, std::vector<double>* busy) {
  const int width = stage.width();
  std::vector<double> free(width, 0), end(nodes.size(), 0);
  busy->assign(width, 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int slot = slot_of_node[nodes[i]];
    const int device = stage.device(replica, slot);
    double start = free[slot], copies = 0;
    for (const SlotRead& read : reads[i]) {
      if (read.made_at >= 0) start = std::max(start, end[read.made_at]);
      copies += context.costs().TransferSeconds(
          read.bytes, context.cluster(), stage.device(replica, read.from_slot),
          device);
    }
    const double seconds =
        copies + context.node_seconds(nodes[i], device) + extra[i];
    end[i] = start + seconds;
    free[slot] = end[i];
    (*busy)[slot] += seconds;
  }
  return end;
}

enum class EventKind { kTaskEnd, kArrival };

struct Event {
  double time;
  int64_t seq;
  EventKind kind;
  int task;
  bool operator>(const Event& o) const {
    return time != o.time ? time > o.time : seq > o.seq;
  }
};

struct Task {
  int stage = 0, micro_batch = 0, device = 0;  // device: the replica's first
  int replica = 0;
  bool backward = false;
  double seconds = 0;
  std::vector<double> slot_busy;  // wide stages: each slot's busy seconds
  int pending = 0;
  double start = -1, end = -1;
};

}  // namespace

double AllreduceSeconds(const CostModel& costs, const Cluster& cluster,
                        const std::vector<int>& devices, int64_t bytes,
                        AllreduceAlgorithm algorithm) {
  const int p = static_cast<int>(devices.size());
  if (p <= 1 || bytes <= 0) return 0;
  if (algorithm == AllreduceAlgorithm::kRing) {
    const int64_t chunk = (bytes + p - 1) / p;
    double step = 0;
    for (int i = 0; i < p; ++i) {
      step = std::max(step, costs.TransferSeconds(chunk, cluster, devices[i],
                                                  devices[(i + 1) % p]));
    }
    return 2.0 * (p - 1) * step;
  }
  // Heap order: the parent of i is (i - 1) / 2; levels 1 .. height.
  auto depth = [](int i) {
    int d = 0;
    for (; i > 0; i = (i - 1) / 2) ++d;
    return d;
  };
  const int height = depth(p - 1);
  std::vector<double> up(height + 1, 0), down(height + 1, 0);
  for (int i = 1; i < p; ++i) {
    const int child = devices[i], parent = devices[(i - 1) / 2];
    up[depth(i)] = std::max(
        up[depth(i)], costs.TransferSeconds(bytes, cluster, child, parent));
    down[depth(i)] = std::max(
        down[depth(i)], costs.TransferSeconds(bytes, cluster, parent, child));
  }
  double total = 0;
  for (int level = 1; level <= height; ++level) total += up[level] + down[level];
  return total;
}

absl::StatusOr<SimulationResult> SimulateAccumulation(
    const SimulationContext& context, const Placement& placement,
    int micro_batches) {
  if (micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro_batches is ", micro_batches, "; a step runs at least one"));
  }
  SimulationOptions options;
  options.record_schedule = true;
  absl::StatusOr<SimulationResult> r = Simulate(context, placement, options);
  if (!r.ok()) return r;
  const TrainingView& view = context.view();
  double passes_end = 0;
  std::vector<double> passes_busy(context.num_devices(), 0);
  for (const ScheduledNode& n : r->schedule) {
    if (view.node(n.node).kind == NodeKind::kUpdate) continue;
    passes_end = std::max(passes_end, n.end_seconds);
    passes_busy[n.device] += n.end_seconds - n.start_seconds;
  }
  int64_t repeated_bytes = 0;
  int repeated_transfers = 0;
  for (const ScheduledTransfer& t : r->transfers) {
    const bool to_update =
        t.gradient_sum >= 0 &&
        view.node(view.gradient_sums()[t.gradient_sum].sink).kind ==
            NodeKind::kUpdate;
    if (to_update) continue;
    repeated_bytes += t.bytes;
    ++repeated_transfers;
  }
  std::vector<double> accumulate(context.num_devices(), 0);
  for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
    if (view.node(n).kind != NodeKind::kUpdate) continue;
    const int d = placement.device_of_op[view.node(n).forward_op];
    accumulate[d] += context.costs().AccumulateSeconds(
        view, n, context.cluster().device(d));
  }
  const int extra = micro_batches - 1;
  r->step_seconds +=
      extra * (passes_end +
               *std::max_element(accumulate.begin(), accumulate.end()));
  for (int d = 0; d < context.num_devices(); ++d) {
    r->busy_seconds[d] += extra * (passes_busy[d] + accumulate[d]);
  }
  r->bytes_moved += extra * repeated_bytes;
  r->transfers_count += extra * repeated_transfers;
  r->schedule.clear();
  r->transfers.clear();
  r->critical_path.clear();
  return r;
}

absl::StatusOr<StrategySimulation> SimulateStrategy(
    const SimulationContext& context, const Strategy& strategy,
    const SimulationOptions& options) {
  const TrainingView& view = context.view();
  const Cluster& cluster = context.cluster();
  RETURN_IF_ERROR(CheckStrategy(view, cluster, strategy));
  ASSIGN_OR_RETURN(Plan made, MakePlan(context, strategy));
  const Plan& plan = made;
  const int S = static_cast<int>(strategy.stages.size());
  const int M = strategy.micro_batches;
  const int D = context.num_devices();
  auto seconds_of = [&](const std::vector<int>& nodes, int device) {
    double t = 0;
    for (int n : nodes) t += context.node_seconds(n, device);
    return t;
  };

  // Tasks and each device's order.
  std::vector<Task> tasks(static_cast<size_t>(S) * M * 2);
  auto id = [M](int s, int j, bool backward) {
    return (s * M + j) * 2 + (backward ? 1 : 0);
  };
  std::vector<std::vector<int>> order(D);
  // Wide stages: each replica's tasks scheduled over its devices, the
  // nodes' ends (from the task's start) and each slot's busy seconds.
  struct WideTimes {
    double forward = 0, backward = 0;  // without accumulation
    // Per slot: busy in the tasks; adding gradients into the accumulators
    // (after a replica's first backward), and adding up other slots'
    // buffers (after every backward).
    std::vector<double> forward_busy, backward_busy, accumulate, merge;
    std::vector<double> backward_end;  // per backward node
    std::vector<double> slot_end;      // per slot: its last backward node
  };
  std::vector<std::vector<WideTimes>> wide(S);
  for (int s = 0; s < S; ++s) {
    const StageModel& st = plan.stages[s];
    if (st.width == 1) continue;
    const PipelineStage& stage = strategy.stages[s];
    for (int replica = 0; replica < stage.num_replicas(); ++replica) {
      WideTimes w;
      std::vector<double> none(st.forward.size(), 0);
      std::vector<double> ends =
          ScheduleWideTask(context, st.forward, st.forward_reads, none,
                           plan.slot_of_node, stage, replica, &w.forward_busy);
      for (double e : ends) w.forward = std::max(w.forward, e);
      std::vector<double> adds(st.backward.size(), 0);
      for (size_t i = 0; i < st.backward.size(); ++i) {
        const int d = stage.device(replica, plan.slot_of_node[st.backward[i]]);
        for (int x : st.adds[i]) adds[i] += context.partial_add_seconds(x, d);
      }
      w.backward_end =
          ScheduleWideTask(context, st.backward, st.backward_reads, adds,
                           plan.slot_of_node, stage, replica, &w.backward_busy);
      w.slot_end.assign(st.width, 0);
      for (size_t i = 0; i < st.backward.size(); ++i) {
        double& e = w.slot_end[plan.slot_of_node[st.backward[i]]];
        e = std::max(e, w.backward_end[i]);
      }
      w.accumulate.assign(st.width, 0);
      for (int u : st.update) {
        const int slot = plan.slot_of_node[u];
        w.accumulate[slot] += context.costs().AccumulateSeconds(
            view, u, cluster.device(stage.device(replica, slot)));
      }
      w.merge.assign(st.width, 0);
      for (int slot = 0; slot < st.width; ++slot) {
        for (int x : st.merges[slot]) {
          w.merge[slot] +=
              context.partial_add_seconds(x, stage.device(replica, slot));
        }
      }
      for (double e : w.slot_end) w.backward = std::max(w.backward, e);
      wide[s].push_back(std::move(w));
    }
  }
  for (int s = 0; s < S; ++s) {
    const std::vector<int> replicas = strategy.stages[s].FirstDevices();
    const int R = static_cast<int>(replicas.size());
    for (int k = 0; k < R; ++k) {
      const int d = replicas[k];
      double f = 0, b = 0, accumulate = 0;
      if (wide[s].empty()) {
        f = seconds_of(plan.stages[s].forward, d);
        b = seconds_of(plan.stages[s].backward, d);
        for (const std::vector<int>& adds : plan.stages[s].adds) {
          for (int x : adds) b += context.partial_add_seconds(x, d);
        }
        // A replica's first backward makes its gradient buffers; every
        // later one adds into them.
        for (int u : plan.stages[s].update) {
          accumulate +=
              context.costs().AccumulateSeconds(view, u, cluster.device(d));
        }
      }
      bool first_backward = true;
      for (const ReplicaTask& task : ReplicaTaskOrder(strategy, s, k)) {
        const int j = task.micro_batch;
        Task& t = tasks[id(s, j, task.backward)];
        t.stage = s;
        t.micro_batch = j;
        t.device = d;
        t.replica = k;
        t.backward = task.backward;
        if (wide[s].empty()) {
          t.seconds = task.backward ? b + (first_backward ? 0 : accumulate) : f;
        } else {
          // A backward: once every slot has run its part (as the
          // executor's workers wait for each other), each slot adds up its
          // parameters' buffers from other slots and (after the first)
          // adds them into its accumulators.
          const WideTimes& w = wide[s][k];
          t.slot_busy = task.backward ? w.backward_busy : w.forward_busy;
          t.seconds = task.backward ? w.backward : w.forward;
          if (task.backward) {
            double most = 0;
            for (int slot = 0; slot < plan.stages[s].width; ++slot) {
              const double after =
                  w.merge[slot] + (first_backward ? 0 : w.accumulate[slot]);
              most = std::max(most, after);
              t.slot_busy[slot] += after;
            }
            t.seconds += most;
          }
        }
        if (task.backward) first_backward = false;
        for (int other = 0; other < S; ++other) {
          t.pending +=
              task.backward
                  ? (other > s && plan.gradient_bytes[s * S + other] > 0)
                  : (other < s && plan.forward_bytes[other * S + s] > 0);
        }
        order[d].push_back(id(s, j, task.backward));
      }
    }
  }

  StrategySimulation out;
  SimulationResult& step = out.step;
  // Copies between the slots of wide stages' tasks, M of each.
  for (const StageModel& st : plan.stages) {
    for (const auto* reads : {&st.forward_reads, &st.backward_reads}) {
      for (const std::vector<SlotRead>& node : *reads) {
        for (const SlotRead& read : node) {
          step.bytes_moved += static_cast<int64_t>(M) * read.bytes;
          step.transfers_count += M;
        }
      }
    }
  }
  step.busy_seconds.assign(D, 0);
  step.peak_memory_bytes.assign(D, 0);
  step.inaccurate_nodes = context.inaccurate_nodes();
  out.micro_batches = M;
  out.most_in_flight.assign(D, 0);
  std::vector<int> in_flight(D, 0), next(D, 0);
  std::vector<bool> busy(D, false);
  std::vector<double> link_free(static_cast<size_t>(D) * D, 0);
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  int64_t seq = 0;
  auto try_start = [&](int d, double now) {
    if (busy[d] || next[d] >= static_cast<int>(order[d].size())) return;
    Task& t = tasks[order[d][next[d]]];
    if (t.pending > 0) return;
    busy[d] = true;
    t.start = now;
    t.end = now + t.seconds;
    if (!t.backward) {
      out.most_in_flight[d] = std::max(out.most_in_flight[d], ++in_flight[d]);
    }
    events.push({t.end, seq++, EventKind::kTaskEnd, order[d][next[d]]});
  };
  auto send = [&](int src, int dst, int64_t bytes, double now, int target) {
    double& free = link_free[static_cast<size_t>(src) * D + dst];
    const double start = std::max(now, free);
    free = start + context.costs().TransferSeconds(bytes, cluster, src, dst);
    step.bytes_moved += bytes;
    ++step.transfers_count;
    if (options.record_schedule) {
      ScheduledTransfer x;
      x.src = src;
      x.dst = dst;
      x.bytes = bytes;
      x.start_seconds = start;
      x.end_seconds = free;
      step.transfers.push_back(x);
    }
    events.push({free, seq++, EventKind::kArrival, target});
  };
  for (int d = 0; d < D; ++d) try_start(d, 0);
  int done = 0;
  while (!events.empty()) {
    const Event e = events.top();
    events.pop();
    Task& t = tasks[e.task];
    if (e.kind == EventKind::kArrival) {
      --t.pending;
      try_start(t.device, e.time);
      continue;
    }
    ++done;
    busy[t.device] = false;
    ++next[t.device];
    if (t.slot_busy.empty()) {
      step.busy_seconds[t.device] += t.seconds;
    } else {
      for (size_t slot = 0; slot < t.slot_busy.size(); ++slot) {
        step.busy_seconds[strategy.stages[t.stage].device(
            t.replica, static_cast<int>(slot))] += t.slot_busy[slot];
      }
    }
    if (t.backward) --in_flight[t.device];
    for (int other = 0; other < S; ++other) {
      if (!t.backward && other > t.stage &&
          plan.forward_bytes[t.stage * S + other] > 0) {
        const int target = id(other, t.micro_batch, false);
        send(t.device, tasks[target].device,
             plan.forward_bytes[t.stage * S + other], e.time, target);
      }
      if (t.backward && other < t.stage &&
          plan.gradient_bytes[other * S + t.stage] > 0) {
        const int target = id(other, t.micro_batch, true);
        send(t.device, tasks[target].device,
             plan.gradient_bytes[other * S + t.stage], e.time, target);
      }
    }
    try_start(t.device, e.time);
  }
  if (done != static_cast<int>(tasks.size())) {
    return absl::InternalError(absl::StrCat(
        "strategy simulation stalled after ", done, " of ", tasks.size(),
        " tasks (", DescribeStrategy(strategy), ")"));
  }

  // Allreduce and updates, per stage; memory per device.
  double end = 0;
  for (const Task& t : tasks) end = std::max(end, t.end);
  const double state = 1 + view.options().optimizer_state_per_parameter_byte();
  for (int s = 0; s < S; ++s) {
    const StageModel& st = plan.stages[s];
    const PipelineStage& stage = strategy.stages[s];
    const std::vector<int> replicas = stage.FirstDevices();
    const int R = static_cast<int>(replicas.size());
    // Each replica's last backward: where its gradients become final.
    std::vector<double> last_start(R), last_end(R);
    std::vector<std::vector<double>> offsets(R);
    for (int k = 0; k < R; ++k) {
      const int d = replicas[k];
      const Task& last = tasks[order[d].back()];
      last_start[k] = last.start;
      last_end[k] = last.end;
      if (!wide[s].empty()) {
        offsets[k] = wide[s][k].backward_end;
        continue;
      }
      double t = 0;
      for (size_t i = 0; i < st.backward.size(); ++i) {
        t += context.node_seconds(st.backward[i], d);
        for (int x : st.adds[i]) t += context.partial_add_seconds(x, d);
        offsets[k].push_back(t);
      }
    }
    // Each slot's devices allreduce that slot's gradients.
    for (int slot = 0; slot < st.width; ++slot) {
      const std::vector<std::pair<int, int64_t>>& gradients =
          st.gradients[slot];
      const std::vector<int> ring = SlotDevices(stage, slot);
      double reduced = 0;
      if (R > 1) {
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
          double ready = reduced;
          for (int k = 0; k < R; ++k) {
            ready =
                std::max(ready, last_start[k] +
                                    (position < 0 ? 0 : offsets[k][position]));
          }
          const double seconds = AllreduceSeconds(
              context.costs(), cluster, ring, bytes, strategy.allreduce);
          reduced = ready + seconds;
          if (options.record_schedule) {
            out.buckets.push_back({s, slot, bytes, ready, reduced});
          }
          out.allreduce_seconds += seconds;
          step.bytes_moved += 2 * static_cast<int64_t>(R - 1) * bytes;
          step.transfers_count +=
              strategy.allreduce == AllreduceAlgorithm::kRing ? 2 * (R - 1) * R
                                                              : 2 * (R - 1);
        }
      }
      for (int k = 0; k < R; ++k) {
        const int d = ring[k];
        const double start = std::max(last_end[k], reduced);
        double seconds = 0;
        for (int u : st.update) {
          if (plan.slot_of_node[u] == slot) {
            seconds += context.node_seconds(u, d);
          }
        }
        step.busy_seconds[d] += seconds;
        end = std::max(end, start + seconds);
        if (options.record_schedule) {
          out.tasks.push_back({s, -1, d, false, start, start + seconds});
        }
        const int64_t resident = static_cast<int64_t>(
            static_cast<double>(st.parameter_bytes[slot]) * state);
        const int runs = (M - k + R - 1) / R;
        const int64_t rest = std::max<int64_t>(
            0, st.one_batch_peak_bytes[slot] - resident - st.stash_bytes[slot]);
        // A replica's devices run the same tasks: as many in flight.
        const int in_flight_here = out.most_in_flight[replicas[k]];
        out.most_in_flight[d] = in_flight_here;
        step.peak_memory_bytes[d] =
            resident + (runs > 1 ? st.parameter_bytes[slot] : 0) +
            in_flight_here * st.stash_bytes[slot] + rest;
        step.oom |= step.peak_memory_bytes[d] > cluster.device(d).memory_bytes;
      }
    }
  }
  if (options.record_schedule) {
    for (const Task& t : tasks) {
      const int width = strategy.stages[t.stage].width();
      for (int slot = 0; slot < width; ++slot) {
        out.tasks.push_back({t.stage, t.micro_batch,
                             strategy.stages[t.stage].device(t.replica, slot),
                             t.backward, t.start, t.end});
      }
    }
  }
  step.step_seconds = end;
  double work = 0;
  for (int n = 0; n < context.num_nodes(); ++n) {
    work += context.min_node_seconds(n) *
            (view.node(n).kind == NodeKind::kUpdate ? 1 : M);
  }
  step.lower_bound_seconds =
      std::max(context.lower_bound_seconds(), work / D);
  out.seconds_per_batch = end / M;
  return out;
}

}  // namespace placer
