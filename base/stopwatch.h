// Elapsed wall time on the steady clock, in seconds: what budgets, progress
// lines and measurements count.
#ifndef PLACER_BASE_STOPWATCH_H_
#define PLACER_BASE_STOPWATCH_H_

#include <chrono>

namespace placer {

using SteadyClock = std::chrono::steady_clock;

// Seconds from `start` to now.
inline double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace placer

#endif  // PLACER_BASE_STOPWATCH_H_
