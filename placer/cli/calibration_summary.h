// The figures `placer calibrate` reports over a set of placements it has
// measured and simulated: how far the simulator is from the measurement,
// how well it ranks the placements, and, with several rounds, how well the
// measurement ranks them itself.
//
// Contract: relative errors are |simulated - measured| / measured, their
// median over rows; rank agreement is Spearman's rho (base/statistics.h).
// RoundsRho is the mean over every pair of rounds of rho between the two
// rounds' measurements (rows measured in both; pairs with fewer than three
// such rows left out): the measurement's own rank agreement.
// SimulatedAgainstRounds compares the simulator (with the reference steps)
// with each round on its own, as RoundsRho compares the rounds: the mean over
// rounds of rho (rounds with fewer than three rows left out) and the
// median over every (row, round) of the relative error. The two rhos are
// alike: each ranks one round against something else, so where the
// simulator's is the higher, the simulator ranks a round as well as
// another round of the same measurement does. Both are empty with fewer
// than two rounds (one round's rho is the summary's own). SimulatorsPick is
// what a search that trusted the simulator would get: the placement
// simulated fastest (+ reference steps; ties broken by name) and how much
// slower it measured than the placement measured fastest (0 when it is
// that one); empty without rows. Summary renders the figures as
// calibrate's text; SummaryJson as a JSON object; with one_model false
// (rows of several models pooled) they leave out the pick.
#ifndef PLACER_PLACER_CLI_CALIBRATION_SUMMARY_H_
#define PLACER_PLACER_CLI_CALIBRATION_SUMMARY_H_

#include <optional>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"

namespace placer {

struct CalibrationRow {
  std::string model;
  std::string placement;
  double simulated = 0;           // with the profile
  double measured = 0;            // the median of `rounds`
  double simulated_feedback = 0;  // profile + one measured reference run
  std::vector<double> rounds;     // the measured step of each round
};

double MedianRelativeError(const std::vector<CalibrationRow>& rows,
                           bool feedback);

std::optional<double> RoundsRho(const std::vector<CalibrationRow>& rows);

// The median over rows of (slowest round - fastest round) / median round.
double MedianRoundsSpread(const std::vector<CalibrationRow>& rows);

struct AgainstRounds {
  double spearman_rho = 0;           // mean over rounds
  double median_relative_error = 0;  // over every (row, round)
};
std::optional<AgainstRounds> SimulatedAgainstRounds(
    const std::vector<CalibrationRow>& rows);

struct Pick {
  std::string placement;             // simulated fastest
  std::string fastest_measured;      // measured fastest
  double measured_over_fastest = 0;  // its measured step / the fastest - 1
};
std::optional<Pick> SimulatorsPick(const std::vector<CalibrationRow>& rows);

std::string Summary(const std::string& what,
                    const std::vector<CalibrationRow>& rows, bool one_model);
google::protobuf::Value SummaryJson(const std::vector<CalibrationRow>& rows,
                                    bool one_model);

}  // namespace placer

#endif  // PLACER_PLACER_CLI_CALIBRATION_SUMMARY_H_
