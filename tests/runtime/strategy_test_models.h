// The models the strategy executor's tests run, in one process and as
// ranks: the zoo's GNMT-2, PyTorch's exported Transformer and ResNet-50,
// and PyTorch's training-mode exports (tests/fixtures).
#ifndef PLACER_TESTS_RUNTIME_STRATEGY_TEST_MODELS_H_
#define PLACER_TESTS_RUNTIME_STRATEGY_TEST_MODELS_H_

#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "gtest/gtest.h"
#include "zoo/zoo.h"

namespace placer {

inline Graph Gnmt2() {
  zoo::ZooParams p;
  p.batch_size = 4;
  p.hidden = 32;
  p.seq_len = 3;
  p.vocab = 50;
  absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel("gnmt2", p);
  EXPECT_TRUE(m.ok()) << m.status();
  return *ImportOnnxModel(*m, "zoo:gnmt2", {});
}

inline Graph Transformer() {
  ImportOptions o;
  o.batch_size = 2;
  o.dim_values = {{"src_len", 6}, {"tgt_len", 5}};
  absl::StatusOr<Graph> g =
      ImportOnnxFile("tests/fixtures/transformer.onnx", o);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

inline Graph ResNet50() {
  absl::StatusOr<Graph> g = ImportOnnxFile("tests/fixtures/resnet50.onnx", {});
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

// A PyTorch export in training mode (tests/fixtures/export_torch_models.py).
inline Graph TrainingExport(const std::string& name) {
  absl::StatusOr<Graph> g =
      ImportOnnxFile("tests/fixtures/numerics/" + name + ".onnx", {});
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

struct Model {
  std::string name;
  Graph graph;
};

// GNMT-2 and the exported Transformer, then PyTorch's training-mode
// exports (tests/fixtures/export_torch_models.py) named in `exports`.
inline std::vector<Model> Models(const std::vector<std::string>& exports) {
  std::vector<Model> models;
  models.push_back({"gnmt2", Gnmt2()});
  models.push_back({"transformer", Transformer()});
  for (const std::string& name : exports) {
    models.push_back({name, TrainingExport(name)});
  }
  return models;
}

// Models(exports) and PyTorch's training-mode Llama-style decoder export.
inline std::vector<Model> ModelsAndLlama(
    const std::vector<std::string>& exports) {
  std::vector<Model> models = Models(exports);
  absl::StatusOr<Graph> llama =
      ImportOnnxFile("tests/fixtures/corpus/llama.train.op17.onnx", {});
  EXPECT_TRUE(llama.ok()) << llama.status();
  if (llama.ok()) models.push_back({"llama", *std::move(llama)});
  return models;
}

}  // namespace placer

#endif  // PLACER_TESTS_RUNTIME_STRATEGY_TEST_MODELS_H_
