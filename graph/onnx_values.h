// ONNX protos to and from the graph's values, for the importer: a type's
// shape with its symbolic dims, initializer and attribute tensors, folded
// constants and attributes. Pure functions; ONNX types stay in graph/'s
// import files (onnx_import.cc, input_shapes.cc, onnx_file.cc).
#ifndef PLACER_GRAPH_ONNX_VALUES_H_
#define PLACER_GRAPH_ONNX_VALUES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/constant_folding.h"
#include "graph/graph.h"
#include "onnx/onnx_pb.h"

namespace placer {

// A dim of a tensor as the importer sees it: a value, or unknown with the
// symbolic name the file gave it (possibly empty).
struct Dim {
  int64_t value = -1;
  std::string param;
};

struct ShapeInfo {
  DataType dtype = DataType::kUndefined;
  bool has_shape = false;  // rank known
  std::vector<Dim> dims;
  std::vector<int64_t> known;  // the dims, once fully known

  bool fully_known() const {
    if (!has_shape) return false;
    for (const Dim& d : dims) {
      if (d.value < 0) return false;
    }
    return true;
  }
  std::vector<int64_t> values() const {
    std::vector<int64_t> v;
    for (const Dim& d : dims) v.push_back(d.value);
    return v;
  }
};

// The dtype and (when the type has one) the shape of a tensor type; dims
// without a value keep their symbolic name.
ShapeInfo FromTypeProto(const onnx::TypeProto& type);

// An initializer or attribute tensor as raw little-endian bytes. External
// data is left unloaded (empty raw).
std::shared_ptr<TensorData> ToTensorData(const onnx::TensorProto& t);

// A small constant as a FoldedValue, if its type is foldable and it has at
// most kMaxFoldedElements elements.
std::optional<FoldedValue> ToFolded(const TensorData& data);

// A folded value as an initializer named `name` (for shape inference).
onnx::TensorProto ToTensorProto(const std::string& name, const FoldedValue& v);

AttributeValue ToAttribute(const onnx::AttributeProto& a);

// The value a Constant node produces, from whichever value_* it carries.
std::optional<FoldedValue> ConstantNodeValue(const Op& op);

}  // namespace placer

#endif  // PLACER_GRAPH_ONNX_VALUES_H_
