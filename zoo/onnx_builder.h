// OnnxBuilder writes ONNX ModelProtos from C++ for the model zoo.
//
// Contract: every name it returns is unique in the graph; weights are
// deterministic functions of (seed, tensor name) so a model built twice is
// byte-identical; the model it finishes passes onnx::checker (the zoo's
// tests check this for every model). With weights disabled, initializers
// are written as external data with no file behind them: their dims and
// types are real, so placement works, but nothing can be trained from them.
#ifndef PLACER_ZOO_ONNX_BUILDER_H_
#define PLACER_ZOO_ONNX_BUILDER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace placer::zoo {

// One ONNX attribute, built by the helpers below.
onnx::AttributeProto IntAttr(const std::string& name, int64_t value);
onnx::AttributeProto FloatAttr(const std::string& name, float value);
onnx::AttributeProto IntsAttr(const std::string& name,
                              std::vector<int64_t> values);
// A one-element float32 tensor (ConstantOfShape's `value`).
onnx::AttributeProto FloatTensorAttr(const std::string& name, float value);

class OnnxBuilder {
 public:
  OnnxBuilder(std::string graph_name, uint64_t seed, bool with_weights);

  // A float32 graph input.
  std::string Input(const std::string& name, std::vector<int64_t> dims);
  // An int64 graph input (token ids, labels).
  std::string IntInput(const std::string& name, std::vector<int64_t> dims);
  // A float32 trainable weight, uniform in +-sqrt(1 / fan_in) (LeCun-style),
  // or `fill` everywhere when fan_in is 0.
  std::string Weight(const std::string& name, std::vector<int64_t> dims,
                     int64_t fan_in, float fill = 0);
  // A small int64 constant (shapes, axes, split sizes); always stored.
  std::string Ints(const std::string& name, std::vector<int64_t> values);

  // A float32 Constant node (not a trainable weight) holding `values`
  // with `dims`; returns its output.
  std::string Constant(const std::string& name, std::vector<int64_t> dims,
                       const std::vector<float>& values);

  // Adds a node named `name` with one output per entry of `output_count`
  // and returns the output names ("<name>:0", ...).
  std::vector<std::string> NodeN(
      const std::string& op_type, const std::string& name,
      const std::vector<std::string>& inputs, int output_count,
      std::initializer_list<onnx::AttributeProto> attributes = {});
  // Single-output form.
  std::string Node(const std::string& op_type, const std::string& name,
                   const std::vector<std::string>& inputs,
                   std::initializer_list<onnx::AttributeProto> attributes = {});

  // A graph output of the given type and shape ({} for a scalar).
  void Output(const std::string& name, int32_t elem_type,
              const std::vector<int64_t>& dims);

  onnx::ModelProto Finish();

 private:
  onnx::ModelProto model_;
  uint64_t seed_;
  bool with_weights_;
};

}  // namespace placer::zoo

#endif  // PLACER_ZOO_ONNX_BUILDER_H_
