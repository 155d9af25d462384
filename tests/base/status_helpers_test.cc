#include "base/status_helpers.h"

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace placer {
namespace {

int calls = 0;

absl::Status Counted(absl::Status status) {
  ++calls;
  return status;
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(int value) {
  if (value < 0) return absl::OutOfRangeError("negative");
  return std::make_unique<int>(value);
}

absl::Status Twice(absl::Status first, absl::Status second, int* reached) {
  RETURN_IF_ERROR(Counted(first));
  *reached = 1;
  RETURN_IF_ERROR(Counted(second));
  *reached = 2;
  return absl::OkStatus();
}

absl::StatusOr<int> Plus(int a, int b) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> x, MakeInt(a));
  int y = 0;
  ASSIGN_OR_RETURN(std::unique_ptr<int> z, MakeInt(b));
  y = *z;
  // A comma inside the expression is one argument.
  ASSIGN_OR_RETURN(int w,
                   absl::StatusOr<int>(std::map<int, int>{{1, 0}}.at(1)));
  return *x + y + w;
}

TEST(StatusHelpersTest, ReturnIfErrorStopsAtTheFirstErrorAndKeepsIt) {
  calls = 0;
  int reached = 0;
  absl::Status s = Twice(absl::NotFoundError("a"), absl::OkStatus(), &reached);
  EXPECT_EQ(s, absl::NotFoundError("a"));
  EXPECT_EQ(reached, 0);
  EXPECT_EQ(calls, 1);  // evaluated once
  calls = 0;
  s = Twice(absl::OkStatus(), absl::InternalError("b"), &reached);
  EXPECT_EQ(s, absl::InternalError("b"));
  EXPECT_EQ(reached, 1);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(Twice(absl::OkStatus(), absl::OkStatus(), &reached).ok());
  EXPECT_EQ(reached, 2);
}

TEST(StatusHelpersTest, AssignOrReturnMovesTheValueOrReturnsTheError) {
  absl::StatusOr<int> sum = Plus(2, 3);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum, 5);
  EXPECT_EQ(Plus(-1, 3).status(), absl::OutOfRangeError("negative"));
  EXPECT_EQ(Plus(1, -3).status(), absl::OutOfRangeError("negative"));
}

TEST(StatusHelpersTest, WithContextKeepsTheCode) {
  absl::Status s = WithContext(absl::InternalError("lost"), "sim: ");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "sim: lost");
  EXPECT_TRUE(WithContext(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace placer
