#include "graph/saved_for_backward.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace placer {
namespace {

enum class Keeps { kNothing, kOutput0, kInput0, kInput1, kMask };

const absl::flat_hash_map<std::string, Keeps>& Table() {
  static const auto* table = new absl::flat_hash_map<std::string, Keeps>{
      // Sizes only: the backward is a reshape, slice, pad, sum or
      // broadcast of the output gradient.
      {"Add", Keeps::kNothing},
      {"Sub", Keeps::kNothing},
      {"Sum", Keeps::kNothing},
      {"Neg", Keeps::kNothing},
      {"Identity", Keeps::kNothing},
      {"Cast", Keeps::kNothing},
      {"Concat", Keeps::kNothing},
      {"Split", Keeps::kNothing},
      {"Slice", Keeps::kNothing},
      {"Reshape", Keeps::kNothing},
      {"Flatten", Keeps::kNothing},
      {"Transpose", Keeps::kNothing},
      {"Squeeze", Keeps::kNothing},
      {"Unsqueeze", Keeps::kNothing},
      {"Expand", Keeps::kNothing},
      {"Tile", Keeps::kNothing},
      {"ReduceMean", Keeps::kNothing},
      {"ReduceSum", Keeps::kNothing},
      {"GlobalAveragePool", Keeps::kNothing},
      {"Pad", Keeps::kNothing},
      // d/dx f(x) written in terms of y = f(x).
      {"Relu", Keeps::kOutput0},
      {"Sigmoid", Keeps::kOutput0},
      {"Tanh", Keeps::kOutput0},
      {"Exp", Keeps::kOutput0},
      {"Sqrt", Keeps::kOutput0},
      {"Reciprocal", Keeps::kOutput0},
      {"Softmax", Keeps::kOutput0},
      {"LogSoftmax", Keeps::kOutput0},
      // index_select keeps its indices; where keeps its condition.
      {"Gather", Keeps::kInput1},
      {"Where", Keeps::kInput0},
      // native_dropout keeps its mask (bool), the op's second output.
      {"Dropout", Keeps::kMask},
  };
  return *table;
}

bool DefaultDomain(absl::string_view domain) {
  return domain.empty() || domain == "ai.onnx";
}

// Pad keeps nothing in constant mode (its backward slices); reflect and
// edge read the input.
bool PadReadsInput(const Op& op) {
  const AttributeValue* mode = op.FindAttribute("mode");
  return op.op_type == "Pad" && mode != nullptr && mode->s != "constant";
}

}  // namespace

SavedTensors SavedForBackward(const Op& op) {
  SavedTensors saved;
  auto it = DefaultDomain(op.domain) ? Table().find(op.op_type) : Table().end();
  if (it == Table().end() || PadReadsInput(op)) {
    for (int k = 0; k < static_cast<int>(op.inputs.size()); ++k) {
      saved.inputs.push_back(k);
    }
    return saved;
  }
  switch (it->second) {
    case Keeps::kNothing:
      break;
    case Keeps::kOutput0:
      saved.outputs.push_back(0);
      break;
    case Keeps::kInput0:
      saved.inputs.push_back(0);
      break;
    case Keeps::kInput1:
      saved.inputs.push_back(1);
      break;
    case Keeps::kMask:
      // Without a mask output the mask is no value of the graph: its
      // input stands in for it (a float per element, not a byte).
      if (op.outputs.size() > 1 && op.outputs[1] >= 0) {
        saved.outputs.push_back(1);
      } else {
        saved.inputs.push_back(0);
      }
      break;
  }
  return saved;
}

}  // namespace placer
