#include "policies/search_clock.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace placer {
namespace {

TEST(SearchClockTest, ExpiresAtTheBudgetOrWhenAStopIsRequested) {
  PolicyOptions o;
  o.budget_seconds = 1e9;
  bool stop = false;
  o.should_stop = [&] { return stop; };
  SearchClock clock(o, "x");
  EXPECT_FALSE(clock.Expired());
  EXPECT_FALSE(clock.StopRequested());
  EXPECT_GT(clock.remaining_seconds(), 1e8);
  stop = true;
  EXPECT_TRUE(clock.StopRequested());
  EXPECT_TRUE(clock.Expired());

  PolicyOptions spent;
  spent.budget_seconds = 0;
  SearchClock over(spent, "y");
  EXPECT_TRUE(over.Expired());
  EXPECT_FALSE(over.StopRequested());  // no should_stop given
  EXPECT_EQ(over.remaining_seconds(), 0);
}

TEST(SearchClockTest, ReportsAtMostOncePerIntervalAndAlwaysWhenTold) {
  std::vector<SearchProgress> heard;
  PolicyOptions o;
  o.on_progress = [&](const SearchProgress& p) { heard.push_back(p); };
  o.progress_interval_seconds = 1e9;
  SearchClock clock(o, "local_search");
  EXPECT_TRUE(clock.reporting());
  clock.Report(1, 2.0);  // the first goes
  clock.Report(2, 1.5);  // within the interval: held back
  clock.ReportNow(3, 1.0);
  clock.ReportNow(4, 0.5, "best");
  ASSERT_EQ(heard.size(), 3u);
  EXPECT_EQ(heard[0].stage, "local_search");
  EXPECT_EQ(heard[0].evaluations, 1);
  EXPECT_EQ(heard[0].best_step_seconds, 2.0);
  EXPECT_EQ(heard[1].evaluations, 3);
  EXPECT_EQ(heard[2].stage, "best");
  EXPECT_EQ(heard[2].best_step_seconds, 0.5);
  EXPECT_GE(heard[2].elapsed_seconds, heard[0].elapsed_seconds);

  o.progress_interval_seconds = 0;  // every report goes
  heard.clear();
  SearchClock every(o, "strategies");
  for (int i = 0; i < 4; ++i) every.Report(i, 1.0);
  EXPECT_EQ(heard.size(), 4u);
}

TEST(SearchClockTest, SilentWithoutAListener) {
  PolicyOptions o;
  SearchClock clock(o, "rl");
  EXPECT_FALSE(clock.reporting());
  clock.Report(1, 1.0);  // nothing to call; must not crash
  clock.ReportNow(1, 1.0, "rl");
}

}  // namespace
}  // namespace placer
