// What the executor draws for integer graph inputs, on exports it did not
// write (tests/fixtures/corpus): indices bounded by what they reach through
// Reshape and the like, masks as tokenizers make them.
#include "runtime/initial_values.h"

#include "graph/onnx_import.h"
#include "gtest/gtest.h"

namespace placer {
namespace {

Graph Import(const std::string& family) {
  absl::StatusOr<Graph> g = ImportOnnxFile(
      "tests/fixtures/corpus/" + family + ".train.op17.onnx", {});
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : Graph();
}

TEST(InitialValuesTest, TargetsThroughAReshapeAreBoundedByTheLoss) {
  Graph g = Import("gpt2");
  const int targets = g.FindTensor("targets");
  ASSERT_GE(targets, 0);
  // targets.view(-1) -> SoftmaxCrossEntropyLoss over 256 classes.
  EXPECT_EQ(IndexBound(g, targets), 256);
  EXPECT_EQ(IndexBound(g, g.FindTensor("tokens")), 256);
}

TEST(InitialValuesTest, AttentionMaskIsAMaskAndTokenTypesAreIndices) {
  Graph g = Import("bert_masked");
  const int mask = g.FindTensor("attention_mask");
  ASSERT_GE(mask, 0);
  EXPECT_EQ(IndexBound(g, mask), 0);
  EXPECT_TRUE(IsMaskInput(g, mask));
  EXPECT_EQ(IndexBound(g, g.FindTensor("token_type_ids")), 2);
  EXPECT_EQ(IndexBound(g, g.FindTensor("labels")), 256);
  EXPECT_FALSE(IsMaskInput(g, g.FindTensor("labels")));

  torch::Generator gen = at::detail::createCPUGenerator(3);
  torch::Tensor drawn = DrawMask({8, 16}, torch::kLong, gen);
  ASSERT_EQ(drawn.sizes(), (std::vector<int64_t>{8, 16}));
  for (int64_t r = 0; r < 8; ++r) {
    torch::Tensor row = drawn[r];
    const int64_t ones = row.sum().item<int64_t>();
    // At least half the row is kept, and padding is at the end only.
    EXPECT_GE(ones, 8);
    EXPECT_EQ(row.narrow(0, 0, ones).min().item<int64_t>(), 1);
    if (ones < 16) {
      EXPECT_EQ(row.narrow(0, ones, 16 - ones).max().item<int64_t>(), 0);
    }
  }
}

}  // namespace
}  // namespace placer
