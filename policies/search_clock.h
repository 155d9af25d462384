// A search's budget, stop request and progress reports in one place: every
// search (local_search, best, memory_first, the strategy search, rl) asks
// its clock whether to go on and tells it how it goes.
//
// Contract: the clock starts when it is made. It reads budget_seconds,
// should_stop, on_progress and progress_interval_seconds from the
// PolicyOptions it was made with, which must outlive it. Not thread-safe:
// one search thread uses it (PolicyOptions' callbacks run on that thread).
#ifndef PLACER_POLICIES_SEARCH_CLOCK_H_
#define PLACER_POLICIES_SEARCH_CLOCK_H_

#include <cstdint>
#include <string>

#include "base/stopwatch.h"
#include "policies/policy.h"

namespace placer {

class SearchClock {
 public:
  // Reports name `stage` (SearchProgress::stage) unless told otherwise.
  SearchClock(const PolicyOptions& options, std::string stage);

  double elapsed_seconds() const { return SecondsSince(start_); }
  // What is left of the budget: max(0, budget_seconds - elapsed).
  double remaining_seconds() const;
  // should_stop says so (a caller's deadline or cancellation).
  bool StopRequested() const;
  // The budget is spent or a stop is requested: the search should answer
  // with the best it has.
  bool Expired() const;
  // Whether anyone listens (on_progress is set).
  bool reporting() const { return static_cast<bool>(options_.on_progress); }

  // Tells on_progress {stage, evaluations, best, elapsed} unless a report
  // went out less than progress_interval_seconds ago (the first always
  // goes). best_step_seconds 0: no valid plan yet.
  void Report(int64_t evaluations, double best_step_seconds);
  // Tells on_progress now, whatever the interval (a search's last word, or
  // a portfolio's member finishing); `stage` replaces the clock's when not
  // empty.
  void ReportNow(int64_t evaluations, double best_step_seconds,
                 const std::string& stage = "");

 private:
  const PolicyOptions& options_;
  std::string stage_;
  SteadyClock::time_point start_;
  SteadyClock::time_point last_report_;
  bool reported_ = false;
};

}  // namespace placer

#endif  // PLACER_POLICIES_SEARCH_CLOCK_H_
