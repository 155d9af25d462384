// The form of a constant-folding evaluator and the helpers evaluators
// share, for the files that define them (constant_folding.cc: shape
// computations; constant_folding_arithmetic.cc: arithmetic). Internal to
// graph/: constant_folding.h is the interface.
//
// Contract: an evaluator returns one FoldedValue per output of the op, or
// std::nullopt when it cannot or will not evaluate it; it never guesses.
#ifndef PLACER_GRAPH_FOLDING_KERNELS_H_
#define PLACER_GRAPH_FOLDING_KERNELS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "graph/constant_folding.h"
#include "graph/graph.h"

namespace placer::folding {

using Result = std::optional<std::vector<FoldedValue>>;
using FoldFn = Result (*)(const Op&, const std::vector<FoldInput>&);
using FoldTable = absl::flat_hash_map<std::string, FoldFn>;

// A double as int64 when int64 can hold it; nullopt for NaN, infinities
// and values out of range.
std::optional<int64_t> ToInt64(double x);
// A double as int64 clamped to int64's range (NaN: 0).
int64_t SaturatingInt64(double x);
int64_t Product(const std::vector<int64_t>& dims);
// Element i of `v` as a double, or as an int64 (reals saturate).
double RealAt(const FoldedValue& v, int64_t i);
int64_t IntAt(const FoldedValue& v, int64_t i);
// A zero-filled value of `dtype` and `dims`.
FoldedValue MakeLike(DataType dtype, std::vector<int64_t> dims);
// dst[i] = src[j], converted to dst's dtype.
void SetFrom(FoldedValue& dst, int64_t i, const FoldedValue& src, int64_t j);
// A 1-D (or scalar) integer constant's values; nullopt when not constant.
std::optional<std::vector<int64_t>> IntList(const FoldInput& in);
// Dtypes folding evaluates.
bool Supported(DataType t);
int64_t NormalizeAxis(int64_t axis, int64_t rank);
// Numpy broadcasting of several shapes; nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> BroadcastShape(
    const std::vector<const FoldedValue*>& values);
// Flat index into `v` for the output multi-index `index` under
// broadcasting.
int64_t BroadcastIndex(const FoldedValue& v, const std::vector<int64_t>& index);
// The multi-index of flat index `flat` in `dims`.
void Unravel(int64_t flat, const std::vector<int64_t>& dims,
             std::vector<int64_t>* index);
// One output.
Result One(FoldedValue v);
// The first `count` inputs are all known constants.
bool AllConstant(const std::vector<FoldInput>& in, size_t count);

// The evaluators of constant_folding_arithmetic.cc.
void AddArithmeticFolds(FoldTable& table);

}  // namespace placer::folding

#endif  // PLACER_GRAPH_FOLDING_KERNELS_H_
