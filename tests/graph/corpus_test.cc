// Imports every model of the real-world corpus (tests/fixtures/corpus,
// exported by PyTorch in training and eval mode at opsets 13 and 17; see
// export_corpus.py there): every file must import with every shape
// resolved, no op without a cost, every op runnable by the executor, and a
// training step costing two to three forward passes. Forward FLOPs of the
// torchvision models are checked against torchvision's published figures.
#include "tests/graph/corpus.h"

#include <map>
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "runtime/executor_ops.h"

namespace placer {
namespace {

// Multiply-accumulates of the contractions (what torchvision's GFLOPS
// column counts), per image.
double ContractionMacs(const Graph& g) {
  double flops = 0;
  for (const Op& op : g.ops()) {
    if (op.op_type == "Conv" || op.op_type == "Gemm" ||
        op.op_type == "MatMul") {
      flops += op.forward.flops;
    }
  }
  return flops / 2;
}

TEST(CorpusTest, EveryExportImportsIsCostedAndRuns) {
  std::vector<CorpusEntry> entries = CorpusManifest();
  ASSERT_GE(entries.size(), 90u) << "MANIFEST.tsv missing or short";
  int train = 0;
  for (const CorpusEntry& e : entries) {
    SCOPED_TRACE(e.file);
    absl::StatusOr<Graph> g = ImportCorpusEntry(e);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(static_cast<int>(g->ops().size() + g->folded_op_keys().size()),
              e.nodes);
    EXPECT_TRUE(g->unknown_cost_ops().empty());
    for (const Tensor& t : g->tensors()) EXPECT_TRUE(t.shape_known) << t.name;
    EXPECT_TRUE(OpsUnsupportedByExecutor(*g).empty());
    TrainingView view = BuildTrainingView(*g);
    EXPECT_EQ(view.unknown_cost_nodes(), 0);
    double ratio = view.training_flops() / g->forward_flops();
    EXPECT_GT(ratio, 2.0);
    EXPECT_LT(ratio, 3.2);
    // Running statistics are state: never a gradient. (Their initializers
    // are constants unless the exporter merged one with an equal weight:
    // eval-mode DenseNet shares all-zero running means and biases through
    // Identity nodes.)
    for (const TrainingValue& v : view.values()) {
      if (v.kind != ValueKind::kGradient || v.producer < 0) continue;
      const Op& op = g->op(view.node(v.producer).forward_op);
      if (op.op_type != "BatchNormalization") continue;
      EXPECT_NE(v.tensor, op.inputs[3]);
      EXPECT_NE(v.tensor, op.inputs[4]);
    }
    train += e.file.find(".train.") != std::string::npos;
  }
  EXPECT_EQ(train * 2, static_cast<int>(entries.size()));
}

TEST(CorpusTest, TrainingModeBatchNormHasItsStatisticsOutputs) {
  for (const char* file : {"resnet50.train.op13.onnx",
                           "resnet50.train.op17.onnx"}) {
    absl::StatusOr<Graph> g = ImportCorpusEntry({file, "input=1x3x224x224", 0});
    ASSERT_TRUE(g.ok()) << g.status();
    int bn = 0;
    for (const Op& op : g->ops()) {
      if (op.op_type != "BatchNormalization") continue;
      ++bn;
      ASSERT_GE(op.outputs.size(), 3u) << file;
      const Tensor& running_mean = g->tensor(op.outputs[1]);
      EXPECT_EQ(running_mean.shape, g->tensor(op.inputs[1]).shape);
    }
    EXPECT_EQ(bn, 53) << file;
  }
}

TEST(CorpusTest, ForwardFlopsMatchTorchvisionsPublishedFigures) {
  // torchvision's model table, GFLOPS column (multiply-accumulates per
  // 224x224 image; 299x299 for Inception-V3).
  const std::map<std::string, double> published = {
      {"resnet18", 1.81},        {"resnet50", 4.09},
      {"resnext50_32x4d", 4.23}, {"wide_resnet50_2", 11.4},
      {"densenet121", 2.83},     {"inception_v3", 5.71},
      {"vgg11", 7.61},           {"convnext_tiny", 4.46},
      {"vit_b_16", 17.56},       {"alexnet", 0.71},
  };
  for (const auto& [name, gmacs] : published) {
    for (const char* mode : {"train", "eval"}) {
      std::string file = name + "." + mode + ".op17.onnx";
      SCOPED_TRACE(file);
      std::string size = name == "inception_v3" ? "299" : "224";
      absl::StatusOr<Graph> g =
          ImportCorpusEntry({file, "input=1x3x" + size + "x" + size, 0});
      ASSERT_TRUE(g.ok()) << g.status();
      EXPECT_NEAR(ContractionMacs(*g) / 1e9, gmacs, 0.02 * gmacs);
    }
  }
}

}  // namespace
}  // namespace placer
