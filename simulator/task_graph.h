// A training step lowered to tasks on resources: what the event engine
// (simulator/engine.h) runs. A resource runs one task at a time — a
// device's compute, one direction of a link, the collective of a group of
// devices. A task starts once it is ready (every edge into it released) and
// its resource takes it.
//
// Contract:
//  - Edges: AddEdge(a, b) releases b's wait on a when a ends;
//    AddStartEdge(a, b, lag) when a has run `lag` seconds (what a long task
//    makes part-way through, e.g. a gradient final inside a backward pass).
//  - Resources: kPriority takes, whenever it is idle, its ready task with
//    the lowest (priority, tie); kArrival books each task the moment it is
//    ready, after the tasks booked before it (a FIFO link).
//  - A task's successors keep the order their edges were added in: the
//    engine releases them in that order, which decides ties between events
//    at the same time. Edges added source by source (`from` never
//    decreasing) spare the engine a sort.
// Not thread-safe; a built graph is read-only and may be shared.
#ifndef PLACER_SIMULATOR_TASK_GRAPH_H_
#define PLACER_SIMULATOR_TASK_GRAPH_H_

#include <vector>

namespace placer {

enum class ResourceOrder {
  kPriority,  // an idle resource starts its best ready task
  kArrival,   // tasks booked in the order they become ready
};

struct TaskEdge {
  int from = -1;
  int to = -1;
  // < 0: released when `from` ends; else this long after it starts.
  double lag_seconds = -1;
};

struct Task {
  int resource = -1;
  double seconds = 0;
  double priority = 0;  // kPriority resources: lower runs first
  int tie = 0;          // then lower tie
};

class TaskGraph {
 public:
  // Returns the new resource's index (0, 1, ...).
  int AddResource(ResourceOrder order);
  // Returns the new task's index (0, 1, ...). `task.resource` must be a
  // resource added before; `task.seconds` >= 0.
  int AddTask(const Task& task);
  // `to` waits for `from` to end. Both must be tasks added before.
  void AddEdge(int from, int to) {
    edges_.push_back({from, to, -1});
    ++predecessors_[to];
  }
  // `to` waits until `from` has run `lag_seconds` (>= 0).
  void AddStartEdge(int from, int to, double lag_seconds) {
    edges_.push_back({from, to, lag_seconds});
    ++predecessors_[to];
    ++start_edges_;
  }

  // Task `t` takes `seconds` (>= 0) instead.
  void set_seconds(int t, double seconds) { seconds_[t] = seconds; }

  // Room for this many tasks and edges in all (a hint).
  void Reserve(int tasks, int edges);

  int num_tasks() const { return static_cast<int>(resource_.size()); }
  int num_resources() const { return static_cast<int>(orders_.size()); }
  int resource(int t) const { return resource_[t]; }
  double seconds(int t) const { return seconds_[t]; }
  double priority(int t) const { return priority_[t]; }
  int tie(int t) const { return tie_[t]; }
  ResourceOrder resource_order(int r) const { return orders_[r]; }
  // Every edge, in the order added.
  const std::vector<TaskEdge>& edges() const { return edges_; }
  // Edges into `t`.
  int num_predecessors(int t) const { return predecessors_[t]; }
  // Edges added with AddStartEdge.
  int num_start_edges() const { return start_edges_; }

 private:
  std::vector<ResourceOrder> orders_;
  // Per task (kept apart: the engine's ready queues read priorities alone).
  std::vector<int> resource_;
  std::vector<double> seconds_;
  std::vector<double> priority_;
  std::vector<int> tie_;
  std::vector<TaskEdge> edges_;
  std::vector<int> predecessors_;
  int start_edges_ = 0;
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_TASK_GRAPH_H_
