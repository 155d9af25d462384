#include "base/statistics.h"

#include <algorithm>

namespace placer {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double TrimmedMean(std::vector<double> v, double trim) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t cut = static_cast<size_t>(trim * static_cast<double>(v.size()));
  double sum = 0;
  for (size_t i = cut; i < v.size() - cut; ++i) sum += v[i];
  return sum / static_cast<double>(v.size() - 2 * cut);
}

}  // namespace placer
