// EmitPlan: hand-built strategies in Megatron-LM's, DeepSpeed's and
// torchtitan's terms, and what each cannot express.
#include "placer/plan_emit.h"

#include <string>

#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "graph/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

using ::testing::HasSubstr;

// zoo:gpt at a micro-batch of 2 sequences of 16 tokens.
Graph Gpt() {
  zoo::ZooParams p;
  p.layers = 2;
  p.hidden = 32;
  p.heads = 4;
  p.seq_len = 16;
  p.vocab = 50;
  p.batch_size = 2;
  absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel("gpt", p);
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Graph> g = ImportOnnxModel(*m, "gpt", {});
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

// Megatron-LM's 3D layout on 8 GPUs: 2 stages, each 2 replicas that are
// tensor-parallel pairs; 8 micro-batches per step.
Strategy ThreeD() {
  Strategy s;
  s.stages.push_back(PipelineStage::OfTensorGroups({{0, 1}, {2, 3}}));
  s.stages.push_back(PipelineStage::OfTensorGroups({{4, 5}, {6, 7}}));
  for (PipelineStage& stage : s.stages) stage.recompute = Recompute::kSelective;
  s.micro_batches = 8;
  s.schedule = PipelineSchedule::k1F1B;
  s.zero = ZeroStage::kOptimizerState;
  s.sequence_parallel = true;
  return s;
}

TEST(PlanEmitTest, MegatronFlagsOfA3DPlan) {
  const Graph g = Gpt();
  const Strategy s = ThreeD();
  absl::StatusOr<EmittedPlan> e =
      EmitPlan(EmitFormat::kMegatron, {&g, &s, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->text,
            "# 8 GPUs: data-parallel size 2 = GPUs / (tensor 2 x pipeline "
            "2), 4 micro-batches per replica per step\n"
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
            "--micro-batch-size 2 --global-batch-size 16 --seq-length 16 "
            "--sequence-parallel --recompute-granularity selective "
            "--use-distributed-optimizer --overlap-grad-reduce --bf16\n");
  EXPECT_TRUE(e->not_expressed.empty());
}

// The distributed optimizer's all-gather overlapped with the next forward:
// Megatron-LM's flag; DeepSpeed cannot, and says so.
TEST(PlanEmitTest, OverlappedParameterGather) {
  const Graph g = Gpt();
  Strategy s = ThreeD();
  s.overlap_parameter_gather = true;
  absl::StatusOr<EmittedPlan> e =
      EmitPlan(EmitFormat::kMegatron, {&g, &s, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->text, HasSubstr("--use-distributed-optimizer "
                                 "--overlap-grad-reduce --overlap-param-gather "
                                 "--bf16"));
  EXPECT_TRUE(e->not_expressed.empty());
  e = EmitPlan(EmitFormat::kDeepSpeed, {&g, &s, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(absl::StrJoin(e->not_expressed, "\n"),
              HasSubstr("gathers the parameters in the optimizer step"));
}

TEST(PlanEmitTest, WhatMegatronCannotExpressIsSaid) {
  const Graph g = Gpt();
  Strategy s = ThreeD();
  s.stages[0].recompute = Recompute::kFull;
  s.stages[1].recompute = Recompute::kNone;
  s.schedule = PipelineSchedule::kGPipe;
  s.zero = ZeroStage::kParameters;
  s.allreduce = AllreduceAlgorithm::kTree;
  absl::StatusOr<EmittedPlan> e =
      EmitPlan(EmitFormat::kMegatron, {&g, &s, Precision::kFp32});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->text, HasSubstr("--recompute-granularity full "
                                 "--recompute-method uniform"));
  EXPECT_THAT(e->text, HasSubstr("--use-torch-fsdp2"));
  EXPECT_THAT(e->text, ::testing::Not(HasSubstr("--bf16")));
  const std::string said = absl::StrJoin(e->not_expressed, "\n");
  EXPECT_THAT(said, HasSubstr("recomputation per stage (full, none)"));
  EXPECT_THAT(said, HasSubstr("the GPipe schedule"));
  EXPECT_THAT(said, HasSubstr("FSDP2 does not run with pipeline parallelism"));
  EXPECT_THAT(said, HasSubstr("the tree allreduce"));
  EXPECT_EQ(e->not_expressed.size(), 5u);  // + full recompute's granularity
}

// A DeepSpeed config: valid JSON whose batch keeps DeepSpeed's identity
// (train batch = micro batch per GPU x accumulation x data-parallel size).
TEST(PlanEmitTest, DeepSpeedConfigKeepsItsBatchIdentity) {
  const Graph g = Gpt();
  const Strategy s = ThreeD();
  absl::StatusOr<EmittedPlan> e =
      EmitPlan(EmitFormat::kDeepSpeed, {&g, &s, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  google::protobuf::Struct config;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(e->text, &config).ok())
      << e->text;
  const auto& f = config.fields();
  const double train = f.at("train_batch_size").number_value();
  const double micro = f.at("train_micro_batch_size_per_gpu").number_value();
  const double accumulation = f.at("gradient_accumulation_steps").number_value();
  EXPECT_EQ(train, 16);
  EXPECT_EQ(train, micro * accumulation * 2);
  EXPECT_EQ(f.at("zero_optimization").struct_value().fields().at("stage")
                .number_value(),
            1);
  EXPECT_TRUE(f.at("bf16").struct_value().fields().at("enabled").bool_value());
  const std::string said = absl::StrJoin(e->not_expressed, "\n");
  EXPECT_THAT(said, HasSubstr("--tensor-model-parallel-size 2"));
  EXPECT_THAT(said, HasSubstr("PipelineModule(num_stages=2)"));
  EXPECT_THAT(said, HasSubstr("selective recomputation"));
  EXPECT_THAT(said, HasSubstr("sequence parallelism"));
}

// torchtitan: data parallelism sharded (ZeRO-3 is FSDP2) on one stage,
// the replicas' micro-batches gradient accumulation; ZeRO-1 said to be
// emitted as FSDP2.
TEST(PlanEmitTest, TorchTitanSections) {
  const Graph g = Gpt();
  Strategy s;
  s.stages.push_back(PipelineStage::OneDevicePerReplica({0, 1, 2, 3}));
  s.micro_batches = 8;
  s.zero = ZeroStage::kParameters;
  absl::StatusOr<EmittedPlan> e =
      EmitPlan(EmitFormat::kTorchTitan, {&g, &s, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->text,
            "[training]\nlocal_batch_size = 2\nglobal_batch_size = 16\n"
            "seq_len = 16\nmixed_precision_param = \"bfloat16\"\n\n"
            "[parallelism]\ndata_parallel_replicate_degree = 1\n"
            "data_parallel_shard_degree = 4\ntensor_parallel_degree = 1\n"
            "pipeline_parallel_degree = 1\n\n"
            "[activation_checkpoint]\nmode = \"none\"\n");
  EXPECT_TRUE(e->not_expressed.empty());
  s.zero = ZeroStage::kOptimizerState;
  const Strategy pipelined = ThreeD();
  e = EmitPlan(EmitFormat::kTorchTitan, {&g, &pipelined, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->text, HasSubstr("local_batch_size = 8\n"));  // 4 x 2
  EXPECT_THAT(e->text, HasSubstr("pipeline_parallel_microbatch_size = 2\n"));
  EXPECT_THAT(e->text, HasSubstr("pipeline_parallel_schedule = \"1F1B\"\n"));
  EXPECT_THAT(e->text, HasSubstr("selective_ac_option = \"op\"\n"));
  EXPECT_THAT(absl::StrJoin(e->not_expressed, "\n"),
              HasSubstr("ZeRO-1: torchtitan replicates (DDP) or shards"));
  // Megatron-LM's selective recomputation is not torchtitan's "op" option;
  // placer's selective-op is, exactly.
  EXPECT_THAT(absl::StrJoin(e->not_expressed, "\n"),
              HasSubstr("placer's --recompute selective-op"));
  Strategy op_level = pipelined;
  for (PipelineStage& stage : op_level.stages) {
    stage.recompute = Recompute::kSelectiveOp;
  }
  e = EmitPlan(EmitFormat::kTorchTitan, {&g, &op_level, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->text, HasSubstr("[activation_checkpoint]\nmode = "
                                 "\"selective\"\nselective_ac_option = "
                                 "\"op\"\n"));
  EXPECT_THAT(absl::StrJoin(e->not_expressed, "\n"),
              ::testing::Not(HasSubstr("selective")));
  e = EmitPlan(EmitFormat::kMegatron, {&g, &op_level, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->text, ::testing::Not(HasSubstr("--recompute")));
  EXPECT_THAT(absl::StrJoin(e->not_expressed, "\n"),
              HasSubstr("op-level selective recomputation (torchtitan's)"));
  // Layer by layer: Megatron-LM's --recompute-num-layers 1 and
  // torchtitan's full, exactly.
  Strategy by_layer = pipelined;
  for (PipelineStage& stage : by_layer.stages) {
    stage.recompute = Recompute::kLayers;
  }
  e = EmitPlan(EmitFormat::kMegatron, {&g, &by_layer, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->text, HasSubstr("--recompute-granularity full "
                                 "--recompute-method uniform "
                                 "--recompute-num-layers 1"));
  EXPECT_THAT(absl::StrJoin(e->not_expressed, "\n"),
              ::testing::Not(HasSubstr("recompute")));
  e = EmitPlan(EmitFormat::kTorchTitan, {&g, &by_layer, Precision::kBf16});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->text, HasSubstr("[activation_checkpoint]\nmode = \"full\"\n"));
  EXPECT_THAT(e->text, ::testing::Not(HasSubstr("selective_ac_option")));
  EXPECT_THAT(absl::StrJoin(e->not_expressed, "\n"),
              ::testing::Not(HasSubstr("recompute")));
}

// fp8 (Transformer Engine's recipe on bf16): Megatron-LM's --fp8-format
// hybrid, torchtitan's float8 converter, DeepSpeed's bf16 with a word on
// what its config cannot say.
TEST(PlanEmitTest, Fp8InEachSystemsTerms) {
  const Graph g = Gpt();
  const Strategy s = ThreeD();
  absl::StatusOr<EmittedPlan> megatron =
      EmitPlan(EmitFormat::kMegatron, {&g, &s, Precision::kFp8});
  ASSERT_TRUE(megatron.ok()) << megatron.status();
  EXPECT_THAT(megatron->text, HasSubstr("--bf16 --fp8-format hybrid\n"));
  absl::StatusOr<EmittedPlan> titan =
      EmitPlan(EmitFormat::kTorchTitan, {&g, &s, Precision::kFp8});
  ASSERT_TRUE(titan.ok()) << titan.status();
  EXPECT_THAT(titan->text, HasSubstr("mixed_precision_param = \"bfloat16\"\n"));
  EXPECT_THAT(titan->text, HasSubstr("[model]\nconverters = [\"float8\"]\n"));
  absl::StatusOr<EmittedPlan> deepspeed =
      EmitPlan(EmitFormat::kDeepSpeed, {&g, &s, Precision::kFp8});
  ASSERT_TRUE(deepspeed.ok()) << deepspeed.status();
  EXPECT_THAT(deepspeed->text, HasSubstr("\"bf16\": {\"enabled\": true}"));
  EXPECT_THAT(absl::StrJoin(deepspeed->not_expressed, "\n"),
              HasSubstr("fp8: not in DeepSpeed's config"));
}

TEST(PlanEmitTest, FormatNames) {
  EXPECT_EQ(*ParseEmitFormat("megatron"), EmitFormat::kMegatron);
  EXPECT_EQ(EmitFormatName(EmitFormat::kTorchTitan), "torchtitan");
  EXPECT_THAT(std::string(ParseEmitFormat("alpa").status().message()),
              HasSubstr("'alpa': expected megatron, deepspeed or torchtitan"));
}

}  // namespace
}  // namespace placer
