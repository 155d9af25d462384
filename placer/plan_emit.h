// A strategy in the terms of the systems users train with: Megatron-LM's
// command-line flags, a DeepSpeed config, torchtitan's TOML sections.
//
// Contract:
//  - EmitPlan(format, plan) returns the text a user of that system pastes
//    (flags on one line, a JSON object, TOML tables) and, beside it, what
//    of the plan the system cannot express, one line each, in words. What
//    cannot be expressed is left out of the text or replaced by the
//    closest setting, and the line says which.
//  - The batch: the graph's batch is one micro-batch (micro batch size);
//    a step runs strategy.micro_batches of them, so the global batch is
//    micro_batches x graph batch and each of the R data-parallel replicas
//    accumulates micro_batches / R of them.
//  - Only the parallelism, batch, recomputation, sharding and precision of
//    the plan are emitted: the model's own settings (layers, widths) are
//    the user's, in the user's config.
//  - Pure; InvalidArgument when the plan has no stage or the graph no
//    input to read the batch from.
#ifndef PLACER_PLACER_PLAN_EMIT_H_
#define PLACER_PLACER_PLAN_EMIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/training_view.h"
#include "simulator/strategy.h"

namespace placer {

enum class EmitFormat { kMegatron, kDeepSpeed, kTorchTitan };

// "megatron", "deepspeed", "torchtitan".
absl::StatusOr<EmitFormat> ParseEmitFormat(const std::string& name);
std::string EmitFormatName(EmitFormat format);

struct EmitInput {
  const Graph* graph = nullptr;
  const Strategy* strategy = nullptr;
  Precision precision = Precision::kFp32;
};

struct EmittedPlan {
  std::string text;
  std::vector<std::string> not_expressed;
};

absl::StatusOr<EmittedPlan> EmitPlan(EmitFormat format, const EmitInput& input);

}  // namespace placer

#endif  // PLACER_PLACER_PLAN_EMIT_H_
