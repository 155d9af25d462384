#include "simulator/placement_lowering.h"

#include <algorithm>

#include "simulator/gradient_partials.h"
#include "simulator/pair_table.h"

namespace placer {
namespace {

// A stage's pass (LowerStagePass): the stage, and which pass.
struct PassScope {
  const Strategy* strategy = nullptr;
  int stage = -1;
  bool backward = false;
};

// kPass: a stage's pass (LowerStagePass), else an op placement's step;
// one walk, compiled for each so that the step's pays for no test of
// which it is.
template <bool kPass>
class Lowering {
 public:
  // An op placement's step.
  Lowering(const SimulationContext& context, const Placement& placement)
      : index_(context.index()),
        view_(context.view()),
        devices_(context.num_devices()),
        context_(&context) {
    out_.num_nodes = context.num_nodes();
    out_.device_of_node = DevicesOfNodes(view_, placement);
    out_.device_of_group = placement.device_of_op;
  }
  // A stage's pass: `nodes` on their slots.
  Lowering(const ViewIndex& index, absl::Span<const double> priorities,
           const PassScope& scope, const std::vector<int>& nodes,
           const std::vector<int>& slot_of_node)
      : index_(index),
        view_(index.view()),
        devices_(scope.strategy->stages[scope.stage].width()),
        scope_(&scope),
        priorities_(priorities) {
    out_.num_nodes = static_cast<int>(nodes.size());
    out_.node_of_task = nodes;
    out_.device_of_node = slot_of_node;
    task_of_node_.assign(index.num_nodes(), -1);
    for (int k = 0; k < out_.num_nodes; ++k) task_of_node_[nodes[k]] = k;
  }

  LoweredPlacement Run() {
    const int n = out_.num_nodes;
    TaskGraph& graph = out_.graph;
    // Edges: about one per consumer and node, and one per backward or
    // update node for the end of the backward (growing this vector past
    // its room costs more than the rest of the lowering).
    graph.Reserve(n + n / 4, index_.total_consumers() + 2 * n);
    for (int d = 0; d < devices_; ++d) {
      graph.AddResource(ResourceOrder::kPriority);
    }
    links_.assign(static_cast<size_t>(devices_) * devices_, -1);
    const std::vector<char> alone = AloneDevices();
    for (int i = 0; i < n; ++i) {
      const int d = out_.device_of_node[i];
      graph.AddTask({d,
                     alone[d] ? context_->alone_node_seconds(i, d)
                              : context_->node_seconds(i, d),
                     context_->priority(i), index_.key_rank(i)});
    }
    has_updates_ = !index_.update_nodes().empty();
    if (has_updates_) {
      out_.backward_done =
          graph.AddTask({graph.AddResource(ResourceOrder::kArrival), 0.0});
      // Per device with updates, in the order of their first update.
      gradients_in_.assign(devices_, -1);
      for (int update : index_.update_nodes()) {
        int& in = gradients_in_[out_.device_of_node[update]];
        if (in < 0) {
          in = graph.AddTask({graph.AddResource(ResourceOrder::kArrival), 0.0});
        }
      }
    }
    out_.first_copy = graph.num_tasks();
    copy_on_device_.assign(devices_, -1);
    CopyWeights();
    partials_ = CountPartials(view_, out_.device_of_node, devices_);
    sum_copy_ = PairTable<int>(
        static_cast<int64_t>(view_.gradient_sums().size()), devices_, -1);
    for (int i = 0; i < n; ++i) AddEdgesOf(i);
    // backward_done to each device's gradients_in, in task order, and each
    // to its device's updates.
    std::vector<int> barriers;
    for (int in : gradients_in_) {
      if (in >= 0) barriers.push_back(in);
    }
    std::sort(barriers.begin(), barriers.end());
    for (int in : barriers) graph.AddEdge(out_.backward_done, in);
    std::vector<std::vector<int>> updates_of(devices_);
    for (int update : index_.update_nodes()) {
      updates_of[out_.device_of_node[update]].push_back(update);
    }
    for (int in : barriers) {
      for (int d = 0; d < devices_; ++d) {
        if (gradients_in_[d] != in) continue;
        for (int update : updates_of[d]) graph.AddEdge(in, update);
      }
    }
    for (int t = out_.first_copy; t < graph.num_tasks(); ++t) {
      AddEdgesOfCopy(t);
    }
    return std::move(out_);
  }

