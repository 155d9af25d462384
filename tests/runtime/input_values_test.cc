#include "runtime/input_values.h"

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "runtime/initial_values.h"

namespace placer {
namespace {

using ::testing::HasSubstr;

Tensor Input(const std::string& name, DataType type,
             std::vector<int64_t> shape) {
  Tensor t;
  t.name = name;
  t.dtype = type;
  t.shape = std::move(shape);
  t.shape_known = true;
  t.kind = TensorKind::kGraphInput;
  return t;
}

InputValues Parse(const std::string& entry, const std::string& dir = "") {
  absl::StatusOr<std::pair<std::string, InputValues>> p =
      ParseInputValues(entry, dir);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? p->second : InputValues();
}

TEST(InputValuesTest, EachKindMakesTheInputsTensor) {
  torch::Generator gen = at::detail::createCPUGenerator(1);
  const Tensor ids = Input("ids", DataType::kInt64, {2, 8});
  torch::Tensor r = *MakeInputValues(ids, Parse("ids=range:3:7"), 10, gen);
  EXPECT_EQ(r.scalar_type(), torch::kLong);
  EXPECT_EQ(r.sizes().vec(), (std::vector<int64_t>{2, 8}));
  EXPECT_GE(r.min().item<int64_t>(), 3);
  EXPECT_LT(r.max().item<int64_t>(), 7);
  torch::Tensor c = *MakeInputValues(ids, Parse("ids=value:0"), 10, gen);
  EXPECT_EQ(c.abs().sum().item<int64_t>(), 0);
  torch::Tensor m = *MakeInputValues(ids, Parse("ids=mask"), 0, gen);
  EXPECT_EQ(m.select(1, 0).sum().item<int64_t>(), 2);  // never padded first
  const Tensor x = Input("x", DataType::kFloat32, {3});
  torch::Tensor f = *MakeInputValues(x, Parse("x=range:-1:1"), 0, gen);
  EXPECT_EQ(f.scalar_type(), torch::kFloat);
  EXPECT_LT(f.abs().max().item<double>(), 1.0);
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/three.txt") << "1, 2\n3\n";
  torch::Tensor l = *MakeInputValues(x, Parse("x=file:three.txt", dir), 0, gen);
  EXPECT_TRUE(torch::equal(l, torch::tensor({1.0f, 2.0f, 3.0f})));
}

TEST(InputValuesTest, WhatDoesNotFitIsAnErrorNamingIt) {
  for (const char* bad : {"ids", "=mask", "ids=range:5:5", "ids=range:1",
                          "ids=value:x", "ids=zeros", "ids=file:/no/such"}) {
    absl::StatusOr<std::pair<std::string, InputValues>> p =
        ParseInputValues(bad, "");
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_THAT(p.status().message(), HasSubstr(bad));
  }
  torch::Generator gen = at::detail::createCPUGenerator(1);
  const Tensor ids = Input("ids", DataType::kInt64, {2, 8});
  absl::StatusOr<torch::Tensor> past =
      MakeInputValues(ids, Parse("ids=range:0:50"), 10, gen);
  ASSERT_FALSE(past.ok());
  EXPECT_THAT(past.status().message(), HasSubstr("'ids'"));
  EXPECT_THAT(past.status().message(), HasSubstr("10 rows"));
  EXPECT_FALSE(MakeInputValues(ids, Parse("ids=value:0.5"), 0, gen).ok());
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/two.txt") << "1 2";
  absl::StatusOr<torch::Tensor> count =
      MakeInputValues(ids, Parse("ids=file:two.txt", dir), 0, gen);
  ASSERT_FALSE(count.ok());
  EXPECT_THAT(count.status().message(), HasSubstr("two.txt holds 2 values"));
}

// Given values replace the drawn ones; a name that is no input lists them.
TEST(InputValuesTest, TheExecutorsStartFromTheGivenValues) {
  ImportOptions options;
  absl::StatusOr<Graph> g = ImportOnnxFile(
      "tests/fixtures/corpus/bert_masked.train.op17.onnx", options);
  ASSERT_TRUE(g.ok()) << g.status();
  TrainingView view = BuildTrainingView(*g);
  std::map<std::string, InputValues> given = {
      {"attention_mask", Parse("attention_mask=value:1")}};
  absl::StatusOr<HostValues> drawn = DrawHostValues(view, 1, given);
  ASSERT_TRUE(drawn.ok()) << drawn.status();
  const torch::Tensor& mask = drawn->value[g->FindTensor("attention_mask")];
  EXPECT_EQ(mask.min().item<int64_t>(), 1);
  absl::StatusOr<HostValues> defaults = DrawHostValues(view, 1);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(
      defaults->value[g->FindTensor("attention_mask")].min().item<int64_t>(),
      0);  // a drawn padding mask pads some row
  absl::StatusOr<HostValues> wrong =
      DrawHostValues(view, 1, {{"mask", Parse("mask=mask")}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("'mask'"));
  EXPECT_THAT(wrong.status().message(), HasSubstr("attention_mask"));
}

}  // namespace
}  // namespace placer
