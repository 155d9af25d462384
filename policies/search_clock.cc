#include "policies/search_clock.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace placer {

SearchClock::SearchClock(const PolicyOptions& options, std::string stage)
    : options_(options),
      stage_(std::move(stage)),
      start_(SteadyClock::now()),
      last_report_(start_) {}

double SearchClock::remaining_seconds() const {
  return std::max(0.0, options_.budget_seconds - elapsed_seconds());
}

bool SearchClock::StopRequested() const {
  return options_.should_stop && options_.should_stop();
}

bool SearchClock::Expired() const {
  return elapsed_seconds() >= options_.budget_seconds || StopRequested();
}

void SearchClock::Report(int64_t evaluations, double best_step_seconds) {
  if (!reporting()) return;
  if (reported_ &&
      std::chrono::duration<double>(SteadyClock::now() - last_report_).count() <
          options_.progress_interval_seconds) {
    return;
  }
  ReportNow(evaluations, best_step_seconds);
}

void SearchClock::ReportNow(int64_t evaluations, double best_step_seconds,
                            const std::string& stage) {
  if (!reporting()) return;
  reported_ = true;
  last_report_ = SteadyClock::now();
  options_.on_progress(
      {stage.empty() ? stage_ : stage, evaluations, best_step_seconds,
       std::chrono::duration<double>(last_report_ - start_).count()});
}

}  // namespace placer