  // LowerStagePass's graph.
  LoweredPlacement RunPass() {
    TaskGraph& graph = out_.graph;
    for (int slot = 0; slot < devices_; ++slot) {
      graph.AddResource(ResourceOrder::kPriority);
    }
    for (int node : out_.node_of_task) {
      graph.AddTask({out_.device_of_node[node], 0,
                     priorities_.empty() ? 0.0 : priorities_[node],
                     index_.key_rank(node)});
    }
    out_.first_copy = graph.num_tasks();
    links_.assign(static_cast<size_t>(devices_) * devices_, -1);
    copy_on_device_.assign(devices_, -1);
    CopyWeights();
    sum_copy_ = PairTable<int>(
        static_cast<int64_t>(view_.gradient_sums().size()), devices_, -1);
    for (int node : out_.node_of_task) AddEdgesOf(node);
    for (int t = out_.first_copy; t < graph.num_tasks(); ++t) {
      AddEdgesOfCopy(t);
    }
    return std::move(out_);
  }

 private:
  // Node `node`'s task, or -1 (not in the pass).
  int Task(int node) const { return kPass ? task_of_node_[node] : node; }

  // A device is alone when no other device of its host runs a node.
  std::vector<char> AloneDevices() const {
    std::vector<char> alone(devices_, 0);
    if (!context_->has_alone_times()) return alone;
    std::vector<int> used_on_host(devices_, 0);
    std::vector<char> used(devices_, 0);
    for (int d : out_.device_of_node) used[d] = 1;
    for (int d = 0; d < devices_; ++d) {
      used_on_host[context_->host_of(d)] += used[d];
    }
    for (int d = 0; d < devices_; ++d) {
      alone[d] = used_on_host[context_->host_of(d)] == 1;
    }
    return alone;
  }

  int Link(int src, int dst) {
    int& r = links_[static_cast<size_t>(src) * devices_ + dst];
    if (r < 0) r = out_.graph.AddResource(ResourceOrder::kArrival);
    return r;
  }

  // A pass's copies take 0 seconds (LowerStagePass).
  int AddCopy(const CopyTask& copy) {
    const int t = out_.graph.AddTask(
        {Link(copy.src, copy.dst),
         kPass ? 0.0
               : context_->costs().TransferSeconds(
                     copy.bytes, context_->cluster(), copy.src, copy.dst)});
    out_.copies.push_back(copy);
    return t;
  }

  // Weights read on other devices than their home (a pass: the stage's,
  // in a forward), sent from it at the start.
  void CopyWeights() {
    if (kPass && scope_->backward) return;
    for (int v = 0; v < static_cast<int>(view_.values().size()); ++v) {
      const TrainingValue& value = view_.value(v);
      if (value.kind != ValueKind::kParameter || view_.sum_of(v) >= 0) {
        continue;
      }
      const int g = index_.home_group(v);
      if (g < 0) continue;
      if (!kPass) {
        CopyWeight(v, out_.device_of_group[g]);
      } else if (scope_->strategy->stage_of_op[g] == scope_->stage) {
        CopyWeight(v, SlotOfOp(*scope_->strategy, g));
      }
    }
  }

  // Weight v, held on `home`, to each other device that a task reading it
  // runs on, from the start.
  void CopyWeight(int v, int home) {
    std::fill(copy_on_device_.begin(), copy_on_device_.end(), -1);
    for (int consumer : view_.value(v).consumers) {
      if (Task(consumer) < 0) continue;
      const int d = out_.device_of_node[consumer];
      if (d != home) CopyValue(-1, v, home, d);
    }
  }

  // Whether a copy of gradient sum `sum`'s partials is made toward its
  // sink: always for a step; for a pass, when the sink is in it or is an
  // update of the stage.
  bool SinkHere(int sink) const {
    if (!kPass || Task(sink) >= 0) return true;
    return index_.kind(sink) == NodeKind::kUpdate &&
           scope_->strategy->stage_of_op[view_.node(sink).forward_op] ==
               scope_->stage;
  }

  // Value v to device dst, once per value (copy_on_device_ is reset for
  // each), after `producer` (-1: at time 0); the copy then releases v's
  // readers there.
  void CopyValue(int producer, int v, int src, int dst) {
    int& copy = copy_on_device_[dst];
    if (copy >= 0) return;
    copy = AddCopy({v, -1, src, dst, index_.value_bytes(v)});
    if (producer >= 0) out_.graph.AddEdge(producer, copy);
  }

