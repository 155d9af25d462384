#include "placer/plan_emit.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/graph_stats.h"

namespace placer {
namespace {

// The plan as the systems see it: one degree per dimension.
struct PlanShape {
  int stages = 1;
  int tensor = 1;
  int replicas = 1;
  int64_t micro_batch = 1;  // the graph's batch
  int64_t sequence = 0;     // 0: the graph says none
  int micro_batches = 1;    // per step, every replica together
  Recompute recompute = Recompute::kNone;
  ZeroStage zero = ZeroStage::kNone;
  bool sequence_parallel = false;
  bool overlap_parameter_gather = false;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  std::vector<std::string> not_expressed;

  int64_t global_batch() const { return micro_batch * micro_batches; }
  int per_replica() const { return micro_batches / replicas; }
};

// The stronger of two recomputations (more memory saved).
int Strength(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return 0;
    case Recompute::kSelective:
      return 1;
    case Recompute::kSelectiveOp:
      return 2;
    case Recompute::kLayers:
      return 3;
    case Recompute::kFull:
      return 4;
  }
  return 0;
}

absl::StatusOr<PlanShape> ShapeOf(const EmitInput& input, const char* system) {
  const Strategy& s = *input.strategy;
  const Graph& g = *input.graph;
  if (s.stages.empty()) return absl::InvalidArgumentError("the plan has no stage");
  PlanShape p;
  p.stages = static_cast<int>(s.stages.size());
  p.tensor = s.stages[0].tensor();
  p.replicas = s.stages[0].num_replicas();
  p.micro_batches = s.micro_batches;
  p.zero = s.zero;
  p.sequence_parallel = s.sequence_parallel;
  p.overlap_parameter_gather = s.overlap_parameter_gather;
  p.schedule = s.schedule;
  // The batch and sequence: the first graph input's first two dims.
  p.micro_batch = GraphBatch(g);
  if (p.micro_batch <= 0) {
    return absl::InvalidArgumentError(
        "the graph has no input with a known shape to read its batch from");
  }
  for (int t : g.inputs()) {
    const Tensor& first = g.tensor(t);
    if (!first.shape_known || first.shape.empty()) continue;
    if (first.shape.size() >= 2 && !IsFloatingPoint(first.dtype)) {
      p.sequence = first.shape[1];  // token ids [batch, sequence]
    }
    break;
  }
  auto& notes = p.not_expressed;
  std::vector<std::string> widths, tensors, recomputes;
  bool same_width = true, same_tensor = true, same_recompute = true;
  for (const PipelineStage& stage : s.stages) {
    widths.push_back(absl::StrCat(stage.num_replicas()));
    tensors.push_back(absl::StrCat(stage.tensor()));
    recomputes.push_back(RecomputeName(stage.recompute));
    same_width &= stage.num_replicas() == p.replicas;
    same_tensor &= stage.tensor() == p.tensor;
    same_recompute &= stage.recompute == s.stages[0].recompute;
    if (Strength(stage.recompute) > Strength(p.recompute)) {
      p.recompute = stage.recompute;
    }
    if (stage.width() > 1) {
      notes.push_back(absl::StrCat(
          "ops placed on ", stage.width(),
          " devices inside a stage (an op placement): ", system,
          " runs a stage's layers on one device per replica"));
    }
  }
  if (!same_width) {
    notes.push_back(absl::StrCat(
        "stages with different data-parallel widths (",
        absl::StrJoin(widths, ", "), "): ", system,
        " uses one for every stage; emitted the first stage's, ", p.replicas));
  }
  if (!same_tensor) {
    notes.push_back(absl::StrCat(
        "stages with different tensor-parallel groups (",
        absl::StrJoin(tensors, ", "), "): ", system,
        " uses one size; emitted the first stage's, ", p.tensor));
  }
  if (!same_recompute) {
    notes.push_back(absl::StrCat(
        "recomputation per stage (", absl::StrJoin(recomputes, ", "), "): ",
        system, " applies one setting to every stage; emitted the strongest, ",
        RecomputeName(p.recompute)));
  }
  if (p.micro_batches % p.replicas != 0) {
    notes.push_back(absl::StrCat(
        p.micro_batches, " micro-batches over ", p.replicas,
        " replicas run unequal counts per replica; ", system,
        " needs the global batch to divide by micro batch x data-parallel "
        "size"));
  }
  if (!s.op_sharding.empty()) {
    notes.push_back(absl::StrCat(
        "the plan fixes each op's tensor-parallel split; ", system,
        " splits layers its own way (Megatron-LM's pattern)"));
  }
  if (s.allreduce != AllreduceAlgorithm::kRing) {
    notes.push_back(absl::StrCat("the ", AllreduceName(s.allreduce),
                                 " allreduce: NCCL chooses its algorithm, "
                                 "no setting of ", system));
  }
  return p;
}

EmittedPlan Megatron(const PlanShape& p, Precision precision) {
  EmittedPlan out;
  out.not_expressed = p.not_expressed;
  std::vector<std::string> flags = {
      absl::StrCat("--tensor-model-parallel-size ", p.tensor),
      absl::StrCat("--pipeline-model-parallel-size ", p.stages),
      absl::StrCat("--micro-batch-size ", p.micro_batch),
      absl::StrCat("--global-batch-size ", p.global_batch())};
  if (p.sequence > 0) flags.push_back(absl::StrCat("--seq-length ", p.sequence));
  if (p.sequence_parallel) flags.push_back("--sequence-parallel");
  if (p.recompute == Recompute::kFull || p.recompute == Recompute::kLayers) {
    flags.push_back(
        "--recompute-granularity full --recompute-method uniform "
        "--recompute-num-layers 1");
  }
  if (p.recompute == Recompute::kFull) {
    out.not_expressed.push_back(
        "placer recomputes a stage whole from its input; "
        "--recompute-num-layers 1 keeps each layer's input instead (a "
        "little more memory, the same recomputation)");
  } else if (p.recompute == Recompute::kSelective) {
    flags.push_back("--recompute-granularity selective");
  } else if (p.recompute == Recompute::kSelectiveOp) {
    out.not_expressed.push_back(
        "op-level selective recomputation (torchtitan's): Megatron-LM's "
        "--recompute-granularity selective reruns the attention core only "
        "(placer's --recompute selective)");
  }
  switch (p.zero) {
    case ZeroStage::kNone:
      break;
    case ZeroStage::kOptimizerState:
      flags.push_back("--use-distributed-optimizer");
      break;
    case ZeroStage::kGradients:
      flags.push_back("--use-distributed-optimizer");
      out.not_expressed.push_back(
          "ZeRO-2: Megatron-LM's distributed optimizer shards the optimizer "
          "state and reduce-scatters the gradients, but keeps the whole "
          "gradient buffer");
      break;
    case ZeroStage::kParameters:
      flags.push_back("--use-torch-fsdp2");
      if (p.stages > 1) {
        out.not_expressed.push_back(
            "ZeRO-3 with pipeline stages: Megatron-LM's FSDP2 does not run "
            "with pipeline parallelism");
      }
      break;
  }
  // placer reduces each bucket as the backward makes it (DDP's overlap).
  if (p.replicas > 1) flags.push_back("--overlap-grad-reduce");
  if (p.overlap_parameter_gather) flags.push_back("--overlap-param-gather");
  if (precision == Precision::kBf16) flags.push_back("--bf16");
  if (precision == Precision::kFp16) flags.push_back("--fp16");
  if (precision == Precision::kFp8) {
    flags.push_back("--bf16");
    flags.push_back("--fp8-format hybrid");
  }
  if (p.schedule == PipelineSchedule::kGPipe && p.stages > 1) {
    out.not_expressed.push_back(
        "the GPipe schedule: Megatron-LM runs 1F1B (less activation memory, "
        "the same bubble)");
  }
  out.text = absl::StrCat(
      "# ", p.tensor * p.stages * p.replicas, " GPUs: data-parallel size ",
      p.replicas, " = GPUs / (tensor ", p.tensor, " x pipeline ", p.stages,
      "), ", p.per_replica(), " micro-batches per replica per step\n",
      absl::StrJoin(flags, " "), "\n");
  return out;
}

EmittedPlan DeepSpeed(const PlanShape& p, Precision precision) {
  EmittedPlan out;
  out.not_expressed = p.not_expressed;
  std::string json = absl::StrCat(
      "{\n  \"train_batch_size\": ", p.global_batch(),
      ",\n  \"train_micro_batch_size_per_gpu\": ", p.micro_batch,
      ",\n  \"gradient_accumulation_steps\": ", p.per_replica(),
      ",\n  \"zero_optimization\": {\"stage\": ", ZeroNumber(p.zero), "}");
  if (precision == Precision::kBf16) absl::StrAppend(&json, ",\n  \"bf16\": {\"enabled\": true}");
  if (precision == Precision::kFp16) absl::StrAppend(&json, ",\n  \"fp16\": {\"enabled\": true}");
  if (precision == Precision::kFp8) {
    absl::StrAppend(&json, ",\n  \"bf16\": {\"enabled\": true}");
    out.not_expressed.push_back(
        "fp8: not in DeepSpeed's config (Transformer Engine's layers in the "
        "model code); emitted bf16");
  }
  absl::StrAppend(&json, "\n}\n");
  out.text = json;
  if (p.tensor > 1) {
    out.not_expressed.push_back(absl::StrCat(
        "tensor parallelism (", p.tensor,
        "): not in DeepSpeed's config; Megatron-DeepSpeed takes "
        "--tensor-model-parallel-size ", p.tensor));
  }
  if (p.stages > 1) {
    out.not_expressed.push_back(absl::StrCat(
        "pipeline stages (", p.stages,
        "): set in the model code, PipelineModule(num_stages=", p.stages,
        ")"));
    if (p.zero == ZeroStage::kGradients || p.zero == ZeroStage::kParameters) {
      out.not_expressed.push_back(
          "ZeRO-2/3 with pipeline stages: DeepSpeed's pipeline engine takes "
          "ZeRO-1 at most");
    }
  }
  if (p.recompute != Recompute::kNone) {
    out.not_expressed.push_back(absl::StrCat(
        RecomputeName(p.recompute),
        " recomputation: called in the model code "
        "(deepspeed.checkpointing.checkpoint), not in the config"));
  }
  if (p.sequence_parallel) {
    out.not_expressed.push_back("sequence parallelism: not in DeepSpeed's config");
  }
  if (p.overlap_parameter_gather) {
    out.not_expressed.push_back(
        "the parameter all-gather overlapped with the next step's forward: "
        "DeepSpeed's ZeRO-1/2 gathers the parameters in the optimizer step");
  }
  return out;
}

EmittedPlan TorchTitan(const PlanShape& p, Precision precision) {
  EmittedPlan out;
  out.not_expressed = p.not_expressed;
  const bool shard = p.zero != ZeroStage::kNone;
  if (p.zero == ZeroStage::kOptimizerState || p.zero == ZeroStage::kGradients) {
    out.not_expressed.push_back(absl::StrCat(
        "ZeRO-", ZeroNumber(p.zero),
        ": torchtitan replicates (DDP) or shards everything (FSDP2); "
        "emitted FSDP2, which shards the parameters too"));
  }
  // Without stages a replica's micro-batches are gradient accumulation;
  // with stages they are the pipeline's micro-batches of one local batch.
  const int64_t local =
      p.stages > 1 ? p.micro_batch * p.per_replica() : p.micro_batch;
  std::string toml = absl::StrCat(
      "[training]\nlocal_batch_size = ", local, "\nglobal_batch_size = ",
      p.global_batch(), "\n");
  if (p.sequence > 0) absl::StrAppend(&toml, "seq_len = ", p.sequence, "\n");
  if (precision == Precision::kBf16 || precision == Precision::kFp8) {
    absl::StrAppend(&toml, "mixed_precision_param = \"bfloat16\"\n");
  } else if (precision == Precision::kFp32) {
    absl::StrAppend(&toml, "mixed_precision_param = \"float32\"\n");
  } else {
    out.not_expressed.push_back("fp16: torchtitan trains in bf16 or fp32");
  }
  absl::StrAppend(
      &toml, "\n[parallelism]\ndata_parallel_replicate_degree = ",
      shard ? 1 : p.replicas, "\ndata_parallel_shard_degree = ",
      shard ? p.replicas : 1, "\ntensor_parallel_degree = ", p.tensor,
      "\npipeline_parallel_degree = ", p.stages, "\n");
  if (p.stages > 1) {
    absl::StrAppend(&toml, "pipeline_parallel_schedule = \"",
                    p.schedule == PipelineSchedule::kGPipe ? "GPipe" : "1F1B",
                    "\"\npipeline_parallel_microbatch_size = ", p.micro_batch,
                    "\n");
  }
  const bool full =
      p.recompute == Recompute::kFull || p.recompute == Recompute::kLayers;
  absl::StrAppend(&toml, "\n[activation_checkpoint]\nmode = \"",
                  full                                 ? "full"
                  : p.recompute == Recompute::kNone ? "none"
                                                       : "selective",
                  "\"\n");
  if (p.recompute == Recompute::kSelective ||
      p.recompute == Recompute::kSelectiveOp) {
    absl::StrAppend(&toml, "selective_ac_option = \"op\"\n");
  }
  if (p.recompute == Recompute::kFull) {
    out.not_expressed.push_back(
        "full recomputation: placer reruns a stage whole from its input; "
        "torchtitan's mode = \"full\" checkpoints each block (placer's "
        "--recompute layers)");
  }
  if (p.recompute == Recompute::kSelective) {
    out.not_expressed.push_back(
        "selective recomputation: placer's reruns every op without a weight "
        "(attention's core with them); torchtitan's \"op\" option keeps "
        "attention's output and every other product and reruns the rest "
        "(placer's --recompute selective-op)");
  }
  if (precision == Precision::kFp8) {
    // torchao's float8 linear layers.
    absl::StrAppend(&toml, "\n[model]\nconverters = [\"float8\"]\n");
  }
  out.text = toml;
  return out;
}

}  // namespace

