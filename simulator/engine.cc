#include "simulator/engine.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>

namespace placer {
namespace {

struct Event {
  double time = 0;
  int64_t seq = 0;
  int task = -1;     // the task that ends, or whose start edge releases
  int release = -1;  // the released successor; -1: `task` ends
  bool operator>(const Event& o) const {
    return time != o.time ? time > o.time : seq > o.seq;
  }
};

class Engine {
 public:
  Engine(const TaskGraph& graph, TaskObserver* observer)
      : graph_(graph),
        observer_(observer),
        pending_(graph.num_tasks()),
        ready_time_(graph.num_tasks(), 0),
        free_at_(graph.num_resources(), 0),
        running_(graph.num_resources(), 0),
        last_on_(graph.num_resources(), -1),
        queues_(graph.num_resources(), Queue(ReadyCompare{&graph})) {
    schedule_.start_seconds.assign(graph.num_tasks(), -1);
    schedule_.end_seconds.assign(graph.num_tasks(), -1);
    schedule_.waited_for.assign(graph.num_tasks(), -1);
    schedule_.busy_seconds.assign(graph.num_resources(), 0);
    schedule_.start_order.reserve(graph.num_tasks());
    // Successors by source, each task's in the order added: the graph's
    // edges as they are when added source by source, else sorted here.
    const std::vector<TaskEdge>& edges = graph.edges();
    first_successor_.assign(graph.num_tasks() + 1, 0);
    bool by_source = true;
    for (size_t e = 0; e < edges.size(); ++e) {
      ++first_successor_[edges[e].from + 1];
      by_source &= e == 0 || edges[e - 1].from <= edges[e].from;
    }
    for (int t = 0; t < graph.num_tasks(); ++t) {
      first_successor_[t + 1] += first_successor_[t];
    }
    successors_ = &edges;
    if (!by_source) {
      sorted_.resize(edges.size());
      std::vector<int> next(first_successor_.begin(),
                            first_successor_.end() - 1);
      for (const TaskEdge& edge : edges) sorted_[next[edge.from]++] = edge;
      successors_ = &sorted_;
    }
  }

  TaskSchedule Run() {
    for (int t = 0; t < graph_.num_tasks(); ++t) {
      pending_[t] = graph_.num_predecessors(t);
    }
    for (int t = 0; t < graph_.num_tasks(); ++t) {
      if (pending_[t] == 0) Ready(t, 0);
    }
    for (int r = 0; r < graph_.num_resources(); ++r) TryStart(r, 0);
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      if (e.release >= 0) {
        Release(e.release, e.task, e.time);
      } else {
        End(e.task, e.time);
      }
      if (touched_.size() > 1) {
        std::sort(touched_.begin(), touched_.end());
        touched_.erase(std::unique(touched_.begin(), touched_.end()),
                       touched_.end());
      }
      for (int r : touched_) TryStart(r, e.time);
      touched_.clear();
    }
    return std::move(schedule_);
  }

 private:
  struct ReadyCompare {
    const TaskGraph* graph;
    bool operator()(int a, int b) const {  // true: b runs first
      const double pa = graph->priority(a), pb = graph->priority(b);
      if (pa != pb) return pa > pb;
      const int ta = graph->tie(a), tb = graph->tie(b);
      if (ta != tb) return ta > tb;
      return a > b;
    }
  };
  using Queue = std::priority_queue<int, std::vector<int>, ReadyCompare>;

  void Push(double time, int task, int release) {
    events_.push({time, seq_++, task, release});
  }

  void Ready(int t, double now) {
    ready_time_[t] = now;
    const int r = graph_.resource(t);
    if (graph_.resource_order(r) == ResourceOrder::kArrival) {
      const double start = std::max(now, free_at_[r]);
      if (start > now && last_on_[r] >= 0) {
        schedule_.waited_for[t] = last_on_[r];
      }
      Start(t, now, start);
      free_at_[r] = schedule_.end_seconds[t];
    } else {
      queues_[r].push(t);
      touched_.push_back(r);
    }
  }

  void Start(int t, double now, double start) {
    const int resource = graph_.resource(t);
    double end = start + graph_.seconds(t);
    if (observer_ != nullptr) end = observer_->Started(t, now, start, end);
    schedule_.start_seconds[t] = start;
    schedule_.end_seconds[t] = end;
    schedule_.start_order.push_back(t);
    last_on_[resource] = t;
    Push(end, t, -1);
    if (graph_.num_start_edges() == 0) return;
    for (int e = first_successor_[t]; e < first_successor_[t + 1]; ++e) {
      const TaskEdge& edge = (*successors_)[e];
      if (edge.lag_seconds >= 0) Push(start + edge.lag_seconds, t, edge.to);
    }
  }

  void TryStart(int r, double now) {
    if (running_[r] || queues_[r].empty()) return;
    const int t = queues_[r].top();
    queues_[r].pop();
    running_[r] = 1;
    if (ready_time_[t] < now && last_on_[r] >= 0) {
      schedule_.waited_for[t] = last_on_[r];
    }
    Start(t, now, now);
  }

  void Release(int t, int by, double now) {
    schedule_.waited_for[t] = by;
    if (--pending_[t] == 0) Ready(t, now);
  }

  void End(int t, double now) {
    const int resource = graph_.resource(t);
    ++schedule_.finished;
    schedule_.busy_seconds[resource] += now - schedule_.start_seconds[t];
    schedule_.makespan_seconds = std::max(schedule_.makespan_seconds, now);
    if (observer_ != nullptr) observer_->Ended(t, now);
    if (graph_.resource_order(resource) == ResourceOrder::kPriority) {
      running_[resource] = 0;
      touched_.push_back(resource);
    }
    for (int e = first_successor_[t]; e < first_successor_[t + 1]; ++e) {
      const TaskEdge& edge = (*successors_)[e];
      if (edge.lag_seconds < 0) Release(edge.to, t, now);
    }
  }

  const TaskGraph& graph_;
  TaskObserver* const observer_;
  std::vector<int> first_successor_;         // per task + 1: into successors_
  const std::vector<TaskEdge>* successors_;  // grouped by source
  std::vector<TaskEdge> sorted_;             // when the graph's edges are not
  std::vector<int> pending_;
  std::vector<double> ready_time_;
  std::vector<double> free_at_;  // kArrival: the last booked task's end
  std::vector<char> running_;    // kPriority
  std::vector<int> last_on_;     // the resource's last started task
  std::vector<Queue> queues_;
  std::vector<int> touched_;  // resources to try after an event
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t seq_ = 0;
  TaskSchedule schedule_;
};

}  // namespace

TaskSchedule RunTaskGraph(const TaskGraph& graph, TaskObserver* observer) {
  return Engine(graph, observer).Run();
}

}  // namespace placer