  // A copy's edges to its readers, added after every node's so that edges
  // go in source order.
  void AddEdgesOfCopy(int task) {
    const CopyTask& copy = out_.copy(task);
    if (copy.gradient_sum >= 0) {
      // A buffer for an update: every update of its device waits for it
      // (a pass: nothing in it).
      const int sink = view_.gradient_sums()[copy.gradient_sum].sink;
      if (index_.kind(sink) != NodeKind::kUpdate) {
        out_.graph.AddEdge(task, Task(sink));
      } else if (!kPass) {
        out_.graph.AddEdge(task, gradients_in_[copy.dst]);
      }
      return;
    }
    for (int consumer : index_.consumers(copy.value)) {
      const int reader = Task(consumer);
      if (reader >= 0 && out_.device_of_node[consumer] == copy.dst) {
        out_.graph.AddEdge(task, reader);
      }
    }
  }

  // Node i's edges (it is a task); what it reads from outside the tasks
  // is not copied.
  void AddEdgesOf(int i) {
    TaskGraph& graph = out_.graph;
    const int t = Task(i);
    const int d = out_.device_of_node[i];
    for (int out : index_.outputs(i)) {
      const int s = view_.sum_of(out);
      if (s >= 0) {
        const GradientSum& sum = view_.gradient_sums()[s];
        if (!SinkHere(sum.sink)) continue;
        const int sink_device = out_.device_of_node[sum.sink];
        if (d == sink_device) {
          if (Task(sum.sink) >= 0) {
            graph.AddEdge(t, Task(sum.sink));
          }
          continue;
        }
        int& copy = sum_copy_.at(s, d);
        if (copy < 0) {
          // A pass: the first partial it meets on d.
          copy = AddCopy({kPass ? out : partials_.first(s, d), s, d,
                          sink_device, sum.bytes});
        }
        graph.AddEdge(t, copy);
        continue;
      }
      std::fill(copy_on_device_.begin(), copy_on_device_.end(), -1);
      for (int consumer : index_.consumers(out)) {
        const int reader = Task(consumer);
        if (reader < 0) continue;
        const int cd = out_.device_of_node[consumer];
        if (cd == d) {
          graph.AddEdge(t, reader);
        } else {
          CopyValue(t, out, d, cd);
        }
      }
    }
    for (int dep : index_.control_dependents(i)) {
      if (Task(dep) >= 0) graph.AddEdge(t, Task(dep));
    }
    if (has_updates_ && index_.kind(i) == NodeKind::kBackward) {
      graph.AddEdge(t, out_.backward_done);
    }
  }

  const ViewIndex& index_;
  const TrainingView& view_;
  const int devices_;  // a pass: the stage's slots
  // An op placement's step: its costs, hosts and priorities.
  const SimulationContext* const context_ = nullptr;
  const PassScope* const scope_ = nullptr;  // kPass
  // A pass: per view node, its task's priority (empty: all 0).
  const absl::Span<const double> priorities_;
  LoweredPlacement out_;
  // A pass: per view node, its task, or -1 (Task).
  std::vector<int> task_of_node_;
  bool has_updates_ = false;
  // Per device: the task its updates wait for (LoweredPlacement's
  // contract), or -1.
  std::vector<int> gradients_in_;
  std::vector<int> links_;           // [src * devices + dst]: resource or -1
  std::vector<int> copy_on_device_;  // the value's copy to each device or -1
  // (sum, src): the copy task of src's buffer to the sink, or -1.
  PairTable<int> sum_copy_;
  PartialsByDevice partials_;
};

}  // namespace

LoweredPlacement LowerPlacement(const SimulationContext& context,
                                const Placement& placement) {
  return Lowering<false>(context, placement).Run();
}

LoweredPlacement LowerStagePass(const ViewIndex& index,
                                absl::Span<const double> priorities,
                                const Strategy& strategy, int stage,
                                bool backward, const std::vector<int>& nodes,
                                const std::vector<int>& slot_of_node) {
  const PassScope scope{&strategy, stage, backward};
  return Lowering<true>(index, priorities, scope, nodes, slot_of_node)
      .RunPass();
}

}  // namespace placer
