#include "simulator/task_graph.h"

namespace placer {

int TaskGraph::AddResource(ResourceOrder order) {
  orders_.push_back(order);
  return num_resources() - 1;
}

int TaskGraph::AddTask(const Task& task) {
  resource_.push_back(task.resource);
  seconds_.push_back(task.seconds);
  priority_.push_back(task.priority);
  tie_.push_back(task.tie);
  predecessors_.push_back(0);
  return num_tasks() - 1;
}

void TaskGraph::Reserve(int tasks, int edges) {
  resource_.reserve(tasks);
  seconds_.reserve(tasks);
  priority_.reserve(tasks);
  tie_.reserve(tasks);
  predecessors_.reserve(tasks);
  edges_.reserve(edges);
}

}  // namespace placer