absl::StatusOr<EmitFormat> ParseEmitFormat(const std::string& name) {
  if (name == "megatron") return EmitFormat::kMegatron;
  if (name == "deepspeed") return EmitFormat::kDeepSpeed;
  if (name == "torchtitan") return EmitFormat::kTorchTitan;
  return absl::InvalidArgumentError(absl::StrCat(
      "'", name, "': expected megatron, deepspeed or torchtitan"));
}

std::string EmitFormatName(EmitFormat format) {
  switch (format) {
    case EmitFormat::kMegatron:
      return "megatron";
    case EmitFormat::kDeepSpeed:
      return "deepspeed";
    case EmitFormat::kTorchTitan:
      return "torchtitan";
  }
  return "";
}

absl::StatusOr<EmittedPlan> EmitPlan(EmitFormat format, const EmitInput& input) {
  switch (format) {
    case EmitFormat::kMegatron: {
      absl::StatusOr<PlanShape> p = ShapeOf(input, "Megatron-LM");
      if (!p.ok()) return p.status();
      return Megatron(*p, input.precision);
    }
    case EmitFormat::kDeepSpeed: {
      absl::StatusOr<PlanShape> p = ShapeOf(input, "DeepSpeed");
      if (!p.ok()) return p.status();
      return DeepSpeed(*p, input.precision);
    }
    case EmitFormat::kTorchTitan: {
      absl::StatusOr<PlanShape> p = ShapeOf(input, "torchtitan");
      if (!p.ok()) return p.status();
      return TorchTitan(*p, input.precision);
    }
  }
  return absl::InvalidArgumentError("unknown format");
}

}  // namespace placer
