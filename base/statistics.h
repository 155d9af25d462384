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

}  // namespace placer

#endif  // PLACER_BASE_STATISTICS_H_
