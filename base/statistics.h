// Small statistics over measured times, shared by the executor's
// measurements, calibration and the placement service.
#ifndef PLACER_BASE_STATISTICS_H_
#define PLACER_BASE_STATISTICS_H_

#include <vector>

namespace placer {

// The median (the mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> values);

// The mean of the values left when the lowest and the highest
// floor(trim x count) each are left out (trim in [0, 0.5)); 0 when empty.
double TrimmedMean(std::vector<double> values, double trim);

// Spearman's rank correlation of a and b (same length): Pearson's
// correlation of their ranks, tied values sharing their mean rank; 0 when
// either has no spread (fewer than two distinct values).
double SpearmanRho(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace placer

#endif  // PLACER_BASE_STATISTICS_H_
