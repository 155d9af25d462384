// The values of graph inputs as the user gives them (`--input-values`),
// for inputs whose meaning the executor cannot infer (an integer input
// that reaches no Gather, loss or comparison) or that the user wants fixed
// (token types all 0, a real batch).
//
// Contract:
//  - ParseInputValues reads one NAME=SPEC entry: `range:LO:HI` (uniform in
//    [LO, HI); integers LO..HI-1 for an integer input), `value:V` (every
//    element V), `mask` (a padding mask, initial_values.h's DrawMask), or
//    `file:PATH` (numbers separated by whitespace or commas, row-major,
//    as many as the input has elements; PATH relative to `base_dir` unless
//    absolute). INVALID_ARGUMENT naming the entry (and the file, with the
//    offending token or count) otherwise.
//  - MakeInputValues turns a spec into the input's tensor (its shape and
//    type), drawing from `gen`; INVALID_ARGUMENT naming the input when the
//    spec does not fit it: a file's count, a fractional value or range
//    bound for an integer input, an integer range past `index_bound` (the
//    rows of the table it indexes; 0: unknown).
#ifndef PLACER_RUNTIME_INPUT_VALUES_H_
#define PLACER_RUNTIME_INPUT_VALUES_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace placer {

struct InputValues {
  enum class Kind { kRange, kConstant, kMask, kList };
  Kind kind = Kind::kRange;
  double low = 0;   // kRange
  double high = 0;  // kRange, exclusive
  double constant = 0;
  std::vector<double> list;  // kList, row-major
  std::string source;        // kList: the file, for errors
};

absl::StatusOr<std::pair<std::string, InputValues>> ParseInputValues(
    absl::string_view entry, const std::string& base_dir);

absl::StatusOr<torch::Tensor> MakeInputValues(const Tensor& input,
                                              const InputValues& values,
                                              int64_t index_bound,
                                              torch::Generator& gen);

}  // namespace placer

#endif  // PLACER_RUNTIME_INPUT_VALUES_H_
