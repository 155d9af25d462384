// Tensor parallelism in the strategy executor: PyTorch's Llama-style and
// GPT-2 exports and the zoo's decoders split over groups of two CPU
// devices (alone, with two replicas, with ZeRO-1, over two pipeline stages,
// recomputing) train as one device does, as do two replicas recomputing
// by layer and with ZeRO-1 and ZeRO-3 (the must-show plans of
// tensor/recompute/ZeRO); so do convolutional, encoder, mixture-of-experts
// and LSTM graphs split over two devices.
#include <string>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "policies/strategy_search.h"
#include "profiles/cost_model.h"
#include "runtime/strategy_executor.h"
#include "simulator/simulation_context.h"
#include "simulator/strategy.h"
#include "tests/runtime/cpu_cluster.h"
#include "tests/runtime/strategy_runs.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

constexpr int kMicroBatches = 4;

struct Model {
  std::string name;
  Graph graph;
};

std::vector<Model> Decoders() {
  std::vector<Model> models;
  absl::StatusOr<Graph> llama =
      ImportOnnxFile("tests/fixtures/corpus/llama.train.op17.onnx", {});
  EXPECT_TRUE(llama.ok()) << llama.status();
  if (llama.ok()) models.push_back({"llama export", *std::move(llama)});
  // GPT-2's fused QKV projection, cut by a Split (dropout off: its eval
  // export, so that one device's random draws need not be matched).
  absl::StatusOr<Graph> gpt2 =
      ImportOnnxFile("tests/fixtures/corpus/gpt2.eval.op17.onnx", {});
  EXPECT_TRUE(gpt2.ok()) << gpt2.status();
  if (gpt2.ok()) models.push_back({"gpt2 export", *std::move(gpt2)});
  for (const char* name : {"gpt", "llama"}) {
    absl::StatusOr<Graph> g = SmallDecoder(name, 16);
    EXPECT_TRUE(g.ok()) << g.status();
    if (g.ok()) models.push_back({name, *std::move(g)});
  }
  return models;
}

TEST(TensorParallelExecutorTest, DecodersMatchOneDevice) {
  for (Model& m : Decoders()) {
    SCOPED_TRACE(m.name);
    TrainingView view = BuildTrainingView(m.graph);
    const Trajectory one = RunStrategy(view, Cpus(1), OneDevice(view, kMicroBatches), 5);

    Strategy tensor = OneDevice(view, kMicroBatches);
    tensor.stages = {PipelineStage::OfTensorGroups({{0, 1}})};
    absl::StatusOr<TensorSharding> sharding =
        ShardStrategy(view.forward(), tensor);
    ASSERT_TRUE(sharding.ok()) << sharding.status();
    EXPECT_GT(sharding->SplitOps(), 10);
    Strategy data = tensor;
    data.stages = {PipelineStage::OfTensorGroups({{0, 1}, {2, 3}})};
    // Stages as the pipeline search cuts the model for two devices.
    absl::StatusOr<Strategy> pipeline =
        Searched(view, Cpus(2), Parallelism::kPipeline, kMicroBatches);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    ASSERT_EQ(pipeline->stages.size(), 2u);
    pipeline->stages = {PipelineStage::OfTensorGroups({{0, 1}}),
                        PipelineStage::OfTensorGroups({{2, 3}})};
    // Recomputed whole, by layer or selectively (each op without a weight
    // when a backward needs it): the rerun's collectives again.
    Strategy full = tensor;
    full.stages[0].recompute = Recompute::kFull;
    Strategy selective = tensor;
    selective.stages[0].recompute = Recompute::kSelective;
    Strategy layers = *pipeline;
    for (PipelineStage& stage : layers.stages) {
      stage.recompute = Recompute::kLayers;
    }
    // ZeRO over the replicas of each tensor rank: ZeRO-1 (each device's
    // part's optimizer state dealt), ZeRO-2, and ZeRO-3 recomputing by
    // layer (as the search plans the largest models).
    Strategy zero = data;
    zero.zero = ZeroStage::kOptimizerState;
    Strategy zero_two = data;
    zero_two.zero = ZeroStage::kGradients;
    Strategy zero_three_layers = data;
    zero_three_layers.zero = ZeroStage::kParameters;
    zero_three_layers.stages[0].recompute = Recompute::kLayers;
    // And without tensor parallelism, two replicas recomputing by layer,
    // with ZeRO-1 and with ZeRO-3.
    Strategy replicas = OneDevice(view, kMicroBatches);
    replicas.stages = {PipelineStage::OneDevicePerReplica({0, 1})};
    Strategy replicas_layers = replicas;
    replicas_layers.stages[0].recompute = Recompute::kLayers;
    Strategy zero_one = replicas;
    zero_one.zero = ZeroStage::kOptimizerState;
    Strategy zero_three = replicas;
    zero_three.zero = ZeroStage::kParameters;
    for (const Strategy& plan :
         {tensor, data, *pipeline, full, selective, layers, zero, zero_two,
          zero_three_layers, replicas_layers, zero_one, zero_three}) {
      SCOPED_TRACE(DescribeStrategy(plan));
      ExpectSame(one, RunStrategy(view, Cpus(4), plan, 5), 1e-5);
    }
  }
}


