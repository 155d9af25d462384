// What the executor starts a graph from where the ONNX file says nothing:
// seeded parameters, normalization state, the range of integer inputs;
// and which values the importer folded to constants.
//
// Contract: deterministic given the generator; every rule reads the
// consumers of the tensor (a parameter read by MatMul or Gemm with
// transB=0 has its fan-in in dimension 0; normalization scales and vectors
// that multiply start at 1, other vectors at 0; a BatchNormalization's
// running mean at 0 and variance at 1).
#ifndef PLACER_RUNTIME_INITIAL_VALUES_H_
#define PLACER_RUNTIME_INITIAL_VALUES_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/training_view.h"
#include "runtime/input_values.h"

namespace placer {

// Whether the importer folded t to a constant (its data is in the graph).
bool Folded(const Tensor& t);

// Seeded initialization of a parameter the file has no data for: uniform
// in +-1/sqrt(fan-in) for matrices and higher ranks; ones or zeros for
// vectors (see the contract).
torch::Tensor InitParameter(const Graph& g, const Tensor& t,
                            torch::Generator& gen);

// Initial state the file has no data for, as the framework starts it:
// BatchNormalization's running mean 0 and running variance 1. Undefined for
// any other constant.
torch::Tensor InitState(const Graph& g, int tensor);

// The exclusive upper bound of the values an integer graph input may take,
// from what its values reach through ops that only move or cast them
// (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Slice, Tile,
// Concat, Identity, Cast to an integer type): Gather's or GatherElements'
// table, a loss's classes; 0 when nothing says.
int64_t IndexBound(const Graph& g, int tensor);

// Whether an integer graph input is a mask: its values reach (the same
// way) a comparison, a Cast to bool or a real type, Mul, Sub, Where, And
// or Or.
bool IsMaskInput(const Graph& g, int tensor);

// A padding mask as tokenizers make them: ones, with each row (dim 0)
// padded at its end (the last dim) by zeros over up to half its length.
torch::Tensor DrawMask(const std::vector<int64_t>& shape,
                       torch::ScalarType type, torch::Generator& gen);

// What a step starts from, on the host, drawn as the executors draw it:
// one generator seeded `seed`; for each view value without a producer, in
// view order: folded data as it is, a parameter by InitParameter, a
// floating graph input normal, an integer one uniform below its
// IndexBound or, for a mask input, by DrawMask, state by InitState; then, for
// each floating graph output that is not a scalar, a loss target (class indices
// for [batch, classes], else normal). FailedPrecondition listing every value
// that cannot be made (no data or shape, an integer input with no bound).
struct HostValues {
  std::vector<torch::Tensor> value;   // per view value; undefined if produced
  std::vector<torch::Tensor> target;  // per graph tensor; undefined if none
};
// `given`: graph inputs by name whose values the user gave
// (runtime/input_values.h), drawn from the same generator in their turn
// instead of by the rules above; a name that is no graph input is an
// INVALID_ARGUMENT listing the inputs.
absl::StatusOr<HostValues> DrawHostValues(
    const TrainingView& view, uint64_t seed,
    const std::map<std::string, InputValues>& given = {});

// Another batch for the same step shape: the graph inputs and targets of
// DrawHostValues(view, seed) (its parameters and constants are drawn and
// dropped, so batches differ only by seed).
absl::StatusOr<HostValues> DrawBatch(
    const TrainingView& view, uint64_t seed,
    const std::map<std::string, InputValues>& given = {});

}  // namespace placer

#endif  // PLACER_RUNTIME_INITIAL_VALUES_H_
