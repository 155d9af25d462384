// Einsum equations, the output shapes ONNX's inference leaves symbolic
// (graph/shape_rules.h), and folding Split (exporters' repeat arithmetic).
#include "graph/shape_rules.h"

#include "gmock/gmock.h"
#include "graph/constant_folding.h"
#include "graph/einsum.h"
#include "gtest/gtest.h"

namespace placer {
namespace {

using ::testing::HasSubstr;
using Shape = std::vector<int64_t>;

std::optional<Shape> EinsumShape(const std::string& equation,
                                 const std::vector<Shape>& shapes) {
  absl::StatusOr<EinsumEquation> eq = ParseEinsum(equation);
  EXPECT_TRUE(eq.ok()) << eq.status();
  if (!eq.ok()) return std::nullopt;
  return EinsumOutputShape(*eq, shapes);
}

TEST(EinsumTest, ExplicitImplicitAndEllipsis) {
  EXPECT_EQ(EinsumShape("i,j->ij", {{16}, {8}}), (Shape{16, 8}));
  EXPECT_EQ(EinsumShape("bhqd,bhkd->bhqk", {{2, 4, 5, 8}, {2, 4, 7, 8}}),
            (Shape{2, 4, 5, 7}));
  // Implicit: the letters seen once, alphabetically.
  EXPECT_EQ(EinsumShape("ij,jk", {{3, 4}, {4, 5}}), (Shape{3, 5}));
  EXPECT_EQ(EinsumShape("ba", {{3, 4}}), (Shape{4, 3}));
  // Ellipsis dims broadcast, right-aligned; implicit mode puts them first.
  EXPECT_EQ(EinsumShape("...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 6}}),
            (Shape{2, 5, 3, 6}));
  EXPECT_EQ(EinsumShape("...ij,jk", {{7, 3, 4}, {4, 5}}), (Shape{7, 3, 5}));
  // Sizes that disagree, or a rank that does not fit: no shape.
  EXPECT_EQ(EinsumShape("ij,jk->ik", {{3, 4}, {5, 6}}), std::nullopt);
  EXPECT_EQ(EinsumShape("ij->i", {{3}}), std::nullopt);
  absl::StatusOr<EinsumEquation> eq = ParseEinsum("i,j->ij");
  ASSERT_TRUE(eq.ok());
  EXPECT_EQ(EinsumPoints(*eq, {{16}, {8}}), 128);
}

TEST(EinsumTest, MalformedEquationsSayWhy) {
  EXPECT_THAT(std::string(ParseEinsum("i1,j->ij").status().message()),
              HasSubstr("'1' is not a letter"));
  EXPECT_THAT(std::string(ParseEinsum("i,j->ik").status().message()),
              HasSubstr("output letter 'k' is in no input"));
  EXPECT_THAT(std::string(ParseEinsum("...i...,j").status().message()),
              HasSubstr("more than one ellipsis"));
}

Op MakeOp(const std::string& type, const std::string& equation = "") {
  Op op;
  op.op_type = type;
  op.inputs = {0, 1};
  op.outputs = {2};
  if (!equation.empty()) {
    op.attributes["equation"].kind = AttributeValue::Kind::kString;
    op.attributes["equation"].s = equation;
  }
  return op;
}

TEST(ShapeRulesTest, EinsumFromShapesOrConstants) {
  Shape a = {16}, b = {8};
  FoldedValue positions;
  positions.dtype = DataType::kFloat32;
  positions.dims = {16};
  positions.reals.assign(16, 0);
  std::vector<FoldInput> in(2);
  in[0].value = &positions;  // a folded constant counts by its dims
  in[1].shape = &b;
  auto shapes = InferOutputShapes(MakeOp("Einsum", "i,j->ij"), in);
  ASSERT_TRUE(shapes.has_value());
  EXPECT_EQ((*shapes)[0], (Shape{16, 8}));
  in[0] = FoldInput();  // unknown: no rule
  EXPECT_FALSE(InferOutputShapes(MakeOp("Einsum", "i,j->ij"), in));
  (void)a;
}

TEST(ShapeRulesTest, ExpandBroadcastsItsInputWithTheTarget) {
  Shape input = {2, 1, 1, 16, 8};
  FoldedValue target;
  target.dtype = DataType::kInt64;
  target.dims = {5};
  target.ints = {2, 1, 2, 1, 1};
  std::vector<FoldInput> in(2);
  in[0].shape = &input;
  in[1].value = &target;
  auto shapes = InferOutputShapes(MakeOp("Expand"), in);
  ASSERT_TRUE(shapes.has_value());
  EXPECT_EQ((*shapes)[0], (Shape{2, 1, 2, 16, 8}));
  target.ints = {3, 1, 1, 1, 1};  // 2 against 3: not broadcastable
  EXPECT_FALSE(InferOutputShapes(MakeOp("Expand"), in));
}

TEST(ConstantFoldingTest, SplitBySizesAndEqually) {
  FoldedValue data;
  data.dtype = DataType::kInt64;
  data.dims = {2, 3};
  data.ints = {1, 2, 3, 4, 5, 6};
  FoldedValue sizes;
  sizes.dtype = DataType::kInt64;
  sizes.dims = {2};
  sizes.ints = {1, 2};
  Op op;
  op.op_type = "Split";
  op.inputs = {0, 1};
  op.outputs = {2, 3};
  op.attributes["axis"].kind = AttributeValue::Kind::kInt;
  op.attributes["axis"].i = 1;
  std::vector<FoldInput> in(2);
  in[0].value = &data;
  in[1].value = &sizes;
  auto parts = FoldNode(op, in);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ((*parts)[0].ints, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ((*parts)[1].dims, (Shape{2, 2}));
  EXPECT_EQ((*parts)[1].ints, (std::vector<int64_t>{2, 3, 5, 6}));
  // No sizes: equal parts along axis 0.
  op.attributes["axis"].i = 0;
  op.inputs = {0};
  auto halves = FoldNode(op, {in[0]});
  ASSERT_TRUE(halves.has_value());
  EXPECT_EQ((*halves)[1].ints, (std::vector<int64_t>{4, 5, 6}));
  // Sizes that do not add up: not folded.
  sizes.ints = {1, 1};
  op.attributes["axis"].i = 1;
  op.inputs = {0, 1};
  EXPECT_FALSE(FoldNode(op, in).has_value());
}

}  // namespace
}  // namespace placer
