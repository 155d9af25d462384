#include "policies/sct_relaxation.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "coin/ClpSimplex.hpp"

namespace placer {

absl::StatusOr<SctRelaxation> SolveSctRelaxation(const SctProblem& problem) {
  const int n = static_cast<int>(problem.seconds.size());
  const std::vector<std::pair<int, int>>& edges = problem.edges;
  const std::vector<double>& comm = problem.comm;
  const int m = static_cast<int>(edges.size());
  std::vector<int> column(m, -1);  // x's column, for edges that may cross
  int columns = 0;
  std::vector<std::vector<int>> out_edges(n), in_edges(n);
  for (int e = 0; e < m; ++e) {
    auto [i, j] = edges[e];
    out_edges[i].push_back(e);
    in_edges[j].push_back(e);
    if (problem.may_cross[e]) column[e] = columns++;
  }
  const int w = columns++;
  auto p = [&](int i) { return problem.seconds[i]; };
  std::vector<double> x(columns, 0.0);
  auto length = [&](int e) {
    return column[e] >= 0 ? comm[e] * x[column[e]] : 0.0;
  };
  // Longest paths under x: into each unit (head, ending at its start)
  // and out of it (tail, from its start), with the edges taken.
  std::vector<double> head(n), tail(n);
  std::vector<int> head_edge(n), tail_edge(n);
  auto longest = [&]() {
    for (int i : problem.order) {
      head[i] = 0;
      head_edge[i] = -1;
      for (int e : in_edges[i]) {
        int a = edges[e].first;
        double t = head[a] + p(a) + length(e);
        if (t > head[i]) {
          head[i] = t;
          head_edge[i] = e;
        }
      }
    }
    double longest_path = 0;
    for (auto it = problem.order.rbegin(); it != problem.order.rend();
         ++it) {
      int i = *it;
      tail[i] = p(i);
      tail_edge[i] = -1;
      for (int e : out_edges[i]) {
        double t = p(i) + length(e) + tail[edges[e].second];
        if (t > tail[i]) {
          tail[i] = t;
          tail_edge[i] = e;
        }
      }
      longest_path = std::max(longest_path, head[i] + tail[i]);
    }
    return longest_path;
  };
  ClpSimplex lp;
  lp.setLogLevel(0);
  lp.resize(0, columns);
  for (int c = 0; c < w; ++c) lp.setColumnUpper(c, 1);
  lp.setColumnUpper(w, COIN_DBL_MAX);
  lp.setColumnLower(w, longest());  // x = 0: a bound on w for any x
  lp.setObjectiveCoefficient(w, 1);
  // Rows are collected in arrays and added at once.
  std::vector<CoinBigIndex> row_start;
  std::vector<int> row_index;
  std::vector<double> row_value, row_lb, row_ub;
  auto start_rows = [&]() {
    row_start = {0};
    row_index.clear();
    row_value.clear();
    row_lb.clear();
    row_ub.clear();
  };
  auto add_rows = [&]() {
    if (row_lb.empty()) return;
    lp.addRows(static_cast<int>(row_lb.size()), row_lb.data(),
               row_ub.data(), row_start.data(), row_index.data(),
               row_value.data());
  };
  auto end_row = [&](double lb) {
    row_start.push_back(static_cast<CoinBigIndex>(row_index.size()));
    row_lb.push_back(lb);
    row_ub.push_back(COIN_DBL_MAX);
  };
  start_rows();
  for (int i = 0; i < n; ++i) {
    for (const auto* list : {&out_edges[i], &in_edges[i]}) {
      int count = 0;
      for (int e : *list) {
        if (column[e] < 0) continue;
        row_index.push_back(column[e]);
        row_value.push_back(1);
        ++count;
      }
      if (count >= 2) {
        end_row(count - 1.0);
      } else {
        row_index.resize(row_start.back());
        row_value.resize(row_start.back());
      }
    }
  }
  add_rows();
  constexpr int kMaxRounds = 10000;
  constexpr int kPathsPerRound = 500;
  for (int round = 0;; ++round) {
    if (lp.numberRows() == 0) {
      // Nothing constrains x (CLP does not take an LP without rows):
      // every column at its lower bound, w at the longest path's.
      std::copy(lp.getColLower(), lp.getColLower() + columns, x.begin());
    } else {
      lp.dual();
      if (!lp.isProvenOptimal()) {
        return absl::InternalError(absl::StrCat(
            "the SCT LP relaxation was not solved (CLP status ",
            lp.status(), ")"));
      }
      std::copy(lp.getColSolution(), lp.getColSolution() + columns,
                x.begin());
    }
    const double tolerance = 1e-7 * std::max(1.0, x[w]);
    if (longest() <= x[w] + tolerance) break;
    if (round == kMaxRounds) {
      return absl::InternalError(
          "the SCT LP relaxation's row generation did not converge");
    }
    std::vector<std::pair<double, int>> violated;  // (-length, edge)
    for (int e = 0; e < m; ++e) {
      auto [i, j] = edges[e];
      double t = head[i] + p(i) + length(e) + tail[j];
      if (t > x[w] + tolerance) violated.push_back({-t, e});
    }
    std::sort(violated.begin(), violated.end());
    std::vector<bool> on_a_row(m, false);
    std::map<int, double> coefficient;
    start_rows();
    const size_t paths = std::min(violated.size(),
                                  static_cast<size_t>(kPathsPerRound));
    for (size_t k = 0; k < paths; ++k) {
      int through = violated[k].second;
      if (on_a_row[through]) continue;
      // The longest path through `through`: back along head edges, on
      // along tail edges.
      std::vector<int> path = {through};
      for (int i = edges[through].first; head_edge[i] >= 0;
           i = edges[head_edge[i]].first) {
        path.push_back(head_edge[i]);
      }
      int last = edges[through].second;
      for (; tail_edge[last] >= 0; last = edges[tail_edge[last]].second) {
        path.push_back(tail_edge[last]);
      }
      double constant = p(last);
      coefficient.clear();
      for (int e : path) {
        on_a_row[e] = true;
        constant += p(edges[e].first);
        if (column[e] >= 0) coefficient[column[e]] -= comm[e];
      }
      row_index.push_back(w);
      row_value.push_back(1);
      for (const auto& [c, v] : coefficient) {
        row_index.push_back(c);
        row_value.push_back(v);
      }
      end_row(constant);
    }
    // At least one row: w is at least any unit's p, so a path longer
    // than w has an edge, and that edge is violated.
    add_rows();
  }
  SctRelaxation result;
  result.makespan = x[w];
  result.x.assign(m, 0.0);
  for (int e = 0; e < m; ++e) {
    if (column[e] >= 0) result.x[e] = x[column[e]];
  }
  return result;
}

}  // namespace placer
