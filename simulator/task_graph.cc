#include "simulator/task_graph.h"

namespace placer {

int TaskGraph::AddResource(ResourceOrder order) {
  orders_.push_back(order);
  return num_resources() - 1;
}

int TaskGraph::AddTask(const Task& task) {
  tasks_.push_back(task);
  successors_.emplace_back();
  predecessors_.push_back(0);
  return num_tasks() - 1;
}

void TaskGraph::AddEdge(int from, int to) {
  successors_[from].push_back({to, -1});
  ++predecessors_[to];
}

void TaskGraph::AddStartEdge(int from, int to, double lag_seconds) {
  successors_[from].push_back({to, lag_seconds});
  ++predecessors_[to];
}

}  // namespace placer
