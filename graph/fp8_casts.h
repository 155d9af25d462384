// The casts fp8 training adds around each product it runs at fp8
// (autocast.h's kFp8 products), by recipe:
//
//  - kTorchao: torchao's Float8Linear with tensorwise (dynamic) scaling,
//    torchtitan's float8, under torch.compile. Each operand is cast in
//    kernels of its own: an amax pass reads it (b bytes an element, b the
//    compute type's: 2), the cast reads it again and writes e4m3 or e5m2
//    (b + 1); the backward's products read transposed fp8 copies (fp8
//    tensor cores take one operand row-major, the other column-major),
//    each a read and a write of fp8 (2). Forward, per product: its weight
//    is cast; its activation operand is cast, with its transposed copy for
//    the weight gradient, once: products reading the same activation
//    (attention's q, k and v; SwiGLU's gate and up) share them, charged to
//    the first in topological order, as torch.compile makes them once.
//    Backward: the output gradient is cast, with its transposed copy, and
//    the weight gets its transposed copy for the input gradient.
//    Checked on one H200 against torchtitan-style layers (docs/llm.md,
//    "torchtitan's layers on one GPU").
//  - kTransformerEngine: none counted. Transformer Engine writes most fp8
//    copies in the kernels that make the tensors (its LayerNorm, activation
//    and their backward kernels cast and transpose as they write) and casts
//    each weight once a step, cached across micro-batches; the casts it
//    still runs alone (of attention's output and of some output
//    gradients) are not modelled, nor measured here.
//
// The scales themselves (one number a tensor) and the kernels' launches
// are not counted. The cost model runs these bytes at the device's memory
// rate beside the product (training_view.h's TrainingNode::fp8_cast_bytes).
#ifndef PLACER_GRAPH_FP8_CASTS_H_
#define PLACER_GRAPH_FP8_CASTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/autocast.h"
#include "graph/graph.h"

namespace placer {

enum class Fp8Recipe { kTransformerEngine, kTorchao };
// "te", "torchao".
absl::string_view Fp8RecipeName(Fp8Recipe recipe);
// Parses an Fp8RecipeName; INVALID_ARGUMENT naming `text` otherwise.
absl::StatusOr<Fp8Recipe> ParseFp8Recipe(absl::string_view text);

struct Fp8CastBytes {
  int64_t forward = 0;
  int64_t backward = 0;
};

// Per op of `graph`: the bytes its fp8 casts move (contract); zero for ops
// whose `precisions` (OpPrecisions) entry is not kFp8. `tensors`: the
// graph's tensors (their elements).
std::vector<Fp8CastBytes> Fp8CastBytesPerOp(
    const Graph& graph, const std::vector<Tensor>& tensors,
    const std::vector<Precision>& precisions, Fp8Recipe recipe);

}  // namespace placer

#endif  // PLACER_GRAPH_FP8_CASTS_H_
