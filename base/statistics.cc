#include "base/statistics.h"

#include <algorithm>
#include <cmath>

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

namespace {

// 1-based ranks of x; tied values share the mean of their ranks.
std::vector<double> Ranks(const std::vector<double>& x) {
  std::vector<size_t> idx(x.size());
  for (size_t i = 0; i < x.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && x[idx[j + 1]] == x[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) rank[idx[k]] = 0.5 * (i + j) + 1;
    i = j + 1;
  }
  return rank;
}

}  // namespace

double SpearmanRho(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(a.size());
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ma += ra[i] / n;
    mb += rb[i] / n;
  }
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0;
}

}  // namespace placer
