// The event engine on small task graphs with hand-computed schedules.
#include "simulator/engine.h"

#include <vector>

#include "gtest/gtest.h"
#include "simulator/task_graph.h"

namespace placer {
namespace {

TEST(EngineTest, AChainOnOneResourceRunsBackToBack) {
  TaskGraph g;
  const int r = g.AddResource(ResourceOrder::kPriority);
  const int a = g.AddTask({r, 1.0});
  const int b = g.AddTask({r, 2.0});
  g.AddEdge(a, b);
  const TaskSchedule s = RunTaskGraph(g);
  EXPECT_EQ(s.finished, 2);
  EXPECT_DOUBLE_EQ(s.start_seconds[b], 1.0);
  EXPECT_DOUBLE_EQ(s.end_seconds[b], 3.0);
  EXPECT_DOUBLE_EQ(s.makespan_seconds, 3.0);
  EXPECT_DOUBLE_EQ(s.busy_seconds[r], 3.0);
  EXPECT_EQ(s.waited_for[a], -1);
  EXPECT_EQ(s.waited_for[b], a);
  EXPECT_EQ(s.start_order, (std::vector<int>{a, b}));
}

TEST(EngineTest, AnIdleResourceStartsItsBestReadyTask) {
  TaskGraph g;
  const int r = g.AddResource(ResourceOrder::kPriority);
  const int x = g.AddTask({r, 1.0, /*priority=*/2, /*tie=*/0});
  const int y = g.AddTask({r, 1.0, 1, 5});
  const int z = g.AddTask({r, 1.0, 1, 3});
  const TaskSchedule s = RunTaskGraph(g);
  EXPECT_DOUBLE_EQ(s.start_seconds[z], 0.0);
  EXPECT_DOUBLE_EQ(s.start_seconds[y], 1.0);
  EXPECT_DOUBLE_EQ(s.start_seconds[x], 2.0);
  // Each was ready at 0 and waited for the resource.
  EXPECT_EQ(s.waited_for[y], z);
  EXPECT_EQ(s.waited_for[x], y);
}

TEST(EngineTest, ArrivalResourcesBookTasksInTheOrderTheyBecomeReady) {
  // A (1 s) and C (2 s) on two devices each send over one link (2 s
  // each): A's transfer is booked at 1 and runs 1..3; C's, ready at 2,
  // runs after it, 3..5.
  TaskGraph g;
  const int d0 = g.AddResource(ResourceOrder::kPriority);
  const int d1 = g.AddResource(ResourceOrder::kPriority);
  const int link = g.AddResource(ResourceOrder::kArrival);
  const int a = g.AddTask({d0, 1.0});
  const int c = g.AddTask({d1, 2.0});
  const int t1 = g.AddTask({link, 2.0});
  const int t2 = g.AddTask({link, 2.0});
  g.AddEdge(a, t1);
  g.AddEdge(c, t2);
  const TaskSchedule s = RunTaskGraph(g);
  EXPECT_DOUBLE_EQ(s.start_seconds[t1], 1.0);
  EXPECT_DOUBLE_EQ(s.start_seconds[t2], 3.0);
  EXPECT_DOUBLE_EQ(s.end_seconds[t2], 5.0);
  EXPECT_EQ(s.waited_for[t1], a);
  EXPECT_EQ(s.waited_for[t2], t1);
  EXPECT_DOUBLE_EQ(s.busy_seconds[link], 4.0);
  EXPECT_DOUBLE_EQ(s.makespan_seconds, 5.0);
}

TEST(EngineTest, AStartEdgeReleasesPartWayThroughItsSource) {
  TaskGraph g;
  const int d0 = g.AddResource(ResourceOrder::kPriority);
  const int d1 = g.AddResource(ResourceOrder::kPriority);
  const int a = g.AddTask({d0, 4.0});
  const int b = g.AddTask({d1, 1.0});
  g.AddStartEdge(a, b, 1.5);
  const TaskSchedule s = RunTaskGraph(g);
  EXPECT_DOUBLE_EQ(s.start_seconds[b], 1.5);
  EXPECT_DOUBLE_EQ(s.end_seconds[b], 2.5);
  EXPECT_DOUBLE_EQ(s.makespan_seconds, 4.0);
  EXPECT_EQ(s.waited_for[b], a);
}

TEST(EngineTest, ATaskThatIsNeverReadyNeverRuns) {
  TaskGraph g;
  const int r = g.AddResource(ResourceOrder::kPriority);
  const int a = g.AddTask({r, 1.0});
  const int b = g.AddTask({r, 1.0});
  const int c = g.AddTask({r, 1.0});
  g.AddEdge(a, b);
  g.AddEdge(b, a);
  const TaskSchedule s = RunTaskGraph(g);
  EXPECT_EQ(s.finished, 1);
  EXPECT_DOUBLE_EQ(s.end_seconds[c], 1.0);
  EXPECT_DOUBLE_EQ(s.start_seconds[a], -1.0);
  EXPECT_DOUBLE_EQ(s.start_seconds[b], -1.0);
}

TEST(EngineTest, EventsAtOneTimeAreHandledInTheOrderTheyWereMade) {
  // At 1, A's end (made first) frees d0 before T's end makes the better
  // H ready: d0 starts L, and H waits until 2.
  TaskGraph g;
  const int d0 = g.AddResource(ResourceOrder::kPriority);
  const int d1 = g.AddResource(ResourceOrder::kPriority);
  const int a = g.AddTask({d0, 1.0, 0});
  const int l = g.AddTask({d0, 1.0, 5});
  const int t = g.AddTask({d1, 1.0});
  const int h = g.AddTask({d0, 1.0, 1});
  g.AddEdge(t, h);
  const TaskSchedule s = RunTaskGraph(g);
  EXPECT_DOUBLE_EQ(s.start_seconds[a], 0.0);
  EXPECT_DOUBLE_EQ(s.start_seconds[l], 1.0);
  EXPECT_DOUBLE_EQ(s.start_seconds[h], 2.0);
  EXPECT_EQ(s.waited_for[h], l);  // ready at 1, waited for d0
  EXPECT_EQ(s.finished, 4);
}

}  // namespace
}  // namespace placer
