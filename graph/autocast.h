// Mixed precision as frameworks train with it: torch.autocast (and AMP)
// run a step's matrix products at a lower precision while the weights, their
// gradients and the optimizer state stay fp32. This file says, for a graph
// exported in fp32, which ops run at the lower precision and what type each
// tensor then has; the training view (training_view.h) sizes values and
// costs from it, the cost model rates the lower-precision nodes at the
// device's tensor-core FLOP/s, and the executor runs the same ops under
// LibTorch's autocast.
//
// Contract (torch.autocast's CUDA op lists, 1.13, mapped to ONNX ops):
//  - kLowerPrecision ops (Conv, ConvTranspose, MatMul, Gemm, Einsum, LSTM,
//    GRU, RNN, PRelu) compute at the step's precision and write it.
//  - kFp32 ops (Softmax, LogSoftmax, the normalizations that torch lists
//    as fp32 — LayerNormalization, GroupNormalization and the
//    InstanceNormalization torch exports GroupNorm as —, Exp, Log, Pow,
//    Reciprocal, Softplus, sums and products, CumSum, the losses) write fp32.
//  - kKeep ops (Cast, CastLike, Shape, Size, Range, generators) write the
//    type the file says.
//  - Every other op writes the widest floating-point type among its inputs
//    that are activations or graph inputs (initializers do not widen: a
//    Linear's bias Add after a bf16 MatMul stays bf16, as torch's fused
//    linear does); with no such input, among all of its inputs.
//  Only tensors the file types float32 change; parameters, graph inputs and
//  constants keep their type (fp32 master weights), so parameter gradients
//  and the optimizer stay fp32. At kFp32 nothing changes.
//  kFp8 is Transformer Engine's FP8 training on top of bf16 autocast: the
//  tensors are as at kBf16, and the products with a weight operand (a
//  MatMul or Gemm reading a parameter: nn.Linear, which TE replaces) compute
//  at fp8 (OpPrecisions, which keeps the output layer at bf16); every other
//  lower-precision op at bf16. The casts fp8 adds are costed by
//  graph/fp8_casts.h; the fp8 copies a backward keeps are not counted.
#ifndef PLACER_GRAPH_AUTOCAST_H_
#define PLACER_GRAPH_AUTOCAST_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace placer {

enum class Precision { kFp32, kBf16, kFp16, kFp8 };

// "fp32", "bf16", "fp16", "fp8".
absl::string_view PrecisionName(Precision precision);
// Parses a PrecisionName; INVALID_ARGUMENT naming `text` otherwise.
absl::StatusOr<Precision> ParsePrecision(absl::string_view text);
// The type lower-precision ops write: kFloat32, kBFloat16 (bf16 and fp8),
// kFloat16.
DataType ComputeType(Precision precision);

enum class AutocastClass { kLowerPrecision, kFp32, kKeep, kPromote };
AutocastClass AutocastClassOf(const Op& op);

// Per tensor of `graph`: whether it is a weight, a parameter or what ops
// make from parameters and constants alone (a tied output layer's
// transposed embedding, an exporter's Transpose(W)).
std::vector<char> WeightTensors(const Graph& graph);

// Per op of `graph`: whether it is a linear layer's product, a MatMul or
// Gemm with a weight operand (WeightTensors): what fp8 runs at fp8
// (OpPrecisions) and torchtitan's op-level recomputation counts
// (graph/repeated_layers.h).
std::vector<char> WeightProducts(const Graph& graph);

// Per op of `graph`, the precision it computes at in a step at `step`:
// `step` for kLowerPrecision ops, kFp32 for the others; at kFp8, only the
// WeightProducts compute at fp8, but for the last of them in
// topological order (the output layer, which Megatron-LM keeps outside
// Transformer Engine),
// and the other lower-precision ops at bf16.
std::vector<Precision> OpPrecisions(const Graph& graph, Precision step);

// The graph's tensors with the types they have under autocast at
// `precision` (a copy of graph.tensors(), only dtypes changed).
// A FusedElementwise op's outputs get the types its body's ops give them.
// With `parameters` (training_view.h's MixedPrecision::kMaster), the fp32
// parameters are held at the compute type too.
std::vector<Tensor> AutocastTensors(const Graph& graph, Precision precision,
                                    bool parameters = false);

// The tensors of `body`, a FusedElementwise op's body (fused_region.h),
// with the types they have under autocast at `precision` when the op's
// inputs have `input_types` (per op input, as AutocastTensors typed them
// in the enclosing graph; kUndefined: as the body says). A copy of
// body.tensors() at kFp32.
std::vector<Tensor> BodyTensors(const Graph& body,
                                const std::vector<DataType>& input_types,
                                Precision precision);

}  // namespace placer

#endif  // PLACER_GRAPH_AUTOCAST_H_
