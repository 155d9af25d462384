// The event engine: runs a TaskGraph (simulator/task_graph.h) from time 0
// until no event is left and says when each task ran.
//
// Contract: RunTaskGraph is a pure function of the graph, bit for bit.
//  - Events are handled in time order, ties in the order they were made.
//    A task's end frees its resource and releases its end edges'
//    successors, in edge order; a task's start schedules a release of each
//    start edge's successor at start + lag.
//  - A task whose last edge is released is ready: on a kArrival resource it
//    is booked at once (it starts when the resource's previously booked
//    task ends, or now); on a kPriority resource it joins the ready queue.
//  - After each event (and at time 0, after the tasks without edges into
//    them are made ready in index order), every kPriority resource that is
//    idle with ready tasks starts its best one, in resource index order.
//  - An observer, when given, hears of each start (and may lengthen the
//    task) and each end, as they happen, on the calling thread.
// A task that is never ready (a cycle, a missing release) never runs:
// `finished` counts those that did.
#ifndef PLACER_SIMULATOR_ENGINE_H_
#define PLACER_SIMULATOR_ENGINE_H_

#include <vector>

#include "simulator/task_graph.h"

namespace placer {

struct TaskSchedule {
  // Per task; -1 for a task that never ran.
  std::vector<double> start_seconds, end_seconds;
  // Per task, what it waited for last: the task whose release made it
  // ready or, when it then waited for its resource, the task before it
  // there; -1 when nothing (ready and started at time 0).
  std::vector<int> waited_for;
  // Tasks in the order they started (kArrival: were booked).
  std::vector<int> start_order;
  std::vector<double> busy_seconds;  // per resource: its tasks' end - start
  int finished = 0;                  // tasks that ran
  double makespan_seconds = 0;       // the last end
};

// Told of tasks starting and ending, in the engine's order.
class TaskObserver {
 public:
  virtual ~TaskObserver() = default;
  // `task` starts at `start`, decided at `now` (the time of the event
  // being handled; earlier than `start` for a task booked on a kArrival
  // resource that is busy until then); `end` is start + its seconds.
  // Returns its end: `end`, or later when the task turns out to do more
  // (e.g. add into a buffer its device holds by then).
  virtual double Started(int task, double now, double start, double end) = 0;
  // `task` ends at `now`, before its successors are released.
  virtual void Ended(int task, double now) = 0;
};

// Two observers in turn: each start goes to `first`, then to `second` with
// the end `first` returned; each end to both, in that order. Both must
// outlive it.
class ObserverPair final : public TaskObserver {
 public:
  ObserverPair(TaskObserver* first, TaskObserver* second)
      : first_(*first), second_(*second) {}
  double Started(int task, double now, double start, double end) override {
    return second_.Started(task, now, start,
                           first_.Started(task, now, start, end));
  }
  void Ended(int task, double now) override {
    first_.Ended(task, now);
    second_.Ended(task, now);
  }

 private:
  TaskObserver& first_;
  TaskObserver& second_;
};

// `observer` may be null.
TaskSchedule RunTaskGraph(const TaskGraph& graph,
                          TaskObserver* observer = nullptr);

}  // namespace placer

#endif  // PLACER_SIMULATOR_ENGINE_H_