// At bf16 (torch.autocast's classes, as one device computes them): the
// loss of a vocabulary-parallel cross-entropy in fp32, as one device's
// (within bf16's products' rounding; a loss rounded to bf16 is 1e-3 off).
TEST(TensorParallelExecutorTest, AtBf16TheLossFollowsOneDevice) {
  absl::StatusOr<Graph> graph =
      ImportOnnxFile("tests/fixtures/corpus/llama.train.op17.onnx", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingOptions options;
  options.precision = Precision::kBf16;
  TrainingView view = BuildTrainingView(*graph, options);
  Strategy tensor = OneDevice(view, kMicroBatches);
  tensor.stages = {PipelineStage::OfTensorGroups({{0, 1}})};
  const Trajectory one =
      RunStrategy(view, Cpus(1), OneDevice(view, kMicroBatches), 3);
  const Trajectory split = RunStrategy(view, Cpus(2), tensor, 3);
  ASSERT_EQ(one.losses.size(), 3u);
  ASSERT_EQ(split.losses.size(), 3u);
  for (int step = 0; step < 3; ++step) {
    EXPECT_NEAR(one.losses[step], split.losses[step],
                3e-4 * one.losses[step])
        << "step " << step + 1;
  }
}

// An op drawing random numbers that a group runs whole (GPT-2's training
// export: dropout after the embedding and on the residuals) is refused by
// name: each device would draw its own mask for one value.
TEST(TensorParallelExecutorTest, WholeRandomDrawsAreRefusedByName) {
  absl::StatusOr<Graph> graph =
      ImportOnnxFile("tests/fixtures/corpus/gpt2.train.op17.onnx", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingView view = BuildTrainingView(*graph);
  Strategy tensor = OneDevice(view, kMicroBatches);
  tensor.stages = {PipelineStage::OfTensorGroups({{0, 1}})};
  absl::StatusOr<std::unique_ptr<StrategyExecutor>> e =
      StrategyExecutor::Create(view, Cpus(2), tensor);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(e.status().message().find("(Dropout) draws random numbers"),
            std::string::npos)
      << e.status();
}

// Beyond decoders: convolutions split on output channels (batch norm, a
// depthwise network, a UNet), an encoder with a mask, a mixture of
// experts (PyTorch's training-mode exports, tests/fixtures/numerics), and
// the zoo's GNMT-2 (LSTM cells whose gate projections a Split cuts).
TEST(TensorParallelExecutorTest, OtherExportsSplitOverTwoDevicesMatchOneDevice) {
  std::vector<Model> models;
  for (const char* name : {"bn_cnn.op13", "mobilenet.op13", "unet.op14",
                           "bert_masked.op14", "llama_moe.op14"}) {
    absl::StatusOr<Graph> graph = ImportOnnxFile(
        std::string("tests/fixtures/numerics/") + name + ".onnx", {});
    ASSERT_TRUE(graph.ok()) << graph.status();
    models.push_back({name, *std::move(graph)});
  }
  zoo::ZooParams p;
  p.batch_size = 4;
  p.hidden = 32;
  p.seq_len = 3;
  p.vocab = 50;
  absl::StatusOr<onnx::ModelProto> gnmt = zoo::BuildZooModel("gnmt2", p);
  ASSERT_TRUE(gnmt.ok()) << gnmt.status();
  absl::StatusOr<Graph> graph = ImportOnnxModel(*gnmt, "zoo:gnmt2", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  models.push_back({"gnmt2", *std::move(graph)});
  for (Model& m : models) {
    SCOPED_TRACE(m.name);
    TrainingView view = BuildTrainingView(m.graph);
    Strategy tensor = OneDevice(view, kMicroBatches);
    tensor.stages = {PipelineStage::OfTensorGroups({{0, 1}})};
    absl::StatusOr<TensorSharding> sharding =
        ShardStrategy(view.forward(), tensor);
    ASSERT_TRUE(sharding.ok()) << sharding.status();
    EXPECT_GT(sharding->SplitOps(), 5);
    ExpectSame(RunStrategy(view, Cpus(1), OneDevice(view, kMicroBatches), 5),
               RunStrategy(view, Cpus(2), tensor, 5), 1e-5);
  }
}

}  // namespace
}  // namespace placer
