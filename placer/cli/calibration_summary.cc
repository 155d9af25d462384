#include "placer/cli/calibration_summary.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/statistics.h"

namespace placer {

namespace {

size_t MostRounds(const std::vector<CalibrationRow>& rows) {
  size_t rounds = 0;
  for (const CalibrationRow& r : rows) {
    rounds = std::max(rounds, r.rounds.size());
  }
  return rounds;
}

std::vector<double> Column(const std::vector<CalibrationRow>& rows,
                           double CalibrationRow::*field) {
  std::vector<double> column;
  for (const CalibrationRow& r : rows) column.push_back(r.*field);
  return column;
}

}  // namespace

double MedianRelativeError(const std::vector<CalibrationRow>& rows,
                           bool feedback) {
  std::vector<double> e;
  for (const CalibrationRow& r : rows) {
    double sim = feedback ? r.simulated_feedback : r.simulated;
    e.push_back(std::abs(sim - r.measured) / r.measured);
  }
  return Median(std::move(e));
}

std::optional<double> RoundsRho(const std::vector<CalibrationRow>& rows) {
  const size_t rounds = MostRounds(rows);
  double sum = 0;
  int pairs = 0;
  for (size_t a = 0; a < rounds; ++a) {
    for (size_t b = a + 1; b < rounds; ++b) {
      std::vector<double> x, y;
      for (const CalibrationRow& r : rows) {
        if (r.rounds.size() > b) {
          x.push_back(r.rounds[a]);
          y.push_back(r.rounds[b]);
        }
      }
      if (x.size() < 3) continue;
      sum += SpearmanRho(x, y);
      ++pairs;
    }
  }
  if (pairs == 0) return std::nullopt;
  return sum / pairs;
}

double MedianRoundsSpread(const std::vector<CalibrationRow>& rows) {
  std::vector<double> spread;
  for (const CalibrationRow& r : rows) {
    if (r.rounds.size() < 2) continue;
    auto [lo, hi] = std::minmax_element(r.rounds.begin(), r.rounds.end());
    spread.push_back((*hi - *lo) / Median(r.rounds));
  }
  return Median(std::move(spread));
}

std::optional<AgainstRounds> SimulatedAgainstRounds(
    const std::vector<CalibrationRow>& rows) {
  const size_t rounds = MostRounds(rows);
  if (rounds < 2) return std::nullopt;
  double sum = 0;
  int counted = 0;
  std::vector<double> errors;
  for (size_t k = 0; k < rounds; ++k) {
    std::vector<double> simulated, measured;
    for (const CalibrationRow& r : rows) {
      if (r.rounds.size() <= k) continue;
      simulated.push_back(r.simulated_feedback);
      measured.push_back(r.rounds[k]);
      errors.push_back(std::abs(r.simulated_feedback - r.rounds[k]) /
                       r.rounds[k]);
    }
    if (simulated.size() < 3) continue;
    sum += SpearmanRho(simulated, measured);
    ++counted;
  }
  if (counted == 0) return std::nullopt;
  return AgainstRounds{sum / counted, Median(std::move(errors))};
}

std::optional<Pick> SimulatorsPick(const std::vector<CalibrationRow>& rows) {
  if (rows.empty()) return std::nullopt;
  auto first = [](const CalibrationRow* a, const CalibrationRow* b,
                  double CalibrationRow::*by) {
    return a->*by != b->*by ? a->*by < b->*by : a->placement < b->placement;
  };
  const CalibrationRow* pick = &rows[0];
  const CalibrationRow* fastest = &rows[0];
  for (const CalibrationRow& r : rows) {
    if (first(&r, pick, &CalibrationRow::simulated_feedback)) pick = &r;
    if (first(&r, fastest, &CalibrationRow::measured)) fastest = &r;
  }
  return Pick{pick->placement, fastest->placement,
              pick->measured / fastest->measured - 1};
}

std::string Summary(const std::string& what,
                    const std::vector<CalibrationRow>& rows, bool one_model) {
  const std::vector<double> s = Column(rows, &CalibrationRow::simulated);
  const std::vector<double> f =
      Column(rows, &CalibrationRow::simulated_feedback);
  const std::vector<double> m = Column(rows, &CalibrationRow::measured);
  std::string out = absl::StrFormat(
      "%s: %d placements\n"
      "  profile:                         median |sim-meas|/meas %5.1f%%, "
      "Spearman rho %.3f\n"
      "  + a reference placement's steps: median |sim-meas|/meas %5.1f%%, "
      "Spearman rho %.3f\n",
      what, rows.size(), 100 * MedianRelativeError(rows, false),
      SpearmanRho(s, m), 100 * MedianRelativeError(rows, true),
      SpearmanRho(f, m));
  if (std::optional<double> rho = RoundsRho(rows)) {
    absl::StrAppendFormat(&out,
                          "  the rounds against each other:   median "
                          "(max-min)/median %5.1f%%, Spearman rho %.3f\n",
                          100 * MedianRoundsSpread(rows), *rho);
  }
  if (std::optional<AgainstRounds> one = SimulatedAgainstRounds(rows)) {
    absl::StrAppendFormat(&out,
                          "  + reference against each round:  median "
                          "|sim-meas|/meas %5.1f%%, Spearman rho %.3f\n",
                          100 * one->median_relative_error, one->spearman_rho);
  }
  std::optional<Pick> pick = SimulatorsPick(rows);
  if (one_model && pick) {
    absl::StrAppendFormat(&out,
                          "  + reference's pick:               %s, measured "
                          "%.1f%% above the fastest (%s)\n",
                          pick->placement, 100 * pick->measured_over_fastest,
                          pick->fastest_measured);
  }
  return out;
}

google::protobuf::Value SummaryJson(const std::vector<CalibrationRow>& rows,
                                    bool one_model) {
  const std::vector<double> s = Column(rows, &CalibrationRow::simulated);
  const std::vector<double> f =
      Column(rows, &CalibrationRow::simulated_feedback);
  const std::vector<double> m = Column(rows, &CalibrationRow::measured);
  google::protobuf::Value v;
  auto& e = *v.mutable_struct_value()->mutable_fields();
  e["placements"].set_number_value(static_cast<double>(rows.size()));
  e["median_relative_error"].set_number_value(MedianRelativeError(rows, false));
  e["spearman_rho"].set_number_value(SpearmanRho(s, m));
  e["median_relative_error_with_feedback"].set_number_value(
      MedianRelativeError(rows, true));
  e["spearman_rho_with_feedback"].set_number_value(SpearmanRho(f, m));
  if (std::optional<double> rho = RoundsRho(rows)) {
    e["rounds_spearman_rho"].set_number_value(*rho);
    e["rounds_median_spread"].set_number_value(MedianRoundsSpread(rows));
  }
  if (std::optional<AgainstRounds> one = SimulatedAgainstRounds(rows)) {
    e["each_round_spearman_rho_with_feedback"].set_number_value(
        one->spearman_rho);
    e["each_round_median_relative_error_with_feedback"].set_number_value(
        one->median_relative_error);
  }
  std::optional<Pick> pick = SimulatorsPick(rows);
  if (one_model && pick) {
    e["pick_with_feedback"].set_string_value(pick->placement);
    e["fastest_measured"].set_string_value(pick->fastest_measured);
    e["pick_measured_over_fastest"].set_number_value(
        pick->measured_over_fastest);
  }
  return v;
}

}  // namespace placer
