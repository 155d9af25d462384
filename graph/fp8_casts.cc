#include "graph/fp8_casts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace placer {
namespace {

constexpr int64_t kFp8Bytes = 1;
constexpr int64_t kTransposedCopyBytes = 2 * kFp8Bytes;  // read and write

int64_t Elements(const Tensor& t) { return std::max<int64_t>(0, t.num_elements()); }

// Bytes torchao's amax pass and cast of `t` move (contract): it is read at
// the compute type, whatever autocast's typing of the file says.
int64_t CastBytes(const Tensor& t) {
  const int64_t b = DataTypeBytes(ComputeType(Precision::kFp8));
  return Elements(t) * (b + b + kFp8Bytes);
}

}  // namespace

absl::string_view Fp8RecipeName(Fp8Recipe recipe) {
  return recipe == Fp8Recipe::kTorchao ? "torchao" : "te";
}

absl::StatusOr<Fp8Recipe> ParseFp8Recipe(absl::string_view text) {
  for (Fp8Recipe r : {Fp8Recipe::kTransformerEngine, Fp8Recipe::kTorchao}) {
    if (text == Fp8RecipeName(r)) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "fp8-recipe '", text, "': expected te or torchao"));
}

std::vector<Fp8CastBytes> Fp8CastBytesPerOp(
    const Graph& graph, const std::vector<Tensor>& tensors,
    const std::vector<Precision>& precisions, Fp8Recipe recipe) {
  std::vector<Fp8CastBytes> bytes(graph.ops().size());
  if (recipe == Fp8Recipe::kTransformerEngine) return bytes;
  const std::vector<char> weight = WeightTensors(graph);
  std::vector<char> cast(tensors.size(), 0);
  for (int i : graph.topological_order()) {
    if (precisions[i] != Precision::kFp8) continue;
    const Op& op = graph.op(i);
    Fp8CastBytes& b = bytes[i];
    for (int k = 0; k < std::min<int>(2, op.inputs.size()); ++k) {
      const int in = op.inputs[k];
      if (in < 0) continue;
      const Tensor& t = tensors[in];
      if (weight[in]) {
        b.forward += CastBytes(t);
        b.backward += Elements(t) * kTransposedCopyBytes;
      } else if (!cast[in]) {
        cast[in] = 1;
        b.forward += CastBytes(t) + Elements(t) * kTransposedCopyBytes;
      }
    }
    for (int out : op.outputs) {
      if (out < 0) continue;
      const Tensor& y = tensors[out];
      b.backward += CastBytes(y) + Elements(y) * kTransposedCopyBytes;
    }
  }
  return bytes;
}

}  // namespace placer
