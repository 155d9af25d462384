// PlanReportHtml: a simulated plan as one self-contained HTML page (inline
// SVG and CSS, no scripts, nothing fetched), for people to look at: where
// the ops went, which device is the bottleneck, when memory peaks, which
// links are busy, and (from place --compare) how the policies compare.
//
// Contract: `result` was simulated from `context` with record_schedule
// (its schedule, transfers and memory samples are drawn) or, for a
// strategy, is `strategy_result->step` (its tasks, transfers between stages
// and allreduced buckets are drawn; its peaks as a table with the
// micro-batches in flight, and its memory samples, when the simulation
// recorded them, as over the step); the page's
// figures are the result's own, printed as the text and JSON reports print
// them (six decimals for seconds). Drawing is bounded whatever the graph's
// size: a device's timeline is at most kTimelinePixels boxes (the work in
// each pixel column merged, coloured by what dominates it), memory at most
// that many points per device, the busiest kReportLinks links. Names from
// the model are HTML-escaped. Pure: the same inputs give the same bytes.
#ifndef PLACER_PLACER_PLAN_REPORT_H_
#define PLACER_PLACER_PLAN_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"

namespace placer {

inline constexpr int kTimelinePixels = 1000;
inline constexpr int kReportLinks = 8;

// A row of place --compare.
struct PolicyComparison {
  std::string policy;
  bool ok = false;
  double step_seconds = 0;
  int64_t max_peak_bytes = 0;
  int64_t bytes_moved = 0;
  double placement_seconds = 0;
};

struct PlanReport {
  std::string title;  // e.g. "zoo:gnmt4 on p100x4 (best)"
  const SimulationContext* context = nullptr;
  const SimulationResult* result = nullptr;
  // A strategy and its simulation (record_schedule); null for an op
  // placement.
  const Strategy* strategy = nullptr;
  const StrategySimulation* strategy_result = nullptr;
  std::vector<PolicyComparison> comparison;  // empty: none shown
};

std::string PlanReportHtml(const PlanReport& report);

}  // namespace placer

#endif  // PLACER_PLACER_PLAN_REPORT_H_
