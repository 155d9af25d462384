// A check shared by the tests of graph rewrites the executor runs (fused
// attention, fused elementwise regions): the rewritten graph trains as the
// graph as written.
#ifndef PLACER_TESTS_RUNTIME_SAME_TRAINING_H_
#define PLACER_TESTS_RUNTIME_SAME_TRAINING_H_

#include <cmath>

#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/strategy_executor.h"
#include "tests/runtime/cpu_cluster.h"

namespace placer {

// Three steps of each view on one CPU: the same losses and the same
// parameters after them (`tolerance` relative).
inline void ExpectSameTraining(const TrainingView& plain,
                               const TrainingView& rewritten,
                               double tolerance) {
  Placement one_a{std::vector<int>(plain.forward().ops().size(), 0)};
  Placement one_b{std::vector<int>(rewritten.forward().ops().size(), 0)};
  auto a = StrategyExecutor::Create(plain, Cpus(1), one_a);
  auto b = StrategyExecutor::Create(rewritten, Cpus(1), one_b);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<StepReport> ra = (*a)->Step();
    absl::StatusOr<StepReport> rb = (*b)->Step();
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    EXPECT_TRUE(std::isfinite(ra->loss));
    EXPECT_NEAR(ra->loss, rb->loss, tolerance * (1 + std::abs(ra->loss)))
        << "step " << step;
  }
  int compared = 0;
  for (const Tensor& t : plain.forward().tensors()) {
    if (t.kind != TensorKind::kParameter || t.consumers.empty()) continue;
    absl::StatusOr<torch::Tensor> wa = (*a)->Resident(t.name);
    absl::StatusOr<torch::Tensor> wb = (*b)->Resident(t.name);
    ASSERT_TRUE(wa.ok()) << wa.status();
    ASSERT_TRUE(wb.ok()) << wb.status();
    EXPECT_TRUE(torch::allclose(*wa, *wb, tolerance, tolerance / 10))
        << t.name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

}  // namespace placer

#endif  // PLACER_TESTS_RUNTIME_SAME_TRAINING_H_
