#include "placer/cli/calibration_summary.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placer {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;
using ::testing::Not;

CalibrationRow Row(const std::string& name, double simulated_feedback,
                   std::vector<double> rounds) {
  CalibrationRow r;
  r.model = "m";
  r.placement = name;
  r.simulated = 100 - simulated_feedback;  // the other order: not used
  r.simulated_feedback = simulated_feedback;
  r.rounds = std::move(rounds);
  std::vector<double> sorted = r.rounds;
  std::sort(sorted.begin(), sorted.end());
  r.measured = sorted[sorted.size() / 2];
  return r;
}

// Three placements, three rounds; round 1 swaps the first two.
std::vector<CalibrationRow> ThreeRounds() {
  return {Row("a", 1.0, {1.0, 2.0, 1.1}), Row("b", 2.0, {2.0, 1.0, 2.2}),
          Row("c", 3.0, {3.0, 3.0, 3.3})};
}

TEST(CalibrationSummaryTest, RoundsAgainstEachOther) {
  // Pairs (0,1) and (1,2) rank one of three swapped: rho 1 - 6*2/(3*8) =
  // 0.5; (0,2) agree: 1. The mean: 2/3.
  std::optional<double> rho = RoundsRho(ThreeRounds());
  ASSERT_TRUE(rho.has_value());
  EXPECT_NEAR(*rho, 2.0 / 3, 1e-12);
  // (max - min) / median: 1 / 1.1, 1.2 / 2 and 0.3 / 3; the median 0.6.
  EXPECT_NEAR(MedianRoundsSpread(ThreeRounds()), 0.6, 1e-12);
}

TEST(CalibrationSummaryTest, SimulatedAgainstEachRound) {
  // Rounds 0 and 2 are in the simulated order (rho 1), round 1 has two
  // swapped (0.5): the mean 5/6. Errors per (row, round): 0, 0, 0; 0.5, 1,
  // 0; 1/11 three times: the median (fifth of nine) is 1/11.
  std::optional<AgainstRounds> one = SimulatedAgainstRounds(ThreeRounds());
  ASSERT_TRUE(one.has_value());
  EXPECT_NEAR(one->spearman_rho, 5.0 / 6, 1e-12);
  EXPECT_NEAR(one->median_relative_error, 1.0 / 11, 1e-12);
  // Here the simulator ranks a round better than the other rounds do.
  EXPECT_GT(one->spearman_rho, *RoundsRho(ThreeRounds()));
}

TEST(CalibrationSummaryTest, OneRoundHasNoRoundFigures) {
  std::vector<CalibrationRow> rows = {Row("a", 1, {1}), Row("b", 2, {2}),
                                      Row("c", 3, {4})};
  EXPECT_FALSE(RoundsRho(rows).has_value());
  EXPECT_FALSE(SimulatedAgainstRounds(rows).has_value());
  std::string text = Summary("m", rows, /*one_model=*/true);
  EXPECT_THAT(text, HasSubstr("m: 3 placements"));
  EXPECT_THAT(text, Not(HasSubstr("against each round")));
  EXPECT_THAT(text, Not(HasSubstr("the rounds against each other")));
  EXPECT_EQ(SummaryJson(rows, true)
                .struct_value()
                .fields()
                .count("each_round_spearman_rho_with_feedback"),
            0u);
}

TEST(CalibrationSummaryTest, RowsMissingARoundAreLeftOutOfIt) {
  // A stop after round 0 of "d": it counts in round 0 only, where it is
  // measured fastest and simulated slowest: ranks 2 3 4 1 against 1 2 3 4,
  // rho 1 - 6 * 12 / (4 * 15) = -0.2. Rounds 1 and 2 as above (0.5, 1).
  std::vector<CalibrationRow> rows = ThreeRounds();
  rows.push_back(Row("d", 4.0, {0.5}));
  std::optional<AgainstRounds> one = SimulatedAgainstRounds(rows);
  ASSERT_TRUE(one.has_value());
  EXPECT_NEAR(one->spearman_rho, (-0.2 + 0.5 + 1) / 3, 1e-12);
}

TEST(CalibrationSummaryTest, SummaryShowsBothRoundFigures) {
  std::string text = Summary("all models", ThreeRounds(), false);
  EXPECT_THAT(text, HasSubstr("the rounds against each other:   median "
                              "(max-min)/median  60.0%, Spearman rho 0.667"));
  EXPECT_THAT(text, HasSubstr("+ reference against each round:  median "
                              "|sim-meas|/meas   9.1%, Spearman rho 0.833"));
  const google::protobuf::Value value = SummaryJson(ThreeRounds(), false);
  const auto& json = value.struct_value().fields();
  EXPECT_THAT(json.at("each_round_spearman_rho_with_feedback").number_value(),
              DoubleNear(5.0 / 6, 1e-12));
  EXPECT_THAT(
      json.at("each_round_median_relative_error_with_feedback").number_value(),
      DoubleNear(1.0 / 11, 1e-12));
}

// What a search trusting the simulator would get: its fastest placement
// (a tie broken by name), measured against the fastest measured.
TEST(CalibrationSummaryTest, SimulatorsPickMeasuredAgainstTheFastest) {
  std::vector<CalibrationRow> rows = {
      Row("z", 1.0, {1.5}), Row("x", 1.0, {1.2}), Row("y", 1.1, {1.0})};
  std::optional<Pick> pick = SimulatorsPick(rows);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->placement, "x");
  EXPECT_EQ(pick->fastest_measured, "y");
  EXPECT_NEAR(pick->measured_over_fastest, 0.2, 1e-12);
  EXPECT_THAT(Summary("m", rows, /*one_model=*/true),
              HasSubstr("+ reference's pick:               x, measured 20.0% "
                        "above the fastest (y)"));
  // Pooled over models, a pick means nothing: left out.
  EXPECT_THAT(Summary("all models", rows, /*one_model=*/false),
              Not(HasSubstr("pick")));
  const google::protobuf::Value one = SummaryJson(rows, true);
  EXPECT_EQ(one.struct_value().fields().at("pick_with_feedback").string_value(),
            "x");
  EXPECT_EQ(SummaryJson(rows, false)
                .struct_value()
                .fields()
                .count("pick_with_feedback"),
            0u);
  // The simulator's pick measured fastest: 0.
  EXPECT_EQ(SimulatorsPick(ThreeRounds())->measured_over_fastest, 0);
  EXPECT_FALSE(SimulatorsPick({}).has_value());
}

}  // namespace
}  // namespace placer
